//! `out = a + b` elementwise: one thread per element, f16/bf16 added in f32.

use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

pub(super) const OP: &str = "add";
const GROUP: u32 = 256;

/// Elementwise sum of two tensors of `n` elements.
#[kernel]
pub fn add_kernel<T>(a: Tensor<T>, b: Tensor<T>, mut out: Tensor<T>, n: u32) {
    let i = global_id();
    if i < n {
        let s = load(a[i]).cast::<f32>() + load(b[i]).cast::<f32>();
        store(out[i], s.cast::<T>());
    }
}

/// `out = a + b` for tensors of one shape and one float dtype.
pub fn add(ctx: &Context, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<(), OpError> {
    dtype_in(OP, "a", a, &FLOAT_DTYPES)?;
    dtype_is(OP, "b", b, a.dtype())?;
    dtype_is(OP, "out", out, a.dtype())?;
    shape_is(OP, "b", b, a.shape())?;
    shape_is(OP, "out", out, a.shape())?;
    distinct(OP, out, &[("a", a), ("b", b)])?;
    let n = fits_u32(OP, "the element count", a.len())?;
    if n == 0 {
        return Err(OpError::invalid(OP, "the tensors are empty"));
    }
    add_kernel::launch(ctx, add_kernel::Args { a, b, out, n })
        .grid([n.div_ceil(GROUP), 1, 1])
        .group_size(GROUP)
        .run()
        .map_err(runtime(OP))
}
