//! The fused Gated DeltaNet decode step: from the conv output `[q | k | v]` of each batch
//! row and the raw gate projections to the new state and the output in one pass. Per
//! head, q and k are RMS-normalised with weights, `g = e^{−e^{a_log}·softplus(a + dt_bias)}`
//! is the decay and `β = sigmoid(b)`; then the decode step's delta rule. The geometry is
//! the decode step's: a simdgroup per contiguous state row, `Dk / 32` elements per lane.

use super::validate::{check_decode_state, check_dk, decode_groups, DECODE_ROWS};
use crate::error::{runtime, OpError};
use crate::validate::{
    distinct_named, dtype_in, dtype_is, eps_ok, fits_u32, shape_is, FLOAT_DTYPES,
};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

/// The fused prep + decode step; grid `[B·Hv, ceil(Dv / rows), 1]`, `32·rows` threads.
#[kernel]
pub fn gdn_prep_decode_kernel<T, S>(
    conv_out: Tensor<T>,
    a_log: Tensor<T>,
    dt_bias: Tensor<T>,
    a: Tensor<T>,
    b: Tensor<T>,
    wq: Tensor<T>,
    wk: Tensor<T>,
    state_in: Tensor<S>,
    mut state_out: Tensor<S>,
    mut o: Tensor<T>,
    eps: f32,
    scale: f32,
    #[constexpr] dk: u32,
    #[constexpr] dv: u32,
    #[constexpr] hv: u32,
    #[constexpr] hk: u32,
) {
    let npt = dk / 32;
    let n = group_id_x();
    let row = group_id_y() * simd_groups() + simd_id();
    let lane = simd_lane();
    if row < dv {
        let bi = n / hv;
        let h = n - bi * hv;
        let kh = h / (hv / hk);
        let cbase = bi * (2 * hk * dk + hv * dv);
        let qoff = cbase + kh * dk + lane * npt;
        let koff = qoff + hk * dk;
        let woff = kh * dk + lane * npt;
        let sbase = (n * dv + row) * dk + lane * npt;
        let qs = stack_array::<f32>(npt);
        let ks = stack_array::<f32>(npt);
        let ss = stack_array::<f32>(npt);
        let mut qsq = 0.0f32;
        let mut ksq = 0.0f32;
        for i in 0..npt {
            let x = load(conv_out[qoff + i]).cast::<f32>();
            let y = load(conv_out[koff + i]).cast::<f32>();
            store(qs[i], x * load(wq[woff + i]).cast::<f32>());
            store(ks[i], y * load(wk[woff + i]).cast::<f32>());
            qsq += x * x;
            ksq += y * y;
        }
        let dkf = dk.cast::<f32>();
        let qinv = rsqrt(simd_sum(qsq) / dkf + eps);
        let kinv = rsqrt(simd_sum(ksq) / dkf + eps);
        let x = load(a[n]).cast::<f32>() + load(dt_bias[h]).cast::<f32>();
        let decay = exp(-(exp(load(a_log[h]).cast::<f32>()) * softplus(x)));
        let bt = sigmoid(load(b[n]).cast::<f32>());
        let mut kv = 0.0f32;
        for i in 0..npt {
            let s = load(state_in[sbase + i]).cast::<f32>() * decay;
            store(ss[i], s);
            kv += s * load(ks[i]);
        }
        let vn = bt
            * (load(conv_out[cbase + 2 * hk * dk + h * dv + row]).cast::<f32>()
                - simd_sum(kv) * kinv);
        let vk = vn * kinv;
        let mut acc = 0.0f32;
        for i in 0..npt {
            let s = load(ss[i]) + vk * load(ks[i]);
            store(state_out[sbase + i], s.cast::<S>());
            acc += s * load(qs[i]);
        }
        let out = simd_sum(acc) * qinv * scale;
        if lane == 0 {
            store(o[n * dv + row], out.cast::<T>());
        }
    }
}

/// The tensors of a fused prep + decode step.
pub struct PrepDecodeArgs<'a> {
    /// `[B, 2·Hk·Dk + Hv·Dv]`: q, k, v of each batch row, head-major.
    pub conv_out: &'a Tensor,
    /// `[Hv]`.
    pub a_log: &'a Tensor,
    /// `[Hv]`.
    pub dt_bias: &'a Tensor,
    /// Raw decay projection `[B, Hv]`.
    pub a: &'a Tensor,
    /// Raw beta projection `[B, Hv]`.
    pub b: &'a Tensor,
    /// RMSNorm weights of q and k per key head, `[Hk·Dk]`.
    pub wq: &'a Tensor,
    pub wk: &'a Tensor,
    /// `[B, Hv, Dv, Dk]`, f32 or the activations' dtype.
    pub state_in: &'a Tensor,
    pub state_out: &'a Tensor,
    /// `[B, Hv, Dv]`.
    pub o: &'a Tensor,
}

