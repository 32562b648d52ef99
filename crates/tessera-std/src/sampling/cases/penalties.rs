//! Cases of `apply_penalties`: every float dtype at odd and Qwen-sized vocabularies with
//! random counts, prompt masks and penalties (neutral rows among them); rows whose
//! penalties are out of range refused, naming the row; benches.

use super::*;
use crate::sampling::penalties::{apply_penalties, penalties_kernel, Penalties, OP};
use crate::testing::{accuracy, compare};

/// Random penalty inputs for `batch` rows of `vocab`: counts mostly 0 (some 1 to 3), a
/// prompt mask of about one token in eight, and per-row penalties (row 0 neutral).
struct Inputs {
    counts: Vec<f64>,
    prompt: Vec<f64>,
    repetition: Vec<f64>,
    frequency: Vec<f64>,
    presence: Vec<f64>,
}

fn inputs(rng: &mut CaseRng, batch: usize, vocab: usize) -> Inputs {
    let n = batch * vocab;
    let counts = (0..n)
        .map(|_| match rng.int(0, 10) {
            0 => f64::from(rng.int(1, 4)),
            _ => 0.0,
        })
        .collect();
    let prompt = (0..n)
        .map(|_| f64::from(u32::from(rng.int(0, 8) == 0)))
        .collect();
    let per_row = |rng: &mut CaseRng, lo: f64, hi: f64, neutral: f64| -> Vec<f64> {
        (0..batch)
            .map(|r| {
                if r == 0 {
                    neutral
                } else {
                    f64::from(rng.uniform(lo, hi) as f32)
                }
            })
            .collect()
    };
    Inputs {
        repetition: per_row(rng, 0.5, 2.0, 1.0),
        frequency: per_row(rng, -0.5, 1.0, 0.0),
        presence: per_row(rng, -0.5, 1.0, 0.0),
        counts,
        prompt,
    }
}

struct Device {
    counts: Tensor,
    prompt: Tensor,
    repetition: Tensor,
    frequency: Tensor,
    presence: Tensor,
}

impl Device {
    fn new(ctx: &Context, h: &Inputs, batch: usize, vocab: usize) -> Result<Device, String> {
        Ok(Device {
            counts: upload(ctx, DType::I32, &h.counts, &[batch, vocab])?.0,
            prompt: upload(ctx, DType::I32, &h.prompt, &[batch, vocab])?.0,
            repetition: upload(ctx, DType::F32, &h.repetition, &[batch])?.0,
            frequency: upload(ctx, DType::F32, &h.frequency, &[batch])?.0,
            presence: upload(ctx, DType::F32, &h.presence, &[batch])?.0,
        })
    }

    fn penalties(&self) -> Penalties<'_> {
        Penalties {
            output_counts: &self.counts,
            prompt_mask: &self.prompt,
            repetition: &self.repetition,
            frequency: &self.frequency,
            presence: &self.presence,
        }
    }
}

fn want(xv: &[f64], vocab: usize, h: &Inputs) -> Vec<f64> {
    reference::penalties(
        xv,
        vocab,
        &h.counts,
        &h.prompt,
        &h.repetition,
        &h.frequency,
        &h.presence,
    )
}

fn correctness(dtype: DType, batch: usize, vocab: usize) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("batch={batch} vocab={vocab}"),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = logits(ctx, rng, dtype, batch, vocab)?;
            let h = inputs(rng, batch, vocab);
            let dev = Device::new(ctx, &h, batch, vocab)?;
            let out = ctx.full_nan(dtype, &[batch, vocab]).map_err(err)?;
            apply_penalties(ctx, &x, &dev.penalties(), &out).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            let w = want(&xv, vocab, &h);
            // Row 0 is neutral: exactly the logits.
            if got[..vocab] != xv[..vocab] {
                return Err("the neutral row 0 changed".to_string());
            }
            compare(&got, &w, accuracy(OP, dtype)?)
        }),
    }
}

/// A call whose row 1 has `set` applied: refused naming it, `out` untouched.
fn bad_row(what: &str, reason: &'static str, set: fn(&mut Inputs)) -> Case {
    crate::testing::rejection_of(OP, what, reason, move |ctx, rng| {
        let (x, _) = logits(ctx, rng, DType::BF16, 3, 40)?;
        let mut h = inputs(rng, 3, 40);
        set(&mut h);
        let dev = Device::new(ctx, &h, 3, 40)?;
        let out = ctx.full_nan(DType::BF16, &[3, 40]).map_err(err)?;
        let (c, o) = (ctx.clone(), out.clone());
        Ok((
            out,
            Box::new(move || apply_penalties(&c, &x, &dev.penalties(), &o)) as Refused,
        ))
    })
}

pub(crate) fn penalties_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for (batch, vocab) in [(3, 1), (4, 257), (5, 1000), (2, 151_936)] {
            v.push(correctness(dtype, batch, vocab));
        }
    }
    v.push(bad_row("repetition 0", "row 1: repetition = 0", |h| {
        h.repetition[1] = 0.0
    }));
    v.push(bad_row("repetition -1", "row 1: repetition = -1", |h| {
        h.repetition[1] = -1.0
    }));
    v.push(bad_row("repetition NaN", "row 1: repetition = NaN", |h| {
        h.repetition[1] = f64::NAN
    }));
    v.push(bad_row("frequency inf", "row 1: frequency = inf", |h| {
        h.frequency[1] = f64::INFINITY
    }));
    v.push(bad_row("presence NaN", "row 1: presence = NaN", |h| {
        h.presence[1] = f64::NAN
    }));
    v.push(rejection(
        OP,
        "out f32 for bf16 logits",
        "`out` must be bf16",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[2, 10])?;
            let h = inputs(&mut CaseRng::new(1), 2, 10);
            let dev = Device::new(ctx, &h, 2, 10)?;
            let out = ctx.full_nan(DType::F32, &[2, 10]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || apply_penalties(&c, &x, &dev.penalties(), &o)) as Refused,
            ))
        },
    ));
    v
}

pub(crate) fn penalties_kernels() -> Vec<KernelUse> {
    per_float(&penalties_kernel::DEF)
}

/// Penalties over Qwen's vocabulary at batch 32 and 256: the bytes are the logits read
/// and written and the counts and mask read.
pub(crate) fn penalties_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in [DType::BF16, DType::F32] {
        for (batch, vocab, quick) in [(4, 1000, true), (32, 151_936, false), (256, 151_936, false)]
        {
            v.push(BenchCase {
                op: OP,
                kernel: "penalties_kernel",
                dtype,
                shape: format!("batch={batch} vocab={vocab}"),
                bytes: (batch * vocab * (2 * dtype.size_bytes() + 8)) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = logits(ctx, rng, dtype, batch, vocab)?;
                    let h = inputs(rng, batch, vocab);
                    let dev = Device::new(ctx, &h, batch, vocab)?;
                    let out = ctx.full_nan(dtype, &[batch, vocab]).map_err(err)?;
                    let (c, o) = (ctx.clone(), out.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            apply_penalties(&c, &x, &dev.penalties(), &o).map_err(err)
                        }),
                        output: out,
                        reference: want(&xv, vocab, &h),
                    })
                }),
            });
        }
    }
    v
}
