//! The Hadamard transform of rows of n = m·2^k for the base orders m = 12, 20 and 28 that
//! rotated quantization needs where a width is not a power of two (QuaRot's
//! `matmul_hadU`): out = scale · (H_m ⊗ H_{2^k}) · x for each row x as a column vector,
//! out[r·2^k + j] = scale · Σ_{c,i} H_m[r][c] · H_{2^k}[j][i] · x[c·2^k + i]. H_12 and
//! H_20 are Paley's first construction for q = 11 and 19, H_28 his second for q = 13
//! (the matrices QuaRot's `get_had12`, `get_had20`, `get_had28` hold).
//!
//! A row is m sub-rows of p = 2^k. Thread `t` of a row holds elements `t·epl .. t·epl +
//! epl` of every sub-row (m·epl registers); the transform over each sub-row runs as in
//! [`super::fwht`] (registers, `simd_shuffle_xor`, threadgroup memory), then every thread
//! mixes its m sub-rows by H_m, whose ±1 entries it reads from threadgroup memory where the
//! threadgroup wrote them from the construction, and stores the m results of each column.

use crate::error::{runtime, OpError};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, Tensor};

/// The base orders and the prime of each one's Paley construction: m = q + 1 (first
/// construction) or m = 2(q + 1) (second).
pub const BASES: [(u32, u32); 3] = [(12, 11), (20, 19), (28, 13)];

/// The longest sub-row 2^k of each base, so that n = m·2^k ≤ 32768.
pub fn max_sub_row(m: u32) -> u32 {
    1 << (super::MAX_N as u32 / m).ilog2()
}

/// Entry (r, c) of H_m as ±1.0. `residues` has bit d set for every non-zero square d mod q.
/// First construction (m = q + 1): H = I + [[0, −1ᵀ], [1, Q]] with Q[i][j] = χ(i − j);
/// second (m = 2(q + 1)): with S = [[0, 1ᵀ], [1, Q]], Q[i][j] = χ(j − i),
/// H = [[S + I, S − I], [S − I, −S − I]].
#[func]
pub fn base_entry(r: u32, c: u32, m: u32, q: u32, residues: u32) -> f32 {
    let mut plus = false;
    if m == q + 1u32 {
        let square = ((residues >> ((r + q - c) % q)) & 1u32) == 1u32;
        plus = select(r == 0u32, c == 0u32, c == 0u32 || c == r || square);
    } else {
        let h = q + 1u32;
        let a = r % h;
        let b = c % h;
        let square = ((residues >> ((b + q - a) % q)) & 1u32) == 1u32;
        let s_plus = a == 0u32 || b == 0u32 || square;
        let lower_right = r >= h && c >= h;
        plus = select(a == b, r < h && c < h, select(lower_right, !s_plus, s_plus));
    }
    select(plus, 1.0f32, -1.0f32)
}

