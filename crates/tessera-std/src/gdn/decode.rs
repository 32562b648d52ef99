//! The Gated DeltaNet recurrent decode step: one token per sequence, the state
//! `[B, Hv, Dv, Dk]` read once and written once. A simdgroup owns one state row
//! `(b, h, dv)`: each lane holds `Dk / 32` consecutive elements (one vector access), so a
//! simdgroup moves a whole contiguous row per access and a threadgroup of four simdgroups
//! four rows. `S ← e^{g}·S; v_new = β·(v − S k); S ← S + v_new kᵀ; o = scale·S q`.

use super::validate::{check_decode_state, check_dk, decode_groups, DECODE_ROWS};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

/// One decode step; grid `[B·Hv, ceil(Dv / rows), 1]`, `32·rows` threads, `npt = Dk / 32`.
#[kernel]
pub fn gdn_decode_kernel<T, S>(
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    g: Tensor<f32>,
    beta: Tensor<f32>,
    state_in: Tensor<S>,
    mut state_out: Tensor<S>,
    mut o: Tensor<T>,
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
        let b = n / hv;
        let kh = (n - b * hv) / (hv / hk);
        let kbase = (b * hk + kh) * dk + lane * npt;
        let sbase = (n * dv + row) * dk + lane * npt;
        let decay = exp(load(g[n]));
        let bt = load(beta[n]);
        let ks = stack_array::<f32>(npt);
        let ss = stack_array::<f32>(npt);
        let mut kv = 0.0f32;
        for i in 0..npt {
            let kk = load(k[kbase + i]).cast::<f32>();
            let s = load(state_in[sbase + i]).cast::<f32>() * decay;
            store(ks[i], kk);
            store(ss[i], s);
            kv += s * kk;
        }
        let vn = bt * (load(v[n * dv + row]).cast::<f32>() - simd_sum(kv));
        let mut acc = 0.0f32;
        for i in 0..npt {
            let s = load(ss[i]) + vn * load(ks[i]);
            store(state_out[sbase + i], s.cast::<S>());
            acc += s * load(q[kbase + i]).cast::<f32>();
        }
        let out = simd_sum(acc) * scale;
        if lane == 0 {
            store(o[n * dv + row], out.cast::<T>());
        }
    }
}

/// The tensors of a decode step.
pub struct DecodeArgs<'a> {
    /// `[B, Hk, Dk]`, normalised and scaled as the model wants (the kernel applies `scale`
    /// to the output).
    pub q: &'a Tensor,
    pub k: &'a Tensor,
    /// `[B, Hv, Dv]`.
    pub v: &'a Tensor,
    /// Log decay `[B, Hv]`, f32.
    pub g: &'a Tensor,
    /// `[B, Hv]`, f32.
    pub beta: &'a Tensor,
    /// `[B, Hv, Dv, Dk]`, f32 or the dtype of q.
    pub state_in: &'a Tensor,
    pub state_out: &'a Tensor,
    /// `[B, Hv, Dv]`, the dtype of q.
    pub o: &'a Tensor,
}

/// One Gated DeltaNet decode step for `B` sequences: Dk ∈ {64, 128, 256}, any Dv,
/// `Hv` a multiple of `Hk`.
pub fn gdn_decode_step(ctx: &Context, a: &DecodeArgs, scale: f32) -> Result<(), OpError> {
    const OP: &str = "gdn_decode_step";
    dtype_in(OP, "q", a.q, &FLOAT_DTYPES)?;
    let t = a.q.dtype();
    dtype_is(OP, "k", a.k, t)?;
    dtype_is(OP, "v", a.v, t)?;
    dtype_is(OP, "o", a.o, t)?;
    dtype_is(OP, "g", a.g, DType::F32)?;
    dtype_is(OP, "beta", a.beta, DType::F32)?;
    let [b, hk, dk] = match a.q.shape() {
        &[b, hk, dk] => [b, hk, dk],
        s => {
            return Err(OpError::invalid(
                OP,
                format!("`q` must be [B, Hk, Dk], got shape {s:?}"),
            ))
        }
    };
    let [hv, dv] = match a.v.shape() {
        &[vb, hv, dv] if vb == b => [hv, dv],
        s => {
            return Err(OpError::invalid(
                OP,
                format!("`v` must be [B = {b}, Hv, Dv], got shape {s:?}"),
            ))
        }
    };
    if b == 0 || hk == 0 || hv == 0 || dv == 0 {
        return Err(OpError::invalid(
            OP,
            format!(
                "the batch, head counts and Dv must not be empty: q {:?}, v {:?}",
                a.q.shape(),
                a.v.shape()
            ),
        ));
    }
    check_dk(OP, dk)?;
    if !hv.is_multiple_of(hk) {
        return Err(OpError::invalid(
            OP,
            format!("Hv = {hv} must be a multiple of Hk = {hk} (GQA)"),
        ));
    }
    shape_is(OP, "k", a.k, &[b, hk, dk])?;
    shape_is(OP, "g", a.g, &[b, hv])?;
    shape_is(OP, "beta", a.beta, &[b, hv])?;
    shape_is(OP, "o", a.o, &[b, hv, dv])?;
    check_decode_state(OP, a.state_in, a.state_out, t, &[b, hv, dv, dk])?;
    let inputs = [
        ("q", a.q),
        ("k", a.k),
        ("v", a.v),
        ("g", a.g),
        ("beta", a.beta),
        ("state_in", a.state_in),
    ];
    distinct(OP, a.o, &inputs)?;
    distinct(OP, a.state_out, &inputs)?;
    distinct(OP, a.state_out, &[("o", a.o)])?;
    if !scale.is_finite() {
        return Err(OpError::invalid(
            OP,
            format!("`scale` must be finite, got {scale}"),
        ));
    }
    fits_u32(OP, "the state size", a.state_in.len())?;
    let (bh, dv32) = (fits_u32(OP, "B·Hv", b * hv)?, dv as u32);
    ctx.launch(&gdn_decode_kernel::DEF)
        .constexpr("dk", dk as u32)
        .constexpr("dv", dv32)
        .constexpr("hv", hv as u32)
        .constexpr("hk", hk as u32)
        .arg("q", a.q)
        .arg("k", a.k)
        .arg("v", a.v)
        .arg("g", a.g)
        .arg("beta", a.beta)
        .arg("state_in", a.state_in)
        .arg("state_out", a.state_out)
        .arg("o", a.o)
        .scalar("scale", scale)
        .grid([bh, decode_groups(dv32), 1])
        .group_size(32 * DECODE_ROWS)
        .run()
        .map_err(runtime(OP))
}
