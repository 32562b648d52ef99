//! The CUDA C dialect of the C-family emitter ([`crate::c_family`]): turns an optimised
//! kernel into one self-contained CUDA C source file that NVRTC compiles with no toolkit
//! headers (f16 / bf16 are our own 16-bit types with round-to-nearest-even conversions;
//! warp collectives are shuffle butterflies).
//!
//! ```text
//! let kernel = tessera_compiler::optimize(kernel, Target::Cuda)?;
//! let src = tessera_compiler::cuda::emit(&kernel)?;   // src.source, src.entry, …
//! ```
//!
//! Output is deterministic: the same kernel always gives the same text, so it can be
//! snapshot-tested and used as a cache key.

mod dialect;
mod frag;
mod helpers;
mod names;
mod prelude;
pub mod samples;
mod scalar;
#[cfg(test)]
mod tests;
mod tiles;

pub use crate::c_family::EmitError;
pub use dialect::STATIC_SHARED_LIMIT;

use tessera_ir::{Kernel, Scalar, Type};

/// NVRTC options the emitted source relies on. `--fmad=false` keeps `a * b + c` two
/// roundings, as the IR defines it (an explicit `fma` op is still one).
pub const NVRTC_OPTIONS: &[&str] = &["--fmad=false", "--std=c++17"];

/// One kernel's CUDA C, ready for NVRTC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaSource {
    /// The whole translation unit.
    pub source: String,
    /// The `extern "C" __global__` function to launch.
    pub entry: String,
    /// Threadgroup memory declared as static `__shared__` arrays.
    pub static_shared_bytes: usize,
    /// Threadgroup memory the launch must provide dynamically (nonzero only above
    /// [`STATIC_SHARED_LIMIT`]; the launch then opts in above 48 KiB).
    pub dynamic_shared_bytes: usize,
    /// The kernel uses simdgroup collectives: its threadgroup size must be a multiple of 32.
    pub uses_simdgroups: bool,
    /// Options to pass to NVRTC besides the architecture ([`NVRTC_OPTIONS`]).
    pub options: Vec<String>,
}

impl CudaSource {
    /// All threadgroup memory the kernel uses, static and dynamic.
    pub fn shared_bytes(&self) -> usize {
        self.static_shared_bytes + self.dynamic_shared_bytes
    }
}

/// True if any value, parameter or array of the kernel has element type `s`.
fn uses_scalar(kernel: &Kernel, s: Scalar) -> bool {
    let body = &kernel.body;
    body.values.iter().any(|t: &Type| t.elem() == s)
        || body.shared.iter().chain(&body.locals).any(|a| a.elem == s)
        || body.frags.iter().any(|f| f.elem == s)
        || kernel.params.iter().any(|p| match p.kind {
            tessera_ir::ParamKind::Tensor { elem, .. } => elem == s,
            tessera_ir::ParamKind::Scalar(t) => t == s,
        })
}

/// Emits the CUDA C of an optimised kernel. `GroupReduce` and `Call` must have been
/// lowered by [`crate::optimize`] first; they are an error here.
pub fn emit(kernel: &Kernel) -> Result<CudaSource, EmitError> {
    crate::c_family::Emitter::new(kernel, dialect::Cuda::default()).run()
}
