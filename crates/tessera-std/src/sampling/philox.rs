//! Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC11), the
//! counter-based generator behind every random draw of the sampling family: the same
//! (key, counter) gives the same four words on every backend, because it is only 32-bit
//! integer arithmetic (wrapping multiplies, xors). The DSL form has no 32×32→64 multiply,
//! so the high word is built from 16-bit halves. [`philox4x32_10`] is the host form the
//! references and tests use; `philox_kernel` runs the DSL form for the known-answer test.

use tessera_macros::{func, kernel};

/// The round multipliers and the Weyl key increments of Philox4x32.
pub const PHILOX_M0: u32 = 0xD251_1F53;
pub const PHILOX_M1: u32 = 0xCD9E_8D57;
pub const PHILOX_W0: u32 = 0x9E37_79B9;
pub const PHILOX_W1: u32 = 0xBB67_AE85;

/// The four output words of Philox4x32-10 for `counter` under `key`, on the host.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(PHILOX_W0), k[1].wrapping_add(PHILOX_W1)];
        }
        let p0 = u64::from(PHILOX_M0) * u64::from(c[0]);
        let p1 = u64::from(PHILOX_M1) * u64::from(c[2]);
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c
}

/// The uniform in `[0, 1)` a sampling row draws: the top 24 bits of the first word of
/// Philox4x32-10 at counter `(offset, 0, 0, 0)` under key `seed`, times 2⁻²⁴ (exact in f32).
pub fn philox_uniform_host(seed: [u32; 2], offset: u32) -> f32 {
    let w = philox4x32_10([offset, 0, 0, 0], seed);
    (w[0] >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// The high 32 bits of the 64-bit product `a·b`, from 16-bit halves (every partial
/// product and sum fits u32 or carries explicitly).
#[func]
pub fn mul_hi(a: u32, b: u32) -> u32 {
    let a_lo = a & 65535u32;
    let a_hi = a >> 16u32;
    let b_lo = b & 65535u32;
    let b_hi = b >> 16u32;
    let ll = a_lo * b_lo;
    let lh = a_lo * b_hi;
    let hl = a_hi * b_lo;
    let hh = a_hi * b_hi;
    // The middle column: the high half of ll plus the low halves of lh and hl (< 3·2¹⁶).
    let mid = (ll >> 16u32) + (lh & 65535u32) + (hl & 65535u32);
    hh + (lh >> 16u32) + (hl >> 16u32) + (mid >> 16u32)
}

/// Philox4x32-10 of counter `(c0, c1, c2, c3)` under key `(k0, k1)`: the four words.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn philox(c0: u32, c1: u32, c2: u32, c3: u32, k0: u32, k1: u32) -> (u32, u32, u32, u32) {
    let mut x0 = c0;
    let mut x1 = c1;
    let mut x2 = c2;
    let mut x3 = c3;
    let mut key0 = k0;
    let mut key1 = k1;
    for round in 0..10u32 {
        if round > 0u32 {
            key0 += 2654435769u32;
            key1 += 3144134277u32;
        }
        let hi0 = mul_hi(3528531795u32, x0);
        let lo0 = 3528531795u32 * x0;
        let hi1 = mul_hi(3449720151u32, x2);
        let lo1 = 3449720151u32 * x2;
        let n0 = hi1 ^ x1 ^ key0;
        let n2 = hi0 ^ x3 ^ key1;
        x0 = n0;
        x1 = lo1;
        x2 = n2;
        x3 = lo0;
    }
    (x0, x1, x2, x3)
}

/// The row's uniform in `[0, 1)`: the DSL form of [`philox_uniform_host`].
#[func]
pub fn philox_uniform(k0: u32, k1: u32, offset: u32) -> f32 {
    let (w0, _w1, _w2, _w3) = philox(offset, 0u32, 0u32, 0u32, k0, k1);
    (w0 >> 8u32).cast::<f32>() * 5.960_464_5e-8f32
}

/// Philox4x32-10 of `counters[4i..4i+4]` under `keys[2i..2i+2]` into `words[4i..4i+4]`,
/// one thread per block: the known-answer test of the DSL form on every backend.
#[kernel]
pub fn philox_kernel(counters: Tensor<u32>, keys: Tensor<u32>, mut words: Tensor<u32>, n: u32) {
    let i = global_id();
    if i < n {
        let (w0, w1, w2, w3) = philox(
            load(counters[4 * i]),
            load(counters[4 * i + 1]),
            load(counters[4 * i + 2]),
            load(counters[4 * i + 3]),
            load(keys[2 * i]),
            load(keys[2 * i + 1]),
        );
        store(words[4 * i], w0);
        store(words[4 * i + 1], w1);
        store(words[4 * i + 2], w2);
        store(words[4 * i + 3], w3);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's published known answers for philox4x32 with 10 rounds (kat_vectors).
    pub(crate) const KNOWN_ANSWERS: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
        (
            [0; 4],
            [0; 2],
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
        ),
        (
            [u32::MAX; 4],
            [u32::MAX; 2],
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
        ),
        (
            [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            [0xa409_3822, 0x299f_31d0],
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
        ),
    ];

    #[test]
    fn host_philox_gives_the_published_known_answers() {
        for (counter, key, want) in KNOWN_ANSWERS {
            assert_eq!(philox4x32_10(counter, key), want, "counter {counter:x?}");
        }
    }

    #[test]
    fn host_uniform_is_in_the_unit_interval() {
        for offset in 0..1000 {
            let u = philox_uniform_host([offset, 7], offset);
            assert!((0.0..1.0).contains(&u), "{u}");
        }
    }
}
