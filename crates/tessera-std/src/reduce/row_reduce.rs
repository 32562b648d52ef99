//! `row_reduce`: the sum, mean, max or min of each row of `x [rows…, n]` into f32 `[rows…]`,
//! f32 accumulation. The output is f32 whatever the input dtype: a sum of a long bf16 row
//! is not a bf16 (cast it after where one is wanted).
//!
//! Bandwidth-shaped: a thread reads whole 16-byte runs (`vec` elements) where `n` is a
//! multiple of `vec`, element by element otherwise, several runs at once (all loaded
//! before any is added) where the rows are long enough. A row is one threadgroup; when there
//! are few long rows, each row is split over several threadgroups writing a partial each
//! into the caller's [`RowSplitWorkspace`], and a second kernel combines them.
//!
//! Non-finite values: NaN anywhere in a row makes its result NaN (max and min too, unlike
//! `fmaxf`); ±∞ follow IEEE (a sum of +∞ and −∞ is NaN). A sum whose f32 running total
//! overflows while the true sum is finite takes a copy accumulated at 2⁻⁶⁴ scale instead,
//! so a finite result is never lost to the order of the additions; a mean is taken from
//! that copy the same way.

use super::float_rows;
use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_is, shape_is};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "row_reduce";

/// What `row_reduce` computes per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    Sum,
    Mean,
    Max,
    Min,
}

