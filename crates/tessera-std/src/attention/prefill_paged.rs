//! Prefill over a paged KV cache (chunked prefill over a prefix cache): the new tokens of
//! many sequences packed into one q `[total_q, n_q_heads, d]` (sequence `b` owning rows
//! `cu_seqlens_q[b] .. cu_seqlens_q[b + 1]`, FlashAttention's offsets), their keys and
//! values already appended to a paged cache with the prefix before them. Sequence `b`
//! holds `len` tokens, its `lq` new ones last, so query `i` sits at position `len − lq + i`
//! and, causal, sees keys `j ≤ len − lq + i`; else all `len`.
//!
//! The page table is reduced and checked on the device by the paged decode's kernels
//! (`paged_table`, one row a sequence), then a small kernel checks the query offsets and
//! that no sequence holds fewer tokens than its queries, and writes one u32 table the
//! prefill kernels read: each sequence's `(q start, q length, first page entry, keys)`
//! as `prefill_varlen` has it, then a header of the page walk (page size, its log2, and
//! the slot and head strides in head_dim rows), then the checked page list. Eagerly the
//! verdict is read back and a bad call refused, naming the sequence or entry, before
//! anything is written; in a recorded graph [`PagedPrefillWorkspace::take_error`] reports
//! it after the replay, every address staying inside the pools meanwhile.
//!
//! The attention is the packed prefill (`varlen = 1`) with `paged` set: each K/V row's
//! address goes through `paged_rows::key_row`, the page list starting at the sequence's
//! entry.

use super::checks::{dims, first_finding, gqa, indexable, same_dim, same_float_dtype, scale_ok};
use super::kv_quant::{check_scales, KvScales};
use super::paged::{
    pool_dims, table_refusal, table_shape, value_at, KvLayout, PageTable, PagedKv, TableGeometry,
};
use super::paged_rows::{key_row, PageWalk};
use super::paged_table::{
    paged_lengths_kernel, paged_pages_kernel, BAD_ROW_POINTERS, LENGTH_PAST_TABLE, NEGATIVE_LENGTH,
    PAGE_OUT_OF_RANGE, SHORTER_THAN_QUERIES,
};
use super::prefill::{prefill_head_dim, prefill_launch, PrefillRows};
use super::prefill_varlen::{prefill_varlen_blind_rows_kernel, OFFSET_DTYPES};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_in, dtype_is, shape_is};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

const OP: &str = "sdpa_prefill_paged";

/// Verdict word: the first sequence whose q offsets are out of order or range.
const BAD_Q: usize = 5;
/// Verdict word: the first sequence with more than `max_seqlen_q` queries.
const TOO_LONG: usize = 6;
/// Words in a verdict: the page table's five, then the two of the queries.
const VERDICT_WORDS: usize = 7;
/// Words of a sequence's entry in the table.
const ENTRY: usize = 4;
/// Words of the page walk's header, after the entries.
const HEADER: usize = 4;

/// The page walk's scalars from the table's header (after the `num_groups_z()` sequences'
/// entries): `(page_size, log2 page_size, slot_rows, head_rows)`; constants when not
/// `paged`, never read.
#[func]
pub fn prefill_page_scalars<S>(seqs: Mem<S>, paged: u32) -> (u32, u32, u32, u32) {
    let at = num_groups_z() * 4;
    let size = if paged != 0 {
        load(seqs[at]).cast::<u32>()
    } else {
        1u32
    };
    let shift = if paged != 0 {
        load(seqs[at + 1]).cast::<u32>()
    } else {
        0u32
    };
    let slot = if paged != 0 {
        load(seqs[at + 2]).cast::<u32>()
    } else {
        0u32
    };
    let head = if paged != 0 {
        load(seqs[at + 3]).cast::<u32>()
    } else {
        0u32
    };
    (size, shift, slot, head)
}

