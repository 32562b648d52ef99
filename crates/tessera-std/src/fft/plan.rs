//! What an FFT of rows of n needs before it runs, made once per n: the size m of the
//! power-of-two transform that does the work (n itself, or for any other n the m ≥ 2n − 1
//! of Bluestein's chirp-z algorithm) and, for Bluestein, the chirp and the spectrum of the
//! convolution kernel, computed on the host in f64 and rounded once to f32.

use crate::error::{runtime, OpError};
use std::f64::consts::PI;
use tessera_runtime::{Context, Tensor};

/// The longest row of any length; powers of two go on to [`MAX_POW2_N`].
pub const MAX_N: usize = 4096;
/// The longest power-of-two row (and the largest Bluestein transform, 2·4096 rounded up).
pub const MAX_POW2_N: usize = 8192;

/// How the transform is scaled, as `torch.fft.fft`'s `norm` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FftNorm {
    /// The forward transform unscaled, the inverse by 1/n (torch's default).
    Backward,
    /// Both by 1/√n: the unitary transform.
    Ortho,
    /// The forward transform by 1/n, the inverse unscaled.
    Forward,
}

impl FftNorm {
    /// `backward`, `ortho` or `forward`.
    pub fn from_name(name: &str) -> Option<FftNorm> {
        match name {
            "backward" => Some(FftNorm::Backward),
            "ortho" => Some(FftNorm::Ortho),
            "forward" => Some(FftNorm::Forward),
            _ => None,
        }
    }

    /// The factor a transform of length `n` in this direction is multiplied by.
    pub fn scale(self, n: usize, inverse: bool) -> f64 {
        let n = n as f64;
        match (self, inverse) {
            (FftNorm::Ortho, _) => 1.0 / n.sqrt(),
            (FftNorm::Backward, true) | (FftNorm::Forward, false) => 1.0 / n,
            _ => 1.0,
        }
    }
}

/// Bluestein's tables for one n, on the device.
pub struct ChirpTables {
    /// f32 `[n, 2]`: w_k = exp(−iπ·k²/n), the forward chirp (the inverse takes its conjugate).
    pub chirp: Tensor,
    /// f32 `[m, 2]`: the DFT of the kernel b (b_k = conj(w_|k|) for |k| < n, cyclic over m,
    /// zero between), divided by m so that the inverse transform needs no scaling.
    pub spectrum: Tensor,
}

/// The plan of an FFT over rows of `n`: made once per length and reused by every call.
pub struct FftPlan {
    pub n: usize,
    /// The power-of-two transform length: n, or the Bluestein size.
    pub m: usize,
    /// Bluestein's tables when n is not a power of two.
    pub chirp: Option<ChirpTables>,
}

const OP: &str = "FftPlan";

impl FftPlan {
    /// Validates n (1 to 4096, or a power of two up to 8192) and, for lengths other than
    /// powers of two, uploads Bluestein's chirp and kernel spectrum.
    pub fn new(ctx: &Context, n: usize) -> Result<FftPlan, OpError> {
        let pow2 = n.is_power_of_two() && n <= MAX_POW2_N;
        if n == 0 || !(n <= MAX_N || pow2) {
            return Err(OpError::invalid(
                OP,
                format!("n = {n} must be from 1 to {MAX_N}, or a power of two up to {MAX_POW2_N}"),
            ));
        }
        if pow2 {
            return Ok(FftPlan {
                n,
                m: n,
                chirp: None,
            });
        }
        let m = bluestein_size(n);
        let w = chirp(n);
        let mut b = vec![(0.0, 0.0); m];
        for (k, &(c, s)) in w.iter().enumerate() {
            b[k] = (c, -s);
            b[(m - k) % m] = (c, -s);
        }
        fft_f64(&mut b);
        let inv_m = 1.0 / m as f64;
        let flat = |v: &[(f64, f64)], scale: f64| -> Vec<f32> {
            v.iter()
                .flat_map(|&(re, im)| [(re * scale) as f32, (im * scale) as f32])
                .collect()
        };
        Ok(FftPlan {
            n,
            m,
            chirp: Some(ChirpTables {
                chirp: ctx.tensor(&flat(&w, 1.0), &[n, 2]).map_err(runtime(OP))?,
                spectrum: ctx.tensor(&flat(&b, inv_m), &[m, 2]).map_err(runtime(OP))?,
            }),
        })
    }
}

