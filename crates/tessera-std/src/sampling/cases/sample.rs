//! Cases of `sample`: tokens against the f64 reference draw (where f32 rounding cannot
//! decide otherwise) at tiny, odd and Qwen-sized vocabularies; exactness (top-k 1 and a
//! tiny top-p are the argmax); no token outside the survivors over many seeds; sampled
//! frequencies against the filtered distribution (chi-square); non-finite rows; the graph
//! form's −1 for bad parameters; rejections of parameters out of range; benches.

use super::*;
use crate::sampling::philox::philox_kernel;
use crate::sampling::reference::{draw, filtered, RowParams};
use crate::sampling::sample::{sample, sample_kernel, SamplingParams, OP};
use crate::sampling::sample_split::{sample_combine_kernel, sample_slice_kernel, sample_split};
use crate::sampling::split::SamplingWorkspace;

/// Per-row parameters on the host, as the op's tensors hold them.
#[derive(Clone, Debug, Default)]
pub(crate) struct HostParams {
    pub temperature: Vec<f64>,
    pub top_k: Vec<f64>,
    pub top_p: Vec<f64>,
    pub min_p: Vec<f64>,
    pub seed: Vec<f64>,
    pub offset: Vec<f64>,
}

impl HostParams {
    /// `batch` rows of `row`'s parameters.
    pub(crate) fn repeat(row: RowParams, batch: usize) -> HostParams {
        let mut h = HostParams::default();
        for _ in 0..batch {
            h.push(row);
        }
        h
    }

    pub(crate) fn push(&mut self, p: RowParams) {
        self.temperature.push(p.temperature);
        self.top_k.push(p.top_k as f64);
        self.top_p.push(p.top_p);
        self.min_p.push(p.min_p);
        self.seed
            .extend([f64::from(p.seed[0]), f64::from(p.seed[1])]);
        self.offset.push(f64::from(p.offset));
    }

    pub(crate) fn row(&self, r: usize) -> RowParams {
        reference::row_params(
            r,
            &self.temperature,
            &self.top_k,
            &self.top_p,
            &self.min_p,
            &self.seed,
            &self.offset,
        )
    }
}

/// The parameters as device tensors.
pub(crate) struct DeviceParams {
    pub temperature: Tensor,
    pub top_k: Tensor,
    pub top_p: Tensor,
    pub min_p: Tensor,
    pub seed: Tensor,
    pub offset: Tensor,
}

impl DeviceParams {
    pub(crate) fn new(ctx: &Context, h: &HostParams) -> Result<DeviceParams, String> {
        let b = h.temperature.len();
        Ok(DeviceParams {
            temperature: upload(ctx, DType::F32, &h.temperature, &[b])?.0,
            top_k: upload(ctx, DType::I32, &h.top_k, &[b])?.0,
            top_p: upload(ctx, DType::F32, &h.top_p, &[b])?.0,
            min_p: upload(ctx, DType::F32, &h.min_p, &[b])?.0,
            seed: upload(ctx, DType::U32, &h.seed, &[b, 2])?.0,
            offset: upload(ctx, DType::U32, &h.offset, &[b])?.0,
        })
    }

    pub(crate) fn params(&self) -> SamplingParams<'_> {
        SamplingParams {
            temperature: &self.temperature,
            top_k: &self.top_k,
            top_p: &self.top_p,
            min_p: &self.min_p,
            seed: &self.seed,
            offset: &self.offset,
        }
    }
}

/// Random parameters for `batch` rows: greedy now and then, top-k of 1, 5, 50 or off,
/// top-p off or in [0.3, 0.95), min-p off or below 0.2, random seeds and steps.
pub(crate) fn random_params(rng: &mut CaseRng, batch: usize) -> HostParams {
    let mut h = HostParams::default();
    for _ in 0..batch {
        let pick = |rng: &mut CaseRng, n: u32| rng.int(0, n);
        h.push(RowParams {
            temperature: if pick(rng, 8) == 0 {
                0.0
            } else {
                f64::from(rng.uniform(0.3, 1.5) as f32)
            },
            top_k: [0, 1, 5, 50][pick(rng, 4) as usize],
            top_p: if pick(rng, 2) == 0 {
                1.0
            } else {
                f64::from(rng.uniform(0.3, 0.95) as f32)
            },
            min_p: if pick(rng, 3) == 0 {
                f64::from(rng.uniform(0.0, 0.2) as f32)
            } else {
                0.0
            },
            seed: [rng.int(0, u32::MAX), rng.int(0, u32::MAX)],
            offset: rng.int(0, u32::MAX),
        });
    }
    h
}

