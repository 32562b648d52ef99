//! Cases of `moe_gemm` and `moe_gemm_silu_mul` (the weights of experts with no rows hold
//! NaN, so reading one fails the case): f16 and bf16 over unbalanced experts (0, 1 and 17
//! rows, rows past a tile, one expert with every row, random counts), N and K off the
//! tile, K down to 8, columns over several of CUDA's large tiles; the schedule compared exactly with one counted from the offsets;
//! rejections of offsets out of order or not ending at the rows (refused on the device,
//! nothing written), an aliased output and a schedule of other rows; the specialisations;
//! Qwen3-30B-A3B's expert MLP at prefills of 4096 and 512 tokens.

use super::*;
use crate::decl::ParamValues;
use crate::matmul::tiled::MATMUL_DTYPES;
use crate::moe::gemm::{moe_gemm, moe_gemm_kernel, moe_gemm_silu_mul, GEMM_SHAPES};
use crate::moe::gemm_schedule::{moe_gemm_schedule, moe_gemm_schedule_kernel, MoeGemmSchedule};
use crate::moe::permute::MoeCheck;
use crate::testing::{accuracy, compare};
use std::collections::BTreeMap;

fn op_name(gated: bool) -> &'static str {
    if gated {
        "moe_gemm_silu_mul"
    } else {
        "moe_gemm"
    }
}

/// The experts' end rows (cumulative counts), as f64.
pub(super) fn ends_of(counts: &[usize]) -> Vec<f64> {
    counts
        .iter()
        .scan(0, |at, &c| {
            *at += c;
            Some(*at as f64)
        })
        .collect()
}

/// Builds the schedule of `ends` on the device.
pub(super) fn schedule_of(
    ctx: &Context,
    ends: &[f64],
    rows: usize,
) -> Result<(Tensor, MoeGemmSchedule), String> {
    let (offsets, _) = upload(ctx, DType::U32, ends, &[ends.len()])?;
    let schedule = MoeGemmSchedule::new(ctx, ends.len(), rows).map_err(err)?;
    let check = MoeCheck::new(ctx).map_err(err)?;
    moe_gemm_schedule(ctx, &offsets, &schedule, &check).map_err(err)?;
    Ok((offsets, schedule))
}

