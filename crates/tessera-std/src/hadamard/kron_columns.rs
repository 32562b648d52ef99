//! The Hadamard transform of rows of n = m·p (m = 12, 20, 28; p = 2^k) with a single trip
//! through threadgroup memory, the order of [`super::columns`] applied to
//! `H_m ⊗ H_p = (H_m ⊗ I)(I ⊗ H_p)`, whose factors commute.
//!
//! Thread `t` of a row loads elements `t·epl .. t·epl + epl` of each of the m sub-rows
//! (m·epl registers) and runs, on every sub-row alike, the butterflies of the low
//! `reg_bits` bits of the sub-row index in registers and of the next `lane_bits` through
//! `simd_shuffle_xor`. It then mixes its m sub-rows by H_m (signs from threadgroup
//! memory, where the threadgroup wrote them from the construction), writing each result
//! straight to threadgroup memory in row order. After the one barrier, the row is read as
//! `m·span` columns of `2^column_bits` elements (element `j` of column `(c, i)` at
//! `c·p + i + j·span`), each thread takes whole columns into registers, runs the last
//! bits' butterflies there and stores the columns to `out`.
//!
//! Against [`super::kron`] (a barrier and two loads and two stores an element per
//! simdgroup bit, in rounds of a few registers) this is one store and one load an element
//! and two barriers. The row's f32 copy and the m² signs must fit the device's
//! threadgroup memory.

use super::kron::{base_entry, KronLayout};
use crate::error::{runtime, OpError};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, Tensor};

/// The butterflies of `bits` index bits over a thread's `len` registers, in groups of
/// `2^bits` consecutive registers.
#[func]
fn grouped_butterflies(mut v: Mem<f32>, len: u32, bits: u32) {
    for s in 0..bits {
        let h = 1u32 << s;
        for pair in 0..len / 2u32 {
            let lo = (pair / h) * 2u32 * h + pair % h;
            let a = load(v[lo]);
            let b = load(v[lo + h]);
            store(v[lo], a + b);
            store(v[lo + h], a - b);
        }
    }
}

/// `out[r] = scale · (H_m ⊗ H_p) · x[r]`, one row a threadgroup of `p / epl` threads: the
/// body of both kernels below, which differ only in the registers they are compiled for.
/// `v` holds a thread's m·epl elements, `acc` one sub-row's epl sums, `signs` H_m and
/// `buf` the row.
#[func]
#[allow(clippy::too_many_arguments)]
fn transform_kron_row<T>(
    x: Mem<T>,
    mut out: Mem<T>,
    mut v: Mem<f32>,
    mut acc: Mem<f32>,
    mut signs: Mem<f32>,
    mut buf: Mem<f32>,
    scale: f32,
    m: u32,
    q: u32,
    residues: u32,
    p: u32,
    epl: u32,
    reg_bits: u32,
    lane_bits: u32,
    column_bits: u32,
) {
    let threads = p / epl;
    let regs = m * epl;
    let t = thread_id();
    let first = group_id_x() * m * p;
    for i in range(t, m * m, threads) {
        store(signs[i], base_entry(i / m, i % m, m, q, residues));
    }
    // Register c·epl + e holds element t·epl + e of sub-row c, scaled first (as fwht).
    for c in 0..m {
        for e in 0..epl {
            let a = load(x[first + c * p + t * epl + e]).cast::<f32>() * scale;
            store(v[c * epl + e], a);
        }
    }
    grouped_butterflies(v, regs, reg_bits);
    for s in 0..lane_bits {
        let h = 1u32 << s;
        // The lower lane of a pair keeps a + b, the upper b − a: b ± a as one fma.
        let upper = ((simd_lane() >> s) & 1u32) == 1u32;
        let sign = select(upper, -1.0f32, 1.0f32);
        for c in 0..m {
            for e in 0..epl {
                let a = load(v[c * epl + e]);
                let b = simd_shuffle_xor(a, h);
                store(v[c * epl + e], fma(sign, a, b));
            }
        }
    }
    barrier();
    // Sub-row r of the mixed row is Σ_c H_m[r][c] · sub-row c, written in row order.
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
            store(buf[r * p + t * epl + e], load(acc[e]));
        }
    }
    barrier();
    // Column g = c·span + i (sub-row c): elements c·p + i + j·span; thread t takes
    // columns g = k·threads + t.
    let per = 1u32 << column_bits;
    let span = p / per;
    for k in 0..regs / per {
        let g = k * threads + t;
        let at = (g / span) * p + g % span;
        for j in 0..per {
            store(v[k * per + j], load(buf[at + j * span]));
        }
    }
    grouped_butterflies(v, regs, column_bits);
    for k in 0..regs / per {
        let g = k * threads + t;
        let at = (g / span) * p + g % span;
        for j in 0..per {
            store(out[first + at + j * span], load(v[k * per + j]).cast::<T>());
        }
    }
}