/// Runs `sample` on the host logits `xv` (as `dtype`) with `h`: the tokens.
fn run(
    ctx: &Context,
    dtype: DType,
    xv: &[f64],
    vocab: usize,
    h: &HostParams,
) -> Result<Vec<i64>, String> {
    let batch = h.temperature.len();
    let (x, _) = upload(ctx, dtype, xv, &[batch, vocab])?;
    let dev = DeviceParams::new(ctx, h)?;
    let token = ctx.full_nan(DType::I32, &[batch]).map_err(err)?;
    sample(ctx, &x, &dev.params(), &token).map_err(err)?;
    Ok(token
        .to_vec::<i32>()
        .map_err(err)?
        .into_iter()
        .map(i64::from)
        .collect())
}

/// Random rows and parameters: every token equals the f64 reference draw where the
/// reference is sure (no boundary within its margin), and at least a quarter of the rows
/// are sure (a row without top-k over 151,936 tokens is rarely: each token weighs ~1e-5).
fn against_reference(dtype: DType, batch: usize, vocab: usize) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("batch={batch} vocab={vocab} random parameters"),
        run: Box::new(move |ctx, rng| {
            let (_, xv) = logits(ctx, rng, dtype, batch, vocab)?;
            let h = random_params(rng, batch);
            let got = run(ctx, dtype, &xv, vocab, &h)?;
            let mut sure = 0;
            for (r, row) in xv.chunks(vocab).enumerate() {
                let (want, is_sure) = draw(row, &h.row(r));
                if is_sure {
                    sure += 1;
                    if got[r] != want {
                        return Err(format!(
                            "row {r} ({:?}): token {}, the reference draws {want}",
                            h.row(r),
                            got[r]
                        ));
                    }
                }
            }
            if 4 * sure < batch {
                return Err(format!(
                    "only {sure} of {batch} rows were far from a boundary"
                ));
            }
            Ok(Outcome {
                checked: sure,
                note: format!("{sure} of {batch} rows sure"),
                ..Outcome::default()
            })
        }),
    }
}

/// Rows with a unique maximum: top-k 1, and a top-p of 1e-6, draw the argmax whatever the
/// seed and temperature.
fn exactness(dtype: DType) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: "top_k=1 and top_p=1e-6 are the argmax".to_string(),
        run: Box::new(move |ctx, rng| {
            let (batch, vocab) = (64, 1000);
            let (_, mut xv) = logits(ctx, rng, dtype, batch, vocab)?;
            let mut want = Vec::new();
            for row in xv.chunks_mut(vocab) {
                let at = rng.int(0, vocab as u32) as usize;
                row[at] = 5.0;
                want.push(at as i64);
            }
            let mut h = random_params(rng, batch);
            for r in 0..batch {
                if r % 2 == 0 {
                    h.top_k[r] = 1.0;
                } else {
                    h.top_k[r] = 0.0;
                    h.top_p[r] = f64::from(1e-6f32);
                }
                h.temperature[r] = f64::from(rng.uniform(0.1, 4.0) as f32);
            }
            let got = run(ctx, dtype, &xv, vocab, &h)?;
            if got != want {
                return Err(format!("tokens {got:?}, the argmax {want:?}"));
            }
            Ok(Outcome {
                checked: batch,
                ..Outcome::default()
            })
        }),
    }
}

