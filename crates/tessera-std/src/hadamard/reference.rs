//! The f64 reference of `hadamard`, from the definitions of the matrices.
//!
//! n = 2^k: Sylvester's H_1 = [1], H_2m = [[H_m, H_m], [H_m, −H_m]]; a row times H_2m is
//! the row's halves a, b mapped to [a·H_m + b·H_m, a·H_m − b·H_m], recursively.
//!
//! n = m·2^k (m = 12, 20, 28): the Kronecker product K = H_m ⊗ H_{2^k} applied to the row as
//! a column vector, out = K·x, i.e. out[r·2^k + j] = Σ_{c,i} H_m[r][c]·H_{2^k}[j][i]·x[c·2^k + i].
//! H_12 and H_20 are Paley's first construction for q = 11 and 19, H_28 his second for
//! q = 13, built here from the Legendre symbol (Euler's criterion), independently of the
//! kernel's own formula. The product is computed factor by factor, (H_m ⊗ I)·(I ⊗ H_{2^k}),
//! which the tests check against the dense Kronecker matrix.

/// `row · H_n` by the block definition (`row.len()` a power of two).
fn times_h(row: &[f64]) -> Vec<f64> {
    let n = row.len();
    if n == 1 {
        return row.to_vec();
    }
    let (a, b) = row.split_at(n / 2);
    let (ha, hb) = (times_h(a), times_h(b));
    let top = ha.iter().zip(&hb).map(|(p, q)| p + q);
    let bottom = ha.iter().zip(&hb).map(|(p, q)| p - q);
    top.chain(bottom).collect()
}

/// The Legendre symbol (a / q) of a prime q: 0, 1 or −1, by Euler's criterion
/// a^((q−1)/2) ≡ (a / q) (mod q).
fn legendre(a: i64, q: i64) -> f64 {
    let a = a.rem_euclid(q);
    if a == 0 {
        return 0.0;
    }
    let mut power = 1;
    for _ in 0..(q - 1) / 2 {
        power = power * a % q;
    }
    if power == 1 {
        1.0
    } else {
        -1.0
    }
}

/// The base matrix H_m of the orders the op supports (12, 20, 28), entry [row][column]:
/// Paley I (q = m − 1 ≡ 3 mod 4): H = I + [[0, −1ᵀ], [1, Q]] with the Jacobsthal matrix
/// Q[i][j] = (i − j / q); Paley II (q = m/2 − 1 ≡ 1 mod 4): with the symmetric conference
/// matrix S = [[0, 1ᵀ], [1, Q]], Q[i][j] = (j − i / q), H = [[S + I, S − I], [S − I, −S − I]].
pub fn base_matrix(m: usize) -> Option<Vec<Vec<f64>>> {
    let identity = |i: usize, j: usize| if i == j { 1.0 } else { 0.0 };
    match m {
        12 | 20 => {
            let q = m as i64 - 1;
            let s = |i: usize, j: usize| match (i, j) {
                (0, 0) => 0.0,
                (0, _) => -1.0,
                (_, 0) => 1.0,
                _ => legendre(i as i64 - j as i64, q),
            };
            Some(
                (0..m)
                    .map(|i| (0..m).map(|j| identity(i, j) + s(i, j)).collect())
                    .collect(),
            )
        }
        28 => {
            let (q, h) = (13, 14);
            let s = |a: usize, b: usize| match (a, b) {
                (0, 0) => 0.0,
                (0, _) | (_, 0) => 1.0,
                _ => legendre(b as i64 - a as i64, q),
            };
            let entry = |i: usize, j: usize| {
                let (a, b) = (i % h, j % h);
                let (sign_s, sign_i) = match (i / h, j / h) {
                    (0, 0) => (1.0, 1.0),
                    (1, 1) => (-1.0, -1.0),
                    _ => (1.0, -1.0),
                };
                sign_s * s(a, b) + sign_i * identity(a, b)
            };
            Some(
                (0..m)
                    .map(|i| (0..m).map(|j| entry(i, j)).collect())
                    .collect(),
            )
        }
        _ => None,
    }
}

/// `n` as m·2^k with m the base order (1 for a power of two, else 12, 20 or 28), or None.
pub fn factor(n: usize) -> Option<(usize, usize)> {
    if n == 0 {
        return None;
    }
    let odd = n >> n.trailing_zeros();
    let m = if odd == 1 { 1 } else { 4 * odd };
    (n.is_multiple_of(m) && (m == 1 || base_matrix(m).is_some())).then_some((m, n / m))
}

