//! The f64 references of the sampling family, written from the math: the argmax, the
//! filtered distribution of `sample` (temperature, top-k, top-p, min-p, in that order)
//! and its inverse-CDF draw with the host Philox uniform. Where f32 rounding could
//! decide differently (a mass within 1e-4 of a top-p boundary, a weight within 1e-4 of
//! min-p, a draw within 1e-4 of a cumulative boundary) the answer is marked unsure.

use super::philox::philox_uniform_host;

/// How close, relative to the total weight, the f32 kernel may land to a boundary of the
/// survivor set (a top-p mass, a min-p ratio).
pub const MARGIN: f64 = 1e-4;

/// How close, as a fraction of the survivors' mass, the f32 kernel's draw may land to a
/// boundary between two tokens (its prefix sums and weights are within a few 1e-6).
pub const DRAW_MARGIN: f64 = 1e-5;

/// The lowest index of each row's maximum; −1 for a row holding a NaN.
pub fn argmax(logits: &[f64], vocab: usize) -> Vec<f64> {
    logits
        .chunks(vocab)
        .map(|row| {
            if row.iter().any(|x| x.is_nan()) {
                return -1.0;
            }
            let mut best = 0;
            for (i, &x) in row.iter().enumerate() {
                if x > row[best] {
                    best = i;
                }
            }
            best as f64
        })
        .collect()
}

/// One row's sampling parameters.
#[derive(Clone, Copy, Debug)]
pub struct RowParams {
    pub temperature: f64,
    pub top_k: i64,
    pub top_p: f64,
    pub min_p: f64,
    pub seed: [u32; 2],
    pub offset: u32,
}

/// A row's filtered distribution: each token's probability (0 outside the survivors),
/// and whether f32 rounding could have kept a different set.
#[derive(Clone, Debug)]
pub struct Filtered {
    pub probs: Vec<f64>,
    pub sure: bool,
}

/// The distribution `sample` draws row `row` from, or `None` when it gives −1 (a NaN or
/// +∞ logit, no finite logit, or parameters out of range).
pub fn filtered(row: &[f64], p: &RowParams) -> Option<Filtered> {
    let params_ok = p.temperature.is_finite()
        && p.temperature >= 0.0
        && p.top_k >= 0
        && p.top_p > 0.0
        && p.top_p <= 1.0
        && (0.0..=1.0).contains(&p.min_p);
    let finite: Vec<f64> = row.iter().copied().filter(|x| x.is_finite()).collect();
    if !params_ok || finite.is_empty() || row.iter().any(|&x| x.is_nan() || x == f64::INFINITY) {
        return None;
    }
    let m = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if p.temperature == 0.0 {
        let first = row.iter().position(|&x| x == m)?;
        let mut probs = vec![0.0; row.len()];
        probs[first] = 1.0;
        return Some(Filtered { probs, sure: true });
    }
    let w: Vec<f64> = row
        .iter()
        .map(|&x| {
            if x.is_finite() {
                ((x - m) / p.temperature).exp()
            } else {
                0.0
            }
        })
        .collect();
    let mut keep: Vec<bool> = row.iter().map(|x| x.is_finite()).collect();
    let mut sure = true;
    // top-k: at least the k-th largest logit.
    let k = p.top_k as usize;
    if k > 0 && k < finite.len() {
        let mut sorted = finite.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let kth = sorted[k - 1];
        for (kp, &x) in keep.iter_mut().zip(row) {
            *kp = *kp && x >= kth;
        }
    }
    // top-p over the top-k survivors: the mass strictly above a token is below p·Z.
    if p.top_p < 1.0 {
        let z: f64 = (0..row.len()).filter(|&i| keep[i]).map(|i| w[i]).sum();
        let limit = p.top_p * z;
        let mut survivors: Vec<usize> = (0..row.len()).filter(|&i| keep[i]).collect();
        survivors.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
        // Walk the survivors from the largest logit down, a group of equal logits at a time.
        let mut above = 0.0;
        let mut g = 0;
        while g < survivors.len() {
            let v = row[survivors[g]];
            let end = survivors[g..]
                .iter()
                .position(|&j| row[j] != v)
                .map_or(survivors.len(), |n| g + n);
            if (above - limit).abs() < MARGIN * z {
                sure = false;
            }
            let kept = above < limit;
            for &j in &survivors[g..end] {
                keep[j] = kept;
                above += w[j];
            }
            g = end;
        }
    }
    // min-p: at least min_p times the largest probability (the max's weight is 1).
    if p.min_p > 0.0 {
        for i in 0..row.len() {
            if keep[i] && (w[i] - p.min_p).abs() < MARGIN {
                sure = false;
            }
            keep[i] = keep[i] && w[i] >= p.min_p;
        }
    }
    let total: f64 = (0..row.len()).filter(|&i| keep[i]).map(|i| w[i]).sum();
    let probs = (0..row.len())
        .map(|i| if keep[i] { w[i] / total } else { 0.0 })
        .collect();
    Some(Filtered { probs, sure })
}

