//! Tessera's standard library: LLM-inference kernels written in the DSL, the op wrappers an
//! engine calls (which check every dispatch invariant and pick the kernel variant and
//! geometry), f64 references written from the math, and the registered correctness and
//! benchmark cases that `tessera check` and `tessera bench` run.
//!
//! The references, cases, benches, kernel specialisation lists, the case runner and the
//! test harness compile only with the `cases` feature (off by default; `tessera-cli`
//! turns it on). A feature rather than a second crate, because each op's declaration
//! names its reference and cases: with the feature off those fields drop out of
//! `OpDecl`, and the declaration stays the one place an op is described, while an engine
//! that only calls ops compiles none of the test code. docs/adding-an-op.md gives the
//! layout of a family.

pub mod attention;
#[cfg(feature = "cases")]
pub mod bandwidth;
pub mod conv;
pub mod decl;
pub mod elementwise;
pub mod error;
pub mod fft;
pub mod float_range;
pub mod gdn;
pub mod gguf;
pub mod hadamard;
pub mod matmul;
pub mod moe;
pub mod norm;
pub mod quant;
pub mod reduce;
pub mod registry;
pub mod rope;
#[cfg(feature = "cases")]
pub mod runner;
pub mod sampling;
pub mod ssm;
#[cfg(feature = "cases")]
pub mod testing;
pub mod validate;

pub use decl::OpDecl;
pub use error::OpError;
pub use registry::{find_op, ops, KernelUse};
#[cfg(feature = "cases")]
pub use registry::{BenchCase, Case, CaseKind, Outcome};