/// The element where KV head `kvh`'s row of key `key` starts: contiguous (`paged = 0`), row
/// `k0 + key` of a token-major `[n_kv, n_kv_heads, head_dim]` tensor; paged, through
/// [`key_row`] with the sequence's page list starting at entry `k0` of `seqs`.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn prefill_kv_row<S>(
    seqs: Mem<S>,
    k0: u32,
    key: u32,
    kvh: u32,
    n_kv_heads: u32,
    head_dim: u32,
    page_size: u32,
    page_shift: u32,
    slot_rows: u32,
    head_rows: u32,
    paged: u32,
) -> u32 {
    if paged == 0 {
        ((k0 + key) * n_kv_heads + kvh) * head_dim
    } else {
        key_row(
            seqs,
            k0,
            key,
            0,
            kvh,
            page_size,
            page_shift,
            page_size * n_kv_heads,
            slot_rows,
            head_rows,
            head_dim,
            paged,
        )
    }
}

/// Builds the prefill table, one thread a sequence and a page entry (`max(batch,
/// entries)` threads): sequence `b`'s entry from its q offsets (checked as
/// `prefill_varlen` checks them, clamped into `0..total_q` and to `max_q`) and its
/// checked first page entry and length (`starts`, `lens`); a sequence with fewer tokens
/// than queries recorded; the header of the walk; the checked page list copied after it.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn prefill_paged_table_kernel<I>(
    cu_q: Tensor<I>,
    starts: Tensor<u32>,
    lens: Tensor<u32>,
    pages: Tensor<u32>,
    mut seqs: Tensor<u32>,
    mut verdict: Tensor<u32>,
    batch: u32,
    total_q: u32,
    max_q: u32,
    entries: u32,
    page_size: u32,
    page_shift: u32,
    slot_rows: u32,
    head_rows: u32,
) {
    let t = global_id();
    let list = batch * 4 + 4;
    if t < batch {
        let q0 = load(cu_q[t]).cast::<u32>();
        let q1 = load(cu_q[t + 1]).cast::<u32>();
        let q_ok =
            q0 <= q1 && q1 <= total_q && (t > 0 || q0 == 0) && (t + 1 < batch || q1 == total_q);
        if !q_ok {
            let _first = atomic_min(verdict[5], t);
        }
        if q_ok && q1 - q0 > max_q {
            let _first = atomic_min(verdict[6], t);
        }
        let n = load(lens[t]);
        if q_ok && q1 - q0 > n {
            let _first = atomic_min(verdict[4], t);
        }
        let qs = min(q0, total_q);
        store(seqs[t * 4], qs);
        store(seqs[t * 4 + 1], min(min(max(q1, qs), total_q) - qs, max_q));
        store(seqs[t * 4 + 2], list + load(starts[t]));
        store(seqs[t * 4 + 3], n);
    }
    if t == 0 {
        store(seqs[batch * 4], page_size);
        store(seqs[batch * 4 + 1], page_shift);
        store(seqs[batch * 4 + 2], slot_rows);
        store(seqs[batch * 4 + 3], head_rows);
    }
    if t < entries {
        store(seqs[list + t], load(pages[t]));
    }
}

/// The scratch of a paged prefill: the page table's reduction (each sequence's first
/// entry and length, the checked list), the table the kernels read and the verdict (seven
/// words, u32::MAX while the call is good). Made once, outside the calls.
pub struct PagedPrefillWorkspace {
    starts: Tensor,
    lens: Tensor,
    pages: Tensor,
    seqs: Tensor,
    verdict: Tensor,
}

impl PagedPrefillWorkspace {
    /// Scratch for calls of up to `max_batch` sequences and page tables of up to
    /// `table_entries` entries (`batch · max_blocks`, or `indices`' length).
    pub fn new(
        ctx: &Context,
        max_batch: usize,
        table_entries: usize,
    ) -> Result<PagedPrefillWorkspace, OpError> {
        let (b, e) = (max_batch.max(1), table_entries.max(1));
        let z = |n: usize| ctx.zeros(DType::U32, &[n]).map_err(runtime(OP));
        Ok(PagedPrefillWorkspace {
            starts: z(b)?,
            lens: z(b)?,
            pages: z(e)?,
            seqs: z(b * ENTRY + HEADER + e)?,
            verdict: ctx
                .tensor(&[u32::MAX; VERDICT_WORDS], &[VERDICT_WORDS])
                .map_err(runtime(OP))?,
        })
    }

