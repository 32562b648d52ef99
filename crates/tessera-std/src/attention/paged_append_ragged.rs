//! `paged_kv_append_ragged`: the new K/V rows of a ragged batch (FlashInfer's
//! `append_paged_kv_cache` call: sequence b's rows are `cu_seqlens[b] .. cu_seqlens[b+1]`
//! of k and v; rows outside `cu_seqlens[0] .. cu_seqlens[batch]` pad the batch, as a −1
//! slot does in vLLM, and are skipped) written into a paged cache through vLLM's block table, each token's slot
//! computed on the device: its position is the sequence's length before the append plus
//! its index in the sequence, its page `block_table[b][position / page_size]`. That
//! position is also the one K is rotated at when a RoPE table is given.
//!
//! It is an op of its own rather than a mode of `paged_kv_append`: its addressing inputs
//! (cu_seqlens, block_table, seq_lens) replace slot_mapping and positions entirely, and
//! its invariants are about them, so as a mode every input would be optional and every
//! invariant conditional. The two share the row checks and the per-row write.
//!
//! Eagerly, a first kernel finds the first bad entry — cu_seqlens decreasing or outside
//! `0..=tokens`; a negative length; a position past the block table; a page id outside
//! the pool; a slot an earlier token takes (a page the table hands to two places), which
//! would make the row that lands depend on timing — and the wrapper refuses the call, naming it,
//! before any row is written. In a recorded graph the append skips such a token (never
//! writing outside the cache) and records it for [`SlotCheck::take_error`].

use super::paged::KvLayout;
use super::paged_append::{append_part, check_rows, run_width, slot_row, RowShape, SlotCheck};
use super::paged_append_rope::{check_table, RopeLaunch};
use crate::error::{runtime, OpError};
use crate::rope::RopeTable;
use crate::validate::{distinct, dtype_is, fits_u32, shape_is};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

const OP: &str = "paged_kv_append_ragged";

/// Threads per threadgroup of both kernels.
const GROUP: u32 = 256;

