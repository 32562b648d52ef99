//! f64 reference for the GEMM: `c[i, j] = Σ_k a[i, k]·b[k, j]`. Blocked so that a
//! 4096³ product takes seconds, not minutes: `b` is read as `[N, K]` rows (transposed once
//! when it comes as `[K, N]`), output rows are shared out across threads, and each thread
//! walks `K` in slices small enough that a block of `a` rows and a `b` row stay in cache.

use rayon::prelude::*;

/// Output rows per task: every `b` slice loaded is reused by this many `a` rows.
const ROWS: usize = 32;
/// The `K` slice a task walks at a time (`ROWS` such slices of `a` stay in L2).
const K_SLICE: usize = 512;

/// `a: [M, K]`, `b: [K, N]` (or `[N, K]` when `bt`); returns `[M, N]`.
pub fn matmul(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize), bt: bool) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    if m == 0 || n == 0 || k == 0 {
        return c;
    }
    let transposed;
    let b_rows: &[f64] = if bt {
        b
    } else {
        transposed = transpose(b, k, n);
        &transposed
    };
    c.par_chunks_mut(ROWS * n)
        .enumerate()
        .for_each(|(block, c_block)| {
            let row0 = block * ROWS;
            let rows = c_block.len() / n;
            for k0 in (0..k).step_by(K_SLICE) {
                let k1 = (k0 + K_SLICE).min(k);
                for j in 0..n {
                    let b_j = &b_rows[j * k + k0..j * k + k1];
                    for r in 0..rows {
                        let i = row0 + r;
                        c_block[r * n + j] += dot(&a[i * k + k0..i * k + k1], b_j);
                    }
                }
            }
        });
    c
}

/// `[rows, cols]` → `[cols, rows]`.
fn transpose(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut t = vec![0.0; rows * cols];
    t.par_chunks_mut(rows).enumerate().for_each(|(c, out)| {
        for (r, o) in out.iter_mut().enumerate() {
            *o = x[r * cols + c];
        }
    });
    t
}

/// `Σ x[i]·y[i]` over four running sums (independent chains the CPU overlaps).
fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (xc, xr) = x.split_at(x.len() / 4 * 4);
    let (yc, yr) = y.split_at(xc.len());
    for (xs, ys) in xc.chunks_exact(4).zip(yc.chunks_exact(4)) {
        for ((sum, p), q) in acc.iter_mut().zip(xs).zip(ys) {
            *sum += p * q;
        }
    }
    let tail: f64 = xr.iter().zip(yr).map(|(p, q)| p * q).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

#[cfg(test)]
mod tests {
    use crate::testing::CaseRng;

    /// The textbook triple loop, to hold the blocked one against.
    fn naive(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize), bt: bool) -> Vec<f64> {
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

    /// Shapes that leave partial row blocks, partial `K` slices and a dot-product tail.
    #[test]
    fn blocked_matches_the_triple_loop_at_ragged_shapes() {
        let mut rng = CaseRng::new(7);
        for (m, n, k) in [
            (1, 1, 1),
            (33, 5, 7),
            (70, 17, 1029),
            (3, 64, 513),
            (0, 4, 4),
        ] {
            for bt in [false, true] {
                let a: Vec<f64> = (0..m * k).map(|_| rng.uniform(-1.0, 1.0)).collect();
                let b: Vec<f64> = (0..k * n).map(|_| rng.uniform(-1.0, 1.0)).collect();
                let got = super::matmul(&a, &b, (m, n, k), bt);
                let want = naive(&a, &b, (m, n, k), bt);
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-12 * (k as f64),
                        "{m}x{n}x{k} bt={bt}: {g} vs {w}"
                    );
                }
            }
        }
    }
}
