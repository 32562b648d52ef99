//! f64 reference for the GEMM: `c[i, j] = Σ_k a[i, k]·b[k, j]`.

/// `a: [M, K]`, `b: [K, N]` (or `[N, K]` when `bt`); returns `[M, N]`.
pub fn matmul(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize), bt: bool) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k)
                .map(|p| a[i * k + p] * if bt { b[j * k + p] } else { b[p * n + j] })
                .sum();
        }
    }
    c
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_by_two() {
        let c = super::matmul(
            &[1.0, 2.0, 3.0, 4.0],
            &[5.0, 6.0, 7.0, 8.0],
            (2, 2, 2),
            false,
        );
        assert_eq!(c, vec![19.0, 22.0, 43.0, 50.0]);
        let t = super::matmul(
            &[1.0, 2.0, 3.0, 4.0],
            &[5.0, 7.0, 6.0, 8.0],
            (2, 2, 2),
            true,
        );
        assert_eq!(t, c);
    }
}