/// `out[r] = scale · (H_m ⊗ H_p) · x[r]`, each row on `p / epl` threads: one row a
/// threadgroup, or for rows of fewer than 32 threads' worth, `group_size() / (p / epl)`
/// rows a threadgroup. Threads past the last row hold zeros and store nothing.
#[kernel(group_size = 256, groups_per_core = 1)]
#[allow(clippy::too_many_arguments)]
pub fn hadamard_kron_kernel<T>(
    x: Tensor<T>,
    mut out: Tensor<T>,
    scale: f32,
    rows: u32,
    #[constexpr] m: u32,
    #[constexpr] q: u32,
    #[constexpr] residues: u32,
    #[constexpr] p: u32,
    #[constexpr] epl: u32,
    #[constexpr] reg_bits: u32,
    #[constexpr] lane_bits: u32,
    #[constexpr] warp_bits: u32,
    #[constexpr] chunk: u32,
) {
    let threads = p / epl;
    let regs = m * epl;
    let tid = thread_id();
    let row = group_id_x() * (group_size() / threads) + tid / threads;
    let active = row < rows;
    let first = select(active, row, 0u32) * m * p + (tid % threads) * epl;
    let signs = threadgroup_array::<f32>(m * m);
    for i in range(tid, m * m, group_size()) {
        store(signs[i], base_entry(i / m, i % m, m, q, residues));
    }
    // Register c·epl + e holds element t·epl + e of sub-row c, scaled first (as fwht).
    let v = stack_array::<f32>(m * epl);
    for c in 0..m {
        for e in 0..epl {
            let a = load(x[first + c * p + e]).cast::<f32>() * scale;
            store(v[c * epl + e], select(active, a, 0.0f32));
        }
    }
    // Bits 0 .. reg_bits of a sub-row's index: within each sub-row's registers.
    for c in 0..m {
        for s in 0..reg_bits {
            let h = 1u32 << s;
            for pair in 0..epl / 2u32 {
                let lo = c * epl + (pair / h) * 2u32 * h + pair % h;
                let a = load(v[lo]);
                let b = load(v[lo + h]);
                store(v[lo], a + b);
                store(v[lo + h], a - b);
            }
        }
    }
    // The next lane_bits: across the lanes of the simdgroup, every register alike (two
    // loops, each short enough to unroll, so that `v` stays in registers).
    for s in 0..lane_bits {
        let h = 1u32 << s;
        let upper = ((simd_lane() >> s) & 1u32) == 1u32;
        for c in 0..m {
            for e in 0..epl {
                let a = load(v[c * epl + e]);
                let b = simd_shuffle_xor(a, h);
                store(v[c * epl + e], select(upper, b - a, a + b));
            }
        }
    }
    // The rest: across simdgroups, through threadgroup memory, `chunk` registers a round.
    if warp_bits > 0u32 {
        let buf = threadgroup_array::<f32>(threads * chunk);
        for round in 0..regs / chunk {
            for e in 0..chunk {
                store(buf[tid * chunk + e], load(v[round * chunk + e]));
            }
            barrier();
            for s in 0..warp_bits {
                let h = (32u32 * chunk) << s;
                for k in 0..chunk / 2u32 {
                    let at = tid + k * threads;
                    let lo = (at / h) * 2u32 * h + at % h;
                    let a = load(buf[lo]);
                    let b = load(buf[lo + h]);
                    store(buf[lo], a + b);
                    store(buf[lo + h], a - b);
                }
                barrier();
            }
            for e in 0..chunk {
                store(v[round * chunk + e], load(buf[tid * chunk + e]));
            }
            barrier();
        }
    } else {
        barrier();
    }
    // Sub-row r of the result is Σ_c H_m[r][c] · sub-row c: `epl` columns at a time.
    if active {
        let acc = stack_array::<f32>(epl);
        for r in 0..m {
            for e in 0..epl {
                store(acc[e], 0.0f32);
            }
            for c in 0..m {
                let sign = load(signs[r * m + c]);
                for e in 0..epl {
                    store(acc[e], fma(sign, load(v[c * epl + e]), load(acc[e])));
                }
            }
            for e in 0..epl {
                store(out[first + r * p + e], load(acc[e]).cast::<T>());
            }
        }
    }
}

/// How rows of n = m·p are spread (see [`super::fwht::Layout`]; `epl` elements of each
/// sub-row a thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KronLayout {
    pub m: u32,
    pub q: u32,
    pub residues: u32,
    pub p: u32,
    pub epl: u32,
    pub reg_bits: u32,
    pub lane_bits: u32,
    pub warp_bits: u32,
    pub chunk: u32,
    pub group: u32,
}

/// Threads a threadgroup of rows shorter than a simdgroup's worth takes (several rows).
const SHORT_ROWS_GROUP: u32 = 128;

/// Bit d set for every non-zero square d modulo `q`.
fn squares_mod(q: u32) -> u32 {
    (1..q).fold(0, |bits, x| bits | 1 << (x * x % q))
}

