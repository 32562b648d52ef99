//! Quantized paged KV caches: the layout, the byte codes and `kv_quant_append`, which
//! quantizes new K/V rows as they are written.
//!
//! **Layout.** The K and V pools are u8 tensors of exactly the shapes the float pools of
//! `sdpa_decode_paged` have (vLLM's NHD `[blocks, page_size, n_kv_heads, head_dim]` or
//! FlashInfer's HND `[blocks, n_kv_heads, page_size, head_dim]`), one byte an element, so
//! the page walk (`paged_rows::key_row`) is the float one. Each (token, KV head) row has
//! its own f32 scale for K and one for V: `k_scale` and `v_scale` are the pool's shape
//! without head_dim (`[blocks, page_size, n_kv_heads]`, HND `[blocks, n_kv_heads,
//! page_size]`), so a row's scale sits at its row index. The value of an element is
//! `code · scale`, as vLLM's fp8 cache multiplies its `k_scale`/`v_scale` (which vLLM holds
//! per tensor or per KV head; here per token and head, computed when the row is written,
//! so no calibration is needed and an outlier token costs only its own row's precision).
//!
//! **Codes.** [`KvFormat::Int8`]: the byte is a two's-complement int8 in `−127..=127`
//! (symmetric, −128 unused), scale `amax / 127`. [`KvFormat::E4m3`]: the byte is an OCP
//! E4M3FN value (`torch.float8_e4m3fn`, vLLM's `fp8`/`fp8_e4m3` cache dtype), scale
//! `amax / 448`, coded and decoded by the quant family's `fp8_encode`/`fp8_decode`. In
//! both, `x / scale` is computed in f32 and rounded to nearest, ties to even, saturating
//! at ±127 / ±448. A row of zeros gets scale 0 and zero codes. A row holding NaN or ±inf
//! cannot be represented with a finite scale: its scale is NaN and its codes 0, so
//! attention over that key gives NaN (as the float cache would), never a finite value.
//!
//! [`KvFormat::Int4`] packs two codes a byte and keeps a scale per group of dims; its
//! layout, codes and append are in `kv_quant_int4`.

use super::kv_quant_int4::{check_int4, int4_row_views, quantize_row_int4};
use super::paged::KvLayout;
use super::paged_append::{AppendGeometry, PagedAppend, SlotCheck};
use super::paged_append_rope::{check_key_rope, rotated_element, KeyRope, RopeLaunch};
use crate::error::{runtime, OpError};
use crate::quant::affine::round_half_even;
use crate::quant::fp8::{fp8_decode, fp8_encode};
use crate::validate::{distinct, dtype_is, fits_u32, shape_is};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

const OP: &str = "kv_quant_append";

/// The kernels' constant for int8 codes.
pub const KV_INT8: u32 = 0;
/// The kernels' constant for e4m3 codes.
pub const KV_E4M3: u32 = 1;
/// The kernels' constant for packed int4 codes with group scales.
pub const KV_INT4: u32 = 2;

/// Rows (simdgroups) per threadgroup of the append.
pub(crate) const ROWS_PER_GROUP: u32 = 4;

/// What a quantized cache's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvFormat {
    /// Two's-complement int8 codes, scale `amax / 127`.
    Int8,
    /// OCP E4M3FN codes, scale `amax / 448`.
    E4m3,
    /// Two 4-bit two's-complement codes a byte (`−7..=7`), a scale `amax / 7` per
    /// `group` dims of a row (`kv_quant_int4` has the layout).
    Int4 {
        /// Dims a scale covers: a power of two of at least 32 that divides head_dim.
        group: u32,
    },
}

impl KvFormat {
    /// The format named `name` (`int8` or `e4m3`).
    pub fn parse(op: &'static str, name: &str) -> Result<Self, OpError> {
        match name {
            "int8" => Ok(KvFormat::Int8),
            "e4m3" => Ok(KvFormat::E4m3),
            _ => Err(OpError::invalid(
                op,
                format!("kv_format must be int8 or e4m3, got `{name}`"),
            )),
        }
    }

