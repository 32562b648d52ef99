//! `paged_kv_append`: new K/V rows `[tokens, n_kv_heads, head_dim]` written into a paged
//! cache (NHD or HND pages) through vLLM's `slot_mapping` (slot = page · page_size +
//! offset; −1 skips the token, as vLLM pads a batch). In place: the caches keep every
//! other slot. K may be rotated on the way in (`paged_append_rope`).
//!
//! The slots live on the device, so they are checked there, as the embedding ids are:
//! eagerly, a first kernel records the first token whose slot is neither −1 nor a slot of
//! the cache, or repeats an earlier token's slot (which would make the row that lands
//! depend on timing), and the wrapper reads that one word back and refuses the call,
//! naming the token, before any row is written. In a recorded graph it cannot read back:
//! the append skips a bad slot (it never writes outside the cache) and records the token,
//! which [`SlotCheck::take_error`] reports after the replay.

use super::paged::KvLayout;
use super::paged_append_rope::{check_key_rope, rotated_element, KeyRope, RopeLaunch};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

const OP: &str = "paged_kv_append";

/// Threads per threadgroup of both kernels.
const GROUP: u32 = 256;

/// Records in `first_bad[0]` the smallest token whose slot is below −1, not below
/// `slots`, or equal to an earlier token's slot other than −1.
#[kernel]
pub fn paged_slots_check_kernel(
    slot_mapping: Tensor<i32>,
    mut first_bad: Tensor<u32>,
    tokens: u32,
    slots: u32,
) {
    let t = global_id();
    if t < tokens {
        let s = load(slot_mapping[t]);
        let mut bad = s < -1i32 || (s >= 0i32 && s.cast::<u32>() >= slots);
        if s >= 0i32 {
            for u in 0..t {
                bad = bad || load(slot_mapping[u]) == s;
            }
        }
        if bad {
            let _first = atomic_min(first_bad[0], t);
        }
    }
}

/// Writes elements `part · vec ..` of the new head row at `src` of `k` and `v` into row
/// `dst_row` of the caches; K rotated at `pos` first when `rot_dim` is not 0 (a constexpr:
/// the unrotated specialisations copy the elements as they are).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn append_part<T>(
    k: Mem<T>,
    v: Mem<T>,
    mut k_cache: Mem<T>,
    mut v_cache: Mem<T>,
    src_row: u32,
    dst_row: u32,
    part: u32,
    row_vecs: u32,
    vec: u32,
    pos: f32,
    inv_freq: Mem<f32>,
    mscale: f32,
    rot_dim: u32,
    neox: u32,
) {
    let src = (src_row * row_vecs + part) * vec;
    let dst = (dst_row * row_vecs + part) * vec;
    if rot_dim != 0 {
        let head = src_row * row_vecs * vec;
        for e in 0..vec {
            let x = rotated_element(
                k,
                head,
                part * vec + e,
                pos,
                inv_freq,
                mscale,
                rot_dim,
                neox,
            );
            store(k_cache[dst + e], x.cast::<T>());
        }
    } else {
        for e in 0..vec {
            store(k_cache[dst + e], load(k[src + e]));
        }
    }
    for e in 0..vec {
        store(v_cache[dst + e], load(v[src + e]));
    }
}

/// The cache row of head `h` at slot `slot`: NHD `slot · n_kv_heads + h`, HND
/// `(page · n_kv_heads + h) · page_size + offset`.
#[func]
pub fn slot_row(slot: u32, h: u32, n_kv_heads: u32, page_size: u32, hnd: u32) -> u32 {
    let page = slot / page_size;
    let off = slot - page * page_size;
    if hnd != 0 {
        (page * n_kv_heads + h) * page_size + off
    } else {
        slot * n_kv_heads + h
    }
}

/// Copies `vec` elements of one token's head row of K and of V per thread into the slot
/// `slot_mapping[token]` names (`total` runs, `row_vecs` to a head row), K rotated at
/// `positions[token]` when `rot_dim` is not 0. A slot of −1 is skipped; one outside
/// `0..slots` too, recorded in `first_bad` (graph replays; an eager call was checked
/// before). Eagerly (`in_graph` 0) thread 0 leaves the word at u32::MAX.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn paged_kv_append_kernel<T>(
    k: Tensor<T>,
    v: Tensor<T>,
    slot_mapping: Tensor<i32>,
    positions: Tensor<u32>,
    inv_freq: Tensor<f32>,
    mut k_cache: Tensor<T>,
    mut v_cache: Tensor<T>,
    mut first_bad: Tensor<u32>,
    n_kv_heads: u32,
    page_size: u32,
    slots: u32,
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
        let s = load(slot_mapping[t]);
        let ok = s >= 0i32 && s.cast::<u32>() < slots;
        if ok {
            let dst_row = slot_row(s.cast::<u32>(), h, n_kv_heads, page_size, hnd);
            let mut pos = 0.0f32;
            if rot_dim != 0 {
                pos = load(positions[t]).cast::<f32>();
            }
            append_part(
                k, v, k_cache, v_cache, row, dst_row, part, row_vecs, vec, pos, inv_freq, mscale,
                rot_dim, neox,
            );
        } else {
            if s != -1i32 && part == 0 && h == 0 {
                let _first = atomic_min(first_bad[0], t);
            }
        }
    }
}

