//! f64 reference for the Mamba selective-scan decode step, from its definition:
//! `δ = softplus(dt + dt_bias)`, `h[d, n] ← h[d, n]·e^{δ·A[d, n]} + δ·B[n]·x[d]`,
//! `y[d] = (Σ_n h[d, n]·C[n] + D[d]·x[d])·silu(z[d])`.

use crate::gdn::reference::softplus;

/// The inputs of one step for `batch` rows of `dim` channels and `n` states each.
pub struct ScanStep<'a> {
    pub state: &'a [f64],
    pub x: &'a [f64],
    pub dt: &'a [f64],
    pub a: &'a [f64],
    pub b: &'a [f64],
    pub c: &'a [f64],
    pub d: &'a [f64],
    pub z: &'a [f64],
    pub dt_bias: &'a [f64],
    pub dims: (usize, usize, usize),
}

/// Returns (y `[B, D]`, new state `[B, D, N]`).
pub fn selective_scan_step(s: &ScanStep) -> (Vec<f64>, Vec<f64>) {
    let (batch, dim, n) = s.dims;
    let mut y = vec![0.0; batch * dim];
    let mut st = s.state.to_vec();
    for bi in 0..batch {
        for d in 0..dim {
            let i = bi * dim + d;
            let delta = softplus(s.dt[i] + s.dt_bias[d]);
            let mut acc = 0.0;
            for k in 0..n {
                let h = &mut st[i * n + k];
                *h = *h * (delta * s.a[d * n + k]).exp() + delta * s.b[bi * n + k] * s.x[i];
                acc += *h * s.c[bi * n + k];
            }
            let z = s.z[i];
            y[i] = (acc + s.d[d] * s.x[i]) * z / (1.0 + (-z).exp());
        }
    }
    (y, st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_decay_rate_keeps_the_state_and_adds_the_input() {
        // A = 0: h ← h + δ·B·x.
        let s = ScanStep {
            state: &[1.0],
            x: &[2.0],
            dt: &[0.0],
            a: &[0.0],
            b: &[3.0],
            c: &[1.0],
            d: &[0.0],
            z: &[50.0],
            dt_bias: &[0.0],
            dims: (1, 1, 1),
        };
        let (y, h) = selective_scan_step(&s);
        let delta = 2f64.ln();
        assert!((h[0] - (1.0 + delta * 6.0)).abs() < 1e-12);
        // D = 0 and C = 1: y = h · silu(z).
        let silu = 50.0 / (1.0 + (-50f64).exp());
        assert!((y[0] - h[0] * silu).abs() < 1e-9);
    }
}