    /// The kernels' constexpr.
    pub fn code(self) -> u32 {
        match self {
            KvFormat::Int8 => KV_INT8,
            KvFormat::E4m3 => KV_E4M3,
            KvFormat::Int4 { .. } => KV_INT4,
        }
    }

    /// Dims a scale covers in rows of `head_dim`: the row for int8 and e4m3.
    pub fn group(self, head_dim: u32) -> u32 {
        match self {
            KvFormat::Int4 { group } => group,
            _ => head_dim,
        }
    }

    /// Bytes a pool row of `head_dim` elements takes: the pools' last dim.
    pub fn row_bytes(self, head_dim: usize) -> usize {
        match self {
            KvFormat::Int4 { .. } => head_dim / 2,
            _ => head_dim,
        }
    }

    /// The head_dim of a pool whose rows are `row_bytes` bytes.
    pub fn head_dim_of(self, row_bytes: usize) -> usize {
        match self {
            KvFormat::Int4 { .. } => row_bytes * 2,
            _ => row_bytes,
        }
    }

    /// The scale pools' shape for a code pool of shape `cache`: the pool's shape without
    /// its last dim, and for int4 then the groups a row has.
    pub fn scale_shape(self, cache: &[usize]) -> Vec<usize> {
        let mut shape = scale_shape(cache);
        if let (KvFormat::Int4 { group }, Some(&w)) = (self, cache.last()) {
            shape.push(self.head_dim_of(w) / (group as usize).max(1));
        }
        shape
    }

    /// The largest code magnitude: a row's largest magnitude maps to it.
    pub fn max(self) -> f32 {
        match self {
            KvFormat::Int8 => 127.0,
            KvFormat::E4m3 => 448.0,
            KvFormat::Int4 { .. } => 7.0,
        }
    }
}

/// The scales of a quantized cache and what its bytes are.
#[derive(Clone, Copy)]
pub struct KvScales<'a> {
    /// f32, the K pool's shape without head_dim.
    pub k_scale: &'a Tensor,
    /// f32, like `k_scale`.
    pub v_scale: &'a Tensor,
    pub format: KvFormat,
}

/// The value of code byte `code` before its scale (`format` [`KV_INT8`] or [`KV_E4M3`]).
/// An int8 code is read without an integer-to-float conversion: with its sign bit flipped
/// it is `c + 128` in 0..=255, which as the low mantissa bits of 2²³ makes the f32
/// `2²³ + c + 128` exactly, so one subtraction leaves `c`.
#[func]
pub fn kv_code_value(code: u32, format: u32) -> f32 {
    let int8 = ((code ^ 0x80u32) | 0x4B00_0000u32).bitcast::<f32>() - 8_388_736.0f32;
    select(format == 0u32, int8, fp8_decode(code, 0u32))
}

/// The code byte of `x` (already divided by its row's scale): nearest, ties to even,
/// saturating.
#[func]
pub fn kv_code_of(x: f32, format: u32) -> u32 {
    let r = round_half_even(min(max(x, -127.0f32), 127.0f32));
    let int8 = (r + 256.0f32).cast::<u32>() & 255u32;
    select(format == 0u32, int8, fp8_encode(x, 0u32))
}

/// Element `e` of the row at `head` of `x` as f32: as stored, or (`rot_dim` not 0, a
/// constexpr) rotated at `pos` and rounded to `T`, the value `rope` would have written.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn row_element<T>(
    x: Mem<T>,
    head: u32,
    e: u32,
    pos: f32,
    inv_freq: Mem<f32>,
    mscale: f32,
    rot_dim: u32,
    neox: u32,
) -> f32 {
    if rot_dim != 0 {
        rotated_element(x, head, e, pos, inv_freq, mscale, rot_dim, neox)
            .cast::<T>()
            .cast::<f32>()
    } else {
        load(x[head + e]).cast::<f32>()
    }
}

