//! The f64 reference of `fft`, from the definition X_k = Σ_j x_j·exp(∓2πi·jk/n): a
//! recursive mixed-radix Cooley–Tukey split by the smallest prime factor p of n,
//! X_k = Σ_{r<p} exp(∓2πi·rk/n)·Y_r[k mod n/p] with Y_r the DFT of x_{r + p·i}, and the
//! definition itself at prime lengths; every angle is reduced exactly in integers. Its
//! tests check it against the definition summed directly, at powers of two, primes and
//! mixed lengths. A row holding NaN or ±∞ gives NaN everywhere: every output is a sum
//! over every input with a non-zero coefficient.

use std::f64::consts::PI;

type Complex = (f64, f64);

fn mul(a: Complex, b: Complex) -> Complex {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

/// exp(sign·2πi·k/n).
fn root(k: usize, n: usize, sign: f64) -> Complex {
    let a = 2.0 * PI * (k % n) as f64 / n as f64;
    (a.cos(), sign * a.sin())
}

/// The DFT by its definition: O(n²).
fn dft(x: &[Complex], sign: f64) -> Vec<Complex> {
    let n = x.len();
    (0..n)
        .map(|k| {
            x.iter().enumerate().fold((0.0, 0.0), |acc, (j, &v)| {
                let t = mul(v, root(j * k, n, sign));
                (acc.0 + t.0, acc.1 + t.1)
            })
        })
        .collect()
}

fn smallest_factor(n: usize) -> usize {
    (2..)
        .take_while(|p| p * p <= n)
        .find(|p| n.is_multiple_of(*p))
        .unwrap_or(n)
}

/// The DFT by the recursive split: O(n·Σ prime factors).
fn transform(x: &[Complex], sign: f64) -> Vec<Complex> {
    let n = x.len();
    let p = smallest_factor(n);
    if p == n {
        return dft(x, sign);
    }
    let m = n / p;
    let parts: Vec<Vec<Complex>> = (0..p)
        .map(|r| {
            let sub: Vec<Complex> = x.iter().skip(r).step_by(p).copied().collect();
            transform(&sub, sign)
        })
        .collect();
    (0..n)
        .map(|k| {
            parts.iter().enumerate().fold((0.0, 0.0), |acc, (r, y)| {
                let t = mul(y[k % m], root(r * k, n, sign));
                (acc.0 + t.0, acc.1 + t.1)
            })
        })
        .collect()
}

/// `scale · DFT(row)` of every row of `x` (rows of `n` complex numbers as (re, im)
/// pairs), forward (exponent −) or `inverse` (+).
pub fn fft(x: &[f64], n: usize, inverse: bool, scale: f64) -> Vec<f64> {
    let sign = if inverse { 1.0 } else { -1.0 };
    x.chunks(2 * n)
        .flat_map(|row| {
            let c: Vec<Complex> = row.chunks(2).map(|p| (p[0], p[1])).collect();
            let finite = row.iter().all(|v| v.is_finite());
            transform(&c, sign).into_iter().flat_map(move |(re, im)| {
                if finite {
                    [scale * re, scale * im]
                } else {
                    [f64::NAN, f64::NAN]
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n: usize) -> Vec<Complex> {
        (0..n)
            .map(|i| {
                (
                    ((i * 7 + 3) % 11) as f64 - 5.0,
                    ((i * 5 + 2) % 13) as f64 - 6.0,
                )
            })
            .collect()
    }

    #[test]
    fn the_split_is_the_definition() {
        for n in [1, 2, 3, 4, 6, 12, 16, 30, 64, 97, 100, 128, 210, 256] {
            let x = row(n);
            for sign in [-1.0, 1.0] {
                let fast = transform(&x, sign);
                let slow = dft(&x, sign);
                for (k, (f, s)) in fast.iter().zip(&slow).enumerate() {
                    let e = (f.0 - s.0).abs().max((f.1 - s.1).abs());
                    assert!(e < 1e-9 * n as f64, "n = {n}, k = {k}: {f:?} vs {s:?}");
                }
            }
        }
    }

    #[test]
    fn known_transforms() {
        // An impulse at 1: X_k = exp(−2πi·k/n); a constant: n at 0, zero elsewhere.
        let n = 12;
        let mut impulse = vec![0.0; 2 * n];
        impulse[2] = 1.0;
        let got = fft(&impulse, n, false, 1.0);
        for k in 0..n {
            let a = -2.0 * PI * k as f64 / n as f64;
            assert!((got[2 * k] - a.cos()).abs() < 1e-12);
            assert!((got[2 * k + 1] - a.sin()).abs() < 1e-12);
        }
        let ones: Vec<f64> = (0..2 * n)
            .map(|i| if i % 2 == 0 { 1.0 } else { 0.0 })
            .collect();
        let got = fft(&ones, n, true, 0.5);
        assert!((got[0] - 6.0).abs() < 1e-12 && got[1].abs() < 1e-12);
        assert!(got[2..].iter().all(|v| v.abs() < 1e-12));
    }

    #[test]
    fn inverse_undoes_forward_and_non_finite_rows_are_nan() {
        let n = 30;
        let x: Vec<f64> = row(n).into_iter().flat_map(|(a, b)| [a, b]).collect();
        let back = fft(&fft(&x, n, false, 1.0), n, true, 1.0 / n as f64);
        for (a, b) in back.iter().zip(&x) {
            assert!((a - b).abs() < 1e-12);
        }
        let mut two = [x.clone(), x.clone()].concat();
        two[2 * n + 7] = f64::INFINITY;
        let got = fft(&two, n, false, 1.0);
        assert!(got[..2 * n].iter().all(|v| v.is_finite()));
        assert!(got[2 * n..].iter().all(|v| v.is_nan()));
    }
}
