//! `cast`: a float tensor converted to another float dtype (f32, f16, bf16), through f32:
//! widening is exact, narrowing rounds to nearest even once, NaN stays NaN, ±inf stays
//! ±inf, and a finite value beyond the target's range becomes ±inf, as IEEE conversion
//! does. One 16-byte access of the narrower side per thread.

use super::gated::{element_count, GROUP};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_in, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "cast";

/// `out[i] = x[i]` converted from `T` to `U` over `n` elements, `vec` per thread.
#[kernel]
pub fn cast_kernel<T, U>(x: Tensor<T>, mut out: Tensor<U>, n: u32, #[constexpr] vec: u32) {
    let base = global_id() * vec;
    if base + vec <= n {
        for e in 0..vec {
            store(out[base + e], load(x[base + e]).cast::<f32>().cast::<U>());
        }
    } else {
        for e in 0..vec {
            if base + e < n {
                store(out[base + e], load(x[base + e]).cast::<f32>().cast::<U>());
            }
        }
    }
}

/// Elements per thread: one 16-byte access of the narrower dtype.
pub(super) fn cast_width(from: DType, to: DType) -> u32 {
    (16 / from.size_bytes().min(to.size_bytes()).max(1)) as u32
}

/// `out = x` converted to `out`'s dtype; both float, one shape, not aliased.
pub fn cast(ctx: &Context, x: &Tensor, out: &Tensor) -> Result<(), OpError> {
    dtype_in(OP, "x", x, &FLOAT_DTYPES)?;
    dtype_in(OP, "out", out, &FLOAT_DTYPES)?;
    shape_is(OP, "out", out, x.shape())?;
    distinct(OP, out, &[("x", x)])?;
    if x.is_empty() {
        return Err(OpError::invalid(OP, "`x` is empty"));
    }
    let n = element_count(OP, x.len())?;
    let vec = cast_width(x.dtype(), out.dtype());
    cast_kernel::launch(
        ctx,
        cast_kernel::Args { x, out, n },
        cast_kernel::Consts { vec },
    )
    .grid([n.div_ceil(vec * GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}