/// [`transform_kron_row`] for two 256-thread groups a core: 128 registers a thread, m·epl
/// ≤ 64 of them the row's.
#[kernel(group_size = 256, groups_per_core = 2)]
#[allow(clippy::too_many_arguments)]
pub fn hadamard_kron_columns_kernel<T>(
    x: Tensor<T>,
    mut out: Tensor<T>,
    scale: f32,
    #[constexpr] m: u32,
    #[constexpr] q: u32,
    #[constexpr] residues: u32,
    #[constexpr] p: u32,
    #[constexpr] epl: u32,
    #[constexpr] reg_bits: u32,
    #[constexpr] lane_bits: u32,
    #[constexpr] column_bits: u32,
) {
    let v = stack_array::<f32>(m * epl);
    let acc = stack_array::<f32>(epl);
    let signs = threadgroup_array::<f32>(m * m);
    let buf = threadgroup_array::<f32>(m * p);
    transform_kron_row(
        x,
        out,
        v,
        acc,
        signs,
        buf,
        scale,
        m,
        q,
        residues,
        p,
        epl,
        reg_bits,
        lane_bits,
        column_bits,
    );
}

/// [`transform_kron_row`] for two 128-thread groups a core: up to 255 registers a thread,
/// m·epl ≤ 128 of them the row's (fewer lane bits at the same occupancy).
#[kernel(group_size = 128, groups_per_core = 2)]
#[allow(clippy::too_many_arguments)]
pub fn hadamard_kron_columns_wide_kernel<T>(
    x: Tensor<T>,
    mut out: Tensor<T>,
    scale: f32,
    #[constexpr] m: u32,
    #[constexpr] q: u32,
    #[constexpr] residues: u32,
    #[constexpr] p: u32,
    #[constexpr] epl: u32,
    #[constexpr] reg_bits: u32,
    #[constexpr] lane_bits: u32,
    #[constexpr] column_bits: u32,
) {
    let v = stack_array::<f32>(m * epl);
    let acc = stack_array::<f32>(epl);
    let signs = threadgroup_array::<f32>(m * m);
    let buf = threadgroup_array::<f32>(m * p);
    transform_kron_row(
        x,
        out,
        v,
        acc,
        signs,
        buf,
        scale,
        m,
        q,
        residues,
        p,
        epl,
        reg_bits,
        lane_bits,
        column_bits,
    );
}

/// How a row of n = m·p is spread over the threads of [`hadamard_kron_columns_kernel`] or
/// its wide twin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KronColumnsLayout {
    pub base: KronLayout,
    pub epl: u32,
    pub reg_bits: u32,
    pub lane_bits: u32,
    pub column_bits: u32,
}

/// Registers of the row a thread at most: on [`hadamard_kron_columns_kernel`] (up to 256
/// threads), and on [`hadamard_kron_columns_wide_kernel`] (up to [`WIDE_THREADS`]).
const MAX_REGS: u32 = 64;
const MAX_WIDE_REGS: u32 = 128;
/// The most threads a row on the wide kernel.
pub const WIDE_THREADS: u32 = 128;

