//! Decode attention over a paged KV cache, the way serving engines keep it: K and V in
//! pages of `page_size` tokens (vLLM's NHD `[blocks, page_size, n_kv_heads, head_dim]` or
//! HND `[blocks, n_kv_heads, page_size, head_dim]`), each sequence's pages named by a vLLM
//! block table with device-side lengths or a FlashInfer CSR page table. The tables are
//! reduced and checked on the device (`paged_table`), then the decode plan runs the same
//! kernels as the contiguous decode, with the page lookup of `paged_rows::key_row`.

use super::checks::{
    decode_head_dim, dims, first_finding, gqa, indexable, same_dim, same_float_dtype,
};
use super::decode::{check_options, DecodeOptions};
use super::kv_quant::{check_scales, KvScales};
use super::paged_prepared::PreparedPages;
use super::paged_rows::PageWalk;
use super::paged_table::{
    paged_lengths_kernel, paged_pages_kernel, BAD_ROW_POINTERS, LENGTH_PAST_TABLE, NEGATIVE_LENGTH,
    PAGE_OUT_OF_RANGE, SHORTER_THAN_QUERIES, VERDICT_WORDS,
};
use super::plan::{DecodeCall, DecodeWorkspace};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use std::sync::atomic::{AtomicU64, Ordering};
use tessera_runtime::{Context, DType, Tensor};

/// Workspaces made so far, each one's id.
static WORKSPACES: AtomicU64 = AtomicU64::new(0);

const OP: &str = "sdpa_decode_paged";
const MQ_OP: &str = "sdpa_multi_query_paged";

/// How a page holds its tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvLayout {
    /// `[blocks, page_size, n_kv_heads, head_dim]` (vLLM's default, FlashInfer's "NHD").
    Nhd,
    /// `[blocks, n_kv_heads, page_size, head_dim]` (FlashInfer's "HND").
    Hnd,
}

/// Which pages each sequence reads, all i32 on the device.
#[derive(Clone, Copy)]
pub enum PageTable<'a> {
    /// vLLM: `block_table [batch, max_pages]` lists sequence b's pages in order,
    /// `seq_lens [batch]` its length in tokens.
    Blocks {
        block_table: &'a Tensor,
        seq_lens: &'a Tensor,
    },
    /// FlashInfer: sequence b's pages are `indices[indptr[b] .. indptr[b + 1])`, its last
    /// page holding `last_page_len[b]` tokens.
    Csr {
        indptr: &'a Tensor,
        indices: &'a Tensor,
        last_page_len: &'a Tensor,
    },
    /// A table [`PagedWorkspace::prepare`] already reduced and checked, for every layer of
    /// a step that reads pools of its page size and page count; the call must run on the
    /// workspace that prepared it, with no other table reduced there since.
    Prepared(&'a PreparedPages),
}

/// A paged K/V cache: the two page pools, their layout and the page table.
#[derive(Clone, Copy)]
pub struct PagedKv<'a> {
    pub k_cache: &'a Tensor,
    pub v_cache: &'a Tensor,
    pub layout: KvLayout,
    pub table: PageTable<'a>,
}

/// The scratch of a paged decode: the split-KV scratch, the checked page list, each query
/// row's start and length, and the verdict of the table check (five words, u32::MAX while
/// the tables are good). Made once, outside the calls.
pub struct PagedWorkspace {
    decode: DecodeWorkspace,
    /// The longest sequence a call may have: the split plan cuts this many keys at most.
    pub(super) max_context: usize,
    pages: Tensor,
    starts: Tensor,
    lens: Tensor,
    verdict: Tensor,
    /// This workspace among all, and how many tables were reduced into it: a prepared
    /// table is good while both still match.
    pub(super) id: u64,
    pub(super) generation: AtomicU64,
}

