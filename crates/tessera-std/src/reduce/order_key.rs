//! The order-preserving 32-bit key of a float: unsigned comparison of keys is the order of
//! the values, with −0 equal to +0 and every NaN the largest key, above +∞ (NaN counts as the
//! largest value, as `torch.topk` and `torch.sort` place it). `topk` selects on it.

use tessera_macros::func;

/// The key of `v`: a positive float's bits with the sign bit set, a negative float's bits
/// inverted, so unsigned order is float order; −0 maps to +0's key, any NaN to `u32::MAX`.
#[func]
pub fn order_key(v: f32) -> u32 {
    let bits = select(v == 0.0f32, 0u32, v.bitcast::<u32>());
    let key = select(bits >= 0x8000_0000u32, !bits, bits | 0x8000_0000u32);
    select(is_nan(v), 0xffff_ffffu32, key)
}
