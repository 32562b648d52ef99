//! f64 references for the norms, written from their definitions.

/// `out[r, i] = x[r, i] / sqrt(mean_i(x[r, i]²) + eps) · w[i]`.
pub fn rms_norm(x: &[f64], w: &[f64], n: usize, eps: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let mean_sq = row.iter().map(|v| v * v).sum::<f64>() / n as f64;
        let scale = 1.0 / (mean_sq + eps).sqrt();
        out.extend(row.iter().zip(w).map(|(v, wi)| v * scale * wi));
    }
    out
}

/// `out = rms_norm(y, w) · silu(z)` with `silu(z) = z / (1 + e^{-z})`.
pub fn gated_mixer_norm(y: &[f64], z: &[f64], w: &[f64], n: usize, eps: f64) -> Vec<f64> {
    rms_norm(y, w, n, eps)
        .into_iter()
        .zip(z)
        .map(|(v, zi)| v * zi / (1.0 + (-zi).exp()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_rms_row_is_unchanged_by_unit_weights() {
        let x = [1.0, -1.0, 1.0, -1.0];
        let out = rms_norm(&x, &[1.0; 4], 4, 0.0);
        assert_eq!(out, x.to_vec());
    }

    #[test]
    fn scales_by_the_inverse_rms_per_row() {
        let x = [3.0, 4.0, 1.0, 1.0];
        let out = rms_norm(&x, &[1.0, 2.0], 2, 0.0);
        let r0 = (12.5f64).sqrt();
        assert!((out[0] - 3.0 / r0).abs() < 1e-12);
        assert!((out[1] - 8.0 / r0).abs() < 1e-12);
        assert!((out[2] - 1.0).abs() < 1e-12 && (out[3] - 2.0).abs() < 1e-12);
    }

    #[test]
    fn gate_is_silu() {
        let out = gated_mixer_norm(&[1.0, 1.0], &[0.0, 2.0], &[1.0, 1.0], 2, 0.0);
        assert_eq!(out[0], 0.0);
        assert!((out[1] - 2.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-12);
    }
}
