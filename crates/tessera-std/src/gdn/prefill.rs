//! The chunked Gated DeltaNet prefill (flash-linear-attention's algorithm, chunks of 64):
//! validates the call against the caller's [`GdnPrefillWorkspace`] (the chunk table planned
//! from the sequence boundaries and the per-chunk scratch) and launches the kernels of
//! [`super::prefill_kernels`] for f16/bf16 activations, allocating nothing; f32 activations
//! take the token-by-token recurrence of [`super::prefill_recurrent`], which keeps f32
//! accuracy and range, and so do the (sequence, value head) pairs of an f16/bf16 prefill
//! whose chunks came out non-finite (a NaN or ∞ in the data, which the chunk's triangular
//! products would carry to earlier tokens, or data past the f16 staging's range). Any
//! sequence lengths (the tail chunk is masked), GQA, an optional initial state, and the
//! final state written in the decode step's layout `[N, Hv, Dv, Dk]`.

use super::prefill_kernels::{
    gdn_chunk_out_kernel, gdn_chunk_prep_kernel, gdn_chunk_state_kernel,
    gdn_chunk_state_wide_kernel,
};
use super::prefill_recurrent::{recurrent_prefill, Heads, Pairs};
use super::prefill_workspace::{equal_sequences, GdnPrefillWorkspace};
use super::validate::check_dk;
use crate::error::{runtime, OpError};
use crate::validate::{
    distinct_named, dtype_in, dtype_is, fits_u32, shape_is, state_dtype, FLOAT_DTYPES,
};
use tessera_runtime::{Context, DType, Tensor};

/// Tokens per chunk.
pub const CHUNK: usize = 64;

/// The tensors of a prefill. Token-major, all sequences packed: q, k `[T, Hk, Dk]`,
/// v `[T, Hv, Dv]`, g (log decay), beta `[T, Hv]` f32, o `[T, Hv, Dv]` — or the same with
/// a leading batch dimension `[B, T, …]` for B sequences of equal length.
pub struct PrefillArgs<'a> {
    pub q: &'a Tensor,
    pub k: &'a Tensor,
    pub v: &'a Tensor,
    pub g: &'a Tensor,
    pub beta: &'a Tensor,
    /// `[N, Hv, Dv, Dk]`, f32 or the activations' dtype; zero when `None`.
    pub h0: Option<&'a Tensor>,
    pub o: &'a Tensor,
    /// `[N, Hv, Dv, Dk]`, the dtype of `h0` (f32 when there is none, or the activations').
    pub final_state: &'a Tensor,
}

/// The tensor-core input type for activations of dtype `t`.
pub fn staging_dtype(t: DType) -> DType {
    match t {
        DType::BF16 => DType::BF16,
        _ => DType::F16,
    }
}

/// The largest Dk whose state slice leaves room for the staged state walk's tiles under
/// the 32 KiB threadgroup limit; above it one walk reads its operands from device memory
/// and forms the outputs itself.
pub const STAGED_DK_MAX: usize = 128;

/// Splits the leading dims of `x` into tokens; returns (tokens, batch if 4-D, trailing).
fn tokens(
    op: &'static str,
    name: &str,
    x: &Tensor,
    tail: usize,
) -> Result<(usize, Option<usize>), OpError> {
    let s = x.shape();
    match s.len() {
        n if n == tail + 1 => Ok((s[0], None)),
        n if n == tail + 2 => Ok((s[0] * s[1], Some(s[0]))),
        _ => Err(OpError::invalid(
            op,
            format!(
                "`{name}` must be [T, …] or [B, T, …] with {tail} trailing dimension(s), got shape {s:?}"
            ),
        )),
    }
}

