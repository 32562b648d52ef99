//! The Metal Shading Language emitter: optimised IR in, one MSL translation unit out.
//!
//! The output has one `kernel void` entry point. Tensor parameter `i` is
//! `device T* [[buffer(i)]]` (`const device T*` when read-only); runtime scalar parameter
//! `i` is `constant T& [[buffer(i)]]`, set from its bytes; thread positions come from the
//! Metal attributes listed in [`MslSource::args`]. Threadgroup arrays are statically sized
//! in the body. f16 / bf16 are Metal's `half` / `bfloat` (so the source needs MSL 3.1),
//! with arithmetic done in `float` and rounded once, as `tessera_ir::ops` specifies.
//!
//! The emitter takes IR as `tessera_compiler::optimize(kernel, Target::Metal)` leaves it:
//! threadgroup reductions and DSL function calls must be gone (they are errors here).
//! Output is deterministic: the same kernel gives the same bytes.

mod emitter;
mod error;
mod helpers;
mod names;
mod scalar;
mod source;
mod types;

pub use error::MslError;
pub use source::{MslArg, MslBuiltin, MslSource};

use tessera_ir::Kernel;

/// Translates optimised IR into MSL.
pub fn emit(kernel: &Kernel) -> Result<MslSource, MslError> {
    emitter::Emitter::new(kernel).emit()
}

/// The MSL spelling of a scalar type (`half`, `bfloat`, `uchar`…), for code that binds
/// generated kernels.
pub fn msl_scalar_type(s: tessera_ir::Scalar) -> &'static str {
    types::scalar(s)
}