/// The sequence holding token `t`: the last `b < batch` with `cu_seqlens[b] ≤ t`, by
/// `steps` halvings (enough for `batch`). Always in `0..batch`, whatever cu_seqlens holds.
#[func]
pub fn sequence_of(cu_seqlens: Mem<i32>, t: u32, batch: u32, steps: u32) -> u32 {
    let mut lo = 0u32;
    let mut hi = batch - 1;
    let ti = t.cast::<i32>();
    for _step in 0..steps {
        if lo < hi {
            let mid = (lo + hi + 1) / 2;
            if load(cu_seqlens[mid]) <= ti {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
    }
    lo
}

/// Whether token `t` pads the batch: outside `cu_seqlens[0] .. cu_seqlens[batch]`.
#[func]
pub fn padding(cu_seqlens: Mem<i32>, t: u32, batch: u32) -> bool {
    let ti = t.cast::<i32>();
    ti < load(cu_seqlens[0]) || ti >= load(cu_seqlens[batch])
}

/// Token `t`'s slot, and whether it has one: sequence `b`'s length plus `t`'s index in
/// it must be a position inside its table row, and the page there inside the pool.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn ragged_slot(
    cu_seqlens: Mem<i32>,
    block_table: Mem<i32>,
    seq_lens: Mem<i32>,
    t: u32,
    b: u32,
    page_size: u32,
    max_blocks: u32,
    blocks: u32,
) -> (u32, u32, bool) {
    let start = load(cu_seqlens[b]);
    let end = load(cu_seqlens[b + 1]);
    let len = load(seq_lens[b]);
    let ti = t.cast::<i32>();
    let inside = len >= 0i32 && start <= ti && ti < end;
    let pos = select(inside, len.cast::<u32>() + (t - start.cast::<u32>()), 0u32);
    let index = pos / page_size;
    let in_table = inside && index < max_blocks;
    let page = load(block_table[b * max_blocks + select(in_table, index, 0u32)]);
    let ok = in_table && page >= 0i32 && page.cast::<u32>() < blocks;
    let slot = select(
        ok,
        page.cast::<u32>() * page_size + (pos - index * page_size),
        0u32,
    );
    (slot, pos, ok)
}

/// Records in `first_bad[0]` the first bad entry: `i ≤ batch` for cu_seqlens entry `i`
/// (negative, below its predecessor or past `tokens`), `batch + 1 + t` for a token of a
/// sequence without a slot or with one an earlier token takes.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn ragged_slots_check_kernel(
    cu_seqlens: Tensor<i32>,
    block_table: Tensor<i32>,
    seq_lens: Tensor<i32>,
    mut first_bad: Tensor<u32>,
    batch: u32,
    tokens: u32,
    page_size: u32,
    max_blocks: u32,
    blocks: u32,
    steps: u32,
) {
    let i = global_id();
    if i <= batch {
        let c = load(cu_seqlens[i]);
        let before = load(cu_seqlens[select(i > 0, i - 1, 0u32)]);
        let bad = c < 0i32 || (i > 0 && c < before) || c > tokens.cast::<i32>();
        if bad {
            let _first = atomic_min(first_bad[0], i);
        }
    } else {
        if i < batch + 1 + tokens {
            let t = i - batch - 1;
            let b = sequence_of(cu_seqlens, t, batch, steps);
            let (slot, pos, ok) = ragged_slot(
                cu_seqlens,
                block_table,
                seq_lens,
                t,
                b,
                page_size,
                max_blocks,
                blocks,
            );
            // A slot another token of the batch takes (a page the table hands to two
            // places) would make the row that lands depend on timing. Checked per page
            // entry (a sequence's run of tokens in one page), not per token pair: the
            // token that opens an entry compares its page and offsets with every entry.
            let pos_in_page = pos % page_size;
            let start = load(cu_seqlens[b]).cast::<u32>();
            if ok && (t == start || pos_in_page == 0) {
                let page = slot / page_size;
                let end = load(cu_seqlens[b + 1]).cast::<u32>();
                let hi = min(page_size, pos_in_page + (end - t));
                for b2 in 0..batch {
                    let s2 = load(cu_seqlens[b2]);
                    let e2 = load(cu_seqlens[b2 + 1]);
                    let l2 = load(seq_lens[b2]);
                    if l2 >= 0i32 && s2 < e2 {
                        let n2 = (e2 - s2).cast::<u32>();
                        let s2 = s2.cast::<u32>();
                        let l2 = l2.cast::<u32>();
                        let last = min((l2 + n2 - 1) / page_size, max_blocks - 1);
                        for j in range(l2 / page_size, last + 1, 1u32) {
                            let page2 = load(block_table[b2 * max_blocks + j]);
                            let other = b2 != b || j != pos / page_size;
                            if other && page2 >= 0i32 && page2.cast::<u32>() == page {
                                let lo2 = select(j * page_size < l2, l2 - j * page_size, 0u32);
                                let hi2 = min(page_size, l2 + n2 - j * page_size);
                                let o = max(pos_in_page, lo2);
                                if o < min(hi, hi2) {
                                    let t1 = t + (o - pos_in_page);
                                    let t2 = s2 + (j * page_size + o - l2);
                                    let _first = atomic_min(first_bad[0], batch + 1 + max(t1, t2));
                                }
                            }
                        }
                    }
                }
            }
            if !ok && !padding(cu_seqlens, t, batch) {
                let _first = atomic_min(first_bad[0], i);
            }
        }
    }
}

