//! The runtime's error type: what a launch, a tensor operation or a backend rejected, and
//! what the CPU sanitizer caught while a kernel ran.

use crate::backend::BackendKind;
use std::fmt;
use tessera_compiler::CompileError;
use tessera_ir::{IrError, Loc, Scalar};
use thiserror::Error;

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum RuntimeError {
    /// `TESSERA_BACKEND` or `Context::by_name` named no backend.
    #[error("unknown backend `{name}`; expected one of: {allowed}")]
    UnknownBackend { name: String, allowed: String },

    /// The backend exists but cannot be used here.
    #[error("the {backend} backend is not available: {reason}")]
    BackendUnavailable {
        backend: BackendKind,
        reason: String,
    },

    /// A failure reported by the device or its driver.
    #[error("{backend} backend: {message}")]
    Backend {
        backend: BackendKind,
        message: String,
    },

    /// Host data does not match the tensor it goes into or comes from.
    #[error("{what}: expected {expected}, got {got}")]
    DTypeMismatch {
        what: String,
        expected: Scalar,
        got: Scalar,
    },

    /// A slice length does not match a shape or a tensor.
    #[error("{what}: expected {expected} elements, got {got}")]
    LengthMismatch {
        what: String,
        expected: usize,
        got: usize,
    },

    /// A shape is too large or otherwise unusable.
    #[error("invalid shape {shape:?}: {reason}")]
    InvalidShape { shape: Vec<usize>, reason: String },

    /// A launch was rejected before anything ran; nothing was written.
    #[error("launch of `{kernel}` rejected: {message}")]
    InvalidLaunch { kernel: String, message: String },

    /// The kernel's IR could not be built for the requested specialisation.
    #[error(transparent)]
    Build(#[from] IrError),

    /// The compiler's pipeline failed.
    #[error(transparent)]
    Compile(#[from] CompileError),

    /// `TESSERA_DUMP` could not be written.
    #[error(
        "TESSERA_DUMP: cannot write `{path}`: {source}; set TESSERA_DUMP to a writable directory"
    )]
    Dump {
        path: String,
        source: std::io::Error,
    },

    /// The CPU sanitizer stopped a kernel that did something undefined.
    #[error(transparent)]
    Sanitizer(Box<SanitizerError>),
}

impl RuntimeError {
    /// The sanitizer report, if this is one.
    pub fn sanitizer(&self) -> Option<&SanitizerError> {
        match self {
            RuntimeError::Sanitizer(s) => Some(s),
            _ => None,
        }
    }

    /// The launch-rejection message, if this is one.
    pub fn is_invalid_launch(&self) -> bool {
        matches!(self, RuntimeError::InvalidLaunch { .. })
    }
}

impl From<SanitizerError> for RuntimeError {
    fn from(e: SanitizerError) -> Self {
        RuntimeError::Sanitizer(Box::new(e))
    }
}

/// Something a kernel did that has no defined meaning on a GPU, caught by the CPU backend.
#[derive(Clone, Debug, PartialEq, Error)]
#[error(
    "kernel `{kernel}`: {violation} — in `{op}`{}, threadgroup {group:?}, thread {thread}",
    at(.loc)
)]
pub struct SanitizerError {
    /// The specialised kernel name.
    pub kernel: String,
    /// The op that went wrong, as `store out[%12]`.
    pub op: String,
    /// Its line in the kernel's source, when the frontend recorded one.
    pub loc: Option<Loc>,
    /// The threadgroup (x, y, z).
    pub group: [u32; 3],
    /// The first offending thread of the threadgroup.
    pub thread: u32,
    pub violation: Violation,
}

fn at(loc: &Option<Loc>) -> String {
    loc.map(|l| format!(" at line {}:{}", l.line, l.col))
        .unwrap_or_default()
}

