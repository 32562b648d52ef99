//! The Metal emulator (`metal-emu`) and the MSL compile check: how generated MSL is
//! verified on Linux, where no Apple GPU exists.
//!
//! - [`syntax_check`] / [`syntax_check_all`] compile MSL as C++17 against a model of the
//!   Metal standard library (`shim/metal_stdlib.h`) with `g++ -fsyntax-only`.
//! - [`MetalEmuBackend`] builds the MSL, the model and a fiber runtime
//!   (`shim/tessera_emu_runtime.h`) into a native program, cached on disk under
//!   `TESSERA_CACHE_DIR` (default `~/.cache/tessera`), and runs each threadgroup's threads
//!   as fibers: barriers and simdgroup collectives are rendezvous points, and one reached
//!   by only part of the group is reported, never a hang.
//!
//! The compiler is `g++` unless `TESSERA_CXX` names another.

mod backend;
mod build;
mod harness;
mod report;
mod syntax;
mod toolchain;

pub use backend::{EmuBuffer, EmuKernel, MetalEmuBackend};
pub use syntax::{syntax_check, syntax_check_all};