    /// After calls recorded in a graph and replayed (which cannot refuse: they read only
    /// checked pages and clamped rows, but a call with a bad table or offsets came out
    /// wrong), the first problem the device check found since the last look, as an error;
    /// the verdict is reset.
    pub fn take_error(&self) -> Result<(), OpError> {
        match self.take_verdict()? {
            None => Ok(()),
            Some((word, at)) => Err(OpError::invalid(
                OP,
                format!(
                    "a paged prefill was refused in a graph replay ({}, at {at}); that call's output is wrong",
                    [
                        "a negative length",
                        "a length past its pages",
                        "a page id outside the cache",
                        "unordered row pointers",
                        "a sequence shorter than its queries",
                        "bad `cu_seqlens_q`",
                        "more queries than max_seqlen_q",
                    ][word]
                ),
            )),
        }
    }

    /// The first verdict word holding a finding (its index and the sequence or entry),
    /// putting the verdict back.
    fn take_verdict(&self) -> Result<Option<(usize, usize)>, OpError> {
        first_finding(
            OP,
            &self.verdict,
            &[
                BAD_Q,
                BAD_ROW_POINTERS,
                NEGATIVE_LENGTH,
                LENGTH_PAST_TABLE,
                PAGE_OUT_OF_RANGE,
                TOO_LONG,
                SHORTER_THAN_QUERIES,
            ],
        )
    }
}

/// The queries of a paged prefill: the offsets (i32 or u32 `[batch + 1]`, on the device)
/// and the most queries a sequence has (FlashAttention's `max_seqlen_q`, sizing the grid).
#[derive(Clone, Copy)]
pub struct PagedQueries<'a> {
    pub cu_seqlens_q: &'a Tensor,
    pub max_seqlen_q: usize,
}

/// The checked shape of a call.
struct Shape {
    batch: usize,
    total_q: usize,
    n_q_heads: usize,
    n_kv_heads: usize,
    page_size: usize,
    blocks: usize,
    head_dim: u32,
    entries: usize,
    width: usize,
}

/// Why prefill refuses a prepared table.
const PREFILL_TABLES: &str =
    "prefill reduces its own table: pass the block or CSR table, not a prepared one";

/// Checks a call named `op`; with `quant`, the pools are u8 codes of that format (checked
/// by [`check_quant_dtypes`]) and q f16 or bf16.
fn check_shapes(
    op: &'static str,
    (q, kv, out): (&Tensor, &PagedKv, &Tensor),
    qs: &PagedQueries,
    quant: Option<&KvScales>,
) -> Result<Shape, OpError> {
    match quant {
        None => same_float_dtype(op, q, kv.k_cache, kv.v_cache, out)?,
        Some(scales) => check_quant_dtypes(op, (q, kv, out), scales, qs.cu_seqlens_q)?,
    }
    let s = dims(op, "q", q, "total_q, n_q_heads, head_dim")?;
    let (ks, page_size, n_kv_heads) = pool_dims(op, kv)?;
    shape_is(op, "out", out, s)?;
    match quant {
        None => same_dim(op, "k_cache's head_dim", ks[3], s[2], "q")?,
        Some(sc) => {
            let bytes = sc.format.row_bytes(s[2]);
            same_dim(op, "k_cache's last dim (bytes a row)", ks[3], bytes, "q")?
        }
    }
    let head_dim = prefill_head_dim(op, s[2])?;
    gqa(op, s[1], n_kv_heads)?;
    indexable(op, &[("q", q), ("k_cache", kv.k_cache)])?;
    let cu = qs.cu_seqlens_q;
    dtype_in(op, "cu_seqlens_q", cu, &OFFSET_DTYPES)?;
    let n = dims(op, "cu_seqlens_q", cu, "batch + 1")?[0];
    if n < 2 {
        return Err(OpError::invalid(
            op,
            "`cu_seqlens_q` must hold batch + 1 ≥ 2 offsets, got 1",
        ));
    }
    let batch = n - 1;
    if let PageTable::Prepared(_) = kv.table {
        return Err(OpError::invalid(op, PREFILL_TABLES));
    }
    let (entries, width) = table_shape(op, kv.table, batch, page_size, ks[0])?;
    if qs.max_seqlen_q == 0 || qs.max_seqlen_q > s[0] {
        return Err(OpError::invalid(
            op,
            format!(
                "max_seqlen_q = {} must be in 1..={} (total_q)",
                qs.max_seqlen_q, s[0]
            ),
        ));
    }
    Ok(Shape {
        batch,
        total_q: s[0],
        n_q_heads: s[1],
        n_kv_heads,
        page_size,
        blocks: ks[0],
        head_dim,
        entries,
        width,
    })
}