impl PagedWorkspace {
    /// Scratch for up to `rows` query rows (decode: the batch; multi-query: batch ·
    /// n_query) of `n_q_heads` heads of `head_dim`, page tables of up to `table_entries`
    /// entries (`batch · max_pages`, or `indices`' length) and sequences of up to
    /// `max_context` tokens. The split-KV plan cuts at most `max_context` keys (not all a
    /// wide block table holds), and a longer sequence is refused.
    pub fn new(
        ctx: &Context,
        rows: usize,
        n_q_heads: usize,
        head_dim: usize,
        table_entries: usize,
        max_context: usize,
    ) -> Result<PagedWorkspace, OpError> {
        let rows = rows.max(1);
        Ok(PagedWorkspace {
            decode: DecodeWorkspace::for_cache(ctx, rows, n_q_heads, head_dim, max_context)?,
            max_context,
            pages: ctx
                .zeros(DType::U32, &[table_entries.max(1)])
                .map_err(runtime(OP))?,
            starts: ctx.zeros(DType::U32, &[rows]).map_err(runtime(OP))?,
            lens: ctx.zeros(DType::U32, &[rows]).map_err(runtime(OP))?,
            verdict: ctx
                .tensor(&[u32::MAX; VERDICT_WORDS], &[VERDICT_WORDS])
                .map_err(runtime(OP))?,
            id: WORKSPACES.fetch_add(1, Ordering::Relaxed),
            generation: AtomicU64::new(0),
        })
    }

    /// After calls recorded in a graph and replayed (which cannot refuse: they read only
    /// checked pages, clamped lengths, but a sequence with a bad table came out wrong), the
    /// first problem the device check found since the last look, as an error; the verdict
    /// is reset. Outside a graph a bad table is refused by the call itself.
    pub fn take_error(&self) -> Result<(), OpError> {
        match self.take_verdict()? {
            None => Ok(()),
            Some((word, at)) => Err(OpError::invalid(
                OP,
                format!(
                    "a page table was refused in a graph replay ({}, at {at}); that call's output is wrong",
                    ["a negative length", "a length past its pages", "a page id outside the cache", "unordered row pointers", "a sequence shorter than its queries"][word]
                ),
            )),
        }
    }

    /// The first verdict word that holds a finding (its index and the sequence or entry),
    /// putting the verdict back.
    pub(super) fn take_verdict(&self) -> Result<Option<(usize, usize)>, OpError> {
        first_finding(
            OP,
            &self.verdict,
            &[
                BAD_ROW_POINTERS,
                NEGATIVE_LENGTH,
                LENGTH_PAST_TABLE,
                PAGE_OUT_OF_RANGE,
                SHORTER_THAN_QUERIES,
            ],
        )
    }
}

/// A quantized call's dtypes: q a float dtype, out like q, the pools u8 with their
/// scales f32 of the pool's shape without head_dim; out aliases no input.
fn check_quant_dtypes(
    op: &'static str,
    q: &Tensor,
    kv: &PagedKv,
    scales: &KvScales,
    out: &Tensor,
) -> Result<(), OpError> {
    dtype_in(op, "q", q, &FLOAT_DTYPES)?;
    dtype_is(op, "k_cache", kv.k_cache, DType::U8)?;
    dtype_is(op, "v_cache", kv.v_cache, DType::U8)?;
    dtype_is(op, "out", out, q.dtype())?;
    let inputs = [("q", q), ("k_cache", kv.k_cache), ("v_cache", kv.v_cache)];
    distinct(op, out, &inputs)?;
    distinct(
        op,
        out,
        &[("k_scale", scales.k_scale), ("v_scale", scales.v_scale)],
    )?;
    check_scales(op, scales, kv.k_cache.shape(), &inputs)
}

/// The checked shapes of a paged call.
pub(super) struct Shape {
    op: &'static str,
    batch: usize,
    /// Query rows a sequence (decode: 1).
    n_query: usize,
    n_q_heads: usize,
    n_kv_heads: usize,
    page_size: usize,
    blocks: usize,
    head_dim: u32,
    /// Entries of the table, and entries a sequence may use (block table: its width).
    entries: usize,
    width: usize,
}

/// An i32 input of shape `shape`.
fn i32_input(op: &'static str, name: &str, t: &Tensor, shape: &[usize]) -> Result<(), OpError> {
    dtype_is(op, name, t, DType::I32)?;
    shape_is(op, name, t, shape)
}