/// How a case's experts get their rows.
#[derive(Clone, Copy, Debug)]
enum Counts {
    /// These counts.
    Fixed(&'static [usize]),
    /// `rows` rows spread at random over `experts` experts.
    Random(usize, usize),
}

impl Counts {
    fn draw(self, rng: &mut CaseRng) -> Vec<usize> {
        match self {
            Counts::Fixed(c) => c.to_vec(),
            Counts::Random(experts, rows) => {
                let mut c = vec![0; experts];
                for _ in 0..rows {
                    c[rng.int(0, experts as u32) as usize] += 1;
                }
                c
            }
        }
    }
}

fn correct(dtype: DType, counts: Counts, n: usize, k: usize, gated: bool) -> Case {
    Case {
        op: op_name(gated),
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("counts={counts:?} N={n} K={k}"),
        run: Box::new(move |ctx, rng| {
            let counts = counts.draw(rng);
            let experts = counts.len();
            let rows: usize = counts.iter().sum();
            let ends = ends_of(&counts);
            let (_, schedule) = schedule_of(ctx, &ends, rows)?;
            let (x, xv) = random_tensor(ctx, rng, dtype, &[rows, k], -1.0, 1.0)?;
            let wrows = if gated { 2 * n } else { n };
            // Weights of a trained layer's scale, so a gated output's rounding stays within
            // the tolerance (see the GEMV's cases).
            let (_, mut wv) = random_tensor(ctx, rng, dtype, &[experts, wrows, k], -0.2, 0.2)?;
            // Experts with no rows hold NaN: a tile reading one would reach y.
            for e in (0..experts).filter(|&e| counts[e] == 0) {
                wv[e * wrows * k..(e + 1) * wrows * k].fill(f64::NAN);
            }
            let (w, wv) = upload(ctx, dtype, &wv, &[experts, wrows, k])?;
            let y = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
            if gated {
                moe_gemm_silu_mul(ctx, &x, &w, &schedule, &y).map_err(err)?;
            } else {
                moe_gemm(ctx, &x, &w, &schedule, &y).map_err(err)?;
            }
            let want = reference::grouped_gemm(&xv, &wv, &ends, (rows, n, k), gated);
            compare(
                &y.to_f64_vec().map_err(err)?,
                &want,
                accuracy(op_name(gated), dtype)?,
            )
        }),
    }
}

/// Expert row counts with empty experts, one row, 17 rows and more than a 64-row tile.
const UNBALANCED: &[usize] = &[0, 1, 17, 0, 70, 3];
/// Every row in the last expert.
const ONE_EXPERT: &[usize] = &[0, 0, 0, 130];

const SHAPES: [(Counts, usize, usize); 5] = [
    (Counts::Fixed(UNBALANCED), 40, 72),
    (Counts::Fixed(ONE_EXPERT), 24, 8),
    (Counts::Random(8, 90), 33, 128),
    (Counts::Fixed(&[1]), 1, 16),
    (Counts::Fixed(&[65, 64]), 17, 64),
];

/// The schedule of `ends` as the kernel must write it: each expert's tiles of
/// `block_rows`, in expert order, then `(E, 0, 0)`.
fn schedule_reference(ends: &[f64], block_rows: usize, slots: usize) -> Vec<f64> {
    let mut v = Vec::new();
    let mut begin = 0;
    for (e, &end) in ends.iter().enumerate() {
        let end = end as usize;
        for row0 in (begin..end).step_by(block_rows) {
            v.extend([e as f64, row0 as f64, end as f64]);
        }
        begin = end;
    }
    while v.len() < 3 * slots {
        v.extend([ends.len() as f64, 0.0, 0.0]);
    }
    v
}

fn schedule_case(counts: &'static [usize]) -> Case {
    Case {
        op: "moe_gemm",
        kind: CaseKind::Correctness,
        dtype: None,
        name: format!("schedule of counts {counts:?}"),
        run: Box::new(move |ctx, _| {
            let rows: usize = counts.iter().sum();
            let ends = ends_of(counts);
            let (_, schedule) = schedule_of(ctx, &ends, rows)?;
            let want = schedule_reference(&ends, schedule.block_rows, schedule.slots());
            exact("schedule tiles", &schedule.tiles, &want)
        }),
    }
}

/// A declared call whose offsets are `ends` over `rows` rows: refused for `reason`, y
/// untouched.
fn bad_offsets(gated: bool, what: &str, ends: &'static [f64], reason: &'static str) -> Case {
    let op = op_name(gated);
    rejection(op, what, reason, move |ctx| {
        let decl = crate::find_op(op).ok_or("no declaration")?;
        let (experts, n, k) = (ends.len(), 8, 16);
        let rows = 20;
        let wrows = if gated { 2 * n } else { n };
        let mut inputs = BTreeMap::new();
        inputs.insert("x".to_string(), zeros(ctx, DType::BF16, &[rows, k])?);
        inputs.insert(
            "w".to_string(),
            zeros(ctx, DType::BF16, &[experts, wrows, k])?,
        );
        let (offsets, _) = upload(ctx, DType::U32, ends, &[experts])?;
        inputs.insert("offsets".to_string(), offsets);
        let y = ctx.full_nan(DType::BF16, &[rows, n]).map_err(err)?;
        let mut outputs = BTreeMap::new();
        outputs.insert("y".to_string(), y.clone());
        let c = ctx.clone();
        Ok((
            y,
            Box::new(move || {
                let params =
                    ParamValues::parse(decl, &[]).map_err(|e| crate::OpError::invalid(op, e))?;
                decl.invoke(&c, &inputs, &outputs, &params)
            }) as Refused,
        ))
    })
}

fn cases_of(gated: bool) -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in MATMUL_DTYPES {
        for (counts, n, k) in SHAPES {
            v.push(correct(dtype, counts, n, k, gated));
        }
    }
    // Enough rows an expert for CUDA's 128-row tiles, and more than one of its 256-column
    // (gated 128-column) tiles.
    v.push(correct(
        DType::BF16,
        Counts::Fixed(&[130, 70]),
        264,
        64,
        gated,
    ));
    let op = op_name(gated);
    v.push(bad_offsets(
        gated,
        "offsets decreasing",
        &[5.0, 12.0, 9.0, 20.0],
        "invalid `offsets`: offsets[2] = 9 is below offsets[1] = 12",
    ));
    v.push(bad_offsets(
        gated,
        "last offset short of the rows",
        &[5.0, 12.0, 19.0],
        "the last offset, offsets[2] = 19, must equal the rows of `x`, 20",
    ));
    v.push(bad_offsets(
        gated,
        "last offset past the rows",
        &[0.0, 21.0],
        "the last offset, offsets[1] = 21, must equal the rows of `x`, 20",
    ));
    // y [16, 16] is x [16, 16].
    v.push(rejection(
        op,
        "y aliases x",
        "`y` aliases `x`",
        move |ctx| {
            let (rows, n) = (16, 16);
            let wrows = if gated { 2 * n } else { n };
            let x = zeros(ctx, DType::F16, &[rows, n])?;
            let w = zeros(ctx, DType::F16, &[2, wrows, n])?;
            let schedule = MoeGemmSchedule::new(ctx, 2, rows).map_err(err)?;
            let c = ctx.clone();
            Ok((
                x.clone(),
                Box::new(move || {
                    if gated {
                        moe_gemm_silu_mul(&c, &x, &w, &schedule, &x)
                    } else {
                        moe_gemm(&c, &x, &w, &schedule, &x)
                    }
                }) as Refused,
            ))
        },
    ));
    v.push(rejection(
        op,
        "a schedule of other rows",
        "the schedule was made for 3 experts and 30 rows, the call has 3 experts and 24 rows",
        move |ctx| {
            let (rows, n, k) = (24, 8, 16);
            let wrows = if gated { 2 * n } else { n };
            let x = zeros(ctx, DType::BF16, &[rows, k])?;
            let w = zeros(ctx, DType::BF16, &[3, wrows, k])?;
            let schedule = MoeGemmSchedule::new(ctx, 3, 30).map_err(err)?;
            let y = ctx.full_nan(DType::BF16, &[rows, n]).map_err(err)?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || {
                    if gated {
                        moe_gemm_silu_mul(&c, &x, &w, &schedule, &o)
                    } else {
                        moe_gemm(&c, &x, &w, &schedule, &o)
                    }
                }) as Refused,
            ))
        },
    ));
    if !gated {
        for counts in [UNBALANCED, ONE_EXPERT, &[300, 0, 1, 64, 129]] {
            v.push(schedule_case(counts));
        }
    }
    v
}