/// A quantized call's dtypes: q f16 or bf16 (the fragment kernel's tiles), out like q,
/// the pools u8 and alike with scales as `kv_quant_append` writes them (int4: the group
/// and head_dim as it takes them); out aliases no input.
fn check_quant_dtypes(
    op: &'static str,
    (q, kv, out): (&Tensor, &PagedKv, &Tensor),
    scales: &KvScales,
    cu_seqlens_q: &Tensor,
) -> Result<(), OpError> {
    dtype_in(op, "q", q, &[DType::F16, DType::BF16])?;
    dtype_is(op, "k_cache", kv.k_cache, DType::U8)?;
    dtype_is(op, "v_cache", kv.v_cache, DType::U8)?;
    dtype_is(op, "out", out, q.dtype())?;
    let inputs = [
        ("q", q),
        ("k_cache", kv.k_cache),
        ("v_cache", kv.v_cache),
        ("cu_seqlens_q", cu_seqlens_q),
    ];
    distinct(op, out, &inputs)?;
    distinct(
        op,
        out,
        &[("k_scale", scales.k_scale), ("v_scale", scales.v_scale)],
    )?;
    check_scales(op, scales, kv.k_cache.shape(), &inputs)
}

/// Checks `ws` holds what the call needs.
fn check_workspace(
    ctx: &Context,
    op: &'static str,
    s: &Shape,
    ws: &PagedPrefillWorkspace,
) -> Result<(), OpError> {
    if !ctx.owns(&ws.verdict) {
        return Err(OpError::invalid(
            op,
            "the workspace was made on another context; make it with PagedPrefillWorkspace::new on this one",
        ));
    }
    if ws.starts.len() < s.batch || ws.pages.len() < s.entries {
        return Err(OpError::invalid(
            op,
            format!(
                "the workspace holds {} sequences and {} table entries, this call needs {} and {}; \
                 make it with PagedPrefillWorkspace::new for this shape",
                ws.starts.len(),
                ws.pages.len(),
                s.batch,
                s.entries
            ),
        ));
    }
    Ok(())
}

/// The refusal for verdict word `word` at sequence or entry `at`, naming the values.
fn refusal(
    op: &'static str,
    (kv, qs): (&PagedKv, &PagedQueries),
    s: &Shape,
    word: usize,
    at: usize,
) -> OpError {
    let cu = qs.cu_seqlens_q;
    let offsets = || format!("{}, {}", value_at(cu, at), value_at(cu, at + 1));
    let msg = match word {
        BAD_Q => format!(
            "`cu_seqlens_q` is bad at sequence {at} (offsets {}): the offsets must rise from 0 to total_q = {}",
            offsets(),
            s.total_q
        ),
        TOO_LONG => format!(
            "sequence {at} (offsets {}) holds more queries than max_seqlen_q = {}",
            offsets(),
            qs.max_seqlen_q
        ),
        SHORTER_THAN_QUERIES => format!(
            "sequence {at} holds fewer tokens than its new queries (offsets {}); its length counts them",
            offsets()
        ),
        _ => {
            let g = TableGeometry {
                page: s.page_size,
                blocks: s.blocks,
                width: s.width,
                entries: s.entries,
            };
            table_refusal(kv.table, word, at, &g, None)
        }
    };
    OpError::invalid(op, msg)
}