/// The pools' shape (k and v alike), page size and kv heads in `kv`'s layout.
pub(super) fn pool_dims<'t>(
    op: &'static str,
    kv: &PagedKv<'t>,
) -> Result<(&'t [usize], usize, usize), OpError> {
    let layout = match kv.layout {
        KvLayout::Nhd => "blocks, page_size, n_kv_heads, head_dim",
        KvLayout::Hnd => "blocks, n_kv_heads, page_size, head_dim",
    };
    let ks = dims(op, "k_cache", kv.k_cache, layout)?;
    shape_is(op, "v_cache", kv.v_cache, ks)?;
    let (page_size, n_kv_heads) = match kv.layout {
        KvLayout::Nhd => (ks[1], ks[2]),
        KvLayout::Hnd => (ks[2], ks[1]),
    };
    Ok((ks, page_size, n_kv_heads))
}

/// Checks a call whose q is `[batch, n_q_heads, head_dim]` (decode) or, with `multi`,
/// `[batch, n_query, n_q_heads, head_dim]`.
pub(super) fn check_shapes(
    op: &'static str,
    q: &Tensor,
    kv: &PagedKv,
    out: &Tensor,
    (multi, quant): (bool, Option<&KvScales>),
) -> Result<Shape, OpError> {
    match quant {
        None => same_float_dtype(op, q, kv.k_cache, kv.v_cache, out)?,
        Some(scales) => check_quant_dtypes(op, q, kv, scales, out)?,
    }
    let (n_query, qs) = if multi {
        let s = dims(op, "q", q, "batch, n_query, n_q_heads, head_dim")?;
        (s[1], [s[0], s[2], s[3]])
    } else {
        let s = dims(op, "q", q, "batch, n_q_heads, head_dim")?;
        (1, [s[0], s[1], s[2]])
    };
    let (ks, page_size, n_kv_heads) = pool_dims(op, kv)?;
    shape_is(op, "out", out, q.shape())?;
    let head_dim = decode_head_dim(op, qs[2])?;
    match quant {
        None => same_dim(op, "k_cache's head_dim", ks[3], qs[2], "q")?,
        Some(s) => {
            let bytes = s.format.row_bytes(qs[2]);
            same_dim(op, "k_cache's last dim (bytes a row)", ks[3], bytes, "q")?
        }
    }
    gqa(op, qs[1], n_kv_heads)?;
    indexable(op, &[("q", q), ("k_cache", kv.k_cache)])?;
    let batch = qs[0];
    let (entries, width) = table_shape(op, kv.table, batch, page_size, ks[0])?;
    Ok(Shape {
        op,
        batch,
        n_query,
        n_q_heads: qs[1],
        n_kv_heads,
        page_size,
        blocks: ks[0],
        head_dim,
        entries,
        width,
    })
}

/// The entries of `table` and those a sequence may use (a block table's width) for
/// `batch` sequences over pools of `blocks` pages of `page_size` tokens; a prepared table
/// must have been prepared for that batch and those pools.
pub(super) fn table_shape(
    op: &'static str,
    table: PageTable,
    batch: usize,
    page_size: usize,
    blocks: usize,
) -> Result<(usize, usize), OpError> {
    let (entries, width) = match table {
        PageTable::Blocks {
            block_table,
            seq_lens,
        } => {
            let bt = dims(op, "block_table", block_table, "batch, max_pages")?;
            i32_input(op, "block_table", block_table, &[batch, bt[1]])?;
            i32_input(op, "seq_lens", seq_lens, &[batch])?;
            (batch * bt[1], bt[1])
        }
        PageTable::Csr {
            indptr,
            indices,
            last_page_len,
        } => {
            i32_input(op, "indptr", indptr, &[batch + 1])?;
            let n = dims(op, "indices", indices, "n_indices")?[0];
            i32_input(op, "indices", indices, &[n])?;
            i32_input(op, "last_page_len", last_page_len, &[batch])?;
            (n, n)
        }
        PageTable::Prepared(p) => return p.fits(op, batch, page_size, blocks),
    };
    // What a table holds at most, plus one page, must fit the kernels' u32 lengths.
    let most = (width + 1)
        .checked_mul(page_size)
        .filter(|&m| m <= i32::MAX as usize);
    if most.is_none() {
        return Err(OpError::invalid(
            op,
            format!(
                "the tables may hold {width} pages of {page_size} tokens a sequence; that must stay below 2^31 tokens"
            ),
        ));
    }
    fits_u32(op, "the table's entry count", entries)?;
    Ok((entries, width))
}

