//! The fast Walsh–Hadamard transform of long rows (n = 2^k, 1024 ≤ n ≤ 32768) with a
//! single trip through threadgroup memory. Thread `t` of a row loads `epl` consecutive
//! elements (whole 16-byte runs) and runs the butterflies of the index's low `reg_bits`
//! bits in registers and of the next `lane_bits` through `simd_shuffle_xor`. The
//! remaining `column_bits` bits (at most `reg_bits`) are the high bits of the index: the
//! row, read as `2^column_bits` rows of `span` columns, has the rest of its transform
//! down each column. The threads write their registers to threadgroup memory once, read
//! back `epl / 2^column_bits` whole columns each, run those butterflies in registers and
//! store the columns straight to `out` (consecutive lanes, consecutive columns).
//!
//! Against one butterfly stage per barrier through threadgroup memory (two loads and two
//! stores an element a stage, [`super::fwht`]'s long-row path), this is one store and one
//! load an element whatever the number of bits, and one barrier. Threadgroup memory holds
//! the whole row in f32, so the layout is only taken where `4·n` bytes (times the rows a
//! threadgroup) fit the device's limit. Its addresses are swizzled (the low five bits of
//! an index XOR the five from `reg_bits` up) so that neither the row-order writes (a
//! lane's run `epl` floats from its neighbour's) nor the column reads meet bank
//! conflicts.

use crate::error::{runtime, OpError};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, Tensor};

/// The shortest row taken this way: 32 threads of 32 elements, every bit in registers.
pub const MIN_N: u32 = 1 << 10;

/// Where element `p` of a row lives in threadgroup memory.
#[func]
fn swizzled(p: u32, reg_bits: u32) -> u32 {
    p ^ ((p >> reg_bits) & 31u32)
}

