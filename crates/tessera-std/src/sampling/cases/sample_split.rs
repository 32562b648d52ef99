//! Cases of `sample`'s split form, forced at small shapes, and of the single-pass kernel's
//! list: the same token as the single-pass kernel searching the whole row, for every row
//! (many seeds and parameter sets, several slice counts, a row shorter than its slices,
//! ties, −∞ bans, k = 1, k = 0, p = 1, min-p, greedy, rows that fall back to the
//! single-pass body), and the f64 reference's token where it is sure; a workspace made for
//! fewer rows is refused.

use super::sample::{random_params, DeviceParams, HostParams};
use super::*;
use crate::sampling::reference::draw;
use crate::sampling::sample::{sample, sample_kernel, OP};
use crate::sampling::sample_split::sample_split;
use crate::sampling::split::SamplingWorkspace;

/// How a case's rows are made.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Rows {
    /// Random logits and random parameters (greedy, k of 0, 1, 5, 50, top-p, min-p).
    Random,
    /// One random row drawn under top-k 50, top-p 0.9 with a different seed each row.
    Seeds,
    /// Logits of few distinct values (many ties at the k-th largest), k of 1 to 200.
    Ties,
    /// Special rows: a NaN, +∞, all −∞, −∞ bans, k ≥ the finite count, k above the lists,
    /// a slice whose ties overflow its list, more equal maxima than the combine keeps,
    /// p = 1 with min-p, then random rows.
    Special,
}

/// The logits and parameters of `rows` rows of `kind`.
fn make_rows(rng: &mut CaseRng, kind: Rows, rows: usize, vocab: usize) -> (Vec<f64>, HostParams) {
    let mut xv: Vec<f64> = (0..rows * vocab).map(|_| rng.uniform(-4.0, 4.0)).collect();
    let mut h = random_params(rng, rows);
    match kind {
        Rows::Random => {}
        Rows::Seeds => {
            let row = xv[..vocab].to_vec();
            for r in 0..rows {
                xv[r * vocab..(r + 1) * vocab].copy_from_slice(&row);
                h.temperature[r] = f64::from(0.7f32);
                h.top_k[r] = 50.0;
                h.top_p[r] = f64::from(0.9f32);
                h.min_p[r] = 0.0;
                h.seed[2 * r] = r as f64;
            }
        }
        Rows::Ties => {
            for (r, row) in xv.chunks_mut(vocab).enumerate() {
                for x in row.iter_mut() {
                    *x = (*x * 2.0).floor() / 2.0;
                }
                h.top_k[r] = [1.0, 3.0, 17.0, 64.0, 128.0, 200.0][r % 6];
                h.temperature[r] = f64::from(rng.uniform(0.3, 1.5) as f32);
            }
        }
        Rows::Special => {
            let at = |r: usize, i: usize| r * vocab + i;
            xv[at(0, vocab / 2)] = f64::NAN;
            xv[at(1, vocab - 1)] = f64::INFINITY;
            xv[at(2, 0)..at(3, 0)].fill(f64::NEG_INFINITY);
            for i in 0..vocab {
                if i % 3 != 1 {
                    xv[at(3, i)] = f64::NEG_INFINITY;
                }
                if i % 50 != 1 {
                    xv[at(4, i)] = f64::NEG_INFINITY;
                }
            }
            let set = |h: &mut HostParams, r: usize, t: f64, k: f64, p: f64, mp: f64| {
                h.temperature[r] = t;
                h.top_k[r] = k;
                h.top_p[r] = p;
                h.min_p[r] = mp;
            };
            // −∞ bans under top-k 5 and under k at the finite count.
            set(&mut h, 3, 0.8, 5.0, 0.9, 0.0);
            set(&mut h, 4, 0.8, (vocab + 48) as f64 / 50.0, 0.9, 0.0);
            // k above the candidate lists; k = 0 (top-k off); p = 1 with min-p.
            set(&mut h, 5, 1.0, 129.0, 0.8, 0.0);
            set(&mut h, 6, 1.0, 0.0, 0.7, 0.05);
            set(&mut h, 7, f64::from(0.6f32), 20.0, 1.0, f64::from(0.1f32));
            // k = 1, and greedy.
            set(&mut h, 8, 1.3, 1.0, 0.5, 0.0);
            set(&mut h, 9, 0.0, 7.0, 0.5, 0.0);
            // Every logit equal: each slice's ties overflow its list (when a slice holds
            // more than 128).
            xv[at(10, 0)..at(11, 0)].fill(1.5);
            set(&mut h, 10, 1.0, 5.0, 0.9, 0.0);
            // More equal maxima than the combine keeps (when no slice overflows).
            xv[at(11, 0)..at(11, 0) + vocab.min(1100)].fill(3.5);
            set(&mut h, 11, 1.0, 5.0, 0.9, 0.0);
        }
    }
    (xv, h)
}

/// The tokens of the single-pass kernel searching the whole row (no list), of `sample`,
/// and of the split form, and the logits as stored.
struct BothForms {
    whole_row: Vec<i32>,
    single: Vec<i32>,
    split: Vec<i32>,
    stored: Vec<f64>,
}

