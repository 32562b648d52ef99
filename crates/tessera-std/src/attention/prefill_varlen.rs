//! Variable-length prefill: many prompts packed token-major into one q `[total_q,
//! n_q_heads, d]` and one k/v `[total_k, n_kv_heads, d]`, sequence `b` owning q rows
//! `cu_seqlens_q[b] .. cu_seqlens_q[b + 1]` and k/v rows `cu_seqlens_k[b] ..
//! cu_seqlens_k[b + 1]`, as FlashAttention's varlen API defines them. Causal masks align
//! bottom-right: query `i` of a sequence of `lq` queries and `lk` keys sees keys `j ≤ i + lk
//! − lq`; a query that sees no key (`lq > lk`, causal, or `lk = 0`) gives zeros.
//!
//! The offsets live on the device, so they are checked there, as the paged tables are: a
//! first kernel, one thread a sequence, records the first sequence whose q or k offsets
//! do not rise from 0 within the totals (q ending at `total_q`, so every output row is some
//! sequence's) and the first holding more than `max_seqlen_q` queries, in a verdict of
//! three words, and writes each sequence's clamped `(q start, q length, k start, k length)`
//! into the caller's [`VarlenWorkspace`]. Eagerly the wrapper reads the verdict back and
//! refuses the call, naming the sequence, before anything is written. In a recorded graph
//! it cannot: the clamped table still keeps every address inside the tensors, and
//! [`VarlenWorkspace::take_error`] reports the verdict after the replay.
//!
//! The attention runs the contiguous prefill kernels, specialised with `varlen = 1`: the
//! grid is FlashAttention's, (query tiles of the longest sequence, heads, sequences), each
//! threadgroup reading its sequence's rows from the table ([`varlen_rows`]); the tiles past
//! a shorter sequence's end do no work and write nothing. A tile table would launch no idle
//! threadgroups, but its size is a device value: the grid would still be an upper bound
//! (`total_q / rows + batch` tiles), and building it costs a scan over the sequences per
//! call. The rows a causal sequence's queries cannot see any key from (its first `lq −
//! lk`) are left out of the attention, so within it `lk ≥ lq` as the kernels assume, and
//! written as zeros by a small kernel after it.

use super::checks::{dims, first_finding, gqa, indexable, same_dim, same_float_dtype, scale_ok};
use super::prefill::{prefill_head_dim, prefill_launch, PrefillRows};
use crate::error::{runtime, OpError};
use crate::validate::{dtype_in, shape_is};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

const OP: &str = "sdpa_prefill_varlen";

/// The offset dtypes.
pub const OFFSET_DTYPES: [DType; 2] = [DType::I32, DType::U32];

/// Verdict word: the first sequence whose q offsets are out of order or range.
const BAD_Q: usize = 0;
/// Verdict word: the first sequence whose k offsets are out of order or range.
const BAD_K: usize = 1;
/// Verdict word: the first sequence with more than `max_seqlen_q` queries.
const TOO_LONG: usize = 2;
/// Words in a verdict.
const VERDICT_WORDS: usize = 3;
/// Words of a sequence's entry in the table.
const ENTRY: u32 = 4;

/// Checks the offsets and writes the table, one thread a sequence `b < batch`: entry `b`
/// of `seqs` is `(q start, q length, k start, k length)`, clamped into `0..total_q` and
/// `0..total_k` and the q length to `max_q`, whatever the offsets hold. A negative i32
/// offset reads as a u32 above every total.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn prefill_varlen_check_kernel<I>(
    cu_q: Tensor<I>,
    cu_k: Tensor<I>,
    mut seqs: Tensor<u32>,
    mut verdict: Tensor<u32>,
    batch: u32,
    total_q: u32,
    total_k: u32,
    max_q: u32,
) {
    let b = global_id();
    if b < batch {
        let q0 = load(cu_q[b]).cast::<u32>();
        let q1 = load(cu_q[b + 1]).cast::<u32>();
        let k0 = load(cu_k[b]).cast::<u32>();
        let k1 = load(cu_k[b + 1]).cast::<u32>();
        let q_ok =
            q0 <= q1 && q1 <= total_q && (b > 0 || q0 == 0) && (b + 1 < batch || q1 == total_q);
        let k_ok = k0 <= k1 && k1 <= total_k && (b > 0 || k0 == 0);
        if !q_ok {
            let _first = atomic_min(verdict[0], b);
        }
        if !k_ok {
            let _first = atomic_min(verdict[1], b);
        }
        if q_ok && q1 - q0 > max_q {
            let _first = atomic_min(verdict[2], b);
        }
        let qs = min(q0, total_q);
        let ks = min(k0, total_k);
        store(seqs[b * 4], qs);
        store(seqs[b * 4 + 1], min(min(max(q1, qs), total_q) - qs, max_q));
        store(seqs[b * 4 + 2], ks);
        store(seqs[b * 4 + 3], min(max(k1, ks), total_k) - ks);
    }
}

