//! Declared rejections: each [`Rejection`] names an invariant and how to break the op's
//! example (a dimension, a parameter, a dtype, one tensor's shape, or an output aliasing
//! an input), and the reason the op must give; `rejection_cases` runs them.

use tessera_runtime::DType;

/// How a rejection case breaks the op's example.
#[derive(Clone, Copy, Debug)]
pub enum Break {
    /// A named dimension changed in every tensor that has it.
    Dim(&'static str, usize),
    /// A parameter set to another value.
    Param(&'static str, &'static str),
    /// One input given in another dtype.
    Dtype(&'static str, DType),
    /// One input's named dimension changed (the other tensors keep the example's).
    InputDim(&'static str, &'static str, usize),
    /// The output (first name) is the input (second name).
    Alias(&'static str, &'static str),
}

/// A call that breaks one declared invariant, and a part of the message the op must give.
#[derive(Clone, Copy, Debug)]
pub struct Rejection {
    /// Index into the op's `invariants`.
    pub invariant: usize,
    pub by: Break,
    pub reason: &'static str,
}

/// `n=100`, `eps=-1`, `w f16`, `w's n=39`, `out is x`.
pub(crate) fn describe(b: Break) -> String {
    match b {
        Break::Dim(d, v) => format!("{d}={v}"),
        Break::Param(p, v) => format!("{p}={v}"),
        Break::Dtype(t, d) => format!("{t} {d}"),
        Break::InputDim(t, d, v) => format!("{t}'s {d}={v}"),
        Break::Alias(o, i) => format!("{o} is {i}"),
    }
}