/// One row drawn with 256 seeds: no token outside the reference's survivors of top-k 50,
/// top-p 0.8 and min-p 0.02, and more than one distinct token.
fn never_outside(dtype: DType) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: "256 seeds never leave the survivors".to_string(),
        run: Box::new(move |ctx, rng| {
            let (batch, vocab) = (256, 1000);
            let (_, row) = logits(ctx, rng, dtype, 1, vocab)?;
            let base = RowParams {
                temperature: 0.7,
                top_k: 50,
                top_p: f64::from(0.8f32),
                min_p: f64::from(0.02f32),
                seed: [0, 0],
                offset: rng.int(0, u32::MAX),
            };
            let mut h = HostParams::default();
            for s in 0..batch as u32 {
                h.push(RowParams {
                    seed: [s, 0x5eed],
                    ..base
                });
            }
            let f = filtered(&row, &base).ok_or("the reference has no distribution")?;
            if !f.sure {
                return Ok(Outcome {
                    checked: 1,
                    note: "a survivor boundary within the margin; skipped".into(),
                    ..Outcome::default()
                });
            }
            let xv: Vec<f64> = (0..batch).flat_map(|_| row.iter().copied()).collect();
            let got = run(ctx, dtype, &xv, vocab, &h)?;
            for (r, &t) in got.iter().enumerate() {
                if t < 0 || f.probs[t as usize] == 0.0 {
                    return Err(format!("seed {r} drew token {t}, outside the survivors"));
                }
            }
            let mut distinct = got.clone();
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.len() < 2 {
                return Err(format!("256 seeds all drew {distinct:?}"));
            }
            Ok(Outcome {
                checked: batch,
                note: format!("{} distinct tokens", distinct.len()),
                ..Outcome::default()
            })
        }),
    }
}

/// 4096 draws (256 seeds × 16 steps) of one 64-token row under temperature 0.8, top-k 20,
/// top-p 0.9: the chi-square of the sampled counts against the reference distribution is
/// within ten standard deviations of its mean (the seeds are fixed; a wrong temperature,
/// filter or draw puts it far outside).
fn statistics() -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(DType::F32),
        name: "4096 draws match the filtered distribution (chi-square)".to_string(),
        run: Box::new(move |ctx, rng| {
            let (batch, vocab, steps) = (256usize, 64usize, 16u32);
            let (_, row) = logits(ctx, rng, DType::F32, 1, vocab)?;
            let base = RowParams {
                temperature: f64::from(0.8f32),
                top_k: 20,
                top_p: f64::from(0.9f32),
                min_p: 0.0,
                seed: [0, 0],
                offset: 0,
            };
            let f = filtered(&row, &base).ok_or("the reference has no distribution")?;
            let xv: Vec<f64> = (0..batch).flat_map(|_| row.iter().copied()).collect();
            let mut counts = vec![0usize; vocab];
            for step in 0..steps {
                let mut h = HostParams::default();
                for s in 0..batch as u32 {
                    h.push(RowParams {
                        seed: [s, 1],
                        offset: step,
                        ..base
                    });
                }
                for t in run(ctx, DType::F32, &xv, vocab, &h)? {
                    let t = usize::try_from(t).map_err(|_| format!("token {t}"))?;
                    counts[t] += 1;
                }
            }
            let n = (batch as u32 * steps) as f64;
            let mut chi2 = 0.0;
            let mut tv = 0.0;
            let mut df = 0usize;
            for (i, &c) in counts.iter().enumerate() {
                let q = f.probs[i];
                if q == 0.0 {
                    if c > 0 && f.sure {
                        return Err(format!("token {i} drawn {c} times outside the survivors"));
                    }
                    continue;
                }
                df += 1;
                chi2 += (c as f64 - n * q).powi(2) / (n * q);
                tv += 0.5 * (c as f64 / n - q).abs();
            }
            let df = df.saturating_sub(1).max(1) as f64;
            let bound = df + 10.0 * (2.0 * df).sqrt();
            if chi2 > bound {
                return Err(format!(
                    "chi-square {chi2:.1} over {df} degrees of freedom, above {bound:.1} (TV {tv:.4})"
                ));
            }
            Ok(Outcome {
                checked: n as usize,
                note: format!("chi-square {chi2:.1}, {df} dof, TV {tv:.4}"),
                ..Outcome::default()
            })
        }),
    }
}