/// The rows a threadgroup of the prefill kernels serves: `(q start, query rows, k start,
/// keys, first row)`. Contiguous (`varlen = 0`): the whole tensors and the kernel's own
/// `block`. Packed: sequence `seq`'s entry of the table, its first `lq − lk` queries left
/// out when causal (they see no key), and tile `tile` of `rows` rows, counted from the last
/// when `reversed`; a tile past the sequence's end reads row 0 against no key and writes
/// nothing (its first row, 1, is past its one row).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn varlen_rows<S>(
    seqs: Mem<S>,
    varlen: u32,
    causal: u32,
    seq: u32,
    tile: u32,
    rows: u32,
    reversed: u32,
    n_q: u32,
    n_kv: u32,
    block: u32,
) -> (u32, u32, u32, u32, u32) {
    let at = seq * 4;
    let packed = varlen != 0;
    // A table entry is the same on every thread; the reductions prove it, so the kernels'
    // block walks may hold barriers.
    let qs = if packed {
        group_max(load(seqs[at]).cast::<u32>())
    } else {
        0u32
    };
    let lq = if packed {
        group_max(load(seqs[at + 1]).cast::<u32>())
    } else {
        0u32
    };
    let ks = if packed {
        group_max(load(seqs[at + 2]).cast::<u32>())
    } else {
        0u32
    };
    let lk = if packed {
        group_max(load(seqs[at + 3]).cast::<u32>())
    } else {
        0u32
    };
    let blind = select(causal != 0 && lq > lk, lq - lk, 0u32);
    let nq = lq - blind;
    let tiles = (nq + rows - 1) / rows;
    let live = tile < tiles;
    let t = select(reversed != 0, tiles - 1 - tile, tile);
    (
        select(packed && live, qs + blind, 0u32),
        select(packed, select(live, nq, 1u32), n_q),
        select(packed && live, ks, 0u32),
        select(packed, select(live, lk, 0u32), n_kv),
        select(packed, select(live, t * rows, 1u32), block),
    )
}

/// Writes zeros to the first `lq − lk` query rows of each causal sequence with more
/// queries than keys (they see no key): `row_elems = n_q_heads · head_dim` elements a row,
/// thread `i` of group row `seq` the `i`-th element of sequence `seq`'s such rows.
#[kernel(group_size = 256)]
pub fn prefill_varlen_blind_rows_kernel<T>(seqs: Tensor<u32>, mut out: Tensor<T>, row_elems: u32) {
    let seq = group_id_y();
    let i = group_id_x() * 256 + thread_id();
    let lq = load(seqs[seq * 4 + 1]);
    let lk = load(seqs[seq * 4 + 3]);
    let blind = select(lq > lk, lq - lk, 0u32);
    if i < blind * row_elems {
        let zero = 0.0f32;
        store(out[load(seqs[seq * 4]) * row_elems + i], zero.cast::<T>());
    }
}

/// The scratch of a packed prefill: each sequence's checked table entry and the verdict of
/// the offsets' check (three words, u32::MAX while the offsets are good). Made once,
/// outside the calls.
pub struct VarlenWorkspace {
    seqs: Tensor,
    verdict: Tensor,
}

impl VarlenWorkspace {
    /// Scratch for calls of up to `max_batch` sequences.
    pub fn new(ctx: &Context, max_batch: usize) -> Result<VarlenWorkspace, OpError> {
        Ok(VarlenWorkspace {
            seqs: ctx
                .zeros(DType::U32, &[max_batch.max(1) * ENTRY as usize])
                .map_err(runtime(OP))?,
            verdict: ctx
                .tensor(&[u32::MAX; VERDICT_WORDS], &[VERDICT_WORDS])
                .map_err(runtime(OP))?,
        })
    }

    /// After calls recorded in a graph and replayed (which cannot refuse: they read only
    /// clamped rows, but a batch with bad offsets came out wrong), the first problem the
    /// device check found since the last look, as an error; the verdict is reset.
    pub fn take_error(&self) -> Result<(), OpError> {
        match self.take_verdict()? {
            None => Ok(()),
            Some((word, b)) => Err(OpError::invalid(
                OP,
                format!(
                    "packed sequences were refused in a graph replay ({} at sequence {b}); that call's output is wrong",
                    ["bad `cu_seqlens_q`", "bad `cu_seqlens_k`", "more queries than max_seqlen_q"][word]
                ),
            )),
        }
    }

