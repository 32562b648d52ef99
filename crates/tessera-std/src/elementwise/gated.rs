//! Gated activations, `out = act(gate) · up`, in the two layouts engines use: `gate` and
//! `up` as two tensors `[rows…, d]` (`silu_mul`, `gelu_mul`), or packed as one
//! `[rows…, 2·d]` whose first half of each row is the gate and second half the up
//! projection, as a fused gate/up matmul writes it and vLLM's `silu_and_mul` reads it
//! (`silu_mul_packed`, `gelu_mul_packed`). A thread takes one 16-byte access of each
//! tensor; the two-tensor kernel runs over the flat element count with a scalar tail, the
//! packed one over rows with the widest access that divides `d`.

use super::activation::{activate, Activation};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_in, dtype_is, fits_u32, rows_of, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

/// Threads per threadgroup of both kernels.
pub(super) const GROUP: u32 = 256;

/// Below this many elements an index of either kernel cannot wrap u32.
pub(super) const MAX_ELEMENTS: usize = 1 << 31;

/// `out[i] = act(gate[i]) · up[i]` over `n` elements, `vec` per thread (one 16-byte access
/// of each tensor); the last thread's partial run element by element.
#[kernel]
pub fn act_mul_kernel<T>(
    gate: Tensor<T>,
    up: Tensor<T>,
    mut out: Tensor<T>,
    n: u32,
    #[constexpr] act: u32,
    #[constexpr] vec: u32,
) {
    let base = global_id() * vec;
    if base + vec <= n {
        for e in 0..vec {
            let g = load(gate[base + e]).cast::<f32>();
            let u = load(up[base + e]).cast::<f32>();
            store(out[base + e], (activate(g, act) * u).cast::<T>());
        }
    } else {
        for e in 0..vec {
            if base + e < n {
                let g = load(gate[base + e]).cast::<f32>();
                let u = load(up[base + e]).cast::<f32>();
                store(out[base + e], (activate(g, act) * u).cast::<T>());
            }
        }
    }
}

/// `out[r, j] = act(gate_up[r, j]) · gate_up[r, d + j]`: thread `v` takes the `v`-th run of
/// `vec` output elements; `row_vecs = d / vec` runs per row, `total` runs in all.
#[kernel]
pub fn act_mul_packed_kernel<T>(
    gate_up: Tensor<T>,
    mut out: Tensor<T>,
    row_vecs: u32,
    total: u32,
    #[constexpr] act: u32,
    #[constexpr] vec: u32,
) {
    let v = global_id();
    if v < total {
        let row = v / row_vecs;
        // Row `row` of gate_up starts 2·row·d in; this run sits `v − row·row_vecs` runs
        // into it.
        let g = (v + row * row_vecs) * vec;
        let u = g + row_vecs * vec;
        let o = v * vec;
        for e in 0..vec {
            let x = load(gate_up[g + e]).cast::<f32>();
            let y = load(gate_up[u + e]).cast::<f32>();
            store(out[o + e], (activate(x, act) * y).cast::<T>());
        }
    }
}

/// Elements of `dtype` in one 16-byte access.
pub(super) fn vec_width(dtype: DType) -> u32 {
    (16 / dtype.size_bytes().max(1)) as u32
}

/// The widest power-of-two run, up to one 16-byte access, that divides `d`.
pub(super) fn row_vec_width(dtype: DType, d: usize) -> u32 {
    let mut w = vec_width(dtype);
    while w > 1 && !d.is_multiple_of(w as usize) {
        w /= 2;
    }
    w
}

/// How a row kernel reads rows of `d` elements of `dtype` into an output of `out_len`
/// elements: `(vec, vectors per row, vectors in the output)`, `vec` from [`row_vec_width`].
pub(super) fn row_vectors(
    op: &'static str,
    dtype: DType,
    d: usize,
    out_len: usize,
) -> Result<(u32, u32, u32), OpError> {
    let vec = row_vec_width(dtype, d);
    let row_vecs = fits_u32(op, "d", d / vec as usize)?;
    let total = fits_u32(op, "the output element count", out_len / vec as usize)?;
    Ok((vec, row_vecs, total))
}

/// The element count of `[rows…, d]` tensors as the kernels index it.
pub(super) fn element_count(op: &'static str, len: usize) -> Result<u32, OpError> {
    if len >= MAX_ELEMENTS {
        return Err(OpError::invalid(
            op,
            format!("the tensors hold {len} elements; at most 2^31 − 1 are supported"),
        ));
    }
    fits_u32(op, "the element count", len)
}

