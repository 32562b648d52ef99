//! Cases of `moe_qgemm` and `moe_qgemm_silu_mul`: experts quantized on the host by the
//! quant family's reference (MLX's bytes; the experts with no rows get NaN scales, so
//! reading one fails the case) over unbalanced experts (0, 1 and 17 rows, rows past a
//! tile), every width and group size, N off the tile and K = 64t + 32, f16 and bf16,
//! against x times the dequantized weights rounded to x's dtype in f64; a rejection of
//! offsets out of order; the specialisations; Qwen3-30B-A3B's expert MLP in 4 bits (group
//! 64) at a 4096-token prefill.

use super::gemm::{ends_of, schedule_of};
use super::*;
use crate::decl::ParamValues;
use crate::elementwise::reference::round_to;
use crate::matmul::tiled::MATMUL_DTYPES;
use crate::moe::qgemm::{moe_qgemm, moe_qgemm_kernel, moe_qgemm_silu_mul, QGEMM_SHAPES};
use crate::moe::qgemv::AffineExperts;
use crate::quant::AFFINE_BITS;
use crate::testing::{accuracy, compare};
use std::collections::BTreeMap;

fn op_name(gated: bool) -> &'static str {
    if gated {
        "moe_qgemm_silu_mul"
    } else {
        "moe_qgemm"
    }
}

fn correct(
    dtype: DType,
    counts: &'static [usize],
    (n, k): (usize, usize),
    (bits, group): (u32, u32),
    gated: bool,
) -> Case {
    Case {
        op: op_name(gated),
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("counts={counts:?} N={n} K={k} bits={bits} group={group}"),
        run: Box::new(move |ctx, rng| {
            let experts = counts.len();
            let rows: usize = counts.iter().sum();
            let ends = ends_of(counts);
            let (_, schedule) = schedule_of(ctx, &ends, rows)?;
            let (x, xv) = random_tensor(ctx, rng, dtype, &[rows, k], -1.0, 1.0)?;
            let wrows = if gated { 2 * n } else { n };
            let group_len = group as usize;
            let (_, wv) = random_tensor(ctx, rng, dtype, &[experts * wrows, k], -0.2, 0.2)?;
            let mut q = crate::quant::reference::quantize(&wv, bits, group_len, dtype);
            let per = wrows * (k / group_len);
            for e in (0..experts).filter(|&e| counts[e] == 0) {
                q.scales[e * per..(e + 1) * per].fill(f64::NAN);
            }
            let words = k * bits as usize / 32;
            let (packed, _) = upload(ctx, DType::U32, &q.packed, &[experts, wrows, words])?;
            let (scales, _) = upload(ctx, dtype, &q.scales, &[experts, wrows, k / group_len])?;
            let (biases, _) = upload(ctx, dtype, &q.biases, &[experts, wrows, k / group_len])?;
            let w = AffineExperts {
                packed: &packed,
                scales: &scales,
                biases: &biases,
                bits,
                group_size: group,
            };
            let y = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
            if gated {
                moe_qgemm_silu_mul(ctx, &x, &w, &schedule, &y).map_err(err)?;
            } else {
                moe_qgemm(ctx, &x, &w, &schedule, &y).map_err(err)?;
            }
            let wq: Vec<f64> = reference::affine_weights(
                &q.packed,
                &q.scales,
                &q.biases,
                (experts * wrows, k),
                bits,
                group_len,
            )
            .into_iter()
            .map(|v| round_to(dtype, v))
            .collect();
            let want = reference::grouped_gemm(&xv, &wq, &ends, (rows, n, k), gated);
            compare(
                &y.to_f64_vec().map_err(err)?,
                &want,
                accuracy(op_name(gated), dtype)?,
            )
        }),
    }
}

const UNBALANCED: &[usize] = &[0, 1, 17, 0, 70, 3];

fn cases_of(gated: bool) -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in MATMUL_DTYPES {
        v.push(correct(dtype, UNBALANCED, (40, 96), (4, 32), gated));
        v.push(correct(dtype, &[65, 0, 64], (17, 128), (8, 128), gated));
    }
    for (i, bits) in AFFINE_BITS.into_iter().enumerate() {
        let group = [32, 64, 128][i % 3];
        v.push(correct(
            DType::BF16,
            &[5, 0, 30],
            (9, 128),
            (bits, group),
            gated,
        ));
    }
    // Enough rows an expert for CUDA's 128-row tiles, and more than one 128-column tile.
    v.push(correct(
        DType::BF16,
        &[150, 0, 50],
        (140, 64),
        (4, 64),
        gated,
    ));
    v.push(decreasing_offsets(gated));
    v
}