    /// The first verdict word holding a finding (its index and the sequence), putting the
    /// verdict back.
    fn take_verdict(&self) -> Result<Option<(usize, usize)>, OpError> {
        first_finding(OP, &self.verdict, &[BAD_Q, BAD_K, TOO_LONG])
    }
}

/// The packed sequences of a call: the offsets (i32 or u32 `[batch + 1]`, on the device)
/// and the most queries any sequence has, which sizes the grid (FlashAttention's
/// `max_seqlen_q`).
#[derive(Clone, Copy)]
pub struct Packed<'a> {
    pub cu_seqlens_q: &'a Tensor,
    pub cu_seqlens_k: &'a Tensor,
    pub max_seqlen_q: usize,
}

/// Offsets `a` and `b` at sequence `at` of `t`, for a message.
fn offsets_at(t: &Tensor, at: usize) -> String {
    let v: Option<Vec<i64>> = match t.dtype() {
        DType::I32 => t
            .to_vec::<i32>()
            .ok()
            .map(|v| v.into_iter().map(i64::from).collect()),
        _ => t
            .to_vec::<u32>()
            .ok()
            .map(|v| v.into_iter().map(i64::from).collect()),
    };
    match v.as_ref().and_then(|v| v.get(at..at + 2)) {
        Some(&[a, b]) => format!("{a}, {b}"),
        _ => "?".into(),
    }
}

/// Packed prefill attention: q `[total_q, n_q_heads, D]`, k and v `[total_k, n_kv_heads,
/// D]`, out like q, sequence `b` owning the rows `seqs` gives it (see the module). The
/// offsets rise from 0, q's to exactly `total_q` and k's to at most `total_k`; no sequence
/// holds more than `max_seqlen_q` queries. Offsets that break this are refused, naming the
/// sequence, before anything is written. head_dim 64, 96, 128, 192, 256; `ws` from
/// [`VarlenWorkspace::new`] for at least `batch` sequences.
#[allow(clippy::too_many_arguments)]
pub fn sdpa_prefill_varlen(
    ctx: &Context,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    seqs: &Packed,
    out: &Tensor,
    causal: bool,
    scale: Option<f32>,
    ws: &VarlenWorkspace,
) -> Result<(), OpError> {
    let eager = !ctx.recording_graph();
    packed_attention(ctx, (q, k, v, out), seqs, (causal, scale), ws, eager)
}