impl Reduction {
    pub const NAMES: [&'static str; 4] = ["sum", "mean", "max", "min"];

    pub fn from_name(name: &str) -> Option<Reduction> {
        Some(match name {
            "sum" => Reduction::Sum,
            "mean" => Reduction::Mean,
            "max" => Reduction::Max,
            "min" => Reduction::Min,
            _ => return None,
        })
    }

    /// The kernels' constexpr code.
    fn code(self) -> u32 {
        match self {
            Reduction::Sum => SUM,
            Reduction::Mean => MEAN,
            Reduction::Max => MAX,
            Reduction::Min => MIN,
        }
    }
}

const SUM: u32 = 0;
const MEAN: u32 = 1;
const MAX: u32 = 2;
const MIN: u32 = 3;

/// A row's result from its two accumulators: for a sum or mean the plain and the 2⁻⁶⁴-scaled
/// sums (the plain one unless it overflowed), for max/min the extreme and the sum of the
/// NaNs seen (0, or NaN).
#[func]
pub fn finish(op: u32, a: f32, b: f32, n: u32) -> f32 {
    let finite = !is_nan(a) && !is_inf(a);
    let count = n.cast::<f32>();
    let sum = select(finite, a, b * 1.844_674_4e19f32);
    let mean = select(finite, a / count, b / count * 1.844_674_4e19f32);
    select(op == 0u32, sum, select(op == 1u32, mean, a + b))
}

/// Threadgroup `group_id_x()` reduces part `group_id_x() % splits` (`seg` runs of `vec`
/// elements) of row `group_id_x() / splits` of `x` (`nv` runs a row). A thread loads `per`
/// runs, a threadgroup apart, into registers before it adds any (several 16-byte loads in
/// flight a thread); runs past the part read as the reduction's identity. With one part it
/// writes the row's result to `out`; with several, its two accumulators to
/// `partial[2·group_id_x()..]` for [`row_reduce_combine_kernel`].
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn row_reduce_kernel<T>(
    x: Tensor<T>,
    mut out: Tensor<f32>,
    mut partial: Tensor<f32>,
    nv: u32,
    seg: u32,
    splits: u32,
    n: u32,
    #[constexpr] op: u32,
    #[constexpr] vec: u32,
    #[constexpr] per: u32,
) {
    let row = group_id_x() / splits;
    let start = (group_id_x() % splits) * seg;
    let end = min(start + seg, nv);
    let base = row * nv;
    let identity = select(
        op == 2u32,
        neg_infinity(),
        select(op == 3u32, infinity(), 0.0f32),
    );
    let mut a = identity;
    let mut b = 0.0f32;
    let held = stack_array::<f32>(per * vec);
    for j0 in range(start + thread_id(), end, group_size() * per) {
        for u in 0..per {
            let j = j0 + u * group_size();
            let inside = j < end;
            let at = (base + select(inside, j, j0)) * vec;
            for e in 0..vec {
                let v = load(x[at + e]).cast::<f32>();
                store(held[u * vec + e], select(inside, v, identity));
            }
        }
        for i in 0..per * vec {
            let v = load(held[i]);
            if op == 2u32 {
                a = max(a, v);
                b += select(is_nan(v), v, 0.0f32);
            } else if op == 3u32 {
                a = min(a, v);
                b += select(is_nan(v), v, 0.0f32);
            } else {
                a += v;
                b += v * 5.421_011e-20f32;
            }
        }
    }
    let ga = select(
        op == 2u32,
        group_max(a),
        select(op == 3u32, group_min(a), group_sum(a)),
    );
    let gb = group_sum(b);
    if thread_id() == 0u32 {
        if splits == 1u32 {
            store(out[row], finish(op, ga, gb, n));
        } else {
            store(partial[2u32 * group_id_x()], ga);
            store(partial[2u32 * group_id_x() + 1u32], gb);
        }
    }
}

/// `out[r]` from the `splits` partials of row `r` that [`row_reduce_kernel`] wrote.
#[kernel]
pub fn row_reduce_combine_kernel(
    partial: Tensor<f32>,
    mut out: Tensor<f32>,
    splits: u32,
    n: u32,
    #[constexpr] op: u32,
) {
    let row = group_id_x();
    let mut a = select(
        op == 2u32,
        neg_infinity(),
        select(op == 3u32, infinity(), 0.0f32),
    );
    let mut b = 0.0f32;
    for s in range(thread_id(), splits, group_size()) {
        let at = 2u32 * (row * splits + s);
        let pa = load(partial[at]);
        if op == 2u32 {
            a = max(a, pa);
        } else if op == 3u32 {
            a = min(a, pa);
        } else {
            a += pa;
        }
        b += load(partial[at + 1u32]);
    }
    let ga = select(
        op == 2u32,
        group_max(a),
        select(op == 3u32, group_min(a), group_sum(a)),
    );
    let gb = group_sum(b);
    if thread_id() == 0u32 {
        store(out[row], finish(op, ga, gb, n));
    }
}

/// Elements of a row below which a row is never split.
const SPLIT_MIN: usize = 1 << 15;
/// Elements each part of a split row reads, at least.
const PART: usize = 1 << 14;
/// Threadgroups a split call aims for (enough to fill a large GPU twice over).
const TARGET_GROUPS: usize = 512;

/// How many threadgroups each row of `rows` rows of `n` takes: 1, or for few long rows
/// enough parts (each at least [`PART`] elements) to give about [`TARGET_GROUPS`] in all.
pub fn splits_for(rows: usize, n: usize) -> usize {
    if n < SPLIT_MIN || rows >= TARGET_GROUPS / 2 {
        return 1;
    }
    (TARGET_GROUPS / rows).clamp(1, n / PART).min(1024)
}

/// The partials a split `row_reduce` or `cumsum` writes: two f32 per part of every row. Made once
/// for a shape (outside any captured graph) and passed to every call on rows that fit it.
pub struct RowSplitWorkspace {
    partials: Tensor,
}

impl RowSplitWorkspace {
    /// The workspace for rows of `x_shape` (`[rows…, n]`).
    pub fn new(ctx: &Context, x_shape: &[usize]) -> Result<RowSplitWorkspace, OpError> {
        let n = x_shape.last().copied().unwrap_or(1);
        let rows: usize = x_shape[..x_shape.len().saturating_sub(1)].iter().product();
        let len = 2 * rows.max(1) * splits_for(rows.max(1), n);
        let partials = ctx.zeros(DType::F32, &[len]).map_err(runtime(OP))?;
        Ok(RowSplitWorkspace { partials })
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.partials.len() * 4
    }