/// Quantizes row `src` of `x` (`head_dim` elements, one simdgroup, lane `lane`), rotated
/// at `pos` when `rot_dim` is not 0, into row `dst` of `codes` and its scale into
/// `scales[dst]` when `write`; every lane takes part in the reductions whatever `write` is.
#[allow(clippy::too_many_arguments)]
#[func]
fn quantize_row<T>(
    x: Mem<T>,
    mut codes: Mem<u8>,
    mut scales: Mem<f32>,
    src: u32,
    dst: u32,
    lane: u32,
    write: bool,
    head_dim: u32,
    format: u32,
    pos: f32,
    inv_freq: Mem<f32>,
    mscale: f32,
    rot_dim: u32,
    neox: u32,
) {
    let head = src * head_dim;
    let mut amax = 0.0f32;
    let mut bad = 0.0f32;
    for e in range(lane, head_dim, 32) {
        let a = abs(row_element(
            x, head, e, pos, inv_freq, mscale, rot_dim, neox,
        ));
        // NaN and inf both fail this.
        bad = select(a <= 3.4028235e38f32, bad, 1.0f32);
        amax = select(a > amax, a, amax);
    }
    let amax = simd_max(amax);
    let bad = simd_max(bad);
    let largest = select(format == 0u32, 127.0f32, 448.0f32);
    let s = select(
        bad > 0.0f32,
        0x7FC0_0000u32.bitcast::<f32>(),
        amax / largest,
    );
    if write {
        if lane == 0 {
            store(scales[dst], s);
        }
        // False for a zero scale and a NaN one: their codes are 0.
        let coded = s > 0.0f32;
        for e in range(lane, head_dim, 32) {
            let val = row_element(x, head, e, pos, inv_freq, mscale, rot_dim, neox);
            let code = select(coded, kv_code_of(val / s, format), 0u32);
            store(codes[dst * head_dim + e], code.cast::<u8>());
        }
    }
}

/// One simdgroup per (token, KV head) row of `k` and `v` `[tokens, n_kv_heads,
/// head_dim]`: the row's scale and codes (`format` 2: packed int4 codes and a scale per
/// `group` dims, `kv_quant_int4`'s layout), K rotated at `positions[token]` first when
/// `rot_dim` is not 0, written to the slot `slot_mapping[token]` names (skipped for −1; for a slot outside `0..slots`, skipped and recorded in `first_bad`,
/// which eagerly (`in_graph` 0) thread 0 leaves at u32::MAX).
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn kv_quant_append_kernel<T>(
    k: Tensor<T>,
    v: Tensor<T>,
    slot_mapping: Tensor<i32>,
    positions: Tensor<u32>,
    inv_freq: Tensor<f32>,
    mut k_cache: Tensor<u8>,
    mut v_cache: Tensor<u8>,
    mut k_scale: Tensor<f32>,
    mut v_scale: Tensor<f32>,
    mut first_bad: Tensor<u32>,
    n_kv_heads: u32,
    page_size: u32,
    slots: u32,
    rows: u32,
    in_graph: u32,
    mscale: f32,
    #[constexpr] head_dim: u32,
    #[constexpr] format: u32,
    #[constexpr] group: u32,
    #[constexpr] hnd: u32,
    #[constexpr] rot_dim: u32,
    #[constexpr] neox: u32,
) {
    if global_id() == 0 && in_graph == 0 {
        store(first_bad[0], 4294967295u32);
    }
    let lane = simd_lane();
    let at = group_id_x() * 4 + simd_id();
    let live = at < rows;
    let row = select(live, at, 0u32);
    let t = row / n_kv_heads;
    let h = row - t * n_kv_heads;
    let s = load(slot_mapping[t]);
    let ok = live && s >= 0i32 && s.cast::<u32>() < slots;
    let su = select(ok, s.cast::<u32>(), 0u32);
    let page = su / page_size;
    let off = su - page * page_size;
    let dst = if hnd != 0 {
        (page * n_kv_heads + h) * page_size + off
    } else {
        su * n_kv_heads + h
    };
    let mut pos = 0.0f32;
    if rot_dim != 0 {
        pos = load(positions[t]).cast::<f32>();
    }
    if format == 2 {
        quantize_row_int4(
            k, k_cache, k_scale, row, dst, lane, ok, head_dim, group, pos, inv_freq, mscale,
            rot_dim, neox,
        );
        quantize_row_int4(
            v, v_cache, v_scale, row, dst, lane, ok, head_dim, group, 0.0f32, inv_freq, 1.0f32,
            0u32, 0u32,
        );
    } else {
        quantize_row(
            k, k_cache, k_scale, row, dst, lane, ok, head_dim, format, pos, inv_freq, mscale,
            rot_dim, neox,
        );
        quantize_row(
            v, v_cache, v_scale, row, dst, lane, ok, head_dim, format, 0.0f32, inv_freq, 1.0f32,
            0u32, 0u32,
        );
    }
    if live && !ok && s != -1i32 && lane == 0 && h == 0 {
        let _first = atomic_min(first_bad[0], t);
    }
}