/// The token `sample` draws from `row`, and whether it is sure (no boundary of the set or
/// of the draw within [`MARGIN`] / [`DRAW_MARGIN`]); −1 where the row has no distribution.
pub fn draw(row: &[f64], p: &RowParams) -> (i64, bool) {
    let Some(f) = filtered(row, p) else {
        return (-1, true);
    };
    let u = f64::from(philox_uniform_host(p.seed, p.offset));
    let mut cum = 0.0;
    let mut last = -1i64;
    for (i, &q) in f.probs.iter().enumerate() {
        if q == 0.0 {
            continue;
        }
        let before = cum;
        cum += q;
        last = i as i64;
        if cum > u {
            let near = (u - before).abs() < DRAW_MARGIN || (cum - u).abs() < DRAW_MARGIN;
            return (i as i64, f.sure && !near);
        }
    }
    (last, false)
}

/// [`draw`] for every row of `logits [batch, vocab]` with the per-row parameter arrays
/// as the op's inputs hold them (`seed` two words a row): the tokens as f64.
#[allow(clippy::too_many_arguments)]
pub fn sample(
    logits: &[f64],
    vocab: usize,
    temperature: &[f64],
    top_k: &[f64],
    top_p: &[f64],
    min_p: &[f64],
    seed: &[f64],
    offset: &[f64],
) -> Vec<f64> {
    logits
        .chunks(vocab)
        .enumerate()
        .map(|(r, row)| {
            draw(
                row,
                &row_params(r, temperature, top_k, top_p, min_p, seed, offset),
            )
            .0 as f64
        })
        .collect()
}

/// Row `r`'s parameters from the op's per-row arrays.
pub fn row_params(
    r: usize,
    temperature: &[f64],
    top_k: &[f64],
    top_p: &[f64],
    min_p: &[f64],
    seed: &[f64],
    offset: &[f64],
) -> RowParams {
    RowParams {
        temperature: temperature[r],
        top_k: top_k[r] as i64,
        top_p: top_p[r],
        min_p: min_p[r],
        seed: [seed[2 * r] as u32, seed[2 * r + 1] as u32],
        offset: offset[r] as u32,
    }
}

/// `apply_penalties` in f64: per row `r` and token `i`, repetition where the token is in
/// the prompt or output (divide a positive logit, multiply any other), then minus
/// `frequency · count` and `presence · [count > 0]`.
#[allow(clippy::too_many_arguments)]
pub fn penalties(
    logits: &[f64],
    vocab: usize,
    counts: &[f64],
    prompt: &[f64],
    repetition: &[f64],
    frequency: &[f64],
    presence: &[f64],
) -> Vec<f64> {
    logits
        .iter()
        .enumerate()
        .map(|(at, &x)| {
            let r = at / vocab;
            let in_output = counts[at] > 0.0;
            let seen = in_output || prompt[at] != 0.0;
            let x = if !seen {
                x
            } else if x > 0.0 {
                x / repetition[r]
            } else {
                x * repetition[r]
            };
            x - frequency[r] * counts[at] - presence[r] * if in_output { 1.0 } else { 0.0 }
        })
        .collect()
}
