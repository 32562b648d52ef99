//! f64 references of the MoE ops, written from the math: the router's scores, groups and
//! top-k by sorting, the plan by counting, the expert products as plain sums.

use super::route::{RouteConfig, Scoring};

/// The router on one row at a time: (ids, weights), each `[tokens, top_k]`, ids as f64.
/// Ties go to the lowest index; a row with no answer (see `route.rs`) gives −1 and NaN.
pub fn route(
    logits: &[f64],
    bias: Option<&[f64]>,
    experts: usize,
    cfg: &RouteConfig,
) -> (Vec<f64>, Vec<f64>) {
    let k = cfg.top_k;
    let mut ids = Vec::new();
    let mut weights = Vec::new();
    let bias_nan = bias.is_some_and(|b| b.iter().any(|v| v.is_nan()));
    for row in logits.chunks(experts) {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let softmax = cfg.scoring == Scoring::Softmax;
        let undefined =
            row.iter().any(|v| v.is_nan()) || bias_nan || (softmax && max.is_infinite());
        if undefined {
            ids.extend(std::iter::repeat_n(-1.0, k));
            weights.extend(std::iter::repeat_n(f64::NAN, k));
            continue;
        }
        let scores: Vec<f64> = if softmax {
            let e: Vec<f64> = row.iter().map(|v| (v - max).exp()).collect();
            let total: f64 = e.iter().sum();
            e.iter().map(|v| v / total).collect()
        } else {
            row.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect()
        };
        let keyed = bias.is_some() || cfg.n_group > 1;
        let keys: Vec<f64> = (0..experts)
            .map(|e| match (keyed, bias) {
                (false, _) => row[e],
                (true, Some(b)) => scores[e] + b[e],
                (true, None) => scores[e],
            })
            .collect();
        // Indices by key, largest first, lowest index first among equals.
        let order = |vals: &[f64], among: &[usize]| -> Vec<usize> {
            let mut v = among.to_vec();
            v.sort_by(|&a, &b| vals[b].total_cmp(&vals[a]).then(a.cmp(&b)));
            v
        };
        let width = experts / cfg.n_group;
        let candidates: Vec<usize> = if cfg.n_group > 1 {
            let group_scores: Vec<f64> = keys
                .chunks(width)
                .map(|g| {
                    let mut s = g.to_vec();
                    s.sort_by(|a, b| b.total_cmp(a));
                    s[0] + s[1]
                })
                .collect();
            let groups: Vec<usize> = (0..cfg.n_group).collect();
            let best = order(&group_scores, &groups);
            let chosen = &best[..cfg.topk_group];
            (0..experts)
                .filter(|e| chosen.contains(&(e / width)))
                .collect()
        } else {
            (0..experts).collect()
        };
        let top: Vec<usize> = order(&keys, &candidates)[..k].to_vec();
        let sum: f64 = top.iter().map(|&e| scores[e]).sum();
        let norm = if cfg.renormalize {
            1.0 / (sum + 1e-20)
        } else {
            1.0
        };
        for &e in &top {
            ids.push(e as f64);
            weights.push(scores[e] * norm * cfg.routed_scaling_factor as f64);
        }
    }
    (ids, weights)
}

/// The plan of `ids` (`pairs` of them) over `experts`: (counts, offsets, sorted pairs,
/// active experts then `experts`), as f64.
pub fn permute(ids: &[f64], experts: usize) -> [Vec<f64>; 4] {
    let mut by_expert: Vec<Vec<usize>> = vec![Vec::new(); experts];
    for (p, &id) in ids.iter().enumerate() {
        by_expert[id as usize].push(p);
    }
    let counts: Vec<f64> = by_expert.iter().map(|v| v.len() as f64).collect();
    let mut offsets = Vec::with_capacity(experts);
    let mut at = 0.0;
    for c in &counts {
        offsets.push(at);
        at += c;
    }
    let sorted: Vec<f64> = by_expert.iter().flatten().map(|&p| p as f64).collect();
    let mut active: Vec<f64> = (0..experts)
        .filter(|&e| !by_expert[e].is_empty())
        .map(|e| e as f64)
        .collect();
    active.resize(experts, experts as f64);
    [counts, offsets, sorted, active]
}