/// The butterflies of `bits` index bits over a thread's `len` registers (`v[lo]`,
/// `v[lo + h]` for `h = 2^s`, `s < bits`): the low bits of a run, or of a column group.
#[func]
fn register_butterflies(mut v: Mem<f32>, len: u32, bits: u32) {
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

/// `out[r] = scale · x[r] · H_n`, each row on `n / epl` threads, `rows_per_group` rows a
/// threadgroup; threads of rows past the last hold zeros and store nothing. The body of
/// both kernels below, which differ only in the registers they are compiled for: `v`
/// holds a thread's `epl` elements, `buf` the threadgroup's rows.
#[func]
#[allow(clippy::too_many_arguments)]
fn transform_rows<T>(
    x: Mem<T>,
    mut out: Mem<T>,
    mut v: Mem<f32>,
    mut buf: Mem<f32>,
    scale: f32,
    rows: u32,
    n: u32,
    epl: u32,
    reg_bits: u32,
    lane_bits: u32,
    column_bits: u32,
    rows_per_group: u32,
) {
    let threads = n / epl;
    let tid = thread_id();
    let slot = tid / threads;
    let t = tid % threads;
    let row = group_id_x() * rows_per_group + slot;
    let active = row < rows;
    let first = select(active, row, 0u32) * n;
    for e in 0..epl {
        // Scaled first, as in `fwht`: partial sums stay in range where the result does.
        let a = load(x[first + t * epl + e]).cast::<f32>() * scale;
        store(v[e], select(active, a, 0.0f32));
    }
    register_butterflies(v, epl, reg_bits);
    for s in 0..lane_bits {
        let h = 1u32 << s;
        // The lower lane of a pair keeps a + b, the upper b − a: b ± a as one fma.
        let upper = ((simd_lane() >> s) & 1u32) == 1u32;
        let sign = select(upper, -1.0f32, 1.0f32);
        for e in 0..epl {
            let a = load(v[e]);
            let b = simd_shuffle_xor(a, h);
            store(v[e], fma(sign, a, b));
        }
    }
    let base = slot * n;
    for e in 0..epl {
        store(buf[base + swizzled(t * epl + e, reg_bits)], load(v[e]));
    }
    barrier();
    // Column c holds elements c + j·span, j < per; thread t takes columns i·threads + t.
    let per = 1u32 << column_bits;
    let span = n / per;
    for i in 0..epl / per {
        for j in 0..per {
            let p = i * threads + t + j * span;
            store(v[i * per + j], load(buf[base + swizzled(p, reg_bits)]));
        }
    }
    register_butterflies(v, epl, column_bits);
    if active {
        for i in 0..epl / per {
            for j in 0..per {
                let p = i * threads + t + j * span;
                store(out[first + p], load(v[i * per + j]).cast::<T>());
            }
        }
    }
}

/// [`transform_rows`] for threadgroups of up to 512 threads (64 registers of the row a
/// thread, 128 registers in all).
#[kernel(group_size = 512, groups_per_core = 1)]
#[allow(clippy::too_many_arguments)]
pub fn hadamard_columns_kernel<T>(
    x: Tensor<T>,
    mut out: Tensor<T>,
    scale: f32,
    rows: u32,
    #[constexpr] n: u32,
    #[constexpr] epl: u32,
    #[constexpr] reg_bits: u32,
    #[constexpr] lane_bits: u32,
    #[constexpr] column_bits: u32,
    #[constexpr] rows_per_group: u32,
) {
    let v = stack_array::<f32>(epl);
    let buf = threadgroup_array::<f32>(rows_per_group * n);
    transform_rows(
        x,
        out,
        v,
        buf,
        scale,
        rows,
        n,
        epl,
        reg_bits,
        lane_bits,
        column_bits,
        rows_per_group,
    );
}

/// [`transform_rows`] for threadgroups of up to 256 threads: rows of 32768 at 128
/// elements a thread (one lane bit instead of three), up to 255 registers a thread.
#[kernel(group_size = 256, groups_per_core = 1)]
#[allow(clippy::too_many_arguments)]
pub fn hadamard_columns_wide_kernel<T>(
    x: Tensor<T>,
    mut out: Tensor<T>,
    scale: f32,
    rows: u32,
    #[constexpr] n: u32,
    #[constexpr] epl: u32,
    #[constexpr] reg_bits: u32,
    #[constexpr] lane_bits: u32,
    #[constexpr] column_bits: u32,
    #[constexpr] rows_per_group: u32,
) {
    let v = stack_array::<f32>(epl);
    let buf = threadgroup_array::<f32>(rows_per_group * n);
    transform_rows(
        x,
        out,
        v,
        buf,
        scale,
        rows,
        n,
        epl,
        reg_bits,
        lane_bits,
        column_bits,
        rows_per_group,
    );
}

/// How a row of n = 2^k is spread over [`hadamard_columns_kernel`]'s threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnsLayout {
    pub n: u32,
    pub epl: u32,
    pub reg_bits: u32,
    pub lane_bits: u32,
    pub column_bits: u32,
    pub rows_per_group: u32,
}

/// The row length held at 128 elements a thread, on [`hadamard_columns_wide_kernel`].
pub const WIDE_N: u32 = 1 << 15;

/// Threads a threadgroup aims at: rows of fewer threads share one.
const TARGET_GROUP: u32 = 128;

