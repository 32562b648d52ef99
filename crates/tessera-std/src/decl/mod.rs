//! Op declarations: the one place an op is described. A declaration names the op's
//! tensors (shapes in named dimensions, allowed dtypes, optional or not), its parameters
//! (type, default, allowed values, meaning), its invariants and variants, how its outputs'
//! shapes and dtypes follow from its inputs, the call into its wrapper, its f64 reference,
//! and its kernels, cases and benchmarks. `tessera run`, `tessera list`, `check`, `bench`
//! and the docs tables are all read from it, so nothing about an op is written twice.
//! The reference, kernels, cases and benchmarks are fields only with the `cases` feature:
//! they are what `check` and `bench` run, not what an engine calling the op needs.

mod accuracy;
mod args;
#[cfg(all(test, feature = "cases"))]
mod call_allocations;
mod dims;
pub mod markdown;
mod params;
#[cfg(feature = "cases")]
mod rejection_cases;
mod rejections;

pub use accuracy::{Accuracy, Tolerance};
pub use args::{HostTensor, OpArgs, OutputSpec, RefArgs};
pub use dims::{eval_shape, Dims};
pub use params::{ParamValue, ParamValues};
#[cfg(feature = "cases")]
pub use rejection_cases::rejection_cases;
pub use rejections::{Break, Rejection};

use crate::error::OpError;
#[cfg(feature = "cases")]
use crate::registry::{BenchCase, Case, KernelUse};
use std::collections::BTreeMap;
use tessera_runtime::{Context, DType, Tensor};

/// f32, f16 and bf16: the dtypes every float op takes.
pub const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16];
/// The u32 of positions and lengths.
pub const U32: &[DType] = &[DType::U32];
/// f32 only.
pub const F32: &[DType] = &[DType::F32];

/// Which dtypes a tensor may have.
#[derive(Clone, Copy, Debug)]
pub enum DtypeRule {
    /// Any of these (for an output: the first).
    OneOf(&'static [DType]),
    /// The dtype of the named input.
    Like(&'static str),
    /// f32 or the dtype of the named input (a recurrent state); for an output, the dtype
    /// of the named input when it is given, else f32.
    F32OrLike(&'static str),
    /// Outputs only: computed from the inputs and parameters; the text says how.
    Derived(fn(&OpArgs) -> Result<DType, OpError>, &'static str),
}

/// One input tensor.
#[derive(Clone, Copy, Debug)]
pub struct TensorDecl {
    pub name: &'static str,
    /// Named dimensions, outermost first: `["tokens", "heads", "head_dim"]`. A name ending
    /// in `…` stands for any number of leading dimensions; a dimension may be a product or
    /// sum of names and integers (`"W - 1"`, `"2·Hk·Dk + Hv·Dv"`).
    pub shape: &'static [&'static str],
    pub dtype: DtypeRule,
    pub optional: bool,
    pub doc: &'static str,
}

impl TensorDecl {
    /// A required input whose dtype follows `dtype`.
    pub const fn new(
        name: &'static str,
        shape: &'static [&'static str],
        dtype: DtypeRule,
        doc: &'static str,
    ) -> Self {
        TensorDecl {
            name,
            shape,
            dtype,
            optional: false,
            doc,
        }
    }

    /// A required input of any float dtype ([`FLOATS`]).
    pub const fn float(
        name: &'static str,
        shape: &'static [&'static str],
        doc: &'static str,
    ) -> Self {
        Self::new(name, shape, DtypeRule::OneOf(FLOATS), doc)
    }

    /// The same input, optional.
    pub const fn optional(self) -> Self {
        TensorDecl {
            optional: true,
            ..self
        }
    }
}

/// How an output's shape follows from the inputs.
#[derive(Clone, Copy)]
pub enum ShapeFrom {
    /// The shape of the named input.
    Like(&'static str),
    /// The output's own named dimensions, bound from the inputs' shapes.
    Dims,
    /// Computed from the inputs and parameters (the declared shape documents it).
    Derived(fn(&OpArgs) -> Result<Vec<usize>, OpError>),
}

/// One output tensor.
#[derive(Clone, Copy)]
pub struct OutputDecl {
    pub name: &'static str,
    pub shape: &'static [&'static str],
    pub dtype: DtypeRule,
    pub shape_from: ShapeFrom,
    pub doc: &'static str,
}

impl OutputDecl {
    /// An output with the shape of the input `like` and the dtype `dtype`.
    pub const fn like(
        like: &'static str,
        name: &'static str,
        shape: &'static [&'static str],
        dtype: DtypeRule,
        doc: &'static str,
    ) -> Self {
        OutputDecl {
            name,
            shape,
            dtype,
            shape_from: ShapeFrom::Like(like),
            doc,
        }
    }
}