/// The caller's scratch for the slot check: one u32 on the device, u32::MAX between
/// calls, so a call uploads nothing.
pub struct SlotCheck {
    first_bad: Tensor,
    /// u32 `[1]` and f32 `[2]`, bound where an append reads no positions or no table.
    no_positions: Tensor,
    no_table: Tensor,
}

impl SlotCheck {
    /// Allocates the word the check writes.
    pub fn new(ctx: &Context) -> Result<SlotCheck, OpError> {
        Ok(SlotCheck {
            first_bad: ctx.tensor(&[u32::MAX], &[1]).map_err(runtime(OP))?,
            no_positions: ctx.tensor(&[0u32], &[1]).map_err(runtime(OP))?,
            no_table: ctx.tensor(&[0.0f32; 2], &[2]).map_err(runtime(OP))?,
        })
    }

    /// The positions and the table an append binds where its specialisation reads none.
    pub(crate) fn placeholders(&self) -> (&Tensor, &Tensor) {
        (&self.no_positions, &self.no_table)
    }

    /// The word the checks and the appends write.
    pub(crate) fn word(&self) -> &Tensor {
        &self.first_bad
    }

    /// After appends recorded in a graph and replayed (which skip a bad slot rather than
    /// refuse), the first such token since the last look, as an error; the word is reset.
    pub fn take_error(&self) -> Result<(), OpError> {
        match self.take_first_bad()? {
            None => Ok(()),
            Some(t) => Err(OpError::invalid(
                OP,
                format!("a token without a slot in a graph replay (`slot_mapping`, or a ragged append's cu_seqlens, seq_lens or block_table, out of range): token {t}'s rows were not written"),
            )),
        }
    }

    pub(crate) fn take_first_bad(&self) -> Result<Option<usize>, OpError> {
        let word = self.first_bad.to_vec::<u32>().map_err(runtime(OP))?;
        match word.first().copied() {
            Some(t) if t != u32::MAX => {
                self.first_bad.write(&[u32::MAX]).map_err(runtime(OP))?;
                Ok(Some(t as usize))
            }
            _ => Ok(None),
        }
    }
}

/// The widest run of elements (at most 16 bytes) that divides `d`.
pub(crate) fn run_width(dtype: DType, d: usize) -> u32 {
    let mut w = (16 / dtype.size_bytes().max(1)) as u32;
    while w > 1 && !d.is_multiple_of(w as usize) {
        w /= 2;
    }
    w
}

/// Writes `k` and `v` `[tokens, n_kv_heads, head_dim]` into the paged caches `k_cache`
/// and `v_cache` (NHD `[blocks, page_size, n_kv_heads, head_dim]` or HND `[blocks,
/// n_kv_heads, page_size, head_dim]`, one float dtype with k and v) at `slot_mapping`
/// (i32 `[tokens]`: slot `page · page_size + offset`, or −1 to skip the token). With
/// `rope`, each key is rotated at its position before it is written, exactly as `rope`
/// would rotate it. A slot below −1 or past the cache, or one that repeats an earlier
/// token's, is refused before anything is written.
#[allow(clippy::too_many_arguments)]
pub fn paged_kv_append(
    ctx: &Context,
    k: &Tensor,
    v: &Tensor,
    slot_mapping: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    layout: KvLayout,
    rope: Option<KeyRope>,
    check: &SlotCheck,
) -> Result<(), OpError> {
    let append = PagedAppend::check(
        ctx,
        (k, v, slot_mapping),
        (k_cache, v_cache),
        layout,
        rope,
        check,
    )?;
    append.write(ctx, k_cache, v_cache)
}

/// The shape of a checked append: `tokens` rows of `n_kv_heads` heads of `head_dim` into
/// `blocks` pages of `page_size` slots.
pub(crate) struct RowShape {
    pub tokens: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub blocks: usize,
    pub page_size: usize,
}