/// The scale pools' shape for a K pool of shape `cache` (the pool without head_dim).
pub fn scale_shape(cache: &[usize]) -> Vec<usize> {
    cache[..cache.len().saturating_sub(1)].to_vec()
}

/// Checks the scale pools against a K pool of shape `cache`: f32, the pool's shape
/// without head_dim (int4: with the row's groups last), not one tensor, aliasing none of
/// `others`; for int4 the group and head_dim as `check_int4` takes them.
pub(crate) fn check_scales(
    op: &'static str,
    scales: &KvScales,
    cache: &[usize],
    others: &[(&str, &Tensor)],
) -> Result<(), OpError> {
    if let KvFormat::Int4 { group } = scales.format {
        check_int4(op, group, cache)?;
    }
    let shape = scales.format.scale_shape(cache);
    for (name, t) in [("k_scale", scales.k_scale), ("v_scale", scales.v_scale)] {
        dtype_is(op, name, t, DType::F32)?;
        shape_is(op, name, t, &shape)?;
        distinct(op, t, others)?;
    }
    distinct(op, scales.k_scale, &[("v_scale", scales.v_scale)])
}

/// Quantizes `k` and `v` `[tokens, n_kv_heads, head_dim]` (one float dtype) per (token,
/// head) row and writes codes into the u8 pools `k_cache` and `v_cache` (NHD or HND, as
/// `paged_kv_append` takes them; int4: head_dim / 2 bytes a row) and scales into `scales`
/// (the pool's shape without head_dim, int4 then the row's groups) at `slot_mapping` (i32
/// `[tokens]`, −1 skips a token). With `rope`, each key is rotated (and rounded to k's
/// dtype, as `rope` would store it) before it is quantized. A slot below −1 or past the
/// cache, or one an earlier token took, is refused, naming the token, before anything is
/// written (in a recorded graph see [`SlotCheck::take_error`]).
#[allow(clippy::too_many_arguments)]
pub fn kv_quant_append(
    ctx: &Context,
    k: &Tensor,
    v: &Tensor,
    slot_mapping: &Tensor,
    (k_cache, v_cache): (&Tensor, &Tensor),
    scales: &KvScales,
    layout: KvLayout,
    rope: Option<KeyRope>,
    check: &SlotCheck,
) -> Result<(), OpError> {
    let rows_in = (k, v, slot_mapping);
    checked_append(
        ctx,
        rows_in,
        (k_cache, v_cache),
        scales,
        layout,
        rope,
        check,
        |geo| {
            let [tokens, n_kv_heads, head_dim] = [k.shape()[0], k.shape()[1], k.shape()[2]];
            let rows = fits_u32(OP, "tokens · n_kv_heads", tokens * n_kv_heads)?;
            let head_dim = fits_u32(OP, "head_dim", head_dim)?;
            kv_quant_append_kernel::launch(
                ctx,
                kv_quant_append_kernel::Args {
                    k,
                    v,
                    slot_mapping,
                    positions: geo.rope.positions,
                    inv_freq: geo.rope.inv_freq,
                    k_cache,
                    v_cache,
                    k_scale: scales.k_scale,
                    v_scale: scales.v_scale,
                    first_bad: geo.first_bad,
                    n_kv_heads: geo.n_kv_heads,
                    page_size: geo.page_size,
                    slots: geo.slots,
                    rows,
                    in_graph: u32::from(geo.in_graph),
                    mscale: geo.rope.mscale,
                },
                kv_quant_append_kernel::Consts {
                    head_dim,
                    format: scales.format.code(),
                    group: scales.format.group(head_dim),
                    hnd: u32::from(layout == KvLayout::Hnd),
                    rot_dim: geo.rope.rot_dim,
                    neox: geo.rope.neox,
                },
            )
            .grid([rows.div_ceil(ROWS_PER_GROUP), 1, 1])
            .group_size(ROWS_PER_GROUP * 32)
            .run()
            .map_err(runtime(OP))
        },
    )
}