/// `silu(g) = g / (1 + e^−g)`.
pub fn silu(g: f64) -> f64 {
    g / (1.0 + (-g).exp())
}

/// The grouped GEMV: `y[t, j, :]` = the row of `x` (token `t`'s, or pair `(t, j)`'s when
/// `x_per_pair`) times expert `ids[t, j]`'s `w` `[n_rows, k]`ᵀ; gated: `silu(gate)·up` over
/// the first and second halves of its rows. `n` output columns.
#[allow(clippy::too_many_arguments)]
pub fn gemv(
    x: &[f64],
    w: &[f64],
    ids: &[f64],
    (tokens, top_k, n, k): (usize, usize, usize, usize),
    x_per_pair: bool,
    gated: bool,
) -> Vec<f64> {
    let rows = if gated { 2 * n } else { n };
    let dot = |xr: &[f64], e: usize, row: usize| -> f64 {
        let wr = &w[(e * rows + row) * k..][..k];
        xr.iter().zip(wr).map(|(a, b)| a * b).sum()
    };
    let mut y = Vec::with_capacity(tokens * top_k * n);
    for t in 0..tokens {
        for j in 0..top_k {
            let p = t * top_k + j;
            let xr = &x[(if x_per_pair { p } else { t }) * k..][..k];
            let e = ids[p] as usize;
            for c in 0..n {
                y.push(if gated {
                    silu(dot(xr, e, c)) * dot(xr, e, n + c)
                } else {
                    dot(xr, e, c)
                });
            }
        }
    }
    y
}

/// `out[t, :] = Σ_j weights[t, j]·y[t, j, :] (+ shared[t, :])`.
pub fn combine(
    y: &[f64],
    weights: &[f64],
    shared: Option<&[f64]>,
    (tokens, top_k, d): (usize, usize, usize),
) -> Vec<f64> {
    let mut out = Vec::with_capacity(tokens * d);
    for t in 0..tokens {
        for c in 0..d {
            let routed: f64 = (0..top_k)
                .map(|j| weights[t * top_k + j] * y[(t * top_k + j) * d + c])
                .sum();
            out.push(routed + shared.map_or(0.0, |s| s[t * d + c]));
        }
    }
    out
}

/// The values MLX affine weights stand for, `scale·q + bias` in f64: `packed` `[rows, k·bits/32]`
/// with `scales`, `biases` `[rows, k/group]` (the experts' rows one after another).
pub fn affine_weights(
    packed: &[f64],
    scales: &[f64],
    biases: &[f64],
    (rows, k): (usize, usize),
    bits: u32,
    group: usize,
) -> Vec<f64> {
    let words = k * bits as usize / 32;
    (0..rows)
        .flat_map(|r| {
            let row = &packed[r * words..(r + 1) * words];
            (0..k).map(move |c| {
                let g = r * (k / group) + c / group;
                scales[g] * crate::quant::reference::code(row, c, bits) as f64 + biases[g]
            })
        })
        .collect()
}

/// The contiguous grouped GEMM: expert `e` owns rows `ends[e − 1] .. ends[e]` of `x`
/// `[rows, k]` (`ends[−1]` = 0) and `y[r, :] = x[r]·w[e]ᵀ` over its `[n_rows, k]` weights;
/// gated: `silu(gate)·up` over the first and second halves of its rows. `n` output columns.
pub fn grouped_gemm(
    x: &[f64],
    w: &[f64],
    ends: &[f64],
    (rows, n, k): (usize, usize, usize),
    gated: bool,
) -> Vec<f64> {
    let wrows = if gated { 2 * n } else { n };
    let mut y = Vec::with_capacity(rows * n);
    let mut begin = 0;
    for (e, &end) in ends.iter().enumerate() {
        let end = end as usize;
        for r in begin..end {
            let xr = &x[r * k..][..k];
            let dot = |row: usize| -> f64 {
                let wr = &w[(e * wrows + row) * k..][..k];
                xr.iter().zip(wr).map(|(a, b)| a * b).sum()
            };
            for c in 0..n {
                y.push(if gated {
                    silu(dot(c)) * dot(n + c)
                } else {
                    dot(c)
                });
            }
        }
        begin = end;
    }
    y
}