/// Checks the new rows `k` and `v` against the caches (`cache_dtype`, `None`: k's), the
/// caches' size and the check word's context: everything an append of any addressing
/// needs.
pub(crate) fn check_rows(
    op: &'static str,
    cache_dtype: Option<DType>,
    ctx: &Context,
    (k, v): (&Tensor, &Tensor),
    (k_cache, v_cache): (&Tensor, &Tensor),
    layout: KvLayout,
    check: &SlotCheck,
) -> Result<RowShape, OpError> {
    dtype_in(op, "k", k, &FLOAT_DTYPES)?;
    dtype_is(op, "v", v, k.dtype())?;
    let cache_dtype = cache_dtype.unwrap_or(k.dtype());
    dtype_is(op, "k_cache", k_cache, cache_dtype)?;
    dtype_is(op, "v_cache", v_cache, cache_dtype)?;
    let &[tokens, n_kv_heads, head_dim] = k.shape() else {
        return Err(OpError::invalid(
            op,
            format!(
                "`k` must be [tokens, n_kv_heads, head_dim], got shape {:?}",
                k.shape()
            ),
        ));
    };
    shape_is(op, "v", v, k.shape())?;
    let &[blocks, a, b, d] = k_cache.shape() else {
        return Err(OpError::invalid(
        op,
        format!("`k_cache` must be 4-D [blocks, page_size, n_kv_heads, head_dim] (HND: [blocks, n_kv_heads, page_size, head_dim]), got shape {:?}", k_cache.shape()),
    ));
    };
    shape_is(op, "v_cache", v_cache, k_cache.shape())?;
    let (page_size, heads) = match layout {
        KvLayout::Nhd => (a, b),
        KvLayout::Hnd => (b, a),
    };
    if heads != n_kv_heads || d != head_dim {
        return Err(OpError::invalid(
            op,
            format!("the caches hold {heads} KV heads of {d}, `k` has {n_kv_heads} of {head_dim}"),
        ));
    }
    if tokens == 0 || n_kv_heads == 0 || head_dim == 0 || blocks == 0 || page_size == 0 {
        return Err(OpError::invalid(
            op,
            format!(
                "the tensors must not be empty: k {:?}, k_cache {:?}",
                k.shape(),
                k_cache.shape()
            ),
        ));
    }
    distinct(op, k_cache, &[("k", k), ("v", v), ("v_cache", v_cache)])?;
    distinct(op, v_cache, &[("k", k), ("v", v)])?;
    if k_cache.len() > i32::MAX as usize {
        return Err(OpError::invalid(
            op,
            "the caches hold 2^31 elements or more; at most 2^31 − 1 are supported",
        ));
    }
    if !ctx.owns(&check.first_bad) {
        return Err(OpError::invalid(
            op,
            "the SlotCheck was made by another context; make it with this one",
        ));
    }
    Ok(RowShape {
        tokens,
        n_kv_heads,
        head_dim,
        blocks,
        page_size,
    })
}

/// A checked append: the rows, their slots, and the launch geometry for caches of the
/// checked shape.
pub(crate) struct PagedAppend<'a> {
    k: &'a Tensor,
    v: &'a Tensor,
    slot_mapping: &'a Tensor,
    rope: Option<KeyRope<'a>>,
    check: &'a SlotCheck,
    n_kv_heads: u32,
    page_size: u32,
    slots: u32,
    in_graph: bool,
    hnd: bool,
}

/// What a kernel writing a checked append needs besides the tensors.
pub(crate) struct AppendGeometry<'a> {
    pub first_bad: &'a Tensor,
    pub n_kv_heads: u32,
    pub page_size: u32,
    pub slots: u32,
    pub in_graph: bool,
    pub rope: RopeLaunch<'a>,
}

impl<'a> PagedAppend<'a> {
    /// Checks every invariant of an append of `k` and `v` at `slot_mapping` into caches
    /// of `k_cache`'s shape, the slots on the device (eagerly), and writes nothing.
    pub(crate) fn check(
        ctx: &Context,
        rows: (&'a Tensor, &'a Tensor, &'a Tensor),
        caches: (&Tensor, &Tensor),
        layout: KvLayout,
        rope: Option<KeyRope<'a>>,
        check: &'a SlotCheck,
    ) -> Result<PagedAppend<'a>, OpError> {
        Self::check_as(OP, None, ctx, rows, caches, layout, rope, check)
    }