/// The call: checks, the offsets checked on the device (a bad batch refused when `eager`),
/// then the attention over the checked table.
fn packed_attention(
    ctx: &Context,
    (q, k, v, out): (&Tensor, &Tensor, &Tensor, &Tensor),
    seqs: &Packed,
    (causal, scale): (bool, Option<f32>),
    ws: &VarlenWorkspace,
    eager: bool,
) -> Result<(), OpError> {
    same_float_dtype(OP, q, k, v, out)?;
    let qs = dims(OP, "q", q, "total_q, n_q_heads, head_dim")?;
    let ks = dims(OP, "k", k, "total_k, n_kv_heads, head_dim")?;
    shape_is(OP, "v", v, ks)?;
    shape_is(OP, "out", out, qs)?;
    same_dim(OP, "k's head_dim", ks[2], qs[2], "q")?;
    let head_dim = prefill_head_dim(OP, qs[2])?;
    gqa(OP, qs[1], ks[1])?;
    indexable(OP, &[("q", q), ("k", k)])?;
    let (cu_q, cu_k) = (seqs.cu_seqlens_q, seqs.cu_seqlens_k);
    dtype_in(OP, "cu_seqlens_q", cu_q, &OFFSET_DTYPES)?;
    dtype_in(OP, "cu_seqlens_k", cu_k, &OFFSET_DTYPES)?;
    let n = dims(OP, "cu_seqlens_q", cu_q, "batch + 1")?[0];
    if n < 2 {
        return Err(OpError::invalid(
            OP,
            "`cu_seqlens_q` must hold batch + 1 ≥ 2 offsets, got 1",
        ));
    }
    shape_is(OP, "cu_seqlens_k", cu_k, &[n])?;
    let batch = n - 1;
    // The sequences are the grid's z extent.
    if batch > 65535 {
        return Err(OpError::invalid(
            OP,
            format!("{batch} sequences in one call; at most 65535 are taken: split the batch"),
        ));
    }
    if seqs.max_seqlen_q == 0 || seqs.max_seqlen_q > qs[0] {
        return Err(OpError::invalid(
            OP,
            format!(
                "max_seqlen_q = {} must be in 1..={} (total_q)",
                seqs.max_seqlen_q, qs[0]
            ),
        ));
    }
    if !ctx.owns(&ws.verdict) {
        return Err(OpError::invalid(
            OP,
            "the workspace was made on another context; make it with VarlenWorkspace::new on this one",
        ));
    }
    if ws.seqs.len() < batch * ENTRY as usize {
        return Err(OpError::invalid(
            OP,
            format!(
                "the workspace holds {} sequences, this call has {batch}; make it with VarlenWorkspace::new for this batch",
                ws.seqs.len() / ENTRY as usize
            ),
        ));
    }
    let scale = scale.unwrap_or(1.0 / (head_dim as f32).sqrt());
    scale_ok(OP, scale)?;
    // Every size below fits u32: q and k's element counts do.
    let (batch32, max_q) = (batch as u32, seqs.max_seqlen_q as u32);
    prefill_varlen_check_kernel::launch(
        ctx,
        prefill_varlen_check_kernel::Args {
            cu_q,
            cu_k,
            seqs: &ws.seqs,
            verdict: &ws.verdict,
            batch: batch32,
            total_q: qs[0] as u32,
            total_k: ks[0] as u32,
            max_q,
        },
    )
    .grid([batch32.div_ceil(128), 1, 1])
    .group_size(128)
    .run()
    .map_err(runtime(OP))?;
    if eager {
        if let Some((word, b)) = ws.take_verdict()? {
            let msg = match word {
                BAD_Q => format!(
                    "`cu_seqlens_q` is bad at sequence {b} (offsets {}): the offsets must rise from 0 to total_q = {}",
                    offsets_at(cu_q, b),
                    qs[0]
                ),
                BAD_K => format!(
                    "`cu_seqlens_k` is bad at sequence {b} (offsets {}): the offsets must rise from 0 to at most total_k = {}",
                    offsets_at(cu_k, b),
                    ks[0]
                ),
                _ => format!(
                    "sequence {b} (offsets {}) holds more queries than max_seqlen_q = {max_q}",
                    offsets_at(cu_q, b)
                ),
            };
            return Err(OpError::invalid(OP, msg));
        }
    }
    let rows = PrefillRows {
        n_q: qs[0] as u32,
        n_kv: ks[0] as u32,
        n_q_heads: qs[1] as u32,
        n_kv_heads: ks[1] as u32,
        head_dim,
        causal: u32::from(causal),
        scale,
    };
    prefill_launch(
        ctx,
        OP,
        (q, k, v, out),
        &rows,
        (Some((&ws.seqs, max_q, batch32)), None, None),
    )?;
    if causal {
        let row_elems = (qs[1] * qs[2]) as u32;
        let per_seq = max_q * row_elems;
        prefill_varlen_blind_rows_kernel::launch(
            ctx,
            prefill_varlen_blind_rows_kernel::Args {
                seqs: &ws.seqs,
                out,
                row_elems,
            },
        )
        .grid([per_seq.div_ceil(256), batch32, 1])
        .group_size(256)
        .run()
        .map_err(runtime(OP))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A graph replay cannot refuse bad offsets: the call as it runs there (no read-back)
    /// must stay inside every tensor (the CPU backend is a sanitizer: an out-of-range
    /// access is an error) and leave the finding for `take_error`.
    #[test]
    fn bad_offsets_in_a_replay_stay_in_bounds_and_are_reported() {
        let ctx = Context::cpu();
        let ones = |n: usize| vec![half::f16::ONE; n];
        let q = ctx.tensor(&ones(10 * 2 * 64), &[10, 2, 64]).expect("q");
        let k = ctx.tensor(&ones(12 * 64), &[12, 1, 64]).expect("k");
        let v = ctx.tensor(&ones(12 * 64), &[12, 1, 64]).expect("v");
        let out = ctx.zeros(DType::F16, &[10, 2, 64]).expect("out");
        let cu_q = ctx.tensor(&[0i32, -5, 40], &[3]).expect("cu_q");
        let cu_k = ctx.tensor(&[0i32, 100, 3], &[3]).expect("cu_k");
        let ws = VarlenWorkspace::new(&ctx, 2).expect("workspace");
        let seqs = Packed {
            cu_seqlens_q: &cu_q,
            cu_seqlens_k: &cu_k,
            max_seqlen_q: 6,
        };
        for causal in [false, true] {
            packed_attention(&ctx, (&q, &k, &v, &out), &seqs, (causal, None), &ws, false)
                .expect("a replay runs, in bounds");
            let e = ws.take_error().expect_err("the finding is kept");
            assert!(
                e.to_string().contains("bad `cu_seqlens_q` at sequence 0"),
                "{e}"
            );
            ws.take_error().expect("the verdict was reset");
        }
        // Eagerly the same call is refused.
        let e = packed_attention(&ctx, (&q, &k, &v, &out), &seqs, (true, None), &ws, true)
            .expect_err("refused");
        assert!(
            e.to_string()
                .contains("`cu_seqlens_q` is bad at sequence 0"),
            "{e}"
        );
    }
}
