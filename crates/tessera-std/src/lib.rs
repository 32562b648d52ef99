//! Tessera's standard library: LLM-inference kernels written in the DSL, the op wrappers an
//! engine calls (which check every dispatch invariant and pick the kernel variant and
//! geometry), f64 references written from the math, and the registered correctness and
//! benchmark cases that `tessera check` and `tessera bench` run.

pub mod attention;
pub mod bandwidth;
pub mod conv;
pub mod decl;
pub mod elementwise;
pub mod error;
pub mod gdn;
pub mod matmul;
pub mod norm;
pub mod registry;
pub mod rope;
pub mod runner;
pub mod ssm;
pub mod testing;
pub mod validate;

pub use decl::OpDecl;
pub use error::OpError;
pub use registry::{find_op, ops, BenchCase, Case, CaseKind, KernelUse, Outcome};
