//! The registry of ops: each op family submits one [`OpDecl`] per op (in its `decl.rs`),
//! naming its tensors, parameters and call, its kernels (with the specialisations it
//! uses), its correctness and rejection cases, and its benchmark shapes. `tessera list`,
//! `run`, `check`, `compile` and `bench` read it; a case cannot exist without a
//! reference, because building one requires it. The cases and benchmarks (and what they
//! are made of) exist only with the `cases` feature.

#[cfg(feature = "cases")]
use crate::testing::CaseRng;
use tessera_ir::{KernelDef, Specialization};
#[cfg(feature = "cases")]
use tessera_runtime::{Context, DType, Tensor};

pub use crate::decl::OpDecl;

inventory::collect!(OpDecl);

/// Every registered op, sorted by family and name.
pub fn ops() -> Vec<&'static OpDecl> {
    let mut v: Vec<&'static OpDecl> = inventory::iter::<OpDecl>.into_iter().collect();
    v.sort_by_key(|o| (o.family, o.name));
    v
}

/// The registered op of that name.
pub fn find_op(name: &str) -> Option<&'static OpDecl> {
    inventory::iter::<OpDecl>
        .into_iter()
        .find(|o| o.name == name)
}

/// A kernel and one specialisation of it.
#[derive(Clone, Debug)]
pub struct KernelUse {
    pub def: &'static KernelDef,
    pub spec: Specialization,
}

#[cfg(feature = "cases")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaseKind {
    /// Random inputs, output poisoned with NaN, compared with the f64 reference.
    Correctness,
    /// A call that breaks an invariant: must be rejected and must write nothing.
    Rejection,
}

#[cfg(feature = "cases")]
/// What a passing case checked.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Elements compared (correctness) or checks made (rejection); zero is a failure.
    pub checked: usize,
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    /// For rejections: the error message the op gave.
    pub note: String,
}

#[cfg(feature = "cases")]
pub type CaseFn = Box<dyn Fn(&Context, &mut CaseRng) -> Result<Outcome, String> + Send + Sync>;

#[cfg(feature = "cases")]
/// One registered case.
pub struct Case {
    pub op: &'static str,
    pub kind: CaseKind,
    pub dtype: Option<DType>,
    /// Shape and variant: `rows=7 n=4096`.
    pub name: String,
    pub run: CaseFn,
}

#[cfg(feature = "cases")]
/// A prepared benchmark: inputs allocated, a closure that launches once.
pub struct PreparedBench {
    pub launch: Box<dyn FnMut() -> Result<(), String>>,
    /// The output to compare with the reference after timing, and the reference.
    pub output: Tensor,
    pub reference: Vec<f64>,
}

#[cfg(feature = "cases")]
pub type BenchFn =
    Box<dyn Fn(&Context, &mut CaseRng) -> Result<PreparedBench, String> + Send + Sync>;

#[cfg(feature = "cases")]
/// One benchmark shape.
pub struct BenchCase {
    pub op: &'static str,
    pub kernel: &'static str,
    pub dtype: DType,
    /// `rows=4096 n=4096`.
    pub shape: String,
    /// Bytes read and written by one launch (for GB/s).
    pub bytes: u64,
    /// Floating-point operations of one launch (for TFLOP/s; 0 for memory-bound ops).
    pub flops: u64,
    /// Small enough for a CPU run (`--quick`).
    pub quick: bool,
    pub prepare: BenchFn,
}
