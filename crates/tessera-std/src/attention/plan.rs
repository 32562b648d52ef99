//! How a decode call is laid out on the device: the lane geometry for a head_dim and dtype,
//! the single-pass or split-KV choice, and the launches themselves. The op wrappers
//! validate first and then describe their call as a [`DecodeCall`].

use super::decode_combine::{combine_slices, sdpa_decode_combine_kernel, COMBINE_COLUMNS};
use super::decode_kernels::{sdpa_decode_kernel, sdpa_decode_partial_kernel};
use super::decode_mma::{mma_block_keys, sdpa_decode_mma_kernel, MMA_HEAD_DIMS};
use super::kv_quant::{KvScales, KV_INT4};
use super::kv_quant_decode::launch_partial as launch_quant_partial;
use super::paged_rows::PageWalk;
use crate::error::{runtime, OpError};
use tessera_runtime::{Context, DType, Tensor};

/// The head dims the decode kernels are specialised for.
pub const DECODE_HEAD_DIMS: [u32; 6] = [64, 96, 128, 192, 256, 512];

/// Simdgroups per decode threadgroup.
pub const DECODE_SIMDGROUPS: u32 = 4;

/// Split-KV threadgroups resident per compute unit: the partial kernel's registers
/// (157 a thread for head_dim 128, bf16, 4 heads, measured on an H200) allow 3 of 128 threads.
pub const RESIDENT_GROUPS: u32 = 3;

/// Threadgroups of the fragment kernel the split count aims at per compute unit. On an
/// H200 (head_dim 128, bf16) 95 registers a thread and 29 KiB of threadgroup memory let 5
/// of 128 threads fit; aiming at 5 won at 32k context by 2 % but lost 30 % on batched
/// decode and head_dim 256, and 3 or 6 lost everywhere, so 4.
pub const MMA_RESIDENT_GROUPS: u32 = 4;

/// The largest number of KV chunks a split-KV call may use.
pub const MAX_SPLITS: u32 = 1024;

/// The lane layout of one decode specialisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Elements of a K/V row per lane.
    pub epl: u32,
    /// Query heads per threadgroup (all sharing one KV head).
    pub hpt: u32,
    /// Simdgroups per threadgroup.
    pub sgs: u32,
    /// `log2(head_dim / epl)`: shuffle steps of a row's score.
    pub lg: u32,
    /// Row slots whose K/V loads the split-KV kernel issues before their arithmetic.
    pub unroll: u32,
}

/// The layout for `head_dim` in `dtype` with `gqa` query heads per KV head: the fewest
/// elements per lane that make whole 16-byte loads (so a row takes a power-of-two number
/// of lanes), and as many heads of the group per threadgroup as registers and threadgroup
/// memory allow.
pub fn geometry(dtype: DType, head_dim: u32, gqa: u32) -> Geometry {
    let vec = (16 / dtype.size_bytes().max(1)) as u32;
    let candidates = [32u32, 16, 8, 4, 2, 1];
    let epl = candidates
        .iter()
        .filter(|&&lanes| head_dim.is_multiple_of(lanes))
        .map(|&lanes| head_dim / lanes)
        .find(|&e| e.is_multiple_of(vec) && e <= 32)
        .unwrap_or(head_dim.div_ceil(32));
    let sgs = DECODE_SIMDGROUPS;
    let mut hpt = 1;
    for c in 1..=gqa.min(8) {
        if gqa.is_multiple_of(c) && c * epl <= 32 && sgs * c * head_dim <= 8192 {
            hpt = c;
        }
    }
    Geometry {
        epl,
        hpt,
        sgs,
        lg: (head_dim / epl).trailing_zeros(),
        // Four slots of 16-byte loads in flight per lane, fewer for wide lanes (registers).
        unroll: (64 / epl.max(1)).clamp(1, 4),
    }
}

/// Preallocated split-KV scratch: partial outputs, their (max, sum) pairs, and a lengths
/// placeholder. Every decode op takes one: the caller makes it once, outside the op call,
/// for the largest call it serves ([`DecodeWorkspace::for_cache`] for every split count the
/// plan may pick over a cache, [`DecodeWorkspace::new`] for a fixed count), as with every
/// op that needs scratch. The op checks it is on the call's context and large enough, so
/// the call allocates nothing and every launch can be captured in a CUDA graph.
pub struct DecodeWorkspace {
    part_o: Tensor,
    part_ml: Tensor,
    lens: Tensor,
    /// The fragment kernel's K/V scales for a float cache (never read; a tensor of its own,
    /// since the launch refuses a read that shares a written buffer).
    no_scales: Tensor,
}