/// What exactly went wrong.
#[derive(Clone, Debug, PartialEq)]
pub enum Violation {
    /// A load, store or atomic outside its memory.
    OutOfBounds {
        memory: String,
        index: u64,
        len: u64,
    },
    /// A vector access whose index is not a multiple of its width.
    Misaligned {
        memory: String,
        index: u64,
        width: u32,
    },
    /// A barrier (or threadgroup reduction) reached by only part of the threadgroup.
    DivergentBarrier { active: u32, group_size: u32 },
    /// A simdgroup collective reached by only part of a simdgroup.
    DivergentSimd { simdgroup: u32, active: u32 },
    /// A value read from never-written threadgroup or stack memory reached `sink`.
    Uninitialized {
        /// Where the poison came from: `load shared tg[%3]` and its line.
        origin: String,
        memory: String,
        index: u64,
        sink: String,
    },
    /// A `for` loop whose step is zero or negative at run time.
    NonPositiveStep { step: i64 },
    /// A loop that ran more iterations than the sanitizer allows, or whose induction
    /// variable overflowed.
    RunawayLoop { iterations: u64 },
    /// Integer division or remainder by zero.
    DivisionByZero,
    /// A shuffle reading a lane outside the simdgroup.
    ShuffleLane { lane: u32 },
    /// IR the interpreter cannot run (a compiler bug or a hand-built kernel).
    Unsupported { message: String },
    /// A read (`write` false) or write of a threadgroup element that an asynchronous copy
    /// of thread `issuer` still targets: no wait has landed that copy yet.
    PendingCopy {
        memory: String,
        index: u64,
        issuer: u32,
        write: bool,
    },
    /// A wait while copies issued since the last commit are uncommitted (the wait would
    /// not cover them), or the kernel's end with copies still in flight.
    CopiesInFlight { copies: u32, at_end: bool },
    /// While an asynchronous tile product is in flight: `what` (a write of one of its
    /// tiles, a use of one of its accumulators, another product, or the kernel's end).
    PendingProduct { what: String },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::OutOfBounds { memory, index, len } => write!(
                f,
                "out-of-bounds access: index {index} into `{memory}` of {len} elements \
                 (valid indices are 0..{len})"
            ),
            Violation::Misaligned {
                memory,
                index,
                width,
            } => write!(
                f,
                "misaligned vector access: index {index} into `{memory}` is not a multiple of \
                 the vector width {width}"
            ),
            Violation::DivergentBarrier { active, group_size } => write!(
                f,
                "divergent barrier: reached by {active} of {group_size} threads; every thread of \
                 the threadgroup must reach it (move it out of the `if`/loop that only some threads enter)"
            ),
            Violation::DivergentSimd { simdgroup, active } => write!(
                f,
                "divergent simdgroup collective: reached by {active} of 32 lanes of simdgroup \
                 {simdgroup}; every lane must reach it (compute it before branching and mask the result)"
            ),
            Violation::Uninitialized {
                origin,
                memory,
                index,
                sink,
            } => write!(
                f,
                "use of uninitialised memory: `{memory}[{index}]` was read by `{origin}` before \
                 anything wrote it, and the value reached {sink}"
            ),
            Violation::NonPositiveStep { step } => write!(
                f,
                "the loop step is {step} at run time; it must be positive"
            ),
            Violation::RunawayLoop { iterations } => write!(
                f,
                "runaway loop: stopped after {iterations} iterations (or its induction variable \
                 overflowed); check the bounds and the step"
            ),
            Violation::DivisionByZero => write!(f, "integer division by zero"),
            Violation::ShuffleLane { lane } => write!(
                f,
                "shuffle from lane {lane}; lanes are 0..32"
            ),
            Violation::Unsupported { message } => write!(f, "cannot run this IR: {message}"),
            Violation::PendingCopy {
                memory,
                index,
                issuer,
                write,
            } => write!(
                f,
                "{} element {index} of `{memory}` while the asynchronous copy of thread {issuer} \
                 into it is in flight; commit the copy and `wait_copies` for its group (then \
                 `barrier()` if other threads read it) first",
                if *write { "writes" } else { "reads" }
            ),
            Violation::PendingProduct { what } => write!(
                f,
                "{what} while a `matrix_mma_tiles_async` is in flight; `matrix_mma_wait` for \
                 it first"
            ),
            Violation::CopiesInFlight {
                copies,
                at_end: true,
            } => write!(
                f,
                "the kernel ends with {copies} asynchronous cop{} in flight; commit them and \
                 `wait_copies(0)` before the end",
                if *copies == 1 { "y" } else { "ies" }
            ),
            Violation::CopiesInFlight {
                copies,
                at_end: false,
            } => write!(
                f,
                "waits while {copies} asynchronous cop{} issued since the last `commit_copies()` \
                 are uncommitted, so no wait covers them; call `commit_copies()` before \
                 `wait_copies`",
                if *copies == 1 { "y" } else { "ies" }
            ),
        }
    }
}
