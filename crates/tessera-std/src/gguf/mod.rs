//! llama.cpp's GGUF block formats (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K) as they are stored in a
//! GGUF file: dequantization bit-exact with llama.cpp's reference, a GEMV that reads the
//! blocks directly, the GEMM of prefill on `quant_gemm_kernel` (the blocks dequantized
//! into its tiles), and Q4_0 / Q8_0 quantization byte-exact with llama.cpp's.

#[cfg(feature = "cases")]
pub(crate) mod cases;
mod decl;
pub mod format;
pub mod kernels;
pub mod ops;
#[cfg(feature = "cases")]
pub mod reference;

pub use format::GgufFormat;
pub use ops::{gguf_dequantize, gguf_qgemm, gguf_qgemv, gguf_quantize};