/// The smallest power of two m ≥ 2n − 1 (a cyclic convolution of that length holds the
/// linear one of the chirp-z transform).
pub fn bluestein_size(n: usize) -> usize {
    (2 * n - 1).next_power_of_two()
}

/// w_k = exp(−iπ·k²/n) for k < n, the angle reduced exactly in integers (k² mod 2n) before
/// the f64 cos and sin.
fn chirp(n: usize) -> Vec<(f64, f64)> {
    (0..n as u64)
        .map(|k| {
            let a = PI * ((k * k) % (2 * n as u64)) as f64 / n as f64;
            (a.cos(), -a.sin())
        })
        .collect()
}

/// The forward DFT of `a` in place (its length a power of two), f64: iterative radix-2,
/// each twiddle exp(−2πi·k/len) from its exact integer angle.
fn fft_f64(a: &mut [(f64, f64)]) {
    let n = a.len();
    if n < 2 {
        return;
    }
    let bits = n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if j > i {
            a.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let half = len / 2;
        for start in (0..n).step_by(len) {
            for k in 0..half {
                let ang = -2.0 * PI * k as f64 / len as f64;
                let (c, s) = (ang.cos(), ang.sin());
                let (ur, ui) = a[start + k];
                let (xr, xi) = a[start + k + half];
                let (vr, vi) = (xr * c - xi * s, xr * s + xi * c);
                a[start + k] = (ur + vr, ui + vi);
                a[start + k + half] = (ur - vr, ui - vi);
            }
        }
        len *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DFT by its definition, for the host FFT to match.
    fn dft(a: &[(f64, f64)]) -> Vec<(f64, f64)> {
        let n = a.len();
        (0..n)
            .map(|k| {
                a.iter()
                    .enumerate()
                    .fold((0.0, 0.0), |(sr, si), (j, &(xr, xi))| {
                        let ang = -2.0 * PI * ((j * k) % n) as f64 / n as f64;
                        let (c, s) = (ang.cos(), ang.sin());
                        (sr + xr * c - xi * s, si + xr * s + xi * c)
                    })
            })
            .collect()
    }

    #[test]
    fn the_host_fft_is_the_dft() {
        for n in [1, 2, 4, 8, 64, 256] {
            let x: Vec<(f64, f64)> = (0..n)
                .map(|i| {
                    (
                        ((i * 7 + 3) % 11) as f64 - 5.0,
                        ((i * 5 + 1) % 13) as f64 - 6.0,
                    )
                })
                .collect();
            let want = dft(&x);
            let mut got = x.clone();
            fft_f64(&mut got);
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g.0 - w.0).abs() < 1e-9 && (g.1 - w.1).abs() < 1e-9,
                    "n = {n}"
                );
            }
        }
    }

    #[test]
    fn the_chirp_is_exp_of_minus_i_pi_k_squared_over_n() {
        for n in [3, 100, 4095] {
            for (k, (c, s)) in chirp(n).into_iter().enumerate() {
                let a = PI * (k as f64 * k as f64) / n as f64;
                assert!((c - a.cos()).abs() < 1e-9 && (s + a.sin()).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn lengths_and_sizes() {
        assert_eq!(bluestein_size(1), 1);
        assert_eq!(bluestein_size(3), 8);
        assert_eq!(bluestein_size(2047), 4096);
        assert_eq!(bluestein_size(2049), 8192);
        assert_eq!(bluestein_size(MAX_N - 1), MAX_POW2_N);
        assert_eq!(FftNorm::Ortho.scale(4, true), 0.5);
        assert_eq!(FftNorm::Backward.scale(4, false), 1.0);
        assert_eq!(FftNorm::Backward.scale(4, true), 0.25);
        assert_eq!(FftNorm::Forward.scale(4, false), 0.25);
    }
}
