//! The fast Walsh–Hadamard transform over the last dimension (`hadamard`): `out = scale ·
//! x · H_n` for n = 2^k up to 32768, H_n the Sylvester-ordered Hadamard matrix (as
//! `scipy.linalg.hadamard` builds it); with scale 1/√n the orthonormal rotation that
//! rotated quantization (QuaRot, SpinQuant) applies before quantizing. Widths of
//! n = m·2^k ≤ 32768 for m = 12, 20, 28 take QuaRot's `matmul_hadU`: each row x becomes
//! `scale · (H_m ⊗ H_{2^k}) · x`, H_m from Paley's constructions ([`kron`]).

#[cfg(feature = "cases")]
mod cases;
pub mod columns;
mod decl;
pub mod fwht;
pub mod kron;
pub mod kron_columns;
#[cfg(feature = "cases")]
pub mod reference;

pub use fwht::{hadamard, MAX_N};
