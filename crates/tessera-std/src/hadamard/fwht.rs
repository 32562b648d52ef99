//! The fast Walsh–Hadamard transform of rows of n = 2^k, one threadgroup per row, in f32.
//! Element `i` of a row is held by thread `i / epl` as its register `i % epl` (`epl`
//! consecutive elements a thread, whole 16-byte loads), so the butterflies over the low
//! bits of `i` run in registers, the next five (the lane's bits) through
//! `simd_shuffle_xor`, and the rest (the simdgroup's bits) in threadgroup memory, a slice
//! of `chunk` registers at a time so at most 32 KiB of it is used. Rows of fewer than 256
//! elements share a threadgroup. Rows of 1024 and more whose f32 copy fits the device's
//! threadgroup memory take [`super::columns`] instead (one trip through it, no barrier a
//! stage); this kernel keeps the rest (Metal's 32 KiB past n = 8192).

use super::columns::columns_layout;
use super::kron::kron_layout;
use super::kron_columns::kron_columns_layout;
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_in, dtype_is, fits_u32, rows_of, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

pub(super) const OP: &str = "hadamard";

/// The longest row: 2^15.
pub const MAX_N: usize = 1 << 15;

/// `out[r] = scale · x[r] · H_n`, each row on `n / epl` threads: one row a threadgroup,
/// or for rows of fewer than 32 threads' worth, `group_size() / (n / epl)` rows a
/// threadgroup (their lane butterflies stay within the row's lanes). Threads past the
/// last row hold zeros and store nothing. Compiled for 1024-thread groups (registers
/// capped so that one fits: a row of 32768 holds 32 f32 a thread).
#[kernel(group_size = 1024, groups_per_core = 1)]
#[allow(clippy::too_many_arguments)]
pub fn hadamard_kernel<T>(
    x: Tensor<T>,
    mut out: Tensor<T>,
    scale: f32,
    rows: u32,
    #[constexpr] n: u32,
    #[constexpr] epl: u32,
    #[constexpr] reg_bits: u32,
    #[constexpr] lane_bits: u32,
    #[constexpr] warp_bits: u32,
    #[constexpr] chunk: u32,
) {
    let threads = n / epl;
    let tid = thread_id();
    let row = group_id_x() * (group_size() / threads) + tid / threads;
    let active = row < rows;
    let first = select(active, row, 0u32) * n + (tid % threads) * epl;
    let v = stack_array::<f32>(epl);
    for e in 0..epl {
        // Scaled first: partial sums of huge rows then stay in f32's range wherever the
        // scaled result does.
        let a = load(x[first + e]).cast::<f32>() * scale;
        store(v[e], select(active, a, 0.0f32));
    }
    // Bits 0 .. reg_bits of the index: within the thread's registers.
    for s in 0..reg_bits {
        let h = 1u32 << s;
        for p in 0..epl / 2u32 {
            let lo = (p / h) * 2u32 * h + p % h;
            let a = load(v[lo]);
            let b = load(v[lo + h]);
            store(v[lo], a + b);
            store(v[lo + h], a - b);
        }
    }
    // The next lane_bits: across the lanes of the simdgroup.
    for s in 0..lane_bits {
        let h = 1u32 << s;
        let upper = ((simd_lane() >> s) & 1u32) == 1u32;
        for e in 0..epl {
            let a = load(v[e]);
            let b = simd_shuffle_xor(a, h);
            store(v[e], select(upper, b - a, a + b));
        }
    }
    // The rest: across simdgroups, through threadgroup memory, `chunk` registers a round.
    if warp_bits > 0u32 {
        let buf = threadgroup_array::<f32>(n / epl * chunk);
        for c in 0..epl / chunk {
            for e in 0..chunk {
                store(buf[tid * chunk + e], load(v[c * chunk + e]));
            }
            barrier();
            for s in 0..warp_bits {
                let h = (32u32 * chunk) << s;
                for q in 0..chunk / 2u32 {
                    let p = tid + q * threads;
                    let lo = (p / h) * 2u32 * h + p % h;
                    let a = load(buf[lo]);
                    let b = load(buf[lo + h]);
                    store(buf[lo], a + b);
                    store(buf[lo + h], a - b);
                }
                barrier();
            }
            for e in 0..chunk {
                store(v[c * chunk + e], load(buf[tid * chunk + e]));
            }
            barrier();
        }
    }
    if active {
        for e in 0..epl {
            store(out[first + e], load(v[e]).cast::<T>());
        }
    }
}