/// A parameter's type and its allowed values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamKind {
    /// `true`, `false`, `1` or `0`.
    Bool,
    /// An unsigned integer in `min..=max`.
    UInt { min: u64, max: u64 },
    /// A finite number.
    Float,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// Comma-separated unsigned integers: `0,5,12`.
    UIntList,
}

/// What happens when a parameter is not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamDefault {
    /// It must be given.
    Required,
    /// This value.
    Value(&'static str),
    /// The op decides; the text says how.
    Auto(&'static str),
}

/// One parameter.
#[derive(Clone, Copy, Debug)]
pub struct ParamDecl {
    pub name: &'static str,
    pub kind: ParamKind,
    pub default: ParamDefault,
    pub doc: &'static str,
}

/// A kernel variant the op picks, and when.
#[derive(Clone, Copy, Debug)]
pub struct VariantDecl {
    pub name: &'static str,
    pub when: &'static str,
}

/// A small call that satisfies every invariant: dimension sizes, parameters, and value
/// ranges for inputs whose values matter (lengths, log decays). `tessera run`'s registry
/// walk runs every op on it.
#[derive(Clone, Copy, Debug)]
pub struct Example {
    pub dims: &'static [(&'static str, usize)],
    pub params: &'static [(&'static str, &'static str)],
    /// `(input, low, high)`: values drawn from `[low, high)`; others from `[-1, 1)`
    /// (floats) or `[0, 16)` (integers).
    pub ranges: &'static [(&'static str, f64, f64)],
    /// Optional inputs the example gives.
    pub with: &'static [&'static str],
}

/// A workspace made for one call of a declared op (the op's own workspace type, which
/// the call takes back with [`OpArgs::workspace`]).
pub type Workspace = Box<dyn std::any::Any>;

/// The scratch an op takes from its caller instead of allocating inside the call, so that
/// every launch of the call can be captured in a CUDA graph.
#[derive(Clone, Copy)]
pub struct WorkspaceDecl {
    /// How many bytes, as a function of the shape: shown by `tessera list` and the docs.
    pub bytes: &'static str,
    /// Makes the workspace for a call's tensors and parameters; [`OpDecl::invoke`] runs it
    /// before, and outside, the call.
    pub make: fn(&Context, &OpArgs) -> Result<Workspace, OpError>,
}

/// The call into the op wrapper, with the tensors and parsed parameters by name.
pub type CallFn = fn(&Context, &OpArgs) -> Result<(), OpError>;
/// The f64 reference: every output, in declaration order, from the inputs in f64.
pub type ReferenceFn = fn(&RefArgs) -> Result<Vec<Vec<f64>>, OpError>;

/// One registered op.
pub struct OpDecl {
    /// The op's name, as the wrapper function is called: `rms_norm`.
    pub name: &'static str,
    /// Its family (the folder it lives in): `norm`.
    pub family: &'static str,
    pub summary: &'static str,
    pub inputs: &'static [TensorDecl],
    pub outputs: &'static [OutputDecl],
    pub params: &'static [ParamDecl],
    /// What the wrapper checks before anything runs, in words.
    pub invariants: &'static [&'static str],
    /// Calls that break an invariant, each run as a rejection case.
    pub rejections: &'static [Rejection],
    pub variants: &'static [VariantDecl],
    pub example: Example,
    /// The caller's scratch the op takes, if it needs any.
    pub workspace: Option<WorkspaceDecl>,
    /// How close the outputs come to the f64 reference, per dtype: what its cases and
    /// benchmark checks compare against.
    pub accuracy: Accuracy,
    /// The op call. It allocates nothing: a workspace comes in [`OpArgs::workspace`].
    pub call: CallFn,
    /// The f64 reference (with the `cases` feature, like the three fields below).
    #[cfg(feature = "cases")]
    pub reference: ReferenceFn,
    /// The kernels it launches with the specialisations its cases and benches use.
    #[cfg(feature = "cases")]
    pub kernels: fn() -> Vec<KernelUse>,
    /// Correctness and rejection cases.
    #[cfg(feature = "cases")]
    pub cases: fn() -> Vec<Case>,
    /// Benchmark shapes.
    #[cfg(feature = "cases")]
    pub benches: fn() -> Vec<BenchCase>,
}