/// Checks `ws` holds what the call needs.
pub(super) fn check_workspace(
    ctx: &Context,
    op: &'static str,
    (rows, entries): (usize, usize),
    ws: &PagedWorkspace,
) -> Result<(), OpError> {
    if !ctx.owns(&ws.verdict) {
        return Err(OpError::invalid(
            op,
            "the workspace was made on another context; make it with PagedWorkspace::new on this one",
        ));
    }
    if ws.starts.len() < rows || ws.pages.len() < entries {
        return Err(OpError::invalid(
            op,
            format!(
                "the workspace holds {} query rows and {} table entries, this call needs {rows} and {entries}; \
                 make it with PagedWorkspace::new for this shape",
                ws.starts.len(),
                ws.pages.len(),
            ),
        ));
    }
    Ok(())
}

/// Reduces `table` (a block or CSR table) for `batch` sequences of `n_query` query rows
/// to the checked list, each query row's start and length in `ws`, and records in its
/// verdict what is wrong with the table. Any table prepared on `ws` before goes stale.
pub(super) fn reduce_table(
    ctx: &Context,
    op: &'static str,
    table: PageTable,
    (batch, n_query, causal): (usize, usize, bool),
    g: &TableGeometry,
    ws: &PagedWorkspace,
) -> Result<(), OpError> {
    let (lengths, indptr, table, csr) = match table {
        PageTable::Blocks {
            block_table,
            seq_lens,
        } => (seq_lens, seq_lens, block_table, 0),
        PageTable::Csr {
            indptr,
            indices,
            last_page_len,
        } => (last_page_len, indptr, indices, 1),
        PageTable::Prepared(_) => {
            return Err(OpError::invalid(op, "this table is prepared already"))
        }
    };
    ws.generation.fetch_add(1, Ordering::Relaxed);
    let (batch, width, page_size) = (batch as u32, g.width as u32, g.page as u32);
    let n_query = n_query as u32;
    let max_len = ws.max_context.min(u32::MAX as usize) as u32;
    let rows = batch * n_query;
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
            page_size,
            n_query,
            causal: u32::from(causal),
            max_len,
        },
        paged_lengths_kernel::Consts { csr },
    )
    .grid([rows.div_ceil(128), 1, 1])
    .group_size(128)
    .run()
    .map_err(runtime(op))?;
    let entries = g.entries as u32;
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
            page_size,
            blocks: g.blocks.min(u32::MAX as usize) as u32,
            n_query,
        },
        paged_pages_kernel::Consts { csr },
    )
    .grid([entries.div_ceil(256).max(1), 1, 1])
    .group_size(256)
    .run()
    .map_err(runtime(op))
}

/// The integer at `i` of `t` (i32 or u32), for a message.
pub(super) fn value_at(t: &Tensor, i: usize) -> String {
    let v = match t.dtype() {
        DType::U32 => t
            .to_vec::<u32>()
            .ok()
            .and_then(|v| v.get(i).map(|x| x.to_string())),
        _ => t
            .to_vec::<i32>()
            .ok()
            .and_then(|v| v.get(i).map(|x| x.to_string())),
    };
    v.unwrap_or_else(|| "?".into())
}

/// The geometry a page table's refusal names: the page size, the pool's pages, a block
/// table's width and a CSR table's entries.
pub(super) struct TableGeometry {
    pub page: usize,
    pub blocks: usize,
    pub width: usize,
    pub entries: usize,
}

