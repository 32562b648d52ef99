//! f64 references for attention, written from the definition:
//! `out = Σ_j softmax_j(scale · q·k_j [, sink]) · v_j` over the visible keys j.

use rayon::prelude::*;

/// Positions `p < n` a query sees: all of them, or with a window the last `window` plus
/// the first `n_sink`.
pub fn visible(n: usize, window: usize, n_sink: usize) -> Vec<usize> {
    (0..n)
        .filter(|&p| window == 0 || p + window >= n || p < n_sink)
        .collect()
}

/// One query vector against the keys at `positions` of a `[positions…, d]` K/V slab:
/// softmax with an optional sink logit in the denominator. No key and no sink: zeros.
pub fn attend(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    positions: &[usize],
    scale: f64,
    sink: Option<f64>,
) -> Vec<f64> {
    let d = q.len();
    let scores: Vec<f64> = positions
        .iter()
        .map(|&p| scale * (0..d).map(|i| q[i] * k[p * d + i]).sum::<f64>())
        .collect();
    // `f64::max` drops NaN; a NaN logit must instead make the whole row NaN, as the
    // definition does (a NaN in q or in a visible key is never hidden).
    let m = scores
        .iter()
        .copied()
        .chain(sink)
        .fold(f64::NEG_INFINITY, |m, s| {
            if m.is_nan() || s.is_nan() {
                f64::NAN
            } else {
                m.max(s)
            }
        });
    if m == f64::NEG_INFINITY {
        return vec![0.0; d];
    }
    // A NaN logit or sink makes the row NaN, also a row with no key (its denominator
    // holds the sink).
    if m.is_nan() {
        return vec![f64::NAN; d];
    }
    // A +∞ sink logit (and no NaN or +∞ score) takes all the weight: the output is the
    // limit 0 of `Σ e^s·v / (Σ e^s + e^sink)`, where subtracting the max would give NaN.
    if sink == Some(f64::INFINITY) && m == f64::INFINITY && !scores.contains(&f64::INFINITY) {
        return vec![0.0; d];
    }
    let den: f64 = scores.iter().map(|s| (s - m).exp()).sum::<f64>()
        + sink.map(|s| (s - m).exp()).unwrap_or(0.0);
    let mut out = vec![0.0; d];
    for (&p, s) in positions.iter().zip(&scores) {
        let w = (s - m).exp() / den;
        for i in 0..d {
            out[i] += w * v[p * d + i];
        }
    }
    out
}

/// Decode-shaped attention: `q [rows, hq, d]`, caches `[caches, hkv, stride, d]`; row r
/// reads cache `rows_at[r].0` and sees its first `rows_at[r].1` keys (through
/// window/sinks). Query head h reads KV head `h / (hq / hkv)`.
#[allow(clippy::too_many_arguments)]
pub fn decode(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    rows_at: &[(usize, usize)],
    hq: usize,
    hkv: usize,
    stride: usize,
    d: usize,
    scale: f64,
    window: usize,
    n_sink: usize,
    sinks: Option<&[f64]>,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows_at.len() * hq * d);
    for (r, &(cache, n)) in rows_at.iter().enumerate() {
        let pos = visible(n, window, n_sink);
        for h in 0..hq {
            let kvh = h / (hq / hkv);
            let slab = (cache * hkv + kvh) * stride * d..(cache * hkv + kvh + 1) * stride * d;
            let qv = &q[(r * hq + h) * d..(r * hq + h + 1) * d];
            out.extend(attend(
                qv,
                &k[slab.clone()],
                &v[slab],
                &pos,
                scale,
                sinks.map(|s| s[h]),
            ));
        }
    }
    out
}

/// Prefill attention: `q [nq, hq, d]`, k and v `[nkv, hkv, d]` (token-major); query i sits
/// at position `nkv - nq + i` and, when causal, sees keys at positions up to its own.
#[allow(clippy::too_many_arguments)]
pub fn prefill(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    nq: usize,
    nkv: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    scale: f64,
    causal: bool,
) -> Vec<f64> {
    // Each KV head's keys and values as one `[nkv, d]` slab; query rows in parallel.
    let slab = |src: &[f64], kvh: usize| -> Vec<f64> {
        (0..nkv)
            .flat_map(|j| {
                src[(j * hkv + kvh) * d..(j * hkv + kvh + 1) * d]
                    .iter()
                    .copied()
            })
            .collect()
    };
    let ks: Vec<Vec<f64>> = (0..hkv).map(|h| slab(k, h)).collect();
    let vs: Vec<Vec<f64>> = (0..hkv).map(|h| slab(v, h)).collect();
    let rows: Vec<Vec<f64>> = (0..nq)
        .into_par_iter()
        .map(|i| {
            let qpos = nkv - nq + i;
            let seen = if causal { qpos + 1 } else { nkv };
            let positions: Vec<usize> = (0..seen).collect();
            let mut row = Vec::with_capacity(hq * d);
            for h in 0..hq {
                let kvh = h / (hq / hkv);
                let qv = &q[(i * hq + h) * d..(i * hq + h + 1) * d];
                row.extend(attend(qv, &ks[kvh], &vs[kvh], &positions, scale, None));
            }
            row
        })
        .collect();
    rows.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_keeps_the_tail_and_the_sinks() {
        assert_eq!(visible(6, 2, 1), vec![0, 4, 5]);
        assert_eq!(visible(3, 0, 2), vec![0, 1, 2]);
        assert_eq!(visible(3, 5, 1), vec![0, 1, 2]);
    }

    #[test]
    fn equal_scores_average_the_values() {
        let out = attend(&[0.0], &[1.0, 2.0], &[1.0, 3.0], &[0, 1], 1.0, None);
        assert!((out[0] - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_sink_takes_its_share_of_the_denominator() {
        let out = attend(&[0.0], &[1.0], &[4.0], &[0], 1.0, Some(0.0));
        assert!((out[0] - 2.0).abs() < 1e-12);
    }
}
