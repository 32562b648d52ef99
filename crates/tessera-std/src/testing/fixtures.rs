//! Small pieces every family's cases share: an error to a case's `String`, zero tensors,
//! merged outcomes of a multi-output comparison, and the rejection case built from a call
//! that must be refused.

use crate::error::OpError;
use crate::registry::{Case, CaseKind, Outcome};
use crate::testing::expect_rejection;
use tessera_runtime::{Context, DType, Tensor};

/// Any error as the `String` a case returns.
pub fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A zero tensor of the given dtype and shape.
pub fn zeros(ctx: &Context, dt: DType, shape: &[usize]) -> Result<Tensor, String> {
    ctx.zeros(dt, shape).map_err(err)
}

/// The outcome of two comparisons (two outputs of one call): counts added, worst errors.
pub fn merge(a: Outcome, b: Outcome) -> Outcome {
    Outcome {
        checked: a.checked + b.checked,
        max_abs_err: a.max_abs_err.max(b.max_abs_err),
        max_rel_err: a.max_rel_err.max(b.max_rel_err),
        note: String::new(),
    }
}

/// A call that must be refused, with its tensors already built.
pub type Refused = Box<dyn FnOnce() -> Result<(), OpError>>;
/// Builds a refused call's tensors: the output it must leave untouched, and the call.
pub type BadCall = fn(&Context) -> Result<(Tensor, Refused), String>;

/// A rejection case of `op`: `f`'s call must be refused for `reason` and write nothing.
pub fn rejection(op: &'static str, what: &str, reason: &'static str, f: BadCall) -> Case {
    Case {
        op,
        kind: CaseKind::Rejection,
        dtype: None,
        name: what.to_string(),
        run: Box::new(move |ctx, _rng| {
            let (out, call) = f(ctx)?;
            expect_rejection(&out, reason, call)
        }),
    }
}
