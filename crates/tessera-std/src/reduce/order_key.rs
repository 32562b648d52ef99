//! The order-preserving 32-bit key of a float: unsigned comparison of keys is the order of
//! the values, with −0 equal to +0 and every NaN one key above +∞ (NaN counts as the
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

/// The same key on the host, for tests of the kernels' order.
pub fn order_key_host(v: f32) -> u32 {
    if v.is_nan() {
        return u32::MAX;
    }
    let bits = if v == 0.0 { 0 } else { v.to_bits() };
    if bits >= 0x8000_0000 {
        !bits
    } else {
        bits | 0x8000_0000
    }
}

#[cfg(test)]
mod tests {
    use super::order_key_host;

    #[test]
    fn keys_order_like_the_values() {
        let vals = [
            f32::NEG_INFINITY,
            -3.3e38,
            -1.0,
            -1e-40,
            0.0,
            1e-40,
            1.0,
            3.3e38,
            f32::INFINITY,
        ];
        for w in vals.windows(2) {
            assert!(order_key_host(w[0]) < order_key_host(w[1]), "{w:?}");
        }
        assert_eq!(order_key_host(-0.0), order_key_host(0.0));
        assert_eq!(order_key_host(f32::NAN), u32::MAX);
        assert_eq!(order_key_host(-f32::NAN), u32::MAX);
    }
}