/// `scale · (H_m ⊗ H_{2^k}) · row` for every row of `x` (rows of `n` = m·2^k; for m = 1,
/// `scale · row · H_n`); None when `n` is not of that form.
pub fn hadamard(x: &[f64], n: usize, scale: f64) -> Option<Vec<f64>> {
    let (m, p) = factor(n)?;
    let base = if m == 1 {
        vec![vec![1.0]]
    } else {
        base_matrix(m)?
    };
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let parts: Vec<Vec<f64>> = row.chunks(p).map(times_h).collect();
        for hr in &base {
            for j in 0..p {
                let sum: f64 = hr.iter().zip(&parts).map(|(h, part)| h * part[j]).sum();
                out.push(scale * sum);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// H_n of Sylvester, entry by entry.
    fn sylvester(n: usize) -> Vec<Vec<f64>> {
        (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if (i & j).count_ones() % 2 == 0 {
                            1.0
                        } else {
                            -1.0
                        }
                    })
                    .collect()
            })
            .collect()
    }

    fn is_hadamard(h: &[Vec<f64>]) -> bool {
        let n = h.len();
        (0..n).all(|i| {
            (0..n).all(|k| {
                let dot: f64 = (0..n).map(|j| h[i][j] * h[k][j]).sum();
                dot == if i == k { n as f64 } else { 0.0 }
            })
        })
    }

    #[test]
    fn block_definition_is_the_matrix_product() {
        for n in [1, 2, 4, 8, 64] {
            let h = sylvester(n);
            let x: Vec<f64> = (0..n).map(|i| ((i * 7 + 3) % 11) as f64 - 5.0).collect();
            let got = hadamard(&x, n, 0.5).expect("a power of two");
            for j in 0..n {
                let want: f64 = 0.5 * (0..n).map(|i| x[i] * h[i][j]).sum::<f64>();
                assert_eq!(got[j], want, "n = {n}, column {j}");
            }
            assert!(is_hadamard(&h), "n = {n}");
        }
    }

    #[test]
    fn base_matrices_are_hadamard_of_their_construction() {
        for m in [12, 20, 28] {
            let h = base_matrix(m).expect("a supported order");
            assert_eq!(h.len(), m);
            assert!(h
                .iter()
                .all(|r| r.len() == m && r.iter().all(|&v| v.abs() == 1.0)));
            assert!(is_hadamard(&h), "H_{m} · H_{m}ᵀ = {m}·I");
            // Paley I is I plus a skew-symmetric S; Paley II is symmetric.
            for (i, row) in h.iter().enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    if m == 28 {
                        assert_eq!(v, h[j][i]);
                    } else if i != j {
                        assert_eq!(v, -h[j][i]);
                    }
                }
            }
        }
        assert!(base_matrix(36).is_none() && base_matrix(4).is_none());
    }

    #[test]
    fn kronecker_form_is_the_dense_product() {
        for (m, p) in [(12, 1), (12, 8), (20, 4), (28, 2), (28, 16)] {
            let n = m * p;
            let (hm, hp) = (base_matrix(m).expect("supported"), sylvester(p));
            let x: Vec<f64> = (0..2 * n)
                .map(|i| ((i * 13 + 5) % 17) as f64 - 8.0)
                .collect();
            let got = hadamard(&x, n, 0.25).expect("supported");
            for (row, x) in x.chunks(n).enumerate() {
                for i in 0..n {
                    let k = |j: usize| hm[i / p][j / p] * hp[i % p][j % p];
                    let want: f64 = 0.25 * (0..n).map(|j| k(j) * x[j]).sum::<f64>();
                    assert_eq!(got[row * n + i], want, "n = {m}·{p}, row {row}, out[{i}]");
                }
            }
        }
    }

    #[test]
    fn other_lengths_are_not_factored() {
        for n in [0, 3, 6, 24 * 3, 36, 40 * 3, 44, 60] {
            assert!(hadamard(&vec![0.0; n.max(1)], n, 1.0).is_none(), "n = {n}");
        }
        assert_eq!(factor(48), Some((12, 4)));
        assert_eq!(factor(20), Some((20, 1)));
        assert_eq!(factor(28 * 1024), Some((28, 1024)));
        assert_eq!(factor(4096), Some((1, 4096)));
    }
}
