//! Tessera's compiler: optimisation passes over the IR and per-target source emitters.
//! [`compile`] is the one entry point from built IR to a target's source.

mod c_family;
pub mod cuda;
pub mod msl;
pub mod passes;

pub use c_family::EmitError;

use tessera_ir::{verify_kernel, verify_lowered_kernel, IrError, Kernel};
use thiserror::Error;

/// What the optimised IR is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    Cpu,
    Cuda,
    Metal,
}

#[derive(Clone, Debug, PartialEq, Error)]
pub enum CompileError {
    #[error(transparent)]
    Ir(#[from] IrError),
    /// A pass produced IR that fails verification: a compiler bug.
    #[error("internal compiler error: the `{pass}` pass produced invalid IR: {error}")]
    Pass { pass: &'static str, error: IrError },
    #[error(transparent)]
    Emit(#[from] EmitError),
}

/// The source a target compiles, or none for the CPU (which runs the IR itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Cpu,
    Cuda(cuda::CudaSource),
    Msl(msl::MslSource),
}

impl Source {
    /// The translation unit's text (empty for the CPU).
    pub fn text(&self) -> &str {
        match self {
            Source::Cpu => "",
            Source::Cuda(s) => &s.source,
            Source::Msl(s) => &s.code,
        }
    }
}

/// A kernel compiled for a target: the optimised IR and the source emitted from it.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub kernel: Kernel,
    pub source: Source,
}

/// Emits the source of an already optimised kernel for `target`.
pub fn emit(kernel: &Kernel, target: Target) -> Result<Source, EmitError> {
    Ok(match target {
        Target::Cpu => Source::Cpu,
        Target::Cuda => Source::Cuda(cuda::emit(kernel)?),
        Target::Metal => Source::Msl(msl::emit(kernel)?),
    })
}

/// Optimises a kernel for `target` ([`optimize`]) and emits its source ([`emit`]): what
/// every backend and the CLI run between building IR and the target's own compiler.
pub fn compile(kernel: Kernel, target: Target) -> Result<Compiled, CompileError> {
    let kernel = optimize(kernel, target)?;
    let source = emit(&kernel, target)?;
    Ok(Compiled { kernel, source })
}

/// Which passes [`optimize_with`] runs; every pass is on by default, and IR is verified
/// after every pass in debug builds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassOptions {
    pub inline: bool,
    pub fold: bool,
    pub cse: bool,
    pub dce: bool,
    pub unroll: bool,
    pub promote_locals: bool,
    pub lower_group_reduce: bool,
    pub vectorize: bool,
    /// Verify the IR after every pass (on by default in debug builds).
    pub verify_each: bool,
}

impl Default for PassOptions {
    fn default() -> Self {
        PassOptions {
            inline: true,
            fold: true,
            cse: true,
            dce: true,
            unroll: true,
            promote_locals: true,
            lower_group_reduce: true,
            vectorize: true,
            verify_each: cfg!(debug_assertions),
        }
    }
}

impl PassOptions {
    /// Every optimisation off. Calls and group reductions are still lowered, because no
    /// backend accepts them.
    pub fn none() -> Self {
        PassOptions {
            inline: true,
            fold: false,
            cse: false,
            dce: false,
            unroll: false,
            promote_locals: false,
            lower_group_reduce: true,
            vectorize: false,
            verify_each: cfg!(debug_assertions),
        }
    }

    /// The passes used for `target` (the same pipeline for every target today).
    pub fn for_target(_target: Target) -> Self {
        PassOptions::default()
    }
}

/// Runs the pass pipeline for `target`:
/// verify → inline → fold → cse → dce → unroll → promote_locals → fold → cse → dce →
/// lower_group_reduce → vectorize → dce, verifying after each pass in debug builds.
/// Every backend, the CPU included, runs its output.
pub fn optimize(kernel: Kernel, target: Target) -> Result<Kernel, CompileError> {
    optimize_with(kernel, &PassOptions::for_target(target))
}

/// Runs the pass pipeline with the passes `options` selects.
pub fn optimize_with(mut kernel: Kernel, options: &PassOptions) -> Result<Kernel, CompileError> {
    verify_kernel(&kernel)?;
    let o = options;
    // Once threadgroup reductions are lowered, their results are only provably
    // simdgroup-uniform; barriers were fully checked on the IR before lowering.
    let mut lowered = false;
    let mut step = |kernel: &mut Kernel, on: bool, name: &'static str, pass: fn(&mut Kernel)| {
        if !on {
            return Ok(());
        }
        if name == "lower_group_reduce" {
            lowered = kernel
                .body
                .block
                .any(&mut |op| matches!(op, tessera_ir::Op::GroupReduce(..)));
        }
        pass(kernel);
        if o.verify_each {
            let r = if lowered {
                verify_lowered_kernel(kernel)
            } else {
                verify_kernel(kernel)
            };
            r.map_err(|error| CompileError::Pass { pass: name, error })?;
        }
        Ok::<(), CompileError>(())
    };
    step(&mut kernel, o.inline, "inline", passes::inline)?;
    step(&mut kernel, o.fold, "fold", passes::fold)?;
    step(&mut kernel, o.cse, "cse", passes::cse)?;
    step(&mut kernel, o.dce, "dce", passes::dce)?;
    step(&mut kernel, o.unroll, "unroll", |k| {
        passes::unroll(k);
    })?;
    step(&mut kernel, o.promote_locals, "promote_locals", |k| {
        passes::promote_locals(k);
    })?;
    step(&mut kernel, o.fold, "fold", passes::fold)?;
    step(&mut kernel, o.cse, "cse", passes::cse)?;
    step(&mut kernel, o.dce, "dce", passes::dce)?;
    step(
        &mut kernel,
        o.lower_group_reduce,
        "lower_group_reduce",
        |k| {
            passes::lower_group_reduce(k);
        },
    )?;
    step(&mut kernel, o.vectorize, "vectorize", |k| {
        passes::vectorize(k);
    })?;
    step(&mut kernel, o.dce, "dce", passes::dce)?;
    Ok(kernel)
}