/// The refusal text for a page-table verdict word (`NEGATIVE_LENGTH`, `LENGTH_PAST_TABLE`,
/// `PAGE_OUT_OF_RANGE`, `BAD_ROW_POINTERS`) at sequence or entry `at`, naming the values;
/// `max_context` is the workspace's bound on a length where it has one.
pub(super) fn table_refusal(
    table: PageTable,
    word: usize,
    at: usize,
    g: &TableGeometry,
    max_context: Option<usize>,
) -> String {
    let TableGeometry {
        page,
        blocks,
        width,
        entries,
    } = *g;
    match (table, word) {
        (PageTable::Blocks { seq_lens, .. }, NEGATIVE_LENGTH) => format!(
            "`seq_lens` holds a negative length: sequence {at} has {}",
            value_at(seq_lens, at)
        ),
        (PageTable::Blocks { seq_lens, .. }, LENGTH_PAST_TABLE) => format!(
            "sequence {at} has seq_len {}, more than its block-table row holds ({width} pages of {page} = {} tokens){}",
            value_at(seq_lens, at),
            width * page,
            max_context.map_or(String::new(), |m| format!(" or the workspace's max_context {m}"))
        ),
        (PageTable::Blocks { block_table, .. }, _) => format!(
            "`block_table`[{}, {}] = {} is not a page of the cache (0..{blocks})",
            at / width.max(1),
            at % width.max(1),
            value_at(block_table, at)
        ),
        (PageTable::Csr { last_page_len, .. }, NEGATIVE_LENGTH) => format!(
            "`last_page_len` holds a negative length: sequence {at} has {}",
            value_at(last_page_len, at)
        ),
        (PageTable::Csr { last_page_len, .. }, LENGTH_PAST_TABLE) => format!(
            "sequence {at} has last_page_len {}, more than its pages hold (at most {page} on a last page, 0 without pages){}",
            value_at(last_page_len, at),
            max_context.map_or(String::new(), |m| format!(", or is longer than the workspace's max_context {m}"))
        ),
        (PageTable::Csr { indices, .. }, PAGE_OUT_OF_RANGE) => format!(
            "`indices`[{at}] = {} is not a page of the cache (0..{blocks})",
            value_at(indices, at)
        ),
        (PageTable::Prepared(_), _) => "the prepared table was refused".into(),
        (PageTable::Csr { indptr, .. }, _) => format!(
            "`indptr` must rise within `indices` (0 ≤ indptr[b] ≤ indptr[b + 1] ≤ {entries}): sequence {at} has indptr[{at}] = {}, indptr[{}] = {}",
            value_at(indptr, at),
            at + 1,
            value_at(indptr, at + 1)
        ),
    }
}

/// The refusal for verdict word `word` at sequence or entry `at` of `table` (read with
/// `n_query` query rows a sequence), naming the values.
pub(super) fn refusal(
    op: &'static str,
    (table, n_query): (PageTable, usize),
    g: &TableGeometry,
    ws: &PagedWorkspace,
    (word, at): (usize, usize),
) -> OpError {
    let msg = if word == SHORTER_THAN_QUERIES {
        format!(
            "sequence {at} holds fewer tokens than its {n_query} new queries (its length counts them)"
        )
    } else {
        table_refusal(table, word, at, g, Some(ws.max_context))
    };
    OpError::invalid(op, msg)
}

/// Decode attention for `batch` sequences over a paged cache: `q [batch, n_q_heads,
/// head_dim]`, the K and V pools of `kv` in its layout, `out` like q. Sequence b attends
/// its own length's keys, read through its pages (GQA, window, sinks and the learned sink
/// logit as [`super::sdpa_decode_batched`] has them; a sequence of length 0 gets zeros).
/// The table is checked on the device first: a negative length, a length past what the
/// sequence's pages hold, a used page id outside `0..blocks` or (CSR) row pointers out
/// of order are refused, naming the sequence, before anything is written (in a recorded
/// graph: see [`PagedWorkspace::take_error`]). `ws` from [`PagedWorkspace::new`].
pub fn sdpa_decode_paged(
    ctx: &Context,
    q: &Tensor,
    kv: &PagedKv,
    out: &Tensor,
    opts: &DecodeOptions,
    ws: &PagedWorkspace,
) -> Result<(), OpError> {
    let s = check_shapes(OP, q, kv, out, (false, None))?;
    let eager = !ctx.recording_graph();
    paged_attention(ctx, (q, kv, out), &s, (false, eager), opts, ws, None)
}

