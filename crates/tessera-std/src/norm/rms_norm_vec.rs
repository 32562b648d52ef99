//! RMSNorm with whole 16-byte accesses: each thread holds `epl` elements of a row as
//! `epl / vec` runs of `vec` (one, two or four 16-byte loads in flight per thread), the runs
//! one threadgroup-width (or row-segment-width) apart (`spread_offset`), so each load of a
//! simdgroup covers one contiguous span. Rows of at least 32 accesses take one threadgroup
//! each (`rms_norm_vec_kernel`); shorter rows (head_dim-sized) take `n/epl` lanes each,
//! several rows to a threadgroup, reduced with shuffles (`rms_norm_rows_kernel`). The
//! dispatching `rms_norm` picks these where the row length allows.

use super::rms_inv::{rms_inv, tiny_square};
use super::rms_norm::check_row_norm;
use crate::error::{runtime, OpError};
use crate::float_range::f32_range;
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

/// One row per threadgroup of `n / epl` threads, `epl / vec` accesses of `vec` consecutive
/// elements each. A thread's accesses sit one threadgroup-width apart (`n · vec / epl`
/// elements), so each load instruction of a simdgroup covers one contiguous span.
#[kernel]
pub fn rms_norm_vec_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    mut out: Tensor<T>,
    eps: f32,
    #[constexpr] n: u32,
    #[constexpr] epl: u32,
    #[constexpr] vec: u32,
) {
    let lane_col = thread_id() * vec;
    let row = group_id_x() * n;
    let xs = stack_array::<f32>(epl);
    let mut ssq = 0.0f32;
    let mut tiny = 0.0f32;
    for e in 0..epl {
        let v = load(x[row + lane_col + spread_offset(e, n, epl, vec)]).cast::<f32>();
        store(xs[e], v);
        ssq += v * v;
        tiny += tiny_square(v);
    }
    // The plain and the overflow-free sum (see rms_inv) in one reduction; f16 squares
    // cannot overflow f32, so its kernel reduces the plain sum alone.
    let inv = rms_inv(ssq, tiny, f32_range(x), eps, n);
    for e in 0..epl {
        let off = spread_offset(e, n, epl, vec);
        let y = load(xs[e]) * inv * load(w[lane_col + off]).cast::<f32>();
        store(out[row + lane_col + off], y.cast::<T>());
    }
}

/// Where a thread's element `e` lies from its first one (at `thread_id() · vec`) when its
/// `epl` elements are `epl / vec` runs of `vec`, one threadgroup-width (`n · vec / epl`)
/// apart. A constant once `e` is: it stays the outermost term of an index, where the
/// vectoriser finds it.
#[func]
pub fn spread_offset(e: u32, n: u32, epl: u32, vec: u32) -> u32 {
    (e / vec) * (n / epl * vec) + e % vec
}

/// Rows of `n = 2^lg · epl` elements, `2^lg <= 32` lanes each holding `epl` elements in
/// runs of `vec` (`spread_offset` over the row), `group_size / 2^lg` rows to a
/// threadgroup; `rows` bounds the last threadgroup.
#[kernel]
pub fn rms_norm_rows_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    mut out: Tensor<T>,
    eps: f32,
    rows: u32,
    #[constexpr] n: u32,
    #[constexpr] epl: u32,
    #[constexpr] vec: u32,
    #[constexpr] lg: u32,
) {
    let lanes = n / epl;
    let row = group_id_x() * (group_size() / lanes) + thread_id() / lanes;
    let inside = row < rows;
    let col = (thread_id() % lanes) * vec;
    let base = select(inside, row, 0) * n + col;
    let xs = stack_array::<f32>(epl);
    let mut ssq = 0.0f32;
    for e in 0..epl {
        let v = load(x[base + spread_offset(e, n, epl, vec)]).cast::<f32>();
        store(xs[e], v);
        ssq += v * v;
    }
    for s in 0..lg {
        ssq += simd_shuffle_xor(ssq, (lanes / 2) >> s);
    }
    let mut inv = rsqrt(ssq / n.cast::<f32>() + eps);
    // The overflow-free sum (see rms_inv) from the registers, only in a simdgroup where
    // some row's plain sum overflowed; its rows differ, so each selects its own.
    let wide = f32_range(x);
    if wide && simd_any(ssq > 3.402_823_5e38) {
        let mut tiny = 0.0f32;
        for e in 0..epl {
            tiny += tiny_square(load(xs[e]));
        }
        for s in 0..lg {
            tiny += simd_shuffle_xor(tiny, (lanes / 2) >> s);
        }
        let scaled = rsqrt(tiny / n.cast::<f32>()) * 8.271_806e-25;
        inv = select(ssq > 3.402_823_5e38, scaled, inv);
    }
    if inside {
        for e in 0..epl {
            let off = spread_offset(e, n, epl, vec);
            let y = load(xs[e]) * inv * load(w[col + off]).cast::<f32>();
            store(out[base + off], y.cast::<T>());
        }
    }
}

