//! Tessera: LLM-inference kernels written once as Rust functions under `#[kernel]`, lowered
//! to one IR, optimised, and run on the CPU (the reference), on NVIDIA GPUs (CUDA C through
//! NVRTC) and on Apple GPUs (Metal). `use tessera::prelude::*;` brings in what a kernel
//! author and a caller need; the standard library's op wrappers are in [`ops`].

extern crate self as tessera;

pub use tessera_compiler as compiler;
pub use tessera_ir as ir;
pub use tessera_macros::{func, kernel};
pub use tessera_runtime as runtime;
/// The standard library: op wrappers (`ops::norm::rms_norm`, …) and their declarations.
pub use tessera_std as ops;

/// The names a kernel author and a caller use.
pub mod prelude {
    pub use crate::{func, kernel};
    pub use half::{bf16, f16};
    pub use tessera_ir::{KernelDef, Literal, Scalar};
    pub use tessera_runtime::{BackendKind, Context, DType, RuntimeError, Tensor};
}
