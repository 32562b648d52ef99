//! Registered cases of the elementwise family, one file per op (the gated activations
//! share one), around what they share here: the imports and the comparison of an output
//! whose non-finite inputs must reach exactly their own elements.

mod add;
mod cast;
mod embedding;
mod gated;

pub(super) use add::{add_benches, add_cases, add_kernels};
pub(super) use cast::{cast_benches, cast_cases, cast_kernels};
pub(super) use embedding::{embedding_benches, embedding_cases, embedding_kernels};
pub(super) use gated::{
    benches as gated_benches, cases as gated_cases, kernels as gated_kernels,
    packed_benches as gated_packed_benches, packed_cases as gated_packed_cases,
    packed_kernels as gated_packed_kernels, GELU_ERF, GELU_TANH, SILU,
};

use super::reference;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, Outcome, PreparedBench};
use crate::testing::{
    accuracy, compare, err, random_tensor, rejection, upload, zeros, Refused, Tolerance,
};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{Literal, Specialization};
use tessera_runtime::DType;

/// Elements whose inputs were non-finite (`touched`) must be non-finite; every other
/// element is compared with `want(i)`.
fn compare_non_finite(
    got: &[f64],
    touched: &[bool],
    want: impl Fn(usize) -> f64,
    tol: Tolerance,
) -> Result<Outcome, String> {
    let mut finite_got = Vec::new();
    let mut finite_want = Vec::new();
    for (i, (&g, &t)) in got.iter().zip(touched).enumerate() {
        if t {
            if g.is_finite() {
                return Err(format!(
                    "output[{i}] = {g}: a non-finite input did not reach it"
                ));
            }
        } else {
            finite_got.push(g);
            finite_want.push(want(i));
        }
    }
    let mut outcome = compare(&finite_got, &finite_want, tol)?;
    outcome.checked = got.len();
    Ok(outcome)
}