/// The layout for n = m·p, or None when `n` is not 12·2^k, 20·2^k or 28·2^k up to 32768:
/// four elements of each sub-row a thread (p/256 past 1024), so at most 256 threads a row
/// and 4·m registers of the row a thread (96 at 12·2048).
pub fn kron_layout(n: u32) -> Option<KronLayout> {
    let (m, q) = BASES
        .into_iter()
        .find(|&(m, _)| n.is_multiple_of(m) && (n / m).is_power_of_two())?;
    let p = n / m;
    if p > max_sub_row(m) {
        return None;
    }
    let epl = (p / 256).max(p.min(4));
    let threads = p / epl;
    let lane_bits = threads.min(32).trailing_zeros();
    let warp_bits = threads.trailing_zeros() - lane_bits;
    Some(KronLayout {
        m,
        q,
        residues: squares_mod(q),
        p,
        epl,
        reg_bits: epl.trailing_zeros(),
        lane_bits,
        warp_bits,
        // A power of two dividing m·epl (m is four times an odd number), with the m²
        // signs at most 8192 floats (32 KiB) of threadgroup memory.
        chunk: if warp_bits == 0 {
            1
        } else {
            1 << (4 * epl).min((8192 - m * m) / threads).ilog2()
        },
        group: if threads >= 32 {
            threads
        } else {
            SHORT_ROWS_GROUP
        },
    })
}

impl KronLayout {
    /// The kernel's constexprs, in order.
    pub fn consts(&self) -> [u32; 9] {
        [
            self.m,
            self.q,
            self.residues,
            self.p,
            self.epl,
            self.reg_bits,
            self.lane_bits,
            self.warp_bits,
            self.chunk,
        ]
    }
}

/// Launches the kernel for `rows` rows of `x` (checked by the caller) laid out as `l`.
pub(super) fn launch(
    ctx: &Context,
    x: &Tensor,
    scale: f32,
    out: &Tensor,
    rows: u32,
    l: KronLayout,
) -> Result<(), OpError> {
    hadamard_kron_kernel::launch(
        ctx,
        hadamard_kron_kernel::Args {
            x,
            out,
            scale,
            rows,
        },
        hadamard_kron_kernel::Consts {
            m: l.m,
            q: l.q,
            residues: l.residues,
            p: l.p,
            epl: l.epl,
            reg_bits: l.reg_bits,
            lane_bits: l.lane_bits,
            warp_bits: l.warp_bits,
            chunk: l.chunk,
        },
    )
    .grid([rows.div_ceil(l.group / (l.p / l.epl)), 1, 1])
    .group_size(l.group)
    .run()
    .map_err(runtime(super::fwht::OP))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_cover_every_sub_row_bit_and_fit() {
        for (m, _) in BASES {
            let top = max_sub_row(m);
            assert!(m * top <= 32768 && m * 2 * top > 32768);
            for k in 0..=top.trailing_zeros() {
                let l = kron_layout(m << k).expect("supported");
                assert_eq!((l.m, l.p), (m, 1 << k));
                assert_eq!(l.reg_bits + l.lane_bits + l.warp_bits, k, "{m}·2^{k}");
                assert!(l.group.is_multiple_of(32) && l.group <= 256);
                if l.warp_bits > 0 {
                    assert!((l.p / l.epl) * l.chunk + m * m <= 8192);
                    assert!((m * l.epl).is_multiple_of(l.chunk) && l.chunk >= 2);
                }
            }
            assert!(kron_layout(m * 2 * top).is_none());
        }
        for n in [0, 1, 6, 36, 44, 60, 4096, 9 * 1024, 20 * 2048] {
            assert!(kron_layout(n).is_none(), "n = {n}");
        }
    }

    #[test]
    fn squares_are_the_quadratic_residues() {
        assert_eq!(
            squares_mod(11),
            (1 << 1) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 9)
        );
        assert_eq!(squares_mod(13).count_ones(), 6);
        assert_eq!(squares_mod(19).count_ones(), 9);
    }
}