/// The layout for the base `l` (from [`super::kron::kron_layout`]), or None where it does
/// not apply: fewer than 32 threads a row, or the row and the signs over
/// `max_shared_bytes`. `epl` elements of each sub-row a thread (a power of two, 32 to 256
/// threads a row) with at most five lane bits and as many column bits as divide the m·epl
/// registers; the largest `epl` (fewest shuffles) within 64 registers, or 128 at up to 128
/// threads a row. Rows of 12·2048, 20·1024 and 28·1024 need more and stay on
/// [`super::kron`].
pub fn kron_columns_layout(l: KronLayout, max_shared_bytes: usize) -> Option<KronColumnsLayout> {
    let (m, p) = (l.m, l.p);
    if 4 * (m * p + m * m) as usize > max_shared_bytes {
        return None;
    }
    let k = p.trailing_zeros();
    let fits = |epl: u32| {
        if epl > p {
            return None;
        }
        let threads = p / epl;
        let reg_bits = epl.trailing_zeros();
        // m is four times an odd number: 2^(reg_bits + 2) is the largest power of two
        // dividing m·epl.
        let column_bits = (reg_bits + 2).min(k - reg_bits);
        let lane_bits = k - reg_bits - column_bits;
        let ok = (32..=256).contains(&threads) && lane_bits <= 5;
        ok.then_some(KronColumnsLayout {
            base: l,
            epl,
            reg_bits,
            lane_bits,
            column_bits,
        })
    };
    [8, 4, 2, 1]
        .into_iter()
        .filter(|&e| m * e <= MAX_REGS || (m * e <= MAX_WIDE_REGS && p / e <= WIDE_THREADS))
        .find_map(fits)
}

impl KronColumnsLayout {
    /// Whether it runs on [`hadamard_kron_columns_wide_kernel`].
    pub fn wide(&self) -> bool {
        self.base.m * self.epl > MAX_REGS
    }

    /// The kernel's constexprs, in order.
    pub fn consts(&self) -> [u32; 8] {
        [
            self.base.m,
            self.base.q,
            self.base.residues,
            self.base.p,
            self.epl,
            self.reg_bits,
            self.lane_bits,
            self.column_bits,
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
    l: KronColumnsLayout,
) -> Result<(), OpError> {
    let (grid, group) = ([rows, 1, 1], l.base.p / l.epl);
    if l.wide() {
        hadamard_kron_columns_wide_kernel::launch(
            ctx,
            hadamard_kron_columns_wide_kernel::Args { x, out, scale },
            hadamard_kron_columns_wide_kernel::Consts {
                m: l.base.m,
                q: l.base.q,
                residues: l.base.residues,
                p: l.base.p,
                epl: l.epl,
                reg_bits: l.reg_bits,
                lane_bits: l.lane_bits,
                column_bits: l.column_bits,
            },
        )
        .grid(grid)
        .group_size(group)
        .run()
    } else {
        hadamard_kron_columns_kernel::launch(
            ctx,
            hadamard_kron_columns_kernel::Args { x, out, scale },
            hadamard_kron_columns_kernel::Consts {
                m: l.base.m,
                q: l.base.q,
                residues: l.base.residues,
                p: l.base.p,
                epl: l.epl,
                reg_bits: l.reg_bits,
                lane_bits: l.lane_bits,
                column_bits: l.column_bits,
            },
        )
        .grid(grid)
        .group_size(group)
        .run()
    }
    .map_err(runtime(super::fwht::OP))
}

#[cfg(test)]
mod tests {
    use super::super::kron::{kron_layout, max_sub_row, BASES};
    use super::*;

    #[test]
    fn layouts_cover_every_bit_and_fit() {
        let mut taken = 0;
        for (m, _) in BASES {
            for k in 0..=max_sub_row(m).trailing_zeros() {
                let base = kron_layout(m << k).expect("supported");
                let Some(l) = kron_columns_layout(base, 227 * 1024) else {
                    // Below a simdgroup a row, or past 64 registers at 256 threads.
                    let expected = base.p < 32 || m * base.p > 16384;
                    assert!(expected, "{m}·2^{k} has no layout");
                    continue;
                };
                taken += 1;
                assert_eq!(l.reg_bits + l.lane_bits + l.column_bits, k, "{m}·2^{k}");
                let threads = l.base.p / l.epl;
                let most = if l.wide() { MAX_WIDE_REGS } else { MAX_REGS };
                assert!(l.lane_bits <= 5 && m * l.epl <= most);
                assert!(!l.wide() || threads <= WIDE_THREADS);
                assert!((m * l.epl).is_multiple_of(1 << l.column_bits));
                assert!((32..=256).contains(&(l.base.p / l.epl)));
                if kron_columns_layout(base, 32 * 1024).is_some() {
                    assert!(4 * (m << k) + 4 * m * m <= 32 * 1024);
                }
            }
        }
        assert!(taken >= 12);
        for n in [5120, 12288, 14336] {
            let base = kron_layout(n).expect("supported");
            assert!(kron_columns_layout(base, 227 * 1024).is_some(), "n = {n}");
        }
    }
}
