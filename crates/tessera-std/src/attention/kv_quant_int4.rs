//! The int4 quantized cache ([`KvFormat::Int4`]): two codes a byte, a scale per group of
//! dims, and the row quantizer `kv_quant_append` runs for it.
//!
//! **Layout.** The pools are u8 of the float pools' shape with head_dim halved (NHD
//! `[blocks, page_size, n_kv_heads, head_dim / 2]`, HND `[blocks, n_kv_heads, page_size,
//! head_dim / 2]`), so the page walk is the float one and a row is `head_dim / 2` bytes.
//! Element `2i` of a row is the low nibble of byte `i`, element `2i + 1` its high nibble:
//! memory order, as GPTQ packs consecutive rows into a word from the low bits up, so a
//! lane that reads consecutive elements reads consecutive bytes and takes each pair with
//! a mask and a shift, no reordering of the query (llama.cpp's Q4_0 puts elements `i` and
//! `i + 16` of a block in one byte, which suits its dot product of two packed blocks, not
//! a float query). The scale pools are the pools' shape without the last dim, then the
//! row's `head_dim / group` groups (`[blocks, page_size, n_kv_heads, groups]`, HND
//! `[blocks, n_kv_heads, page_size, groups]`): group `g` of row `r` at `r · groups + g`.
//! `group` (a [`KvFormat::Int4`] field) is a power of two of at least 32 that divides
//! head_dim: 32 or 64 as the int4 caches of serving engines group, or head_dim for one
//! scale a row. head_dim is 64, 128, 256 or 512, the dims at which the decode kernel
//! gives each lane its own 16 consecutive elements of one group.
//!
//! **Codes.** Symmetric: the nibble is a two's-complement int4 in `−7..=7` (−8 unused),
//! the value `code · scale` with scale `amax / 7` over the group. Keys and values have no
//! consistent offset per token and head for a zero point to remove (RoPE'd keys swing
//! both ways), while symmetric codes keep the zero byte a zero row, the dequantization
//! one multiply, and the K scale a factor of the group's partial dot product. `x / scale`
//! is computed in f32 and rounded to nearest, ties to even, saturating at ±7; a group of
//! zeros gets scale 0 and zero codes. A row holding NaN or ±inf anywhere gets NaN in every
//! group's scale and zero codes, the int8 rule: attention over that key is NaN, never a
//! finite value.

use super::kv_quant::{row_element, KvFormat};
use crate::error::OpError;
use crate::quant::affine::round_half_even;
use tessera_macros::func;

/// The head dims an int4 cache takes.
pub const INT4_HEAD_DIMS: [usize; 4] = [64, 128, 256, 512];

/// The value (`−7..=7`, −8 for a nibble no append writes) of the nibble of `byte` that
/// `high` (0 or 1) picks: the low one holds the even element.
#[func]
pub fn kv_nibble_value(byte: u32, high: u32) -> f32 {
    let n = (byte >> (high * 4u32)) & 15u32;
    (n ^ 8u32).cast::<f32>() - 8.0f32
}

/// The nibble of `x` (already divided by its group's scale): nearest, ties to even,
/// saturating at ±7, two's complement.
#[func]
pub fn kv_nibble_of(x: f32) -> u32 {
    let r = round_half_even(min(max(x, -7.0f32), 7.0f32));
    (r + 16.0f32).cast::<u32>() & 15u32
}