/// A declared call whose offsets decrease: refused on the device, y untouched.
fn decreasing_offsets(gated: bool) -> Case {
    let op = op_name(gated);
    rejection(
        op,
        "offsets decreasing",
        "invalid `offsets`: offsets[1] = 3 is below offsets[0] = 12",
        move |ctx| {
            let decl = crate::find_op(op).ok_or("no declaration")?;
            let (experts, rows, n, k) = (3, 20, 8, 64);
            let wrows = if gated { 2 * n } else { n };
            let mut inputs = BTreeMap::new();
            inputs.insert("x".to_string(), zeros(ctx, DType::BF16, &[rows, k])?);
            let packed = zeros(ctx, DType::U32, &[experts, wrows, k * 4 / 32])?;
            inputs.insert("packed".to_string(), packed);
            for name in ["scales", "biases"] {
                let t = zeros(ctx, DType::BF16, &[experts, wrows, k / 64])?;
                inputs.insert(name.to_string(), t);
            }
            let (offsets, _) = upload(ctx, DType::U32, &[12.0, 3.0, 20.0], &[experts])?;
            inputs.insert("offsets".to_string(), offsets);
            let y = ctx.full_nan(DType::BF16, &[rows, n]).map_err(err)?;
            let mut outputs = BTreeMap::new();
            outputs.insert("y".to_string(), y.clone());
            let c = ctx.clone();
            Ok((
                y,
                Box::new(move || {
                    let params = ParamValues::parse(decl, &[])
                        .map_err(|e| crate::OpError::invalid(op, e))?;
                    decl.invoke(&c, &inputs, &outputs, &params)
                }) as Refused,
            ))
        },
    )
}

pub(crate) fn qgemm_cases() -> Vec<Case> {
    cases_of(false)
}

pub(crate) fn qgemm_silu_mul_cases() -> Vec<Case> {
    cases_of(true)
}

pub(crate) fn qgemm_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in MATMUL_DTYPES {
        for (wg, nb, stages) in QGEMM_SHAPES {
            for bits in AFFINE_BITS {
                for gated in [0, 1] {
                    v.push(crate::testing::kernel_use(
                        &moe_qgemm_kernel::DEF,
                        dt,
                        &[wg, nb, stages, bits, gated],
                    ));
                }
            }
        }
    }
    v
}

/// Qwen3-30B-A3B's expert MLP in 4 bits, group 64, bf16, at a 4096-token prefill (32768
/// rows over 128 experts, a seeded router-like routing): the gate/up projection with
/// SiLU·mul or the down projection, the schedule built before timing; no f64 reference
/// at this size (the cases check the kernel).
fn benches_of(gated: bool) -> Vec<BenchCase> {
    let (experts, top_k, hidden, width) = QWEN3_MOE;
    let (tokens, bits, group) = (4096, 4u32, 64usize);
    let dtype = DType::BF16;
    let (n, k) = if gated {
        (width, hidden)
    } else {
        (hidden, width)
    };
    let wrows = if gated { 2 * n } else { n };
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
    let weights = experts * wrows * (k * bits as usize / 8 + 2 * (k / group) * dtype.size_bytes());
    let bytes = (rows * k + rows * n) * dtype.size_bytes() + weights;
    vec![BenchCase {
        op: op_name(gated),
        kernel: "moe_qgemm_kernel",
        dtype,
        shape: format!("R={rows} E={experts} N={n} K={k} bits={bits} group={group}"),
        bytes: bytes as u64,
        flops: (2 * rows * wrows * k) as u64,
        quick: false,
        prepare: Box::new(move |ctx, rng| {
            let (_, schedule) = schedule_of(ctx, &ends, rows)?;
            let (x, _) = random_tensor(ctx, rng, dtype, &[rows, k], -1.0, 1.0)?;
            let words = k * bits as usize / 32;
            let groups = k / group;
            let (packed, _) = random_tensor(
                ctx,
                rng,
                DType::U32,
                &[experts, wrows, words],
                0.0,
                4294967295.0,
            )?;
            let (scales, _) =
                random_tensor(ctx, rng, dtype, &[experts, wrows, groups], 0.001, 0.01)?;
            let (biases, _) =
                random_tensor(ctx, rng, dtype, &[experts, wrows, groups], -0.05, 0.0)?;
            let y = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok(PreparedBench {
                launch: Box::new(move || {
                    let w = AffineExperts {
                        packed: &packed,
                        scales: &scales,
                        biases: &biases,
                        bits,
                        group_size: group as u32,
                    };
                    if gated {
                        moe_qgemm_silu_mul(&c, &x, &w, &schedule, &o).map_err(err)
                    } else {
                        moe_qgemm(&c, &x, &w, &schedule, &o).map_err(err)
                    }
                }),
                output: y,
                reference: Vec::new(),
            })
        }),
    }]
}

pub(crate) fn qgemm_benches() -> Vec<BenchCase> {
    benches_of(false)
}

pub(crate) fn qgemm_silu_mul_benches() -> Vec<BenchCase> {
    benches_of(true)
}