/// `out = act(gate) · up` with `gate`, `up` and `out` of one float dtype and one shape.
pub(super) fn act_mul(
    op: &'static str,
    ctx: &Context,
    gate: &Tensor,
    up: &Tensor,
    out: &Tensor,
    act: Activation,
) -> Result<(), OpError> {
    dtype_in(op, "gate", gate, &FLOAT_DTYPES)?;
    dtype_is(op, "up", up, gate.dtype())?;
    dtype_is(op, "out", out, gate.dtype())?;
    rows_of(op, "gate", gate)?;
    shape_is(op, "up", up, gate.shape())?;
    shape_is(op, "out", out, gate.shape())?;
    distinct(op, out, &[("gate", gate), ("up", up)])?;
    let n = element_count(op, gate.len())?;
    let vec = vec_width(gate.dtype());
    act_mul_kernel::launch(
        ctx,
        act_mul_kernel::Args { gate, up, out, n },
        act_mul_kernel::Consts {
            act: act.code(),
            vec,
        },
    )
    .grid([n.div_ceil(vec * GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(op))
}

/// `out[…, j] = act(gate_up[…, j]) · gate_up[…, d + j]` with `gate_up` `[rows…, 2·d]` and
/// `out` `[rows…, d]`.
pub(super) fn act_mul_packed(
    op: &'static str,
    ctx: &Context,
    gate_up: &Tensor,
    out: &Tensor,
    act: Activation,
) -> Result<(), OpError> {
    dtype_in(op, "gate_up", gate_up, &FLOAT_DTYPES)?;
    dtype_is(op, "out", out, gate_up.dtype())?;
    distinct(op, out, &[("gate_up", gate_up)])?;
    let (_, width) = rows_of(op, "gate_up", gate_up)?;
    if !width.is_multiple_of(2) {
        return Err(OpError::invalid(
            op,
            format!(
                "the last dimension of `gate_up` must be even (gate then up, d each), got {width}"
            ),
        ));
    }
    let d = width / 2;
    let mut want = gate_up.shape().to_vec();
    if let Some(last) = want.last_mut() {
        *last = d;
    }
    shape_is(op, "out", out, &want)?;
    element_count(op, gate_up.len())?;
    let (vec, row_vecs, total) = row_vectors(op, gate_up.dtype(), d, out.len())?;
    act_mul_packed_kernel::launch(
        ctx,
        act_mul_packed_kernel::Args {
            gate_up,
            out,
            row_vecs,
            total,
        },
        act_mul_packed_kernel::Consts {
            act: act.code(),
            vec,
        },
    )
    .grid([total.div_ceil(GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(op))
}

/// `out = silu(gate) · up`: `gate`, `up` and `out` `[rows…, d]` of one float dtype.
pub fn silu_mul(ctx: &Context, gate: &Tensor, up: &Tensor, out: &Tensor) -> Result<(), OpError> {
    act_mul("silu_mul", ctx, gate, up, out, Activation::Silu)
}

/// `out = silu(gate) · up` with gate and up packed in one `[rows…, 2·d]` tensor (gate
/// first), `out` `[rows…, d]`: vLLM's `silu_and_mul`.
pub fn silu_mul_packed(ctx: &Context, gate_up: &Tensor, out: &Tensor) -> Result<(), OpError> {
    act_mul_packed("silu_mul_packed", ctx, gate_up, out, Activation::Silu)
}

/// How GELU is computed: PyTorch's `approximate="none"` (erf) or `"tanh"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeluApproximation {
    /// `x/2 · (1 + erf(x/√2))`.
    None,
    /// `x/2 · (1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    Tanh,
}

impl GeluApproximation {
    fn activation(self) -> Activation {
        match self {
            GeluApproximation::None => Activation::GeluErf,
            GeluApproximation::Tanh => Activation::GeluTanh,
        }
    }
}

/// `out = gelu(gate) · up`: `gate`, `up` and `out` `[rows…, d]` of one float dtype.
pub fn gelu_mul(
    ctx: &Context,
    gate: &Tensor,
    up: &Tensor,
    out: &Tensor,
    approximate: GeluApproximation,
) -> Result<(), OpError> {
    act_mul("gelu_mul", ctx, gate, up, out, approximate.activation())
}

/// `out = gelu(gate) · up` with gate and up packed in one `[rows…, 2·d]` tensor (gate
/// first), `out` `[rows…, d]`: vLLM's `gelu_and_mul` / `gelu_tanh_and_mul`.
pub fn gelu_mul_packed(
    ctx: &Context,
    gate_up: &Tensor,
    out: &Tensor,
    approximate: GeluApproximation,
) -> Result<(), OpError> {
    act_mul_packed(
        "gelu_mul_packed",
        ctx,
        gate_up,
        out,
        approximate.activation(),
    )
}