/// Quantizes row `src` of `x` (`head_dim` elements, one simdgroup, lane `lane`), rotated
/// at `pos` when `rot_dim` is not 0, into packed row `dst` of `codes` (`head_dim / 2`
/// bytes) and its `head_dim / group` scales into `scales` from `dst · groups` when
/// `write`; every lane takes part in the reductions whatever `write` is.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn quantize_row_int4<T>(
    x: Mem<T>,
    mut codes: Mem<u8>,
    mut scales: Mem<f32>,
    src: u32,
    dst: u32,
    lane: u32,
    write: bool,
    head_dim: u32,
    group: u32,
    pos: f32,
    inv_freq: Mem<f32>,
    mscale: f32,
    rot_dim: u32,
    neox: u32,
) {
    let head = src * head_dim;
    let mut bad = 0.0f32;
    for e in range(lane, head_dim, 32) {
        let a = abs(row_element(
            x, head, e, pos, inv_freq, mscale, rot_dim, neox,
        ));
        // NaN and inf both fail this.
        bad = select(a <= 3.4028235e38f32, bad, 1.0f32);
    }
    let bad = simd_max(bad);
    let groups = head_dim / group;
    for g in range(0u32, groups, 1u32) {
        let lo = g * group;
        let mut amax = 0.0f32;
        for e in range(lo + lane, lo + group, 32) {
            let a = abs(row_element(
                x, head, e, pos, inv_freq, mscale, rot_dim, neox,
            ));
            amax = select(a > amax, a, amax);
        }
        let amax = simd_max(amax);
        let s = select(bad > 0.0f32, 0x7FC0_0000u32.bitcast::<f32>(), amax / 7.0f32);
        if write {
            if lane == 0 {
                store(scales[dst * groups + g], s);
            }
            // False for a zero scale and a NaN one: their codes are 0.
            let coded = s > 0.0f32;
            for b in range(lo / 2 + lane, (lo + group) / 2, 32) {
                let even = row_element(x, head, 2 * b, pos, inv_freq, mscale, rot_dim, neox);
                let odd = row_element(x, head, 2 * b + 1, pos, inv_freq, mscale, rot_dim, neox);
                let pair = kv_nibble_of(even / s) | (kv_nibble_of(odd / s) << 4u32);
                let code = select(coded, pair, 0u32);
                store(codes[dst * (head_dim / 2) + b], code.cast::<u8>());
            }
        }
    }
}

/// Checks an int4 cache of code pool shape `cache`: a head_dim (twice the last dim) of
/// [`INT4_HEAD_DIMS`], and `group` a power of two of at least 32 that divides it.
pub(crate) fn check_int4(op: &'static str, group: u32, cache: &[usize]) -> Result<(), OpError> {
    let Some(&row) = cache.last() else {
        return Ok(());
    };
    let head_dim = KvFormat::Int4 { group }.head_dim_of(row);
    if !INT4_HEAD_DIMS.contains(&head_dim) {
        return Err(OpError::invalid(
            op,
            format!(
                "an int4 cache packs two codes a byte: `k_cache`'s last dim {row} makes head_dim {head_dim}, expected one of {INT4_HEAD_DIMS:?} (a last dim of half that)"
            ),
        ));
    }
    let g = group as usize;
    if g < 32 || !g.is_power_of_two() || !head_dim.is_multiple_of(g) {
        return Err(OpError::invalid(
            op,
            format!(
                "the int4 group must be a power of two of at least 32 that divides head_dim {head_dim}, got {group}"
            ),
        ));
    }
    Ok(())
}

/// For an int4 append, `k` and `v` as the shared append checks compare them with the
/// pools: views of their first `head_dim / 2` columns' worth of elements shaped `[tokens,
/// n_kv_heads, head_dim / 2]`, so the pools' last dim (bytes) meets k's (elements halved).
/// Refuses a pool whose last dim is not head_dim / 2, and v of another shape than k; k of
/// another rank is passed through for the shared checks to refuse.
pub(crate) fn int4_row_views(
    op: &'static str,
    k: &tessera_runtime::Tensor,
    v: &tessera_runtime::Tensor,
    k_cache: &tessera_runtime::Tensor,
) -> Result<(tessera_runtime::Tensor, tessera_runtime::Tensor), OpError> {
    let (&[tokens, heads, head_dim], Some(&row)) = (k.shape(), k_cache.shape().last()) else {
        return Ok((k.clone(), v.clone()));
    };
    crate::validate::shape_is(op, "v", v, k.shape())?;
    if row * 2 != head_dim {
        return Err(OpError::invalid(
            op,
            format!(
                "an int4 cache row is head_dim / 2 = {} bytes (two codes a byte), but `k_cache`'s last dim is {row}",
                head_dim / 2
            ),
        ));
    }
    let shape = [tokens, heads, row];
    let view = |t: &tessera_runtime::Tensor| t.view(&shape).map_err(crate::error::runtime(op));
    Ok((view(k)?, view(v)?))
}