/// Rows holding a NaN, +∞, only −∞, and −∞ bans beside finite logits: −1, −1, −1, and a
/// token that is never a banned one.
fn non_finite(dtype: DType) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: "rows with NaN, +inf, -inf".to_string(),
        run: Box::new(move |ctx, rng| {
            let (batch, vocab) = (64, 300);
            let (_, mut xv) = logits(ctx, rng, dtype, batch, vocab)?;
            xv[17] = f64::NAN;
            xv[vocab + 40] = f64::INFINITY;
            xv[2 * vocab..3 * vocab].fill(f64::NEG_INFINITY);
            for r in 3..batch {
                for i in 0..vocab {
                    if (i + r) % 3 != 0 {
                        xv[r * vocab + i] = f64::NEG_INFINITY;
                    }
                }
            }
            let h = random_params(rng, batch);
            let got = run(ctx, dtype, &xv, vocab, &h)?;
            if got[..3] != [-1, -1, -1] {
                return Err(format!("NaN, +inf and all -inf rows gave {:?}", &got[..3]));
            }
            for (r, &t) in got.iter().enumerate().skip(3) {
                if t < 0 || !(t as usize + r).is_multiple_of(3) {
                    return Err(format!("row {r} drew {t}, a banned (-inf) token"));
                }
            }
            Ok(Outcome {
                checked: batch,
                ..Outcome::default()
            })
        }),
    }
}

/// The kernel as a graph replays it (no read-back): a row with parameters out of range
/// gets −1 and the rows beside it their reference tokens.
fn graph_form() -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(DType::BF16),
        name: "graph form: bad parameters give -1".to_string(),
        run: Box::new(move |ctx, rng| {
            let (batch, vocab) = (6, 500);
            let (x, xv) = logits(ctx, rng, DType::BF16, batch, vocab)?;
            let mut h = random_params(rng, batch);
            h.temperature[1] = -1.0;
            h.top_p[3] = 0.0;
            h.min_p[4] = 1.5;
            let dev = DeviceParams::new(ctx, &h)?;
            let token = ctx.full_nan(DType::I32, &[batch]).map_err(err)?;
            sample_kernel::launch(
                ctx,
                sample_kernel::Args {
                    logits: &x,
                    temperature: &dev.temperature,
                    top_k: &dev.top_k,
                    top_p: &dev.top_p,
                    min_p: &dev.min_p,
                    seed: &dev.seed,
                    offset: &dev.offset,
                    token: &token,
                    vocab: vocab as u32,
                    list_max: crate::sampling::survivors::LIST_MAX,
                },
            )
            .grid([batch as u32, 1, 1])
            .group_size(crate::sampling::row_group(vocab as u32))
            .run()
            .map_err(err)?;
            let got = token.to_vec::<i32>().map_err(err)?;
            for (r, row) in xv.chunks(vocab).enumerate() {
                let (want, sure) = draw(row, &h.row(r));
                let bad = [1, 3, 4].contains(&r);
                if (bad && got[r] != -1) || (sure && i64::from(got[r]) != want) {
                    return Err(format!("row {r}: token {}, expected {want}", got[r]));
                }
            }
            Ok(Outcome {
                checked: batch,
                ..Outcome::default()
            })
        }),
    }
}

/// A call whose row 1 has `set` applied: refused naming it, the tokens untouched.
fn bad_row(what: &str, reason: &'static str, set: fn(&mut HostParams)) -> Case {
    crate::testing::rejection_of(OP, what, reason, move |ctx, rng| {
        let (x, _) = logits(ctx, rng, DType::F16, 3, 50)?;
        let mut h = random_params(rng, 3);
        set(&mut h);
        let dev = DeviceParams::new(ctx, &h)?;
        let token = ctx.full_nan(DType::I32, &[3]).map_err(err)?;
        let (c, t) = (ctx.clone(), token.clone());
        Ok((
            token,
            Box::new(move || sample(&c, &x, &dev.params(), &t)) as Refused,
        ))
    })
}

