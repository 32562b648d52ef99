//! Tessera's runtime: a [`Context`] owns one backend, typed device [`Tensor`]s, a compile
//! cache keyed by each kernel's definition, and checked launches: a `#[kernel]`'s typed
//! `kernel::launch(&ctx, kernel::Args { … })` ([`TypedLaunch`]), or by name for dynamic
//! callers (`ctx.launch(&KERNEL).arg("x", &x)….run()`, [`Launch`]).
//!
//! Backends implement [`Backend`]; the CPU backend ([`cpu`]) is always present and is the
//! reference and sanitizer. GPU backends plug in at [`registry`].

pub mod backend;
mod cache;
pub mod context;
pub mod cpu;
pub mod cuda;
mod dump;
pub mod error;
pub mod graph;
pub mod grid;
pub mod launch;
#[cfg(target_os = "macos")]
pub mod metal;
pub mod metal_emu;
pub mod registry;
pub mod tensor;

pub use backend::{
    Backend, BackendKind, CompiledKernel, DeviceBuffer, DeviceGraph, DeviceInfo, KernelArg,
};
pub use context::Context;
pub use error::{Result, RuntimeError, SanitizerError, Violation};
pub use graph::Recorded;
pub use launch::{BoundArg, Launch, TypedLaunch};
pub use tensor::{Element, Tensor};
pub use tessera_ir::Scalar as DType;
pub use tessera_ir::{KernelDef, Literal, Specialization};
