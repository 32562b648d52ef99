//! `out = a + b` elementwise, and the residual add in place (`acc += x`): eight elements
//! of each tensor per thread (one 16-byte access of f16/bf16, two of f32), f16/bf16 added
//! in f32, the last partial run element by element.

use super::gated::{element_count, GROUP};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, distinct_named, dtype_in, dtype_is, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

pub(super) const OP: &str = "add";

/// Elements per thread of both kernels (the literal `8` in their bodies).
pub const ADD_RUN: u32 = 8;

/// `out[i] = a[i] + b[i]` over `n` elements, 8 per thread.
#[kernel]
pub fn add_kernel<T>(a: Tensor<T>, b: Tensor<T>, mut out: Tensor<T>, n: u32) {
    let vec = 8u32;
    let base = global_id() * vec;
    if base + vec <= n {
        for e in 0..vec {
            let s = load(a[base + e]).cast::<f32>() + load(b[base + e]).cast::<f32>();
            store(out[base + e], s.cast::<T>());
        }
    } else {
        for e in 0..vec {
            if base + e < n {
                let s = load(a[base + e]).cast::<f32>() + load(b[base + e]).cast::<f32>();
                store(out[base + e], s.cast::<T>());
            }
        }
    }
}

/// `acc[i] += x[i]` over `n` elements, 8 per thread: the run of `acc` is read whole
/// before any of it is written, so both stay wide accesses.
#[kernel]
pub fn add_in_place_kernel<T>(x: Tensor<T>, mut acc: Tensor<T>, n: u32) {
    let vec = 8u32;
    let base = global_id() * vec;
    if base + vec <= n {
        let s = stack_array::<f32>(vec);
        for e in 0..vec {
            store(
                s[e],
                load(acc[base + e]).cast::<f32>() + load(x[base + e]).cast::<f32>(),
            );
        }
        for e in 0..vec {
            store(acc[base + e], load(s[e]).cast::<T>());
        }
    } else {
        for e in 0..vec {
            if base + e < n {
                let v = load(acc[base + e]).cast::<f32>() + load(x[base + e]).cast::<f32>();
                store(acc[base + e], v.cast::<T>());
            }
        }
    }
}

/// `a` and `b` of one float dtype and shape, not empty: the element count.
fn check_pair(a_name: &str, a: &Tensor, b_name: &str, b: &Tensor) -> Result<u32, OpError> {
    dtype_in(OP, a_name, a, &FLOAT_DTYPES)?;
    dtype_is(OP, b_name, b, a.dtype())?;
    shape_is(OP, b_name, b, a.shape())?;
    if a.is_empty() {
        return Err(OpError::invalid(OP, "the tensors are empty"));
    }
    element_count(OP, a.len())
}

/// `out = a + b` for tensors of one shape and one float dtype.
pub fn add(ctx: &Context, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<(), OpError> {
    let n = check_pair("a", a, "b", b)?;
    dtype_is(OP, "out", out, a.dtype())?;
    shape_is(OP, "out", out, a.shape())?;
    distinct(OP, out, &[("a", a), ("b", b)])?;
    add_kernel::launch(ctx, add_kernel::Args { a, b, out, n })
        .grid([n.div_ceil(ADD_RUN * GROUP), 1, 1])
        .group_size(GROUP)
        .run()
        .map_err(runtime(OP))
}

/// The residual add in place, `acc += x` (`acc` the residual stream, `x` a block's
/// output): one float dtype and shape, `acc` a tensor of its own (not `x`).
pub fn add_in_place(ctx: &Context, acc: &Tensor, x: &Tensor) -> Result<(), OpError> {
    let n = check_pair("acc", acc, "x", x)?;
    distinct_named(OP, "acc", acc, &[("x", x)])?;
    add_in_place_kernel::launch(ctx, add_in_place_kernel::Args { x, acc, n })
        .grid([n.div_ceil(ADD_RUN * GROUP), 1, 1])
        .group_size(GROUP)
        .run()
        .map_err(runtime(OP))
}
