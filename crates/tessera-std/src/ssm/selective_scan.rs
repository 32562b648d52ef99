//! The Mamba selective-scan decode step (`selective_state_update`): one token per batch
//! row, state `[B, D, N]` updated once. A thread owns one channel's `N` contiguous states
//! (vector accesses); B and C of the row are shared by the threadgroup through the cache.

use crate::error::{runtime, OpError};
use crate::validate::{
    distinct_named, dtype_in, dtype_is, fits_u32, shape_is, state_dtype, FLOAT_DTYPES,
};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

const GROUP: u32 = 128;

/// One step; grid `[ceil(D / 128), B, 1]`.
#[kernel]
pub fn selective_scan_step_kernel<T, S>(
    state_in: Tensor<S>,
    x: Tensor<T>,
    dt: Tensor<T>,
    a: Tensor<f32>,
    b: Tensor<T>,
    c: Tensor<T>,
    d: Tensor<T>,
    z: Tensor<T>,
    dt_bias: Tensor<T>,
    mut state_out: Tensor<S>,
    mut y: Tensor<T>,
    dim: u32,
    #[constexpr] n: u32,
) {
    let bi = group_id_y();
    let ch = group_id_x() * group_size() + thread_id();
    if ch < dim {
        let i = bi * dim + ch;
        let xv = load(x[i]).cast::<f32>();
        let delta = softplus(load(dt[i]).cast::<f32>() + load(dt_bias[ch]).cast::<f32>());
        let dx = delta * xv;
        let mut acc = 0.0f32;
        for k in 0..n {
            let h = load(state_in[i * n + k]).cast::<f32>() * exp(delta * load(a[ch * n + k]))
                + dx * load(b[bi * n + k]).cast::<f32>();
            store(state_out[i * n + k], h.cast::<S>());
            acc += h * load(c[bi * n + k]).cast::<f32>();
        }
        let zv = load(z[i]).cast::<f32>();
        let out = (acc + load(d[ch]).cast::<f32>() * xv) * silu(zv);
        store(y[i], out.cast::<T>());
    }
}

/// The tensors of a selective-scan step.
pub struct ScanArgs<'a> {
    /// `[B, D, N]`, f32 or the activations' dtype.
    pub state_in: &'a Tensor,
    /// `[B, D]`.
    pub x: &'a Tensor,
    /// `[B, D]`, before softplus.
    pub dt: &'a Tensor,
    /// `[D, N]`, f32 (negative in models: `−e^{A_log}`).
    pub a: &'a Tensor,
    /// `[B, N]`.
    pub b: &'a Tensor,
    /// `[B, N]`.
    pub c: &'a Tensor,
    /// Skip weight `[D]`.
    pub d: &'a Tensor,
    /// Gate `[B, D]`.
    pub z: &'a Tensor,
    /// `[D]`.
    pub dt_bias: &'a Tensor,
    pub state_out: &'a Tensor,
    /// `[B, D]`.
    pub y: &'a Tensor,
}

/// One selective-scan step: N ≤ 256.
pub fn selective_scan_step(ctx: &Context, s: &ScanArgs) -> Result<(), OpError> {
    const OP: &str = "selective_scan_step";
    dtype_in(OP, "x", s.x, &FLOAT_DTYPES)?;
    let t = s.x.dtype();
    for (name, v) in [
        ("dt", s.dt),
        ("b", s.b),
        ("c", s.c),
        ("d", s.d),
        ("z", s.z),
        ("dt_bias", s.dt_bias),
        ("y", s.y),
    ] {
        dtype_is(OP, name, v, t)?;
    }
    dtype_is(OP, "a", s.a, DType::F32)?;
    state_dtype(OP, "state_in", s.state_in, t)?;
    let sd = s.state_in.dtype();
    dtype_is(OP, "state_out", s.state_out, sd)?;
    let (batch, dim, n) = match s.state_in.shape() {
        &[b, d, n] if b > 0 && d > 0 && (1..=256).contains(&n) => (b, d, n),
        sh => {
            return Err(OpError::invalid(
                OP,
                format!(
                "`state_in` must be [B, D, N] with B, D > 0 and 1 <= N <= 256, got shape {sh:?}"
            ),
            ))
        }
    };
    for (name, v) in [("x", s.x), ("dt", s.dt), ("z", s.z), ("y", s.y)] {
        shape_is(OP, name, v, &[batch, dim])?;
    }
    shape_is(OP, "a", s.a, &[dim, n])?;
    shape_is(OP, "b", s.b, &[batch, n])?;
    shape_is(OP, "c", s.c, &[batch, n])?;
    shape_is(OP, "d", s.d, &[dim])?;
    shape_is(OP, "dt_bias", s.dt_bias, &[dim])?;
    shape_is(OP, "state_out", s.state_out, &[batch, dim, n])?;
    let inputs = [
        ("state_in", s.state_in),
        ("x", s.x),
        ("dt", s.dt),
        ("a", s.a),
        ("b", s.b),
        ("c", s.c),
        ("d", s.d),
        ("z", s.z),
        ("dt_bias", s.dt_bias),
    ];
    distinct_named(OP, "y", s.y, &inputs)?;
    distinct_named(OP, "state_out", s.state_out, &inputs)?;
    fits_u32(OP, "the state size", s.state_in.len())?;
    selective_scan_step_kernel::launch(
        ctx,
        selective_scan_step_kernel::Args {
            state_in: s.state_in,
            x: s.x,
            dt: s.dt,
            a: s.a,
            b: s.b,
            c: s.c,
            d: s.d,
            z: s.z,
            dt_bias: s.dt_bias,
            state_out: s.state_out,
            y: s.y,
            dim: dim as u32,
        },
        selective_scan_step_kernel::Consts { n: n as u32 },
    )
    .grid([(dim as u32).div_ceil(GROUP), batch as u32, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}