/// The layout for rows of `n` values of `elem_bytes` bytes, or None where it does not
/// apply (n not a power of two in [`MIN_N`] ..= 32768, one row's `4·n` bytes over
/// `max_shared_bytes`, or rows of 32768 two-byte values: on an H100 the column kernel took
/// 382 µs for 2048 bf16 rows where the round-based kernel takes 260, while f32 rows gain
/// on it, 452 → 398 µs): 64 elements a
/// thread (32 at n = 1024, 128 at 32768), as few lane bits as leave the column bits within the
/// registers, and rows sharing a threadgroup up to 128 threads while their threadgroup
/// memory fits.
pub fn columns_layout(n: u32, elem_bytes: usize, max_shared_bytes: usize) -> Option<ColumnsLayout> {
    if !n.is_power_of_two() || !(MIN_N..=super::MAX_N as u32).contains(&n) {
        return None;
    }
    if n == WIDE_N && elem_bytes == 2 {
        return None;
    }
    let k = n.trailing_zeros();
    let reg_bits = match n {
        MIN_N => 5,
        WIDE_N => 7,
        _ => 6,
    };
    let lane_bits = k.saturating_sub(2 * reg_bits);
    let threads = n >> reg_bits;
    let row_bytes = 4 * n as usize;
    let mut rows_per_group = (TARGET_GROUP / threads).max(1);
    while rows_per_group > 1 && rows_per_group as usize * row_bytes > max_shared_bytes {
        rows_per_group /= 2;
    }
    if row_bytes > max_shared_bytes {
        return None;
    }
    Some(ColumnsLayout {
        n,
        epl: 1 << reg_bits,
        reg_bits,
        lane_bits,
        column_bits: k - reg_bits - lane_bits,
        rows_per_group,
    })
}

impl ColumnsLayout {
    /// Threads of one row.
    pub fn threads(&self) -> u32 {
        self.n / self.epl
    }

    /// The kernel's constexprs, in order.
    pub fn consts(&self) -> [u32; 6] {
        [
            self.n,
            self.epl,
            self.reg_bits,
            self.lane_bits,
            self.column_bits,
            self.rows_per_group,
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
    l: ColumnsLayout,
) -> Result<(), OpError> {
    let group = l.threads() * l.rows_per_group;
    let grid = [rows.div_ceil(l.rows_per_group), 1, 1];
    if l.n == WIDE_N {
        hadamard_columns_wide_kernel::launch(
            ctx,
            hadamard_columns_wide_kernel::Args {
                x,
                out,
                scale,
                rows,
            },
            hadamard_columns_wide_kernel::Consts {
                n: l.n,
                epl: l.epl,
                reg_bits: l.reg_bits,
                lane_bits: l.lane_bits,
                column_bits: l.column_bits,
                rows_per_group: l.rows_per_group,
            },
        )
        .grid(grid)
        .group_size(group)
        .run()
    } else {
        hadamard_columns_kernel::launch(
            ctx,
            hadamard_columns_kernel::Args {
                x,
                out,
                scale,
                rows,
            },
            hadamard_columns_kernel::Consts {
                n: l.n,
                epl: l.epl,
                reg_bits: l.reg_bits,
                lane_bits: l.lane_bits,
                column_bits: l.column_bits,
                rows_per_group: l.rows_per_group,
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
    use super::*;

    #[test]
    fn every_bit_is_covered_once_and_fits() {
        for limit in [32 * 1024, 227 * 1024] {
            for k in 10..=15 {
                let n = 1u32 << k;
                let Some(l) = columns_layout(n, 4, limit) else {
                    assert!(
                        4 * n as usize > limit,
                        "n = {n} fits {limit} but has no layout"
                    );
                    continue;
                };
                assert_eq!(l.reg_bits + l.lane_bits + l.column_bits, k);
                assert!(l.column_bits <= l.reg_bits && l.reg_bits >= 5 && l.lane_bits <= 5);
                let most = if n == WIDE_N { 256 } else { 512 };
                assert!(l.threads() >= 32 && l.threads() * l.rows_per_group <= most);
                assert!((l.rows_per_group * n * 4) as usize <= limit);
            }
        }
        assert!(columns_layout(512, 4, 1 << 20).is_none());
        assert!(columns_layout(3 << 10, 4, 1 << 20).is_none());
        assert!(columns_layout(1 << 16, 4, 1 << 20).is_none());
        assert!(columns_layout(1 << 14, 4, 32 * 1024).is_none());
        assert!(columns_layout(WIDE_N, 2, 1 << 20).is_none());
        assert!(columns_layout(WIDE_N >> 1, 2, 1 << 20).is_some());
    }
}