/// How a row of `n = 2^k` is spread: (elements a thread, threads in use, register bits,
/// lane bits, simdgroup bits, registers per threadgroup-memory round, threadgroup size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub epl: u32,
    pub reg_bits: u32,
    pub lane_bits: u32,
    pub warp_bits: u32,
    pub chunk: u32,
    pub group: u32,
}

/// Threads a threadgroup of rows shorter than a simdgroup's worth takes (several rows).
const SHORT_ROWS_GROUP: u32 = 128;

/// The layout for rows of `n` (a power of two up to [`MAX_N`]): eight elements a thread
/// (n/1024 past 8192); one row a threadgroup from 32 threads' worth, several below.
pub fn layout(n: u32) -> Layout {
    let epl = (n / 1024).max(n.min(8));
    let threads = n / epl;
    let lane_bits = threads.min(32).trailing_zeros();
    let warp_bits = threads.trailing_zeros() - lane_bits;
    Layout {
        epl,
        reg_bits: epl.trailing_zeros(),
        lane_bits,
        warp_bits,
        chunk: if warp_bits == 0 {
            1
        } else {
            epl.min(8192 / threads)
        },
        group: if threads >= 32 {
            threads
        } else {
            SHORT_ROWS_GROUP
        },
    }
}

/// `out = scale · x · H_n` over the last dimension of `x [rows…, n]` (f32, f16 or bf16;
/// out like x), n a power of two up to 32768; `scale` finite (1/√n makes it orthonormal).
/// For n = m·2^k (m = 12, 20, 28; n ≤ 32768) each row x becomes
/// `scale · (H_m ⊗ H_{2^k}) · x` instead ([`super::kron`]).
pub fn hadamard(ctx: &Context, x: &Tensor, scale: f32, out: &Tensor) -> Result<(), OpError> {
    dtype_in(OP, "x", x, &FLOAT_DTYPES)?;
    let (rows, n) = rows_of(OP, "x", x)?;
    fits_u32(OP, "the element count", x.len())?;
    let kron = if n.is_power_of_two() && n <= MAX_N {
        None
    } else {
        let l = u32::try_from(n).ok().and_then(kron_layout);
        Some(l.ok_or_else(|| {
            OpError::invalid(
                OP,
                format!("n = {n} must be 2^k, 12·2^k, 20·2^k or 28·2^k up to {MAX_N}"),
            )
        })?)
    };
    if !scale.is_finite() {
        return Err(OpError::invalid(
            OP,
            format!("`scale` must be finite, got {scale}"),
        ));
    }
    distinct(OP, out, &[("x", x)])?;
    dtype_is(OP, "out", out, x.dtype())?;
    shape_is(OP, "out", out, x.shape())?;
    let shared = ctx.info().max_shared_bytes;
    if let Some(l) = kron {
        if let Some(c) = kron_columns_layout(l, shared) {
            return super::kron_columns::launch(ctx, x, scale, out, rows as u32, c);
        }
        return super::kron::launch(ctx, x, scale, out, rows as u32, l);
    }
    if let Some(l) = columns_layout(n as u32, x.dtype().size_bytes(), shared) {
        return super::columns::launch(ctx, x, scale, out, rows as u32, l);
    }
    let l = layout(n as u32);
    hadamard_kernel::launch(
        ctx,
        hadamard_kernel::Args {
            x,
            out,
            scale,
            rows: rows as u32,
        },
        hadamard_kernel::Consts {
            n: n as u32,
            epl: l.epl,
            reg_bits: l.reg_bits,
            lane_bits: l.lane_bits,
            warp_bits: l.warp_bits,
            chunk: l.chunk,
        },
    )
    .grid([(rows as u32).div_ceil(l.group / (n as u32 / l.epl)), 1, 1])
    .group_size(l.group)
    .run()
    .map_err(runtime(OP))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_bit_is_covered_once() {
        for k in 0..=15 {
            let l = layout(1 << k);
            assert_eq!(l.reg_bits + l.lane_bits + l.warp_bits, k, "n = 2^{k}");
            assert!(l.group.is_multiple_of(32) && l.group <= 1024);
            if l.warp_bits > 0 {
                assert!((1u32 << k) / l.epl * l.chunk * 4 <= 32 * 1024);
                assert!(l.epl.is_multiple_of(l.chunk) && l.chunk >= 2);
            }
        }
    }
}