/// Every check [`kv_quant_append`] makes (the slots on the device), writing nothing.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_quant_append(
    ctx: &Context,
    rows_in: (&Tensor, &Tensor, &Tensor),
    caches: (&Tensor, &Tensor),
    scales: &KvScales,
    layout: KvLayout,
    rope: Option<KeyRope>,
    check: &SlotCheck,
) -> Result<(), OpError> {
    checked_append(
        ctx,
        rows_in,
        caches,
        scales,
        layout,
        rope,
        check,
        |_| Ok(()),
    )
}

/// Checks an append as [`kv_quant_append`] documents it, then runs `then` with its launch
/// scalars.
#[allow(clippy::too_many_arguments)]
fn checked_append<R>(
    ctx: &Context,
    (k, v, slot_mapping): (&Tensor, &Tensor, &Tensor),
    (k_cache, v_cache): (&Tensor, &Tensor),
    scales: &KvScales,
    layout: KvLayout,
    rope: Option<KeyRope>,
    check: &SlotCheck,
    then: impl FnOnce(AppendGeometry) -> Result<R, OpError>,
) -> Result<R, OpError> {
    let others = [
        ("k", k),
        ("v", v),
        ("slot_mapping", slot_mapping),
        ("k_cache", k_cache),
        ("v_cache", v_cache),
    ];
    check_scales(OP, scales, k_cache.shape(), &others)?;
    // The shared checks compare the pools' last dim with k's; an int4 pool's is head_dim
    // / 2, so they see k and v as views of that width, and the rotation (checked against
    // the real head_dim) is bound here.
    let int4 = matches!(scales.format, KvFormat::Int4 { .. });
    let (k_rows, v_rows, checked_rope) = if int4 {
        let (kr, vr) = int4_row_views(OP, k, v, k_cache)?;
        (kr, vr, None)
    } else {
        (k.clone(), v.clone(), rope)
    };
    let append = PagedAppend::check_as(
        OP,
        Some(DType::U8),
        ctx,
        (&k_rows, &v_rows, slot_mapping),
        (k_cache, v_cache),
        layout,
        checked_rope,
        check,
    )?;
    let mut geo = append.geometry();
    if let (true, Some(r)) = (int4, rope) {
        check_key_rope(OP, &r, k.shape()[0], k.shape()[2])?;
        let caches = [("k_cache", k_cache), ("v_cache", v_cache)];
        distinct(OP, r.positions, &caches)?;
        geo.rope = RopeLaunch::of(Some(r.table), Some(r.positions), check);
    }
    then(geo)
}
