//! The fast Fourier transform over rows of complex f32 (`fft`): `out = scale · DFT(x)`
//! forward or inverse with `torch.fft`'s normalisations, x `[rows…, n, 2]` as (re, im)
//! pairs. Powers of two up to 8192 run one in-threadgroup Stockham transform; any other
//! n up to 4096 runs Bluestein's chirp-z algorithm over a power-of-two transform of
//! m ≥ 2n − 1, fused into the same single kernel.

#[cfg(feature = "cases")]
mod cases;
mod decl;
pub mod kernels;
mod ops;
pub mod plan;
#[cfg(feature = "cases")]
pub mod reference;

pub use ops::fft;
pub use plan::{FftNorm, FftPlan, MAX_N, MAX_POW2_N};
