//! Small pieces every family's cases share: an error to a case's `String`, a kernel use
//! from its u32 constexprs, zero tensors
//! (one at a time or from a list of dtype-and-shape specs), merged outcomes of a
//! multi-output comparison, and the rejection case built from a call that must be refused.

use crate::error::OpError;
use crate::registry::{Case, CaseKind, KernelUse, Outcome};
use crate::testing::{expect_rejection, CaseRng};
use tessera_ir::{KernelDef, Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

/// Any error as the `String` a case returns.
pub fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A zero tensor of the given dtype and shape.
pub fn zeros(ctx: &Context, dt: DType, shape: &[usize]) -> Result<Tensor, String> {
    ctx.zeros(dt, shape).map_err(err)
}

/// A tensor's dtype and shape, as a rejection case lists the tensors of its call.
pub type Spec = (DType, &'static [usize]);

/// Zero tensors of each spec, in order.
pub fn zeros_of<const N: usize>(ctx: &Context, specs: [Spec; N]) -> Result<[Tensor; N], String> {
    let mut v = Vec::with_capacity(N);
    for (dt, shape) in specs {
        v.push(zeros(ctx, dt, shape)?);
    }
    v.try_into()
        .map_err(|_| "a spec list built the wrong number of tensors".to_string())
}

/// A use of `def` for one dtype and its u32 constexprs, in order.
pub fn kernel_use(def: &'static KernelDef, dt: DType, consts: &[u32]) -> KernelUse {
    let consts = consts.iter().map(|&c| Literal::U32(c)).collect();
    KernelUse {
        def,
        spec: Specialization::new(vec![dt], consts),
    }
}

/// `specs` with the spec at `i` replaced: a good call's tensors with one thing wrong.
pub fn replaced<const N: usize>(mut specs: [Spec; N], i: usize, spec: Spec) -> [Spec; N] {
    specs[i] = spec;
    specs
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
/// A rejection case of `op`: `f` builds the call's tensors (from the case's random source
/// where it needs values) and returns the output the call must leave untouched with the
/// call, which must be refused for `reason`.
pub fn rejection_of(
    op: &'static str,
    what: &str,
    reason: &'static str,
    f: impl Fn(&Context, &mut CaseRng) -> Result<(Tensor, Refused), String> + Send + Sync + 'static,
) -> Case {
    Case {
        op,
        kind: CaseKind::Rejection,
        dtype: None,
        name: what.to_string(),
        run: Box::new(move |ctx, rng| {
            let (out, call) = f(ctx, rng)?;
            expect_rejection(&out, reason, call)
        }),
    }
}

/// [`rejection_of`] for a call whose tensors need no random values.
pub fn rejection(
    op: &'static str,
    what: &str,
    reason: &'static str,
    f: impl Fn(&Context) -> Result<(Tensor, Refused), String> + Send + Sync + 'static,
) -> Case {
    rejection_of(op, what, reason, move |ctx, _rng| f(ctx))
}
