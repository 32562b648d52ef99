//! f64 references for the residual RMSNorm, LayerNorm, softmax and logsumexp, written from
//! their definitions.

use super::reference::rms_norm;

/// `(x + residual, rms_norm(x + residual, w))`.
pub fn rms_norm_residual(
    x: &[f64],
    residual: &[f64],
    w: &[f64],
    n: usize,
    eps: f64,
) -> (Vec<f64>, Vec<f64>) {
    let sum: Vec<f64> = x.iter().zip(residual).map(|(a, b)| a + b).collect();
    let out = rms_norm(&sum, w, n, eps);
    (sum, out)
}

/// `(x - mean) / sqrt(var + eps) · w + b` per row (population variance).
pub fn layer_norm(x: &[f64], w: &[f64], b: &[f64], n: usize, eps: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let mean = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let inv = 1.0 / (var + eps).sqrt();
        out.extend(
            row.iter()
                .zip(w.iter().zip(b))
                .map(|(v, (wi, bi))| (v - mean) * inv * wi + bi),
        );
    }
    out
}

/// `exp(x_i) / Σ_j exp(x_j)` per row (shifted by the row max for range).
pub fn softmax(x: &[f64], n: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
        out.extend(row.iter().map(|v| (v - m).exp() / s));
    }
    out
}

/// `ln Σ_j exp(x_j)` per row: −∞ for an all −∞ row, +∞ for a row holding +∞.
pub fn logsumexp(x: &[f64], n: usize) -> Vec<f64> {
    x.chunks(n)
        .map(|row| {
            let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let m = if max.is_finite() { max } else { 0.0 };
            m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_rows_sum_to_one() {
        let s = softmax(&[1.0, 2.0, 3.0, 0.0, 0.0, 0.0], 3);
        assert!((s[..3].iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((s[3] - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn logsumexp_of_equal_values() {
        let l = logsumexp(&[2.0, 2.0], 2);
        assert!((l[0] - (2.0 + 2f64.ln())).abs() < 1e-12);
    }

    #[test]
    fn layer_norm_centres_and_scales() {
        let out = layer_norm(&[1.0, 3.0], &[1.0, 1.0], &[0.5, 0.5], 2, 0.0);
        assert!((out[0] + 0.5).abs() < 1e-12 && (out[1] - 1.5).abs() < 1e-12);
    }
}