/// Threads per threadgroup of the multi-row layout.
const ROWS_GROUP: u32 = 128;

/// The layout `rms_norm_vec` uses for rows of `n` in `dtype`, or `None` where `n` is not
/// a whole number of 16-byte accesses fitting one threadgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VecLayout {
    /// One row per threadgroup of `threads`, `epl` elements each in 16-byte runs of `vec`.
    Row { epl: u32, vec: u32, threads: u32 },
    /// `2^lg` lanes per row, `epl` elements each in runs of `vec`, several rows per
    /// threadgroup.
    Rows { epl: u32, vec: u32, lg: u32 },
}

pub fn vec_layout(dtype: DType, n: u32) -> Option<VecLayout> {
    let vec = (16 / dtype.size_bytes().max(1)) as u32;
    if n == 0 || !n.is_multiple_of(vec) {
        return None;
    }
    let accesses = n / vec;
    if accesses <= 32 {
        // Rows of 16 or more accesses take two per lane (H200, 32768×128 bf16: 6.16 →
        // 5.54 µs), so each lane has two 16-byte loads in flight.
        let per_lane = if accesses >= 16 { 2 } else { 1 };
        return accesses.is_power_of_two().then(|| VecLayout::Rows {
            epl: per_lane * vec,
            vec,
            lg: (accesses / per_lane).trailing_zeros(),
        });
    }
    // Two accesses per thread where that still leaves at least 128 threads: more bytes in
    // flight per thread, fewer threads to reduce over. Four for 2-byte rows that would
    // otherwise take more than 256 threads (H200, 4096×8192 bf16: 35.2 → 34.8 µs; f32
    // rows measured fastest at two).
    let accesses_per_thread =
        if dtype.size_bytes() == 2 && accesses > 512 && accesses.is_multiple_of(4) {
            4
        } else if accesses.is_multiple_of(2) && accesses / 2 >= 128 {
            2
        } else {
            1
        };
    let epl = accesses_per_thread * vec;
    let threads = n / epl;
    (threads.is_multiple_of(32) && threads <= 1024).then_some(VecLayout::Row { epl, vec, threads })
}

/// RMSNorm with 16-byte accesses: `n` a multiple of 16 bytes' worth of elements, either at
/// most 32 accesses (a power of two) or a multiple of 32 accesses up to 1024 threads.
pub fn rms_norm_vec(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    eps: f32,
) -> Result<(), OpError> {
    const OP: &str = "rms_norm_vec";
    let (rows, n) = check_row_norm(OP, x, w, out, eps)?;
    let layout = vec_layout(x.dtype(), n).ok_or_else(|| {
        OpError::invalid(
            OP,
            format!(
                "the row length n = {n} is not a layout of 16-byte accesses ({} elements of {}: \
                 a power of two up to 32 of them, or a multiple of 32 up to 1024 threads); use \
                 rms_norm for any length",
                16 / x.dtype().size_bytes().max(1),
                x.dtype().name()
            ),
        )
    })?;
    match layout {
        VecLayout::Row { epl, vec, threads } => rms_norm_vec_kernel::launch(
            ctx,
            rms_norm_vec_kernel::Args { x, w, out, eps },
            rms_norm_vec_kernel::Consts { n, epl, vec },
        )
        .grid([rows, 1, 1])
        .group_size(threads)
        .run()
        .map_err(runtime(OP)),
        VecLayout::Rows { epl, vec, lg } => {
            let per_group = ROWS_GROUP >> lg;
            rms_norm_rows_kernel::launch(
                ctx,
                rms_norm_rows_kernel::Args {
                    x,
                    w,
                    out,
                    eps,
                    rows,
                },
                rms_norm_rows_kernel::Consts { n, epl, vec, lg },
            )
            .grid([rows.div_ceil(per_group).max(1), 1, 1])
            .group_size(ROWS_GROUP)
            .run()
            .map_err(runtime(OP))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_take_whole_16_byte_accesses() {
        assert_eq!(
            vec_layout(DType::BF16, 4096),
            Some(VecLayout::Row {
                epl: 16,
                vec: 8,
                threads: 256
            })
        );
        assert_eq!(
            vec_layout(DType::F32, 4096),
            Some(VecLayout::Row {
                epl: 8,
                vec: 4,
                threads: 512
            })
        );
        assert_eq!(
            vec_layout(DType::BF16, 128),
            Some(VecLayout::Rows {
                epl: 16,
                vec: 8,
                lg: 3
            })
        );
        assert_eq!(
            vec_layout(DType::F16, 8192),
            Some(VecLayout::Row {
                epl: 32,
                vec: 8,
                threads: 256
            })
        );
        assert_eq!(
            vec_layout(DType::F32, 8192),
            Some(VecLayout::Row {
                epl: 8,
                vec: 4,
                threads: 1024
            })
        );
        assert_eq!(vec_layout(DType::BF16, 3000), None);
        assert_eq!(vec_layout(DType::BF16, 8 * 48), None);
    }
}