/// Copies `vec` elements of one token's head row of K (rotated at its position when
/// `rot_dim` is not 0) and of V per thread into the slot its sequence's table gives. A
/// token without one is skipped and recorded in `first_bad` (graph replays; an eager call
/// was checked before). Eagerly (`in_graph` 0) thread 0 leaves the word at u32::MAX.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn paged_kv_append_ragged_kernel<T>(
    k: Tensor<T>,
    v: Tensor<T>,
    cu_seqlens: Tensor<i32>,
    block_table: Tensor<i32>,
    seq_lens: Tensor<i32>,
    inv_freq: Tensor<f32>,
    mut k_cache: Tensor<T>,
    mut v_cache: Tensor<T>,
    mut first_bad: Tensor<u32>,
    n_kv_heads: u32,
    page_size: u32,
    max_blocks: u32,
    blocks: u32,
    batch: u32,
    steps: u32,
    row_vecs: u32,
    total: u32,
    in_graph: u32,
    mscale: f32,
    #[constexpr] vec: u32,
    #[constexpr] hnd: u32,
    #[constexpr] rot_dim: u32,
    #[constexpr] neox: u32,
) {
    let i = global_id();
    if i == 0 && in_graph == 0 {
        store(first_bad[0], 4294967295u32);
    }
    if i < total {
        let row = i / row_vecs;
        let part = i - row * row_vecs;
        let t = row / n_kv_heads;
        let h = row - t * n_kv_heads;
        let b = sequence_of(cu_seqlens, t, batch, steps);
        let (slot, pos, ok) = ragged_slot(
            cu_seqlens,
            block_table,
            seq_lens,
            t,
            b,
            page_size,
            max_blocks,
            blocks,
        );
        if ok {
            let dst_row = slot_row(slot, h, n_kv_heads, page_size, hnd);
            append_part(
                k,
                v,
                k_cache,
                v_cache,
                row,
                dst_row,
                part,
                row_vecs,
                vec,
                pos.cast::<f32>(),
                inv_freq,
                mscale,
                rot_dim,
                neox,
            );
        } else {
            if part == 0 && h == 0 && !padding(cu_seqlens, t, batch) {
                let _first = atomic_min(first_bad[0], t);
            }
        }
    }
}

/// Halvings [`sequence_of`] needs for `batch` sequences.
fn search_steps(batch: u32) -> u32 {
    u32::BITS - batch.leading_zeros()
}

/// Writes the rows `k` and `v` `[tokens, n_kv_heads, head_dim]` of a ragged batch into
/// the paged caches (as `paged_kv_append` takes them): sequence b's rows are
/// `cu_seqlens[b] .. cu_seqlens[b+1]` (i32 `[batch + 1]`, never decreasing, within
/// `0..=tokens`; a sequence may add none; rows outside `cu_seqlens[0] ..
/// cu_seqlens[batch]` pad the batch and are skipped), its i-th at position `seq_lens[b] + i` (i32
/// `[batch]`: the lengths before the append), slot `block_table[b][position / page_size]
/// · page_size + position mod page_size` (i32 `[batch, max_blocks]`). With `rope`, each
/// key is rotated at that position first, exactly as `rope` would rotate it. Bad
/// cu_seqlens, a negative length, a position past the table or a page outside the pool
/// is refused, naming it, before anything is written.
pub fn paged_kv_append_ragged(
    ctx: &Context,
    rows: (&Tensor, &Tensor),
    addressing: (&Tensor, &Tensor, &Tensor),
    caches: (&Tensor, &Tensor),
    layout: KvLayout,
    rope: Option<&RopeTable>,
    check: &SlotCheck,
) -> Result<(), OpError> {
    check_addressing(ctx, rows, addressing, caches, layout, rope, check)?.write(ctx, caches)
}

/// A checked ragged append, ready to write into caches of the checked shape.
pub(crate) struct RaggedAppend<'a> {
    k: &'a Tensor,
    v: &'a Tensor,
    addressing: (&'a Tensor, &'a Tensor, &'a Tensor),
    rope: Option<&'a RopeTable>,
    check: &'a SlotCheck,
    g: Geometry,
    n_kv_heads: u32,
    head_dim: usize,
    in_graph: bool,
    hnd: bool,
}