impl DecodeWorkspace {
    /// Scratch for up to `rows` query rows × `n_q_heads` heads × `splits` chunks of `head_dim`.
    pub fn new(
        ctx: &Context,
        rows: usize,
        n_q_heads: usize,
        head_dim: usize,
        splits: usize,
    ) -> Result<DecodeWorkspace, OpError> {
        const OP: &str = "DecodeWorkspace";
        let slots = rows * n_q_heads * splits.max(1);
        Ok(DecodeWorkspace {
            part_o: ctx
                .zeros(DType::F32, &[slots * head_dim])
                .map_err(runtime(OP))?,
            part_ml: ctx.zeros(DType::F32, &[slots * 2]).map_err(runtime(OP))?,
            lens: ctx.zeros(DType::U32, &[1]).map_err(runtime(OP))?,
            no_scales: ctx.zeros(DType::F32, &[1]).map_err(runtime(OP))?,
        })
    }

    /// Scratch for `rows` query rows × `n_q_heads` heads of `head_dim` over a cache of
    /// `kv_stride` positions: enough for every split count the automatic plan may pick
    /// ([`auto_split_bound`]), so a call that leaves `splits` to the plan always fits.
    pub fn for_cache(
        ctx: &Context,
        rows: usize,
        n_q_heads: usize,
        head_dim: usize,
        kv_stride: usize,
    ) -> Result<DecodeWorkspace, OpError> {
        DecodeWorkspace::new(ctx, rows, n_q_heads, head_dim, auto_split_bound(kv_stride))
    }

    /// The most KV chunks this workspace holds for `rows × n_q_heads` query heads of
    /// `head_dim` (0 when it is too small for even one).
    fn splits_held(&self, rows: usize, n_q_heads: usize, head_dim: usize) -> usize {
        let heads = (rows * n_q_heads).max(1);
        (self.part_o.len() / (heads * head_dim.max(1))).min(self.part_ml.len() / (heads * 2))
    }

    /// The bytes a workspace for `rows × n_q_heads × splits` partials of `head_dim` holds:
    /// `4·rows·n_q_heads·splits·(head_dim + 2) + 8`.
    pub fn bytes_for(rows: usize, n_q_heads: usize, head_dim: usize, splits: usize) -> usize {
        4 * rows * n_q_heads * splits.max(1) * (head_dim + 2) + 8
    }

    /// The bytes this workspace holds on the device.
    pub fn bytes(&self) -> usize {
        self.part_o.size_bytes()
            + self.part_ml.size_bytes()
            + self.lens.size_bytes()
            + self.no_scales.size_bytes()
    }
}

/// The most KV chunks the automatic plan picks over a cache of `kv_stride` positions: it
/// cuts at least 128 keys a chunk on the CUDA-core path and two fragment blocks of
/// `4096 / head_dim ≥ 16` keys on the fragment path, so never more than one per 32.
pub fn auto_split_bound(kv_stride: usize) -> usize {
    kv_stride.div_ceil(32).clamp(1, MAX_SPLITS as usize)
}

#[cfg(test)]
thread_local! {
    /// Split-KV runs of more than one chunk on this thread, so that a test can tell its
    /// shape really took the split path.
    pub(crate) static SPLIT_RUNS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A validated decode call.
pub(crate) struct DecodeCall<'a> {
    pub op: &'static str,
    pub q: &'a Tensor,
    pub k: &'a Tensor,
    pub v: &'a Tensor,
    pub out: &'a Tensor,
    pub sinks: Option<&'a Tensor>,
    /// Per-row lengths on the device (batched decode).
    pub kv_lens: Option<&'a Tensor>,
    pub rows: u32,
    pub n_q_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    pub kv_stride: u32,
    pub row_cache_rows: u32,
    pub len0: u32,
    pub len_step: u32,
    /// The most keys any row sees (for planning the split).
    pub max_len: u32,
    pub window: u32,
    pub n_sink: u32,
    pub scale: f32,
    /// The pages of a paged cache (with per-row lengths in `kv_lens`).
    pub paging: Option<PageWalk<'a>>,
    /// The scales of a quantized paged cache (`k` and `v` then hold u8 codes).
    pub kv_quant: Option<KvScales<'a>>,
}