/// Head counts and sizes of a fused step (the conv output's width alone does not fix them).
#[derive(Clone, Copy, Debug)]
pub struct PrepDecodeShape {
    pub hk: usize,
    pub hv: usize,
    pub dk: usize,
    pub dv: usize,
}

/// The fused decode step: Dk ∈ {64, 128, 256}, any Dv, Hv a multiple of Hk.
pub fn gdn_prep_decode_step(
    ctx: &Context,
    a: &PrepDecodeArgs,
    s: PrepDecodeShape,
    eps: f32,
    scale: f32,
) -> Result<(), OpError> {
    const OP: &str = "gdn_prep_decode_step";
    dtype_in(OP, "conv_out", a.conv_out, &FLOAT_DTYPES)?;
    let t = a.conv_out.dtype();
    for (name, x) in [
        ("a_log", a.a_log),
        ("dt_bias", a.dt_bias),
        ("a", a.a),
        ("b", a.b),
        ("wq", a.wq),
        ("wk", a.wk),
        ("o", a.o),
    ] {
        dtype_is(OP, name, x, t)?;
    }
    let PrepDecodeShape { hk, hv, dk, dv } = s;
    check_dk(OP, dk)?;
    if hk == 0 || hv == 0 || dv == 0 || !hv.is_multiple_of(hk) {
        return Err(OpError::invalid(
            OP,
            format!(
                "Hv = {hv} must be a positive multiple of Hk = {hk} (GQA), and Dv = {dv} positive"
            ),
        ));
    }
    let width = 2 * hk * dk + hv * dv;
    let b = match a.conv_out.shape() {
        &[b, w] if w == width && b > 0 => b,
        sh => {
            return Err(OpError::invalid(
                OP,
                format!(
                "`conv_out` must be [B, 2·Hk·Dk + Hv·Dv = {width}] with B > 0, got shape {sh:?}"
            ),
            ))
        }
    };
    shape_is(OP, "a_log", a.a_log, &[hv])?;
    shape_is(OP, "dt_bias", a.dt_bias, &[hv])?;
    shape_is(OP, "a", a.a, &[b, hv])?;
    shape_is(OP, "b", a.b, &[b, hv])?;
    shape_is(OP, "wq", a.wq, &[hk * dk])?;
    shape_is(OP, "wk", a.wk, &[hk * dk])?;
    shape_is(OP, "o", a.o, &[b, hv, dv])?;
    check_decode_state(OP, a.state_in, a.state_out, t, &[b, hv, dv, dk])?;
    let inputs = [
        ("conv_out", a.conv_out),
        ("a_log", a.a_log),
        ("dt_bias", a.dt_bias),
        ("a", a.a),
        ("b", a.b),
        ("wq", a.wq),
        ("wk", a.wk),
        ("state_in", a.state_in),
    ];
    distinct_named(OP, "o", a.o, &inputs)?;
    distinct_named(OP, "state_out", a.state_out, &inputs)?;
    distinct_named(OP, "state_out", a.state_out, &[("o", a.o)])?;
    eps_ok(OP, eps)?;
    if !scale.is_finite() {
        return Err(OpError::invalid(
            OP,
            format!("`scale` must be finite, got {scale}"),
        ));
    }
    fits_u32(OP, "the state size", a.state_in.len())?;
    fits_u32(OP, "the conv output size", a.conv_out.len())?;
    let bh = fits_u32(OP, "B·Hv", b * hv)?;
    gdn_prep_decode_kernel::launch(
        ctx,
        gdn_prep_decode_kernel::Args {
            conv_out: a.conv_out,
            a_log: a.a_log,
            dt_bias: a.dt_bias,
            a: a.a,
            b: a.b,
            wq: a.wq,
            wk: a.wk,
            state_in: a.state_in,
            state_out: a.state_out,
            o: a.o,
            eps,
            scale,
        },
        gdn_prep_decode_kernel::Consts {
            dk: dk as u32,
            dv: dv as u32,
            hv: hv as u32,
            hk: hk as u32,
        },
    )
    .grid([bh, decode_groups(dv as u32, 32), 1])
    .group_size(32 * DECODE_ROWS)
    .run()
    .map_err(runtime(OP))
}
