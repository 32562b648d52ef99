//! Row reductions over the last dimension: `row_reduce` (sum, mean, max, min into f32),
//! `topk` (the k largest of each row with their indices, by radix select on an
//! order-preserving integer key, no full sort), `cumsum` (an inclusive scan) and `sort` /
//! `argsort` (whole rows in order, stable, by bitonic or radix sort on the same keys).

#[cfg(feature = "cases")]
mod cases;
pub mod cumsum;
mod decl;
pub mod order_key;
#[cfg(feature = "cases")]
pub mod reference;
pub mod row_reduce;
pub mod sort;
#[cfg(feature = "cases")]
pub mod sort_reference;
pub mod topk;

pub use cumsum::cumsum;
pub use row_reduce::{row_reduce, Reduction, RowSplitWorkspace};
pub use sort::{argsort, sort, SortWorkspace};
pub use topk::topk;

use crate::error::OpError;
use crate::validate::{dtype_in, fits_u32, rows_of, FLOAT_DTYPES};
use tessera_runtime::Tensor;

/// Validates `x [rows…, n]` (float, not empty, the element count fitting u32): (rows, n).
pub(crate) fn float_rows(op: &'static str, x: &Tensor) -> Result<(u32, u32), OpError> {
    dtype_in(op, "x", x, &FLOAT_DTYPES)?;
    let (rows, n) = rows_of(op, "x", x)?;
    fits_u32(op, "the element count", x.len())?;
    Ok((rows as u32, n as u32))
}

/// The shape of a per-row output of `x [rows…, n]`: `[rows…]`, or `[1]` for a 1-D x.
pub fn per_row_shape(x: &[usize]) -> Vec<usize> {
    match x.len() {
        0 | 1 => vec![1],
        d => x[..d - 1].to_vec(),
    }
}
