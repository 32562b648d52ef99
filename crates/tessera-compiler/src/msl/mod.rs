//! The Metal Shading Language dialect: optimised IR in, one MSL translation unit out.
//!
//! The output has one `kernel void` entry point. Tensor parameter `i` is
//! `device T* [[buffer(i)]]` (`const device T*` when read-only); runtime scalar parameter
//! `i` is `constant T& [[buffer(i)]]`, set from its bytes; thread positions come from the
//! Metal attributes listed in [`MslSource::args`]. Threadgroup arrays are statically sized
//! in the body. f16 / bf16 are Metal's `half` / `bfloat` (so the source needs MSL 3.1),
//! with arithmetic done in `float` and rounded once, as `tessera_ir::ops` specifies.
//!
//! The walk itself is the shared C-family core ([`crate::c_family`]); this module holds
//! only what Metal spells its own way. It takes IR as `tessera_compiler::optimize(kernel,
//! Target::Metal)` leaves it: threadgroup reductions and DSL function calls must be gone
//! (they are errors here). Output is deterministic: the same kernel gives the same bytes.

mod dialect;
mod frag;
mod helpers;
mod names;
mod scalar;
mod source;
mod types;

pub use crate::c_family::EmitError;
pub use source::{MslArg, MslBuiltin, MslSource};

use tessera_ir::Kernel;

/// Translates optimised IR into MSL.
pub fn emit(kernel: &Kernel) -> Result<MslSource, EmitError> {
    crate::c_family::Emitter::new(kernel, dialect::Msl::default()).run()
}

/// The MSL spelling of a scalar type (`half`, `bfloat`, `uchar`…), for code that binds
/// generated kernels.
pub fn msl_scalar_type(s: tessera_ir::Scalar) -> &'static str {
    types::scalar(s)
}