/// Checks every invariant of a ragged append (the addressing on the device, eagerly) and
/// writes nothing.
pub(crate) fn check_addressing<'a>(
    ctx: &Context,
    (k, v): (&'a Tensor, &'a Tensor),
    (cu_seqlens, block_table, seq_lens): (&'a Tensor, &'a Tensor, &'a Tensor),
    (k_cache, v_cache): (&Tensor, &Tensor),
    layout: KvLayout,
    rope: Option<&'a RopeTable>,
    check: &'a SlotCheck,
) -> Result<RaggedAppend<'a>, OpError> {
    let RowShape {
        tokens,
        n_kv_heads,
        head_dim,
        blocks,
        page_size,
    } = check_rows(OP, None, ctx, (k, v), (k_cache, v_cache), layout, check)?;
    let addressing = [
        ("cu_seqlens", cu_seqlens),
        ("block_table", block_table),
        ("seq_lens", seq_lens),
    ];
    for (name, t) in addressing {
        dtype_is(OP, name, t, DType::I32)?;
    }
    let &[batch, max_blocks] = block_table.shape() else {
        return Err(OpError::invalid(
            OP,
            format!(
                "`block_table` must be [batch, max_blocks], got shape {:?}",
                block_table.shape()
            ),
        ));
    };
    if batch == 0 || max_blocks == 0 {
        return Err(OpError::invalid(
            OP,
            format!("`block_table` must not be empty, got shape [{batch}, {max_blocks}]"),
        ));
    }
    shape_is(OP, "cu_seqlens", cu_seqlens, &[batch + 1])?;
    shape_is(OP, "seq_lens", seq_lens, &[batch])?;
    for cache in [("k_cache", k_cache), ("v_cache", v_cache)] {
        distinct(OP, cache.1, &addressing)?;
    }
    if let Some(table) = rope {
        check_table(OP, table, head_dim)?;
    }
    // Positions run below the table's slots plus tokens; they must stay below 2^31.
    if max_blocks
        .checked_mul(page_size)
        .and_then(|s| s.checked_add(tokens))
        .is_none_or(|s| s > i32::MAX as usize)
    {
        return Err(OpError::invalid(
            OP,
            format!("max_blocks · page_size + tokens = {max_blocks} · {page_size} + {tokens} must be below 2^31"),
        ));
    }
    let g = Geometry {
        batch: fits_u32(OP, "batch", batch)?,
        tokens: fits_u32(OP, "tokens", tokens)?,
        page_size: page_size as u32,
        max_blocks: max_blocks as u32,
        blocks: fits_u32(OP, "blocks", blocks)?,
    };
    let in_graph = ctx.recording_graph();
    let first_bad = check.word();
    if !in_graph {
        let threads = g.batch + 1 + g.tokens;
        ragged_slots_check_kernel::launch(
            ctx,
            ragged_slots_check_kernel::Args {
                cu_seqlens,
                block_table,
                seq_lens,
                first_bad,
                batch: g.batch,
                tokens: g.tokens,
                page_size: g.page_size,
                max_blocks: g.max_blocks,
                blocks: g.blocks,
                steps: search_steps(g.batch),
            },
        )
        .grid([threads.div_ceil(GROUP), 1, 1])
        .group_size(GROUP)
        .run()
        .map_err(runtime(OP))?;
        if let Some(at) = check.take_first_bad()? {
            return Err(diagnose(at, &g, (cu_seqlens, block_table, seq_lens)));
        }
    }
    Ok(RaggedAppend {
        k,
        v,
        addressing: (cu_seqlens, block_table, seq_lens),
        rope,
        check,
        g,
        n_kv_heads: n_kv_heads as u32,
        head_dim,
        in_graph,
        hnd: layout == KvLayout::Hnd,
    })
}