    pub(crate) fn partials(&self) -> &Tensor {
        &self.partials
    }

    /// The parts each of `rows` rows of `n` takes, once the workspace is known to hold
    /// their partials.
    pub(crate) fn splits_checked(
        &self,
        op: &'static str,
        rows: u32,
        n: u32,
    ) -> Result<u32, OpError> {
        let splits = splits_for(rows as usize, n as usize) as u32;
        let need = 2 * rows as usize * splits as usize;
        if splits > 1 && self.partials.len() < need {
            return Err(OpError::invalid(
                op,
                format!(
                    "the workspace holds {} partials, this call needs {need}: make it with \
                     RowSplitWorkspace::new for this shape",
                    self.partials.len()
                ),
            ));
        }
        Ok(splits)
    }
}

/// Threads for `runs` accesses: one each, a power of two from 32 to 1024.
fn group_for(runs: u32) -> u32 {
    runs.next_power_of_two().clamp(32, 1024)
}

/// Runs a thread of [`row_reduce_kernel`] loads before adding: four (64 bytes in flight a
/// thread) where a part has enough runs to keep a simdgroup busy, else one.
pub const RUNS_IN_FLIGHT: u32 = 4;

/// The runs a thread holds at once for parts of `seg` runs.
pub fn runs_per_thread(seg: u32) -> u32 {
    if seg >= 32 * RUNS_IN_FLIGHT {
        RUNS_IN_FLIGHT
    } else {
        1
    }
}

/// The sum, mean, max or min of each row of `x [rows…, n]` (f32, f16 or bf16) into f32
/// `out [rows…]` (`[1]` for a 1-D x). `ws` is a [`RowSplitWorkspace`] made for a shape
/// with at least these rows and this n.
pub fn row_reduce(
    ctx: &Context,
    x: &Tensor,
    reduction: Reduction,
    ws: &RowSplitWorkspace,
    out: &Tensor,
) -> Result<(), OpError> {
    let (rows, n) = float_rows(OP, x)?;
    distinct_named(OP, "out", out, &[("x", x)])?;
    dtype_is(OP, "out", out, DType::F32)?;
    shape_is(OP, "out", out, &super::per_row_shape(x.shape()))?;
    let splits = ws.splits_checked(OP, rows, n)?;
    let wide = (16 / x.dtype().size_bytes().max(1)) as u32;
    let vec = if n.is_multiple_of(wide) { wide } else { 1 };
    let nv = n / vec;
    let seg = nv.div_ceil(splits);
    let op = reduction.code();
    let per = runs_per_thread(seg);
    row_reduce_kernel::launch(
        ctx,
        row_reduce_kernel::Args {
            x,
            out,
            partial: &ws.partials,
            nv,
            seg,
            splits,
            n,
        },
        row_reduce_kernel::Consts { op, vec, per },
    )
    .grid([rows * splits, 1, 1])
    .group_size(group_for(seg.div_ceil(per)))
    .run()
    .map_err(runtime(OP))?;
    if splits == 1 {
        return Ok(());
    }
    row_reduce_combine_kernel::launch(
        ctx,
        row_reduce_combine_kernel::Args {
            partial: &ws.partials,
            out,
            splits,
            n,
        },
        row_reduce_combine_kernel::Consts { op },
    )
    .grid([rows, 1, 1])
    .group_size(group_for(splits))
    .run()
    .map_err(runtime(OP))
}

#[cfg(test)]
mod tests {
    use super::splits_for;

    #[test]
    fn only_few_long_rows_split() {
        assert_eq!(splits_for(4096, 4096), 1);
        assert_eq!(splits_for(1, 1000), 1);
        assert_eq!(splits_for(1, 1 << 24), 512);
        assert_eq!(splits_for(4, 1 << 16), 4);
        assert_eq!(splits_for(300, 1 << 20), 1);
    }
}