impl DecodeCall<'_> {
    fn geometry(&self) -> Geometry {
        geometry(
            self.k.dtype(),
            self.head_dim,
            self.n_q_heads / self.n_kv_heads,
        )
    }

    /// Visible keys of a row that holds `n`.
    fn visible(&self, n: u32) -> u32 {
        let lo = if self.window > 0 && n > self.window {
            n - self.window
        } else {
            0
        };
        self.n_sink.min(lo) + n - lo
    }

    /// True when the fragment kernel serves this call: a 2-byte cache, or a quantized one
    /// read by bf16 queries (f16 weights times a V scale could leave f16's range) in a
    /// byte-a-code format, and a head_dim it is specialised for.
    fn on_fragments(&self) -> bool {
        let tiles = match self.kv_quant {
            None => matches!(self.k.dtype(), DType::F16 | DType::BF16),
            Some(s) => self.q.dtype() == DType::BF16 && s.format.code() != KV_INT4,
        };
        tiles && MMA_HEAD_DIMS.contains(&self.head_dim)
    }

    /// The fragment kernel's `quant` constant: 0 for a float cache, else 1 + the format.
    fn mma_quant(&self) -> u32 {
        self.kv_quant.map_or(0, |s| 1 + s.format.code())
    }

    /// The fragment kernel's keys a block on `ctx`'s device.
    fn mma_block(&self, ctx: &Context) -> u32 {
        let shared = ctx.info().max_shared_bytes;
        mma_block_keys(self.head_dim, self.kv_quant.is_some(), shared)
    }

    /// Fragment-kernel threadgroups per query row and KV chunk: each KV head's group in
    /// blocks of 16 query heads.
    fn mma_head_blocks(&self) -> u32 {
        self.n_kv_heads * (self.n_q_heads / self.n_kv_heads).div_ceil(16)
    }

    /// Fragment rows per query row in the fragment kernel: 16 (one query row per
    /// threadgroup), or the GQA group when `16 / gqa` query rows that share one cache and
    /// see it without a window (so their visible keys are prefixes of one another) go into
    /// one threadgroup's 16 fragment rows.
    fn mma_heads_per_row(&self) -> u32 {
        let gqa = self.n_q_heads / self.n_kv_heads;
        let shared = self.kv_lens.is_none() && self.row_cache_rows == 0 && self.window == 0;
        if shared && gqa <= 8 && self.rows > 1 {
            gqa
        } else {
            16
        }
    }

    /// Fragment-kernel threadgroups per KV head block and KV chunk: the query rows in
    /// blocks of `16 / heads_per_row`.
    fn mma_row_blocks(&self) -> u32 {
        self.rows.div_ceil(16 / self.mma_heads_per_row())
    }

    /// Threadgroups per KV chunk: of the fragment kernel (16 heads each), or of a
    /// single-pass launch.
    fn groups(&self) -> u32 {
        if self.on_fragments() {
            return self.mma_head_blocks() * self.mma_row_blocks();
        }
        let g = self.geometry();
        self.n_q_heads / g.hpt * self.rows
    }

    /// The split count the wrappers pick: one pass when the single-pass grid already fills
    /// the device or the context is short, else enough chunks (of at least 128 keys) for
    /// one full wave of the threadgroups that are resident at once: with more, the last
    /// wave runs partly empty and the combine walks more partial states.
    pub fn auto_splits(&self, ctx: &Context) -> u32 {
        let units = ctx.info().compute_units.max(1);
        let groups = self.groups().max(1);
        let visible = self.visible(self.max_len);
        if self.on_fragments() {
            let per = self.mma_block(ctx) * 2;
            return (MMA_RESIDENT_GROUPS * units / groups)
                .min(visible.div_ceil(per))
                .clamp(1, MAX_SPLITS);
        }
        let target = RESIDENT_GROUPS * units;
        if groups >= target || visible < 512 {
            return 1;
        }
        (target / groups)
            .min(visible.div_ceil(128))
            .clamp(1, MAX_SPLITS)
    }

    /// Runs in one pass (`splits == 1`: the single-pass kernel without per-row lengths, or
    /// the fragment kernel writing the output itself without a sink logit) or split-KV plus
    /// combine, in `splits` chunks or, when `None`, as many as [`Self::auto_splits`] picks
    /// and the workspace holds. (Walking more keys in one chunk to save the combine loses
    /// on the fragment kernel: with few threadgroups each block's load latency is exposed.)
    /// The workspace is checked before anything runs, whichever path the call takes, so a
    /// wrong one is refused on every shape and writes nothing.
    pub fn run(
        &self,
        ctx: &Context,
        splits: Option<u32>,
        ws: &DecodeWorkspace,
    ) -> Result<(), OpError> {
        if !ctx.owns(&ws.part_o) {
            return Err(OpError::invalid(
                self.op,
                "the workspace was made on another context; make it with DecodeWorkspace::new on this one",
            ));
        }
        let (rows, heads, d) = (
            self.rows as usize,
            self.n_q_heads as usize,
            self.head_dim as usize,
        );
        let held = ws.splits_held(rows, heads, d);
        let splits = match splits {
            Some(s) => s.max(1),
            None => self.auto_splits(ctx).min(held.max(1) as u32),
        };
        if held < splits as usize {
            return Err(OpError::invalid(
                self.op,
                format!(
                    "the workspace holds {} partial outputs, this call needs {} of head_dim {d} \
                     (rows × heads × splits = {rows} × {heads} × {splits}); make it with \
                     DecodeWorkspace::for_cache or DecodeWorkspace::new for this shape",
                    ws.part_ml.len() / 2,
                    rows * heads * splits as usize
                ),
            ));
        }
        if splits <= 1 && self.kv_lens.is_none() && !self.on_fragments() {
            self.single(ctx)
        } else {
            self.split(ctx, splits, ws)
        }
    }

    fn single(&self, ctx: &Context) -> Result<(), OpError> {
        let g = self.geometry();
        let DecodeCall {
            q,
            k,
            v,
            out,
            n_q_heads,
            kv_stride,
            row_cache_rows,
            len0,
            len_step,
            window,
            n_sink,
            scale,
            ..
        } = *self;
        let args = sdpa_decode_kernel::Args {
            q,
            k,
            v,
            sinks: self.sinks.unwrap_or(q),
            out,
            n_q_heads,
            gqa: self.gqa(),
            kv_stride,
            row_cache_rows,
            len0,
            len_step,
            window,
            n_sink,
            has_sink_logit: u32::from(self.sinks.is_some()),
            scale,
        };
        let consts = sdpa_decode_kernel::Consts {
            head_dim: self.head_dim,
            epl: g.epl,
            hpt: g.hpt,
            sgs: g.sgs,
            lg: g.lg,
        };
        sdpa_decode_kernel::launch(ctx, args, consts)
            .grid([n_q_heads / g.hpt, self.rows, 1])
            .group_size(g.sgs * 32)
            .run()
            .map_err(runtime(self.op))
    }

    /// Query heads per KV head.
    fn gqa(&self) -> u32 {
        self.n_q_heads / self.n_kv_heads
    }

    fn split(&self, ctx: &Context, splits: u32, ws: &DecodeWorkspace) -> Result<(), OpError> {
        let g = self.geometry();
        #[cfg(test)]
        if splits > 1 {
            SPLIT_RUNS.with(|n| n.set(n.get() + 1));
        }
        let step = if self.on_fragments() {
            self.mma_block(ctx)
        } else {
            g.sgs * g.unroll * 32 / (self.head_dim / g.epl)
        };
        let chunk = self
            .visible(self.max_len)
            .div_ceil(splits)
            .next_multiple_of(step)
            .max(step);
        let per_row_lens = u32::from(self.kv_lens.is_some());
        let direct = self.on_fragments() && splits == 1 && self.sinks.is_none();
        let DecodeCall {
            q,
            k,
            v,
            out,
            n_q_heads,
            kv_stride,
            row_cache_rows,
            len0,
            len_step,
            window,
            n_sink,
            scale,
            ..
        } = *self;
        let kv_lens = self.kv_lens.unwrap_or(&ws.lens);
        let (part_o, part_ml, gqa) = (&ws.part_o, &ws.part_ml, self.gqa());
        let (pages, starts) = self
            .paging
            .map_or((kv_lens, kv_lens), |p| (p.pages, p.starts));
        let [page_size, page_shift, page_rows, slot_rows, head_rows, paged] =
            PageWalk::scalars(self.paging.as_ref());
        if self.on_fragments() {
            let (k_scale, v_scale) = self
                .kv_quant
                .map_or((&ws.no_scales, &ws.no_scales), |s| (s.k_scale, s.v_scale));
            let args = sdpa_decode_mma_kernel::Args {
                q,
                k,
                v,
                k_scale,
                v_scale,
                kv_lens,
                pages,
                starts,
                part_o,
                part_ml,
                out,
                n_q_heads,
                gqa,
                kv_stride,
                row_cache_rows,
                len0,
                len_step,
                window,
                n_sink,
                chunk,
                scale,
                rows: self.rows,
                page_size,
                page_shift,
                page_rows,
                slot_rows,
                head_rows,
            };
            let consts = sdpa_decode_mma_kernel::Consts {
                head_dim: self.head_dim,
                per_row_lens,
                heads_per_row: self.mma_heads_per_row(),
                direct: u32::from(direct),
                paged,
                quant: self.mma_quant(),
                block_keys: self.mma_block(ctx),
            };
            sdpa_decode_mma_kernel::launch(ctx, args, consts)
                .grid([self.mma_head_blocks(), self.mma_row_blocks(), splits])
                .group_size(128)
                .run()
        } else if let (Some(scales), Some(walk)) = (&self.kv_quant, &self.paging) {
            let parts = (part_o, part_ml);
            launch_quant_partial(ctx, self, scales, walk, (g, chunk, splits), parts)
        } else {
            let args = sdpa_decode_partial_kernel::Args {
                q,
                k,
                v,
                kv_lens,
                pages,
                starts,
                part_o,
                part_ml,
                n_q_heads,
                gqa,
                kv_stride,
                row_cache_rows,
                len0,
                len_step,
                window,
                n_sink,
                chunk,
                scale,
                page_size,
                page_shift,
                page_rows,
                slot_rows,
                head_rows,
            };
            let consts = sdpa_decode_partial_kernel::Consts {
                head_dim: self.head_dim,
                epl: g.epl,
                hpt: g.hpt,
                sgs: g.sgs,
                lg: g.lg,
                per_row_lens,
                unroll: g.unroll,
                paged,
            };
            sdpa_decode_partial_kernel::launch(ctx, args, consts)
                .grid([n_q_heads / g.hpt, self.rows, splits])
                .group_size(g.sgs * 32)
                .run()
        }
        .map_err(runtime(self.op))?;
        if direct {
            return Ok(());
        }
        let slices = combine_slices(splits);
        sdpa_decode_combine_kernel::launch(
            ctx,
            sdpa_decode_combine_kernel::Args {
                part_o: &ws.part_o,
                part_ml: &ws.part_ml,
                sinks: self.sinks.unwrap_or(self.q),
                out: self.out,
                n_q_heads: self.n_q_heads,
                splits,
                has_sink_logit: u32::from(self.sinks.is_some()),
            },
            sdpa_decode_combine_kernel::Consts {
                head_dim: self.head_dim,
                slices,
            },
        )
        .grid([
            self.n_q_heads * (self.head_dim / COMBINE_COLUMNS),
            self.rows,
            1,
        ])
        .group_size(8 * slices)
        .run()
        .map_err(runtime(self.op))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_take_whole_16_byte_loads() {
        assert_eq!(geometry(DType::F16, 128, 4).epl, 8);
        assert_eq!(geometry(DType::F32, 128, 4).epl, 4);
        assert_eq!(geometry(DType::BF16, 64, 1).epl, 8);
        assert_eq!(geometry(DType::F16, 96, 1).epl, 24);
        assert_eq!(geometry(DType::F32, 96, 1).epl, 12);
        assert_eq!(geometry(DType::F16, 512, 1).epl, 16);
    }

    #[test]
    fn a_threadgroup_serves_a_divisor_of_the_group() {
        let g = geometry(DType::F16, 128, 4);
        assert_eq!(g.hpt, 4);
        assert_eq!(g.lg, 4);
        assert_eq!(geometry(DType::F16, 128, 6).hpt, 3);
        assert_eq!(geometry(DType::F16, 128, 8).hpt, 4);
        assert_eq!(geometry(DType::F32, 128, 8).hpt, 8);
        assert_eq!(geometry(DType::F16, 512, 8).hpt, 2);
        assert_eq!(geometry(DType::F32, 128, 1).hpt, 1);
    }
}