impl RaggedAppend<'_> {
    /// Writes the rows into `k_cache` and `v_cache` (of the checked shape and dtype).
    pub(crate) fn write(
        &self,
        ctx: &Context,
        (k_cache, v_cache): (&Tensor, &Tensor),
    ) -> Result<(), OpError> {
        let (k, v, g) = (self.k, self.v, &self.g);
        let (cu_seqlens, block_table, seq_lens) = self.addressing;
        let vec = run_width(k.dtype(), self.head_dim);
        let row_vecs = (self.head_dim / vec as usize) as u32;
        let total = fits_u32(OP, "the element count of `k`", k.len() / vec as usize)?;
        let r = RopeLaunch::of(self.rope, None, self.check);
        paged_kv_append_ragged_kernel::launch(
            ctx,
            paged_kv_append_ragged_kernel::Args {
                k,
                v,
                cu_seqlens,
                block_table,
                seq_lens,
                inv_freq: r.inv_freq,
                k_cache,
                v_cache,
                first_bad: self.check.word(),
                n_kv_heads: self.n_kv_heads,
                page_size: g.page_size,
                max_blocks: g.max_blocks,
                blocks: g.blocks,
                batch: g.batch,
                steps: search_steps(g.batch),
                row_vecs,
                total,
                in_graph: u32::from(self.in_graph),
                mscale: r.mscale,
            },
            paged_kv_append_ragged_kernel::Consts {
                vec,
                hnd: u32::from(self.hnd),
                rot_dim: r.rot_dim,
                neox: r.neox,
            },
        )
        .grid([total.div_ceil(GROUP), 1, 1])
        .group_size(GROUP)
        .run()
        .map_err(runtime(OP))
    }
}

/// The sizes a ragged append's addressing is checked against.
struct Geometry {
    batch: u32,
    tokens: u32,
    page_size: u32,
    max_blocks: u32,
    blocks: u32,
}

/// The error for the first bad entry `at` the check kernel found (see
/// [`ragged_slots_check_kernel`]), with the values read back to name it.
fn diagnose(at: usize, g: &Geometry, (cu, table, lens): (&Tensor, &Tensor, &Tensor)) -> OpError {
    let read = |t: &Tensor| t.to_vec::<i32>().unwrap_or_default();
    let (cu, table, lens) = (read(cu), read(table), read(lens));
    let batch = g.batch as usize;
    if at <= batch {
        let value = cu.get(at).copied().unwrap_or_default();
        return OpError::invalid(
            OP,
            format!(
                "`cu_seqlens` is bad at entry {at} ({value}): it must never decrease and stay within 0..={} (tokens)",
                g.tokens
            ),
        );
    }
    let t = at - batch - 1;
    let place = |t: usize| -> Result<(usize, usize, i64), OpError> {
        let b = cu[..batch]
            .iter()
            .rposition(|&c| c as i64 <= t as i64)
            .unwrap_or(0);
        let len = lens.get(b).copied().unwrap_or_default();
        if len < 0 {
            return Err(OpError::invalid(
                OP,
                format!("`seq_lens` is bad at sequence {b}: its length before the append is {len}"),
            ));
        }
        let pos = len as usize + t - cu.get(b).copied().unwrap_or_default().max(0) as usize;
        let index = pos / g.page_size as usize;
        let max_blocks = g.max_blocks as usize;
        if index >= max_blocks {
            return Err(OpError::invalid(
                OP,
                format!(
                    "token {t} (sequence {b}, position {pos}) is past its block table: it needs page {index} of a row of {max_blocks}"
                ),
            ));
        }
        let page = table
            .get(b * max_blocks + index)
            .copied()
            .unwrap_or_default();
        if page < 0 || page as u32 >= g.blocks {
            return Err(OpError::invalid(
                OP,
                format!(
                    "token {t} (sequence {b}, position {pos}): `block_table` [{b}, {index}] = {page} is not a page of the pool's 0..{}",
                    g.blocks
                ),
            ));
        }
        let slot = page as i64 * g.page_size as i64 + (pos % g.page_size as usize) as i64;
        Ok((b, pos, slot))
    };
    let (b, pos, slot) = match place(t) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let first = cu.first().copied().unwrap_or_default().max(0) as usize;
    let earlier = (first..t).find(|&u| place(u).is_ok_and(|p| p.2 == slot));
    OpError::invalid(
        OP,
        format!(
            "token {t} (sequence {b}, position {pos}) lands in slot {slot}, which token {} takes too: the block table hands one page to two places",
            earlier.map_or_else(|| "an earlier".to_string(), |u| u.to_string())
        ),
    )
}
