//! The Metal backend (macOS only): generated MSL compiled at run time by the Metal
//! framework into pipeline states (cached per source), shared-storage buffers, and
//! dispatch on one serial command queue, through `objc2-metal` — the backend's own device
//! and queue, or a caller's device, queue, command buffer and buffers ([`interop`]).
//!
//! Nothing here has run on Apple hardware yet; the same MSL is verified on Linux by
//! [`crate::metal_emu`] (compile check and emulation). See `docs/metal.md`.

mod backend;
mod buffer;
pub mod interop;
mod library;

pub use backend::MetalBackend;
pub use buffer::MetalBuffer;

use crate::backend::Backend;
use crate::error::Result;
use std::sync::Arc;

/// Opens Metal device `ordinal` (only the system default device, 0, is supported).
pub fn open(ordinal: usize) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(MetalBackend::new(ordinal)?))
}
