//! The declaration of `hadamard`.

#[cfg(feature = "cases")]
use super::{cases, reference};
use crate::decl::{
    Accuracy, Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault,
    ParamKind, Rejection, TensorDecl,
};
use crate::error::OpError;
use tessera_runtime::DType;

/// The call's scale: the given one, else 1/√n.
fn scale_of(a: &OpArgs) -> Result<f32, OpError> {
    let n = a.last_dim("x")?;
    Ok(a.params
        .opt_f32("scale")?
        .unwrap_or(1.0 / (n as f32).sqrt()))
}

inventory::submit! {
    OpDecl {
        name: "hadamard",
        family: "hadamard",
        summary: "fast Walsh–Hadamard transform over the last dimension, out = scale · x · H_n (Sylvester order) for n = 2^k, and out = scale · (H_m ⊗ H_{2^k}) · x for n = m·2^k, m = 12, 20, 28 (QuaRot's Paley matrices), n ≤ 32768; registers, shuffles and threadgroup memory, one pass over memory",
        accuracy: Accuracy::STANDARD,
        inputs: &[TensorDecl::float("x", &["rows…", "n"], "rows to rotate over their last dimension")],
        outputs: &[OutputDecl::like("x", "out", &["rows…", "n"], DtypeRule::Like("x"), "scale · x · H_n, or scale · (H_m ⊗ H_{2^k}) · x per row")],
        params: &[ParamDecl {
            name: "scale",
            kind: ParamKind::Float,
            default: ParamDefault::Auto("1/√n (orthonormal)"),
            doc: "multiplies the transform; finite",
        }],
        invariants: &[
            "x is a float [rows…, n], not empty, its element count fits u32; out is like x and does not alias it",
            "n is 2^k, 12·2^k, 20·2^k or 28·2^k, at most 32768",
            "scale is finite",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::U32), reason: "`x` must be one of" },
            Rejection { invariant: 0, by: Break::Alias("out", "x"), reason: "aliases `x`" },
            Rejection { invariant: 1, by: Break::Dim("n", 36), reason: "must be 2^k, 12·2^k, 20·2^k or 28·2^k up to 32768" },
            Rejection { invariant: 1, by: Break::Dim("n", 40_960), reason: "must be 2^k, 12·2^k, 20·2^k or 28·2^k up to 32768" },
            Rejection { invariant: 1, by: Break::Dim("n", 65_536), reason: "must be 2^k, 12·2^k, 20·2^k or 28·2^k up to 32768" },
            Rejection { invariant: 2, by: Break::Param("scale", "inf"), reason: "a finite number" },
        ],
        variants: &[],
        example: Example { dims: &[("rows", 3), ("n", 32)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        call: |ctx, a| super::hadamard(ctx, a.input("x")?, scale_of(a)?, a.output("out")?),
        #[cfg(feature = "cases")]
        reference: |r| {
            let n = r.dim("n")?;
            let scale = r.params.opt_f64("scale")?.unwrap_or(1.0 / (n as f64).sqrt());
            let out = reference::hadamard(r.data("x")?, n, scale)
                .ok_or_else(|| OpError::invalid("hadamard", format!("no reference for n = {n}")))?;
            Ok(vec![out])
        },
        #[cfg(feature = "cases")]
        kernels: cases::hadamard_kernels,
        #[cfg(feature = "cases")]
        cases: cases::hadamard_cases,
        #[cfg(feature = "cases")]
        benches: cases::hadamard_benches,
    }
}