pub(crate) fn gemm_cases() -> Vec<Case> {
    cases_of(false)
}

pub(crate) fn gemm_silu_mul_cases() -> Vec<Case> {
    cases_of(true)
}

pub(crate) fn gemm_kernels() -> Vec<KernelUse> {
    let mut v = vec![KernelUse {
        def: &moe_gemm_schedule_kernel::DEF,
        spec: tessera_ir::Specialization::new(vec![], vec![]),
    }];
    for dt in MATMUL_DTYPES {
        for (wg, nb, stages) in GEMM_SHAPES {
            for gated in [0, 1] {
                v.push(crate::testing::kernel_use(
                    &moe_gemm_kernel::DEF,
                    dt,
                    &[wg, nb, stages, gated],
                ));
            }
        }
    }
    v
}

/// Qwen3-30B-A3B's expert MLP at a prefill of 4096 and of 512 tokens (32768 and 4096 rows,
/// top-8 of 128 experts: about 256 and 32 rows an expert, the large and the small row
/// tiles on CUDA), bf16: the gate/up projection with SiLU·mul (`[128, 1536, 2048]`) or
/// the down projection (`[128, 2048, 768]`). The rows per expert are those of a seeded
/// router-like routing (distinct experts per token); the schedule is built before timing
/// (an engine builds it once per layer for both projections). The f64 reference (up to
/// 10¹¹ products) is left out: the cases check the kernel at small shapes.
fn benches_of(gated: bool) -> Vec<BenchCase> {
    let (experts, top_k, hidden, width) = QWEN3_MOE;
    let dtype = DType::BF16;
    let (n, k) = if gated {
        (width, hidden)
    } else {
        (hidden, width)
    };
    let wrows = if gated { 2 * n } else { n };
    let mut v = Vec::new();
    for tokens in [4096, 512] {
        let rows = tokens * top_k;
        let ids = routing(
            &mut CaseRng::new(0x9e11 + tokens as u64),
            tokens,
            top_k,
            experts,
            true,
        );
        let mut counts = vec![0usize; experts];
        for &e in &ids {
            counts[e as usize] += 1;
        }
        let ends = ends_of(&counts);
        let bytes = (rows * k + experts * wrows * k + rows * n) * dtype.size_bytes();
        v.push(BenchCase {
            op: op_name(gated),
            kernel: "moe_gemm_kernel",
            dtype,
            shape: format!("R={rows} E={experts} N={n} K={k}"),
            bytes: bytes as u64,
            flops: (2 * rows * wrows * k) as u64,
            quick: false,
            prepare: Box::new(move |ctx, rng| {
                let (_, schedule) = schedule_of(ctx, &ends, rows)?;
                let (x, _) = random_tensor(ctx, rng, dtype, &[rows, k], -1.0, 1.0)?;
                let (w, _) = random_tensor(ctx, rng, dtype, &[experts, wrows, k], -0.05, 0.05)?;
                let y = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
                let (c, o) = (ctx.clone(), y.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        if gated {
                            moe_gemm_silu_mul(&c, &x, &w, &schedule, &o).map_err(err)
                        } else {
                            moe_gemm(&c, &x, &w, &schedule, &o).map_err(err)
                        }
                    }),
                    output: y,
                    reference: Vec::new(),
                })
            }),
        });
    }
    v
}

pub(crate) fn gemm_benches() -> Vec<BenchCase> {
    benches_of(false)
}

pub(crate) fn gemm_silu_mul_benches() -> Vec<BenchCase> {
    benches_of(true)
}