/// Prefill attention over a paged cache: q `[total_q, n_q_heads, D]` packed as
/// `queries.cu_seqlens_q` says, out like q, K and V in the pools of `kv` (NHD or HND, any
/// page size, a vLLM block table or a FlashInfer CSR table) with each sequence's new
/// tokens already appended as its last. Query i of a sequence of `lq` queries and `len`
/// tokens sits at position `len − lq + i`; causal, it sees keys `j ≤ len − lq + i`, else
/// all `len`. GQA; head_dim 64, 96, 128, 192, 256. Refused, naming the sequence or entry,
/// before anything is written: every bad table [`super::sdpa_decode_paged`] refuses, q
/// offsets that do not rise from 0 to total_q, a sequence of more than `max_seqlen_q`
/// queries or of fewer tokens than queries. `ws` from [`PagedPrefillWorkspace::new`].
#[allow(clippy::too_many_arguments)]
pub fn sdpa_prefill_paged(
    ctx: &Context,
    q: &Tensor,
    kv: &PagedKv,
    queries: &PagedQueries,
    out: &Tensor,
    causal: bool,
    scale: Option<f32>,
    ws: &PagedPrefillWorkspace,
) -> Result<(), OpError> {
    let eager = !ctx.recording_graph();
    let call = PagedPrefillCall {
        op: OP,
        tensors: (q, kv, out),
        queries,
        quant: None,
    };
    paged_prefill(ctx, &call, (causal, scale), ws, eager)
}

/// A paged prefill's operands: the op it is called as, q, the cache and out, the query
/// offsets and, for a quantized cache, its scales and format.
pub(crate) struct PagedPrefillCall<'a> {
    pub op: &'static str,
    pub tensors: (&'a Tensor, &'a PagedKv<'a>, &'a Tensor),
    pub queries: &'a PagedQueries<'a>,
    pub quant: Option<&'a KvScales<'a>>,
}

