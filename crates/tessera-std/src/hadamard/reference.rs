//! The f64 reference of `hadamard`, from Sylvester's definition of the matrix,
//! H_1 = [1], H_2m = [[H_m, H_m], [H_m, −H_m]]: a row times H_2m is the row's halves a, b
//! mapped to [a·H_m + b·H_m, a·H_m − b·H_m], recursively. Its tests check it against the
//! matrix built entry by entry, H[i][j] = (−1)^popcount(i & j), and H·Hᵀ = n·I.

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

/// `scale · row · H_n` for every row of `x` (rows of `n`, a power of two).
pub fn hadamard(x: &[f64], n: usize, scale: f64) -> Vec<f64> {
    x.chunks(n)
        .flat_map(|row| times_h(row).into_iter().map(move |v| scale * v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// H_n entry by entry.
    fn matrix(n: usize) -> Vec<Vec<f64>> {
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

    #[test]
    fn block_definition_is_the_matrix_product() {
        for n in [1, 2, 4, 8, 64] {
            let h = matrix(n);
            let x: Vec<f64> = (0..n).map(|i| ((i * 7 + 3) % 11) as f64 - 5.0).collect();
            let got = hadamard(&x, n, 0.5);
            for j in 0..n {
                let want: f64 = 0.5 * (0..n).map(|i| x[i] * h[i][j]).sum::<f64>();
                assert_eq!(got[j], want, "n = {n}, column {j}");
            }
            for i in 0..n {
                for k in 0..n {
                    let dot: f64 = (0..n).map(|j| h[i][j] * h[k][j]).sum();
                    assert_eq!(dot, if i == k { n as f64 } else { 0.0 });
                }
            }
        }
    }
}
