//! Quantized weights in MLX's affine format (bits 2, 3, 4, 5, 6, 8; groups of 32, 64 or
//! 128 with a scale and a bias each), laid out exactly as MLX writes them, so the tensors
//! of an MLX-quantized safetensors file are used as they are: quantize, dequantize, and
//! the quantized GEMV / skinny GEMM of decode.

pub mod affine;
#[cfg(feature = "cases")]
mod cases;
mod decl;
pub mod format;
pub mod qgemv;
pub mod qgemv_mma;
#[cfg(feature = "cases")]
pub mod reference;

pub use affine::{affine_dequantize, affine_quantize};
pub use format::{AffineFormat, AFFINE_BITS, AFFINE_GROUP_SIZES};
pub use qgemv::affine_qgemv;