impl OpDecl {
    /// The op's own cases and the rejection cases generated from its declaration.
    #[cfg(feature = "cases")]
    pub fn all_cases(&'static self) -> Vec<Case> {
        let mut v = (self.cases)();
        v.extend(rejection_cases(self));
        v
    }

    /// Makes the call's workspace (when the op takes one), then calls the op with it: the
    /// way every surface runs a declared op, so the op call itself never allocates.
    pub fn invoke(
        &'static self,
        ctx: &Context,
        inputs: &BTreeMap<String, Tensor>,
        outputs: &BTreeMap<String, Tensor>,
        params: &ParamValues,
    ) -> Result<(), OpError> {
        let bare = OpArgs {
            op: self,
            inputs,
            outputs,
            params,
            workspace: None,
        };
        let ws = self.make_workspace(ctx, &bare)?;
        let args = OpArgs {
            workspace: ws.as_ref(),
            ..bare
        };
        (self.call)(ctx, &args)
    }

    /// The workspace a call with these arguments takes, if the op takes one.
    pub fn make_workspace(
        &self,
        ctx: &Context,
        args: &OpArgs,
    ) -> Result<Option<Workspace>, OpError> {
        self.workspace.map(|w| (w.make)(ctx, args)).transpose()
    }

    pub fn input(&self, name: &str) -> Option<&'static TensorDecl> {
        self.inputs.iter().find(|t| t.name == name)
    }

    pub fn param(&self, name: &str) -> Option<&'static ParamDecl> {
        self.params.iter().find(|p| p.name == name)
    }

    /// One line per tensor and parameter, for `tessera run`'s help and errors.
    pub fn usage(&self) -> String {
        let mut s = format!("{} — {}", self.name, self.summary);
        for t in self.inputs {
            let opt = if t.optional { ", optional" } else { "" };
            s += &format!(
                "\n    --input  {}=FILE  {} {}{opt}: {}",
                t.name,
                shape_text(t.shape),
                dtype_text(t.dtype),
                t.doc
            );
        }
        for p in self.params {
            s += &format!(
                "\n    --param  {}={}  {}; {}",
                p.name,
                kind_text(p.kind),
                default_text(p.default),
                p.doc
            );
        }
        for o in self.outputs {
            s += &format!(
                "\n    --output {}=FILE  {} {}: {}",
                o.name,
                shape_text(o.shape),
                dtype_text(o.dtype),
                o.doc
            );
        }
        if let Some(w) = self.workspace {
            s += &format!("\n    workspace: {} (made before the call)", w.bytes);
        }
        s += &format!(
            "\n    accuracy vs the f64 reference: {}",
            self.accuracy.text()
        );
        s
    }
}

/// `[tokens, heads, head_dim]`.
pub fn shape_text(shape: &[&str]) -> String {
    format!("[{}]", shape.join(", "))
}

/// `f32|f16|bf16`, `like q`, `f32 or like q`.
pub fn dtype_text(d: DtypeRule) -> String {
    match d {
        DtypeRule::OneOf(list) => list.iter().map(|t| t.name()).collect::<Vec<_>>().join("|"),
        DtypeRule::Like(n) => format!("like {n}"),
        DtypeRule::F32OrLike(n) => format!("f32 or like {n}"),
        DtypeRule::Derived(_, how) => how.to_string(),
    }
}

/// `bool`, `uint 1..=64`, `float`, `neox|interleaved`, `uint,uint,…`.
pub fn kind_text(k: ParamKind) -> String {
    match k {
        ParamKind::Bool => "bool".into(),
        ParamKind::UInt { min, max } if max >= u64::from(u32::MAX) => format!("uint ≥ {min}"),
        ParamKind::UInt { min, max } => format!("uint {min}..={max}"),
        ParamKind::Float => "float".into(),
        ParamKind::Choice(v) => v.join("|"),
        ParamKind::UIntList => "uint,uint,…".into(),
    }
}

/// `required`, `default 1e-6`, `default: 1/sqrt(head_dim)`.
pub fn default_text(d: ParamDefault) -> String {
    match d {
        ParamDefault::Required => "required".into(),
        ParamDefault::Value(v) => format!("default {v}"),
        ParamDefault::Auto(what) => format!("default: {what}"),
    }
}