pub(crate) fn sample_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for vocab in VOCABS {
            let batch = match vocab {
                1 => 4,
                151_936 => 8,
                _ => 24,
            };
            v.push(against_reference(dtype, batch, vocab));
        }
        v.push(exactness(dtype));
        v.push(never_outside(dtype));
        v.push(non_finite(dtype));
    }
    v.push(statistics());
    v.push(graph_form());
    v.extend(super::sample_split::split_cases());
    v.push(bad_row("temperature -1", "row 1: temperature = -1", |h| {
        h.temperature[1] = -1.0
    }));
    v.push(bad_row(
        "temperature NaN",
        "row 1: temperature = NaN",
        |h| h.temperature[1] = f64::NAN,
    ));
    v.push(bad_row("top_k -3", "row 1: top_k = -3", |h| {
        h.top_k[1] = -3.0
    }));
    v.push(bad_row("top_p 0", "row 1: top_p = 0", |h| h.top_p[1] = 0.0));
    v.push(bad_row("top_p 1.5", "row 1: top_p = 1.5", |h| {
        h.top_p[1] = 1.5
    }));
    v.push(bad_row("min_p 2", "row 1: min_p = 2", |h| h.min_p[1] = 2.0));
    v.push(rejection(
        OP,
        "seed [batch]",
        "`seed` must have shape",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 10])?;
            let mut h = HostParams::repeat(
                RowParams {
                    temperature: 1.0,
                    top_k: 0,
                    top_p: 1.0,
                    min_p: 0.0,
                    seed: [1, 2],
                    offset: 0,
                },
                2,
            );
            h.seed.truncate(2);
            let b = 2;
            let dev = DeviceParams {
                temperature: upload(ctx, DType::F32, &h.temperature, &[b])?.0,
                top_k: upload(ctx, DType::I32, &h.top_k, &[b])?.0,
                top_p: upload(ctx, DType::F32, &h.top_p, &[b])?.0,
                min_p: upload(ctx, DType::F32, &h.min_p, &[b])?.0,
                seed: upload(ctx, DType::U32, &h.seed, &[b])?.0,
                offset: upload(ctx, DType::U32, &h.offset, &[b])?.0,
            };
            let token = ctx.full_nan(DType::I32, &[2]).map_err(err)?;
            let (c, t) = (ctx.clone(), token.clone());
            Ok((
                token,
                Box::new(move || sample(&c, &x, &dev.params(), &t)) as Refused,
            ))
        },
    ));
    v
}

pub(crate) fn sample_kernels() -> Vec<KernelUse> {
    let mut v = per_float(&sample_kernel::DEF);
    v.extend(per_float(&sample_slice_kernel::DEF));
    v.extend(per_float(&sample_combine_kernel::DEF));
    v.push(KernelUse {
        def: &philox_kernel::DEF,
        spec: Specialization::new(vec![], vec![]),
    });
    v
}

/// Top-k 50 + top-p 0.9 at temperature 0.7 over Qwen's 151,936-token vocabulary at batch
/// 1, 32 and 256, through the split form where the device's core count picks it: the bytes
/// are the logits read once (the single-pass kernel reads them once per search step; the
/// row stays in cache at batch 1) and the tokens written.
pub(crate) fn sample_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in [DType::BF16, DType::F32] {
        for (batch, vocab, quick) in BENCH_ROWS {
            v.push(BenchCase {
                op: OP,
                kernel: "sample_kernel",
                dtype,
                shape: format!("batch={batch} vocab={vocab} top_k=50 top_p=0.9"),
                bytes: (batch * vocab * dtype.size_bytes() + 4 * batch) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = logits(ctx, rng, dtype, batch, vocab)?;
                    let mut h = HostParams::default();
                    for r in 0..batch as u32 {
                        h.push(RowParams {
                            temperature: f64::from(0.7f32),
                            top_k: 50,
                            top_p: f64::from(0.9f32),
                            min_p: 0.0,
                            seed: [r, 42],
                            offset: 7,
                        });
                    }
                    let dev = DeviceParams::new(ctx, &h)?;
                    let token = ctx.full_nan(DType::I32, &[batch]).map_err(err)?;
                    let ws = SamplingWorkspace::new(ctx, batch, vocab).map_err(err)?;
                    let (c, t) = (ctx.clone(), token.clone());
                    let reference = xv
                        .chunks(vocab)
                        .enumerate()
                        .map(|(r, row)| draw(row, &h.row(r)).0 as f64)
                        .collect();
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            sample_split(&c, &x, &dev.params(), &ws, &t).map_err(err)
                        }),
                        output: token,
                        reference,
                    })
                }),
            });
        }
    }
    v
}