/// [`sdpa_decode_paged`] as a recorded graph runs it: the table is reduced and checked on
/// the device but the verdict is not read back, so a bad table is not refused; the
/// attention still reads only checked pages (for the cases that prove it).
#[cfg(feature = "cases")]
pub(crate) fn sdpa_decode_paged_as_in_graph(
    ctx: &Context,
    q: &Tensor,
    kv: &PagedKv,
    out: &Tensor,
    opts: &DecodeOptions,
    ws: &PagedWorkspace,
) -> Result<(), OpError> {
    let s = check_shapes(OP, q, kv, out, (false, None))?;
    paged_attention(ctx, (q, kv, out), &s, (false, false), opts, ws, None)
}

/// Multi-query attention over a paged cache (speculative verification, chunked prefill):
/// `q [batch, n_query, n_q_heads, head_dim]`, `out` like q; each sequence's length counts
/// its `n_query` new tokens, already appended (`paged_kv_append`), which are its last.
/// Causal: query i of a sequence of n tokens sees its first `n − n_query + i + 1` keys;
/// else all n. A sequence of 0 tokens gets zeros; one with tokens but fewer than n_query
/// is refused (causal), as is every bad table [`sdpa_decode_paged`] refuses. `ws` from
/// [`PagedWorkspace::new`] for `batch · n_query` rows.
pub fn sdpa_multi_query_paged(
    ctx: &Context,
    q: &Tensor,
    kv: &PagedKv,
    out: &Tensor,
    causal: bool,
    opts: &DecodeOptions,
    ws: &PagedWorkspace,
) -> Result<(), OpError> {
    let s = check_shapes(MQ_OP, q, kv, out, (true, None))?;
    let eager = !ctx.recording_graph();
    paged_attention(ctx, (q, kv, out), &s, (causal, eager), opts, ws, None)
}

/// The checked call: the table reduced on the device, the verdict read back and a bad
/// table refused when `eager`, then the attention over the checked pages.
pub(super) fn paged_attention(
    ctx: &Context,
    (q, kv, out): (&Tensor, &PagedKv, &Tensor),
    s: &Shape,
    (causal, eager): (bool, bool),
    opts: &DecodeOptions,
    ws: &PagedWorkspace,
    kv_quant: Option<KvScales>,
) -> Result<(), OpError> {
    let scale = check_options(s.op, opts, q, s.n_q_heads, s.head_dim)?;
    check_workspace(ctx, s.op, (s.batch * s.n_query, s.entries), ws)?;
    if let PageTable::Prepared(p) = kv.table {
        p.current(s.op, ws, (s.n_query, causal))?;
    } else {
        let g = TableGeometry {
            page: s.page_size,
            blocks: s.blocks,
            width: s.width,
            entries: s.entries,
        };
        let rows = (s.batch, s.n_query, causal);
        reduce_table(ctx, s.op, kv.table, rows, &g, ws)?;
        if eager {
            if let Some(finding) = ws.take_verdict()? {
                return Err(refusal(s.op, (kv.table, s.n_query), &g, ws, finding));
            }
        }
    }
    let (page, hkv) = (s.page_size as u32, s.n_kv_heads as u32);
    let (slot_rows, head_rows) = match kv.layout {
        KvLayout::Nhd => (hkv, 1),
        KvLayout::Hnd => (1, page),
    };
    let capacity = (s.width * s.page_size).min(ws.max_context) as u32;
    let call = DecodeCall {
        op: s.op,
        q,
        k: kv.k_cache,
        v: kv.v_cache,
        out,
        sinks: opts.sink_logits,
        kv_lens: Some(&ws.lens),
        rows: (s.batch * s.n_query) as u32,
        n_q_heads: s.n_q_heads as u32,
        n_kv_heads: hkv,
        head_dim: s.head_dim,
        kv_stride: capacity,
        row_cache_rows: 0,
        len0: 0,
        len_step: 0,
        max_len: capacity,
        window: opts.window,
        n_sink: opts.n_sink,
        scale,
        paging: Some(PageWalk {
            pages: &ws.pages,
            starts: &ws.starts,
            page_size: page,
            page_rows: page * hkv,
            slot_rows,
            head_rows,
        }),
        kv_quant,
    };
    call.run(ctx, opts.splits, &ws.decode)
}