/// The call: checks, the table reduced and checked on the device (refused when `eager`),
/// the attention over the checked pages, then zeros in rows that see no key.
pub(crate) fn paged_prefill(
    ctx: &Context,
    call: &PagedPrefillCall,
    (causal, scale): (bool, Option<f32>),
    ws: &PagedPrefillWorkspace,
    eager: bool,
) -> Result<(), OpError> {
    let (op, (q, kv, out), queries) = (call.op, call.tensors, call.queries);
    let s = check_shapes(op, (q, kv, out), queries, call.quant)?;
    check_workspace(ctx, op, &s, ws)?;
    let scale = scale.unwrap_or(1.0 / (s.head_dim as f32).sqrt());
    scale_ok(op, scale)?;
    let (lengths, indptr, table, csr) = match kv.table {
        PageTable::Blocks {
            block_table,
            seq_lens,
        } => (seq_lens, seq_lens, block_table, 0),
        PageTable::Csr {
            indptr,
            indices,
            last_page_len,
        } => (last_page_len, indptr, indices, 1),
        PageTable::Prepared(_) => return Err(OpError::invalid(op, PREFILL_TABLES)),
    };
    // Every size fits u32: the table's capacity is below 2^31 and q's elements fit.
    let (batch, width, page) = (s.batch as u32, s.width as u32, s.page_size as u32);
    let entries = s.entries as u32;
    let capacity = ((s.width.max(1) * s.page_size).min(u32::MAX as usize)) as u32;
    paged_lengths_kernel::launch(
        ctx,
        paged_lengths_kernel::Args {
            lengths,
            indptr,
            starts: &ws.starts,
            lens: &ws.lens,
            verdict: &ws.verdict,
            batch,
            width,
            page_size: page,
            n_query: 1,
            causal: 0,
            max_len: capacity,
        },
        paged_lengths_kernel::Consts { csr },
    )
    .grid([batch.div_ceil(128), 1, 1])
    .group_size(128)
    .run()
    .map_err(runtime(op))?;
    paged_pages_kernel::launch(
        ctx,
        paged_pages_kernel::Args {
            table,
            indptr,
            lens: &ws.lens,
            pages: &ws.pages,
            verdict: &ws.verdict,
            entries,
            batch,
            width,
            page_size: page,
            blocks: s.blocks.min(u32::MAX as usize) as u32,
            n_query: 1,
        },
        paged_pages_kernel::Consts { csr },
    )
    .grid([entries.div_ceil(256).max(1), 1, 1])
    .group_size(256)
    .run()
    .map_err(runtime(op))?;
    let hkv = s.n_kv_heads as u32;
    let (slot_rows, head_rows) = match kv.layout {
        KvLayout::Nhd => (hkv, 1),
        KvLayout::Hnd => (1, page),
    };
    let walk = PageWalk {
        pages: &ws.seqs,
        starts: &ws.seqs,
        page_size: page,
        page_rows: page * hkv,
        slot_rows,
        head_rows,
    };
    let [_, page_shift, ..] = PageWalk::scalars(Some(&walk));
    let max_q = queries.max_seqlen_q as u32;
    prefill_paged_table_kernel::launch(
        ctx,
        prefill_paged_table_kernel::Args {
            cu_q: queries.cu_seqlens_q,
            starts: &ws.starts,
            lens: &ws.lens,
            pages: &ws.pages,
            seqs: &ws.seqs,
            verdict: &ws.verdict,
            batch,
            total_q: s.total_q as u32,
            max_q,
            entries,
            page_size: page,
            page_shift,
            slot_rows,
            head_rows,
        },
    )
    .grid([batch.max(entries).div_ceil(128), 1, 1])
    .group_size(128)
    .run()
    .map_err(runtime(op))?;
    if eager {
        if let Some((word, at)) = ws.take_verdict()? {
            return Err(refusal(op, (kv, queries), &s, word, at));
        }
    }
    let rows = PrefillRows {
        n_q: s.total_q as u32,
        n_kv: capacity,
        n_q_heads: s.n_q_heads as u32,
        n_kv_heads: hkv,
        head_dim: s.head_dim,
        causal: u32::from(causal),
        scale,
    };
    prefill_launch(
        ctx,
        op,
        (q, kv.k_cache, kv.v_cache, out),
        &rows,
        (Some((&ws.seqs, max_q, batch)), Some(&walk), call.quant),
    )?;
    if causal {
        // Only a replayed bad call has such rows (a sequence shorter than its queries).
        let row_elems = (s.n_q_heads * s.head_dim as usize) as u32;
        prefill_varlen_blind_rows_kernel::launch(
            ctx,
            prefill_varlen_blind_rows_kernel::Args {
                seqs: &ws.seqs,
                out,
                row_elems,
            },
        )
        .grid([(max_q * row_elems).div_ceil(256), batch, 1])
        .group_size(256)
        .run()
        .map_err(runtime(op))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A graph replay cannot refuse a bad table: the call as it runs there (no read-back)
    /// must stay inside every tensor (the CPU backend checks every access) and leave the
    /// finding for `take_error`; eagerly the same call is refused.
    #[test]
    fn bad_tables_in_a_replay_stay_in_bounds_and_are_reported() {
        let ctx = Context::cpu();
        let ones = |n: usize| vec![half::f16::ONE; n];
        let q = ctx.tensor(&ones(6 * 2 * 64), &[6, 2, 64]).expect("q");
        let kc = ctx.tensor(&ones(3 * 4 * 64), &[3, 4, 1, 64]).expect("k");
        let vc = ctx.tensor(&ones(3 * 4 * 64), &[3, 4, 1, 64]).expect("v");
        let out = ctx.zeros(DType::F16, &[6, 2, 64]).expect("out");
        let cu = ctx.tensor(&[0i32, 4, 6], &[3]).expect("cu");
        let table = ctx.tensor(&[0i32, 9, 1, 2], &[2, 2]).expect("table");
        let lens = ctx.tensor(&[7i32, 1], &[2]).expect("lens");
        let kv = PagedKv {
            k_cache: &kc,
            v_cache: &vc,
            layout: KvLayout::Nhd,
            table: PageTable::Blocks {
                block_table: &table,
                seq_lens: &lens,
            },
        };
        let queries = PagedQueries {
            cu_seqlens_q: &cu,
            max_seqlen_q: 4,
        };
        let ws = PagedPrefillWorkspace::new(&ctx, 2, 4).expect("workspace");
        let call = PagedPrefillCall {
            op: OP,
            tensors: (&q, &kv, &out),
            queries: &queries,
            quant: None,
        };
        for causal in [false, true] {
            paged_prefill(&ctx, &call, (causal, None), &ws, false)
                .expect("a replay runs, in bounds");
            let e = ws.take_error().expect_err("the finding is kept");
            assert!(
                e.to_string().contains("a page id outside the cache, at 1"),
                "{e}"
            );
            ws.take_error().expect("the verdict was reset");
        }
        let e = paged_prefill(&ctx, &call, (true, None), &ws, true).expect_err("refused");
        assert!(e.to_string().contains("`block_table`[0, 1] = 9"), "{e}");
    }
}
