//! The Gated DeltaNet recurrent decode step: one token per sequence, the state
//! `[B, Hv, Dv, Dk]` read once and written once. A simdgroup owns one state row
//! `(b, h, dv)` with `lanes` lanes, each holding `Dk / lanes` consecutive elements (one
//! 16-byte access where Dk allows): an f32 state takes 32 lanes a row, a 2-byte state of
//! Dk 128 takes 16 (two rows a simdgroup, reduced with a width-16 butterfly), so a 2-byte
//! state keeps whole 16-byte accesses. `S ← e^{g}·S; v_new = β·(v − S k); S ← S + v_new kᵀ; o = scale·S q`.

use super::validate::{check_decode_state, check_dk, decode_groups, decode_lanes, DECODE_ROWS};
use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

/// One decode step; grid `[B·Hv, ceil(Dv / (rows · 32 / lanes)), 1]`, `32·rows` threads.
/// A state row takes `lanes = 2^lg` lanes (32 / lanes rows a simdgroup), `npt = Dk / lanes`
/// consecutive elements each; rows past `Dv` compute on row 0 and store nothing.
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
    #[constexpr] lanes: u32,
    #[constexpr] lg: u32,
) {
    let npt = dk / lanes;
    let n = group_id_x();
    let row = (group_id_y() * simd_groups() + simd_id()) * (32 / lanes) + simd_lane() / lanes;
    let lane = simd_lane() % lanes;
    let inside = row < dv;
    let r = select(inside, row, 0);
    let b = n / hv;
    let kh = (n - b * hv) / (hv / hk);
    let kbase = (b * hk + kh) * dk + lane * npt;
    let sbase = (n * dv + r) * dk + lane * npt;
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
    for s in 0..lg {
        kv += simd_shuffle_xor(kv, (lanes / 2) >> s);
    }
    let vn = bt * (load(v[n * dv + r]).cast::<f32>() - kv);
    let mut acc = 0.0f32;
    for i in 0..npt {
        let s = load(ss[i]) + vn * load(ks[i]);
        store(ss[i], s);
        acc += s * load(q[kbase + i]).cast::<f32>();
    }
    for s in 0..lg {
        acc += simd_shuffle_xor(acc, (lanes / 2) >> s);
    }
    if inside {
        for i in 0..npt {
            store(state_out[sbase + i], load(ss[i]).cast::<S>());
        }
        if lane == 0 {
            store(o[n * dv + r], (acc * scale).cast::<T>());
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
    distinct_named(OP, "o", a.o, &inputs)?;
    distinct_named(OP, "state_out", a.state_out, &inputs)?;
    distinct_named(OP, "state_out", a.state_out, &[("o", a.o)])?;
    if !scale.is_finite() {
        return Err(OpError::invalid(
            OP,
            format!("`scale` must be finite, got {scale}"),
        ));
    }
    fits_u32(OP, "the state size", a.state_in.len())?;
    let (bh, dv32) = (fits_u32(OP, "B·Hv", b * hv)?, dv as u32);
    let (lanes, lg) = decode_lanes(dk, a.state_in.dtype());
    gdn_decode_kernel::launch(
        ctx,
        gdn_decode_kernel::Args {
            q: a.q,
            k: a.k,
            v: a.v,
            g: a.g,
            beta: a.beta,
            state_in: a.state_in,
            state_out: a.state_out,
            o: a.o,
            scale,
        },
        gdn_decode_kernel::Consts {
            dk: dk as u32,
            dv: dv32,
            hv: hv as u32,
            hk: hk as u32,
            lanes,
            lg,
        },
    )
    .grid([bh, decode_groups(dv32, lanes), 1])
    .group_size(32 * DECODE_ROWS)
    .run()
    .map_err(runtime(OP))
}