    /// [`Self::check`] for op `op`, whose caches hold `cache_dtype` (`None`: k's dtype).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_as(
        op: &'static str,
        cache_dtype: Option<DType>,
        ctx: &Context,
        (k, v, slot_mapping): (&'a Tensor, &'a Tensor, &'a Tensor),
        (k_cache, v_cache): (&Tensor, &Tensor),
        layout: KvLayout,
        rope: Option<KeyRope<'a>>,
        check: &'a SlotCheck,
    ) -> Result<PagedAppend<'a>, OpError> {
        let RowShape {
            tokens,
            n_kv_heads,
            head_dim,
            blocks,
            page_size,
        } = check_rows(
            op,
            cache_dtype,
            ctx,
            (k, v),
            (k_cache, v_cache),
            layout,
            check,
        )?;
        dtype_is(op, "slot_mapping", slot_mapping, DType::I32)?;
        shape_is(op, "slot_mapping", slot_mapping, &[tokens])?;
        if let Some(r) = &rope {
            check_key_rope(op, r, tokens, head_dim)?;
            distinct(
                op,
                r.positions,
                &[("k_cache", k_cache), ("v_cache", v_cache)],
            )?;
        }
        let slots = fits_u32(op, "blocks · page_size", blocks * page_size)?;
        let tokens32 = fits_u32(op, "tokens", tokens)?;
        let in_graph = ctx.recording_graph();
        if !in_graph {
            paged_slots_check_kernel::launch(
                ctx,
                paged_slots_check_kernel::Args {
                    slot_mapping,
                    first_bad: &check.first_bad,
                    tokens: tokens32,
                    slots,
                },
            )
            .grid([tokens32.div_ceil(GROUP), 1, 1])
            .group_size(GROUP)
            .run()
            .map_err(runtime(op))?;
            if let Some(t) = check.take_first_bad()? {
                let slot = slot_mapping
                    .to_vec::<i32>()
                    .map_err(runtime(op))?
                    .get(t)
                    .map_or_else(String::new, |s| s.to_string());
                return Err(OpError::invalid(
                op,
                format!(
                    "`slot_mapping` is bad at token {t}: slot {slot} must be −1 or one of the cache's 0..{slots} slots ({blocks} pages of {page_size}), not taken by an earlier token"
                ),
            ));
            }
        }
        Ok(PagedAppend {
            k,
            v,
            slot_mapping,
            rope,
            check,
            n_kv_heads: n_kv_heads as u32,
            page_size: page_size as u32,
            slots,
            in_graph,
            hnd: layout == KvLayout::Hnd,
        })
    }

    /// The launch scalars of the checked append, for a kernel that writes it another way.
    pub(crate) fn geometry(&self) -> AppendGeometry<'a> {
        AppendGeometry {
            first_bad: &self.check.first_bad,
            n_kv_heads: self.n_kv_heads,
            page_size: self.page_size,
            slots: self.slots,
            in_graph: self.in_graph,
            rope: self.rope_launch(),
        }
    }

    fn rope_launch(&self) -> RopeLaunch<'a> {
        RopeLaunch::of(
            self.rope.map(|r| r.table),
            self.rope.map(|r| r.positions),
            self.check,
        )
    }

    /// Writes the rows into `k_cache` and `v_cache` (of the checked shape and dtype).
    pub(crate) fn write(
        &self,
        ctx: &Context,
        k_cache: &Tensor,
        v_cache: &Tensor,
    ) -> Result<(), OpError> {
        let (k, v, slot_mapping, check) = (self.k, self.v, self.slot_mapping, self.check);
        let head_dim = k.shape()[2];
        let vec = run_width(k.dtype(), head_dim);
        let row_vecs = (head_dim / vec as usize) as u32;
        let total = fits_u32(OP, "the element count of `k`", k.len() / vec as usize)?;
        let rope = self.rope_launch();
        paged_kv_append_kernel::launch(
            ctx,
            paged_kv_append_kernel::Args {
                k,
                v,
                slot_mapping,
                positions: rope.positions,
                inv_freq: rope.inv_freq,
                k_cache,
                v_cache,
                first_bad: &check.first_bad,
                n_kv_heads: self.n_kv_heads,
                page_size: self.page_size,
                slots: self.slots,
                row_vecs,
                total,
                in_graph: u32::from(self.in_graph),
                mscale: rope.mscale,
            },
            paged_kv_append_kernel::Consts {
                vec,
                hnd: u32::from(self.hnd),
                rot_dim: rope.rot_dim,
                neox: rope.neox,
            },
        )
        .grid([total.div_ceil(GROUP), 1, 1])
        .group_size(GROUP)
        .run()
        .map_err(runtime(OP))
    }
}