/// Chunked prefill over the sequences `ws` is planned for (packed `cu_seqlens`, or for 4-D
/// inputs `[B, T, …]` B equal sequences, [`equal_sequences`]). Everything the kernels need
/// besides the tensors comes from the caller's workspace, so the call allocates and
/// uploads nothing; a workspace that is too small, for another dtype or context, or planned
/// for another token count is refused before anything runs. f16/bf16 activations run the
/// chunked algorithm on matrix fragments (their own precision), then redo in f32 the
/// (sequence, value head) pairs whose chunked outputs were not finite; f32 activations run
/// the recurrence token by token in f32 (f32-accurate, any f32 value, slower on long
/// prompts).
pub fn gdn_chunked_prefill(
    ctx: &Context,
    a: &PrefillArgs,
    ws: &GdnPrefillWorkspace,
    scale: f32,
) -> Result<(), OpError> {
    const OP: &str = "gdn_chunked_prefill";
    dtype_in(OP, "q", a.q, &FLOAT_DTYPES)?;
    let t = a.q.dtype();
    dtype_is(OP, "k", a.k, t)?;
    dtype_is(OP, "v", a.v, t)?;
    dtype_is(OP, "o", a.o, t)?;
    dtype_is(OP, "g", a.g, DType::F32)?;
    dtype_is(OP, "beta", a.beta, DType::F32)?;
    let (total, batch) = tokens(OP, "q", a.q, 2)?;
    let qs = a.q.shape();
    let (hk, dk) = (qs[qs.len() - 2], qs[qs.len() - 1]);
    let (vt, _) = tokens(OP, "v", a.v, 2)?;
    let vs = a.v.shape();
    let (hv, dv) = (vs[vs.len() - 2], vs[vs.len() - 1]);
    if vt != total || a.v.shape()[..vs.len() - 2] != qs[..qs.len() - 2] {
        return Err(OpError::invalid(
            OP,
            format!(
                "`v` must have the token dimensions of `q` {:?}, got shape {vs:?}",
                &qs[..qs.len() - 2]
            ),
        ));
    }
    check_dk(OP, dk)?;
    if hk == 0 || hv == 0 || !hv.is_multiple_of(hk) {
        return Err(OpError::invalid(
            OP,
            format!("Hv = {hv} must be a positive multiple of Hk = {hk} (GQA)"),
        ));
    }
    if dv == 0 || !dv.is_multiple_of(16) || dv > 256 {
        return Err(OpError::invalid(
            OP,
            format!("the value head size Dv = {dv} must be a multiple of 16, at most 256"),
        ));
    }
    let lead = &qs[..qs.len() - 2];
    shape_is(OP, "k", a.k, qs)?;
    let gshape: Vec<usize> = lead.iter().copied().chain([hv]).collect();
    shape_is(OP, "g", a.g, &gshape)?;
    shape_is(OP, "beta", a.beta, &gshape)?;
    shape_is(OP, "o", a.o, vs)?;
    // Sequence boundaries: the workspace's plan.
    let cu = ws.cu_seqlens();
    if cu[cu.len() - 1] != total {
        return Err(OpError::invalid(
            OP,
            format!(
                "the workspace is planned for `cu_seqlens` {cu:?}, which do not end at T = {total}; plan this batch into it first"
            ),
        ));
    }
    if let Some(b) = batch.filter(|&b| b != 1) {
        if cu != equal_sequences(b, total / b) {
            return Err(OpError::invalid(
                OP,
                format!(
                    "[B, T, …] inputs are {b} sequences of {} tokens; the workspace is planned for `cu_seqlens` {cu:?}",
                    total / b
                ),
            ));
        }
    }
    let n = cu.len() - 1;
    state_dtype(OP, "final_state", a.final_state, t)?;
    let sd = a.final_state.dtype();
    let sshape = [n, hv, dv, dk];
    shape_is(OP, "final_state", a.final_state, &sshape)?;
    if let Some(h0) = a.h0 {
        dtype_is(OP, "h0", h0, sd)?;
        shape_is(OP, "h0", h0, &sshape)?;
    }
    let mut inputs = vec![
        ("q", a.q),
        ("k", a.k),
        ("v", a.v),
        ("g", a.g),
        ("beta", a.beta),
    ];
    if let Some(h0) = a.h0 {
        inputs.push(("h0", h0));
    }
    distinct_named(OP, "o", a.o, &inputs)?;
    distinct_named(OP, "final_state", a.final_state, &inputs)?;
    distinct_named(OP, "final_state", a.final_state, &[("o", a.o)])?;
    if !scale.is_finite() {
        return Err(OpError::invalid(
            OP,
            format!("`scale` must be finite, got {scale}"),
        ));
    }
    ws.check(OP, ctx, t, hv, dk, dv)?;
    let nc = ws.n_chunks();
    fits_u32(OP, "the token count", total * hv * dk.max(dv))?;
    fits_u32(OP, "the state size", n * hv * dv * dk)?;
    let h0 = a.h0.unwrap_or_else(|| ws.zero_state(sd));
    let heads = Heads {
        hk: hk as u32,
        hv: hv as u32,
        dk: dk as u32,
        dv: dv as u32,
    };
    let recurrent = |pairs| {
        let with_h0 = a.h0.is_some();
        recurrent_prefill(OP, ctx, a, h0, with_h0, ws, pairs, n as u32, heads, scale)
    };
    if t == DType::F32 {
        // f32 data would lose precision (and overflow past 65504) in the f16 fragments.
        return recurrent(Pairs::All);
    }
    fits_u32(OP, "the chunk-start states", nc * hv * dv * dk)?;
    let rt = runtime(OP);
    let (chunks, seqs, ops, u, decay) = (&ws.chunks, &ws.seq_chunks, &ws.ops, &ws.u, &ws.decay);
    let redo = &ws.redo;
    let (dk32, dv32, hv32, hk32) = (dk as u32, dv as u32, hv as u32, hk as u32);
    let use_h0 = u32::from(a.h0.is_some());
    if nc > 0 {
        let args = gdn_chunk_prep_kernel::Args {
            q: a.q,
            k: a.k,
            v: a.v,
            g: a.g,
            beta: a.beta,
            chunks,
            ops,
            u,
            decay,
            redo,
            scale,
        };
        let consts = gdn_chunk_prep_kernel::Consts {
            dk: dk32,
            dv: dv32,
            hv: hv32,
            hk: hk32,
        };
        gdn_chunk_prep_kernel::launch(ctx, args, consts)
            .grid([nc as u32, hv32, 1])
            .group_size(128)
            .run()
            .map_err(&rt)?;
    }
    if dk > STAGED_DK_MAX {
        let args = gdn_chunk_state_wide_kernel::Args {
            ops,
            u,
            decay,
            chunks,
            seq_chunks: seqs,
            h0,
            o: a.o,
            state_out: a.final_state,
            redo,
            use_h0,
        };
        let consts = gdn_chunk_state_wide_kernel::Consts {
            dk: dk32,
            dv: dv32,
            hv: hv32,
        };
        gdn_chunk_state_wide_kernel::launch(ctx, args, consts)
            .grid([dv32 / 16, hv32, n as u32])
            .group_size(128)
            .run()
            .map_err(&rt)?;
        return redo_flagged(nc, recurrent);
    }
    let (hs, vn) = (&ws.hs, &ws.vn);
    let args = gdn_chunk_state_kernel::Args {
        ops,
        u,
        decay,
        seq_chunks: seqs,
        h0,
        hs,
        vn,
        state_out: a.final_state,
        redo,
        use_h0,
    };
    let consts = gdn_chunk_state_kernel::Consts {
        dk: dk32,
        dv: dv32,
        hv: hv32,
    };
    gdn_chunk_state_kernel::launch(ctx, args, consts)
        .grid([dv32.div_ceil(32), hv32, n as u32])
        .group_size(256)
        .run()
        .map_err(&rt)?;
    if nc == 0 {
        return Ok(());
    }
    let args = gdn_chunk_out_kernel::Args {
        ops,
        hs,
        vn,
        chunks,
        o: a.o,
        redo,
    };
    let consts = gdn_chunk_out_kernel::Consts {
        dk: dk32,
        dv: dv32,
        hv: hv32,
    };
    gdn_chunk_out_kernel::launch(ctx, args, consts)
        .grid([nc as u32, hv32, dv32.div_ceil(64)])
        .group_size(128)
        .run()
        .map_err(rt)?;
    redo_flagged(nc, recurrent)
}

/// After the chunked kernels: the f32 walk over the pairs they flagged (a launch whose
/// threadgroups read their sequence's flags and, on the common path, stop there). Without
/// chunks nothing was staged and nothing is flagged.
fn redo_flagged(
    nc: usize,
    recurrent: impl FnOnce(Pairs) -> Result<(), OpError>,
) -> Result<(), OpError> {
    if nc == 0 {
        return Ok(());
    }
    recurrent(Pairs::Flagged)
}