/// Runs the single-pass kernel without its list, `sample`, and `sample_split` over
/// `slices` slices on `xv`.
fn both_forms(
    ctx: &Context,
    dtype: DType,
    xv: &[f64],
    vocab: usize,
    h: &HostParams,
    slices: u32,
) -> Result<BothForms, String> {
    let rows = h.temperature.len();
    let (x, xv) = upload(ctx, dtype, xv, &[rows, vocab])?;
    let dev = DeviceParams::new(ctx, h)?;
    let whole_row = ctx.full_nan(DType::I32, &[rows]).map_err(err)?;
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
            token: &whole_row,
            vocab: vocab as u32,
            list_max: 0,
        },
    )
    .grid([rows as u32, 1, 1])
    .group_size(crate::sampling::row_group(vocab as u32))
    .run()
    .map_err(err)?;
    let single = ctx.full_nan(DType::I32, &[rows]).map_err(err)?;
    sample(ctx, &x, &dev.params(), &single).map_err(err)?;
    let ws = SamplingWorkspace::with_slices(ctx, rows, slices).map_err(err)?;
    let split = ctx.full_nan(DType::I32, &[rows]).map_err(err)?;
    sample_split(ctx, &x, &dev.params(), &ws, &split).map_err(err)?;
    Ok(BothForms {
        whole_row: whole_row.to_vec::<i32>().map_err(err)?,
        single: single.to_vec::<i32>().map_err(err)?,
        split: split.to_vec::<i32>().map_err(err)?,
        stored: xv,
    })
}

/// The split form over `slices` slices: every row's token equals the single-pass kernel's,
/// and the reference's where the reference is sure.
pub(crate) fn split_same_token(
    dtype: DType,
    kind: Rows,
    rows: usize,
    vocab: usize,
    slices: u32,
) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("split into {slices} slices, {kind:?} rows={rows} vocab={vocab}"),
        run: Box::new(move |ctx, rng| {
            let (xv, h) = make_rows(rng, kind, rows, vocab);
            let BothForms {
                whole_row,
                single,
                split,
                stored: xv,
            } = both_forms(ctx, dtype, &xv, vocab, &h, slices)?;
            let mut sure = 0;
            for (r, row) in xv.chunks(vocab).enumerate() {
                if single[r] != whole_row[r] {
                    return Err(format!(
                        "row {r} ({:?}): the single-pass kernel drew {} from its list, {} \
                         searching the whole row",
                        h.row(r),
                        single[r],
                        whole_row[r]
                    ));
                }
                if split[r] != single[r] {
                    return Err(format!(
                        "row {r} ({:?}): the split form drew {}, the single-pass kernel {}",
                        h.row(r),
                        split[r],
                        single[r]
                    ));
                }
                let (want, is_sure) = draw(row, &h.row(r));
                if is_sure {
                    sure += 1;
                    if i64::from(split[r]) != want {
                        return Err(format!(
                            "row {r} ({:?}): token {}, the reference draws {want}",
                            h.row(r),
                            split[r]
                        ));
                    }
                }
            }
            if matches!(kind, Rows::Special) && single[..3] != [-1, -1, -1] {
                return Err(format!("NaN, +inf, all -inf rows gave {:?}", &single[..3]));
            }
            Ok(Outcome {
                checked: rows,
                note: format!("{sure} of {rows} rows also the reference's"),
                ..Outcome::default()
            })
        }),
    }
}

/// The split cases: several slice counts, a row shorter than its slices, Qwen's vocabulary
/// over 128 slices.
pub(crate) fn split_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (dtype, kind, rows, vocab, slices) in [
        (DType::F32, Rows::Random, 24, 1000, 7),
        (DType::BF16, Rows::Random, 24, 1000, 2),
        (DType::F16, Rows::Random, 16, 257, 3),
        (DType::BF16, Rows::Random, 6, 5, 8),
        (DType::F32, Rows::Seeds, 64, 2000, 16),
        (DType::BF16, Rows::Seeds, 64, 1000, 5),
        (DType::BF16, Rows::Ties, 12, 3000, 10),
        (DType::F32, Rows::Ties, 12, 700, 4),
        (DType::F32, Rows::Special, 16, 1500, 6),
        (DType::BF16, Rows::Special, 16, 600, 3),
        (DType::F16, Rows::Special, 12, 4000, 40),
        (DType::BF16, Rows::Seeds, 2, 151_936, 128),
        (DType::F32, Rows::Random, 3, 151_936, 40),
    ] {
        v.push(split_same_token(dtype, kind, rows, vocab, slices));
    }
    v.push(crate::testing::rejection_of(
        OP,
        "split workspace of fewer rows",
        "the workspace holds 2 rows",
        |ctx, rng| {
            let (x, _) = logits(ctx, rng, DType::F32, 3, 40)?;
            let dev = DeviceParams::new(ctx, &random_params(rng, 3))?;
            let ws = SamplingWorkspace::with_slices(ctx, 2, 4).map_err(err)?;
            let token = ctx.full_nan(DType::I32, &[3]).map_err(err)?;
            let (c, t) = (ctx.clone(), token.clone());
            Ok((
                token,
                Box::new(move || sample_split(&c, &x, &dev.params(), &ws, &t)) as Refused,
            ))
        },
    ));
    v
}
