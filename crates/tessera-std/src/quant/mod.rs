//! Quantized weights in MLX's affine format (bits 2, 3, 4, 5, 6, 8; groups of 32, 64 or
//! 128 with a scale and a bias each), laid out exactly as MLX writes them, so the tensors
//! of an MLX-quantized safetensors file are used as they are: quantize, dequantize, the
//! quantized GEMV / skinny GEMM of decode and the quantized GEMM of prefill. And fp8
//! weights and activations (e4m3 and e5m2 as PyTorch stores them, scales per tensor or per
//! block as DeepSeek-V3 lays them out): quantize, dequantize and a GEMV. And GPTQ's int4
//! checkpoints (act-order off): dequantize and a GEMV on the packed words; the same for
//! AWQ's.

pub mod affine;
pub mod awq;
#[cfg(feature = "cases")]
mod awq_cases;
mod awq_decl;
#[cfg(feature = "cases")]
pub mod awq_reference;
#[cfg(feature = "cases")]
mod cases;
mod decl;
pub mod format;
pub mod fp8;
#[cfg(feature = "cases")]
mod fp8_cases;
mod fp8_decl;
pub mod fp8_format;
pub mod fp8_qgemm;
pub mod fp8_qgemv;
#[cfg(feature = "cases")]
pub mod fp8_reference;
pub mod gptq;
#[cfg(feature = "cases")]
mod gptq_cases;
mod gptq_decl;
#[cfg(feature = "cases")]
pub mod gptq_reference;
pub mod int4_qgemm;
pub mod qgemm;
pub(crate) mod qgemm_decl;
pub mod qgemm_formats;
#[cfg(feature = "cases")]
pub(crate) mod qgemm_formats_cases;
pub mod qgemm_tiles;
pub mod qgemv;
pub mod qgemv_mma;
#[cfg(feature = "cases")]
pub mod reference;

pub use affine::{affine_dequantize, affine_quantize};
pub use awq::{awq_dequantize, awq_qgemv};
pub use format::{AffineFormat, AFFINE_BITS, AFFINE_GROUP_SIZES};
pub use fp8::{fp8_dequantize, fp8_quantize};
pub use fp8_format::{Fp8Format, Fp8Scaling};
pub use fp8_qgemm::fp8_qgemm;
pub use fp8_qgemv::fp8_qgemv;
pub use gptq::{gptq_dequantize, gptq_qgemv};
pub use int4_qgemm::{awq_qgemm, gptq_qgemm};
pub use qgemm::affine_qgemm;
pub use qgemv::affine_qgemv;
