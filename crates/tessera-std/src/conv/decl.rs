//! The declarations of the causal depthwise conv1d ops, prefill and decode step, which
//! share the rolling state `[B, C, W − 1]`.

use super::Conv1dArgs;
#[cfg(feature = "cases")]
use super::{cases, reference};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault, ParamKind,
    Rejection, ShapeFrom, TensorDecl,
};
use crate::error::OpError;
use tessera_runtime::DType;

const X_DTYPE: DtypeRule = DtypeRule::Like("x");
const W: TensorDecl = TensorDecl::new(
    "w",
    &["C", "W"],
    X_DTYPE,
    "the depthwise filter, width W of 2..=8",
);
const BIAS: TensorDecl = TensorDecl::new("bias", &["C"], X_DTYPE, "the bias");
const STATE_IN: TensorDecl = TensorDecl::new(
    "state_in",
    &["B", "C", "W - 1"],
    X_DTYPE,
    "the last W − 1 inputs, oldest first",
);
const STATE_OUT: OutputDecl = OutputDecl::like(
    "state_in",
    "state_out",
    &["B", "C", "W - 1"],
    X_DTYPE,
    "the state after the call",
);
const SILU: ParamDecl = ParamDecl {
    name: "silu",
    kind: ParamKind::Bool,
    default: ParamDefault::Value("true"),
    doc: "apply SiLU to the output",
};
const INVARIANTS: [&str; 3] = [
    "every tensor shares x's float dtype",
    "w is [C, W] with C > 0 and W in 2..=8; bias is [C]; the states are [B, C, W − 1]",
    "outputs alias no input nor each other",
];

fn args<'a>(a: &OpArgs<'a>) -> Result<Conv1dArgs<'a>, OpError> {
    Ok(Conv1dArgs {
        x: a.input("x")?,
        w: a.input("w")?,
        bias: a.input("bias")?,
        state_in: a.input("state_in")?,
        out: a.output("out")?,
        state_out: a.output("state_out")?,
    })
}

#[cfg(feature = "cases")]
fn conv_reference(r: &RefArgs, t: usize) -> Result<Vec<Vec<f64>>, OpError> {
    let (b, c, w) = (r.dim("B")?, r.dim("C")?, r.dim("W")?);
    let (out, state) = reference::conv1d(
        r.data("x")?,
        r.data("w")?,
        r.data("bias")?,
        r.data("state_in")?,
        (b, t, c, w),
        r.params.bool("silu")?,
    );
    Ok(vec![out, state])
}

inventory::submit! {
    OpDecl {
        name: "causal_conv1d",
        family: "conv",
        summary: "causal depthwise conv1d (+SiLU) over [B, T, C] from a carried state [B, C, W-1], writing the final state",
        inputs: &[
            TensorDecl::float("x", &["B", "T", "C"], "the inputs, B, T > 0"),
            W,
            BIAS,
            STATE_IN,
        ],
        outputs: &[
            OutputDecl { name: "out", shape: &["B", "T", "C"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Like("x"), doc: "the convolved inputs" },
            STATE_OUT,
        ],
        params: &[SILU],
        invariants: &[INVARIANTS[0], INVARIANTS[1], INVARIANTS[2], "x and out are [B, T, C] with B, T > 0; T·C fits u32"],
        rejections: &[Rejection { invariant: 1, by: Break::Dim("W", 9), reason: "a width W of 2..=8" }, Rejection { invariant: 1, by: Break::InputDim("bias", "C", 23), reason: "`bias` must have shape" }, Rejection { invariant: 0, by: Break::Dtype("w", DType::F16), reason: "`w` must be f32" }, Rejection { invariant: 2, by: Break::Alias("out", "x"), reason: "aliases `x`" }],
        variants: &[],
        example: Example { dims: &[("B", 2), ("T", 7), ("C", 24), ("W", 4)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::causal_conv1d(ctx, &args(a)?, a.params.bool("silu")?),
        #[cfg(feature = "cases")]
        reference: |r| conv_reference(r, r.dim("T")?),
        #[cfg(feature = "cases")]
        kernels: cases::causal_conv1d_kernels,
        #[cfg(feature = "cases")]
        cases: cases::prefill_cases,
        #[cfg(feature = "cases")]
        benches: cases::prefill_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "causal_conv1d_update",
        family: "conv",
        summary: "causal depthwise conv1d (+SiLU) decode step: one token per batch row, rolls the state [B, C, W-1]",
        inputs: &[
            TensorDecl::float("x", &["B", "C"], "one token per batch row, B > 0"),
            W,
            BIAS,
            STATE_IN,
        ],
        outputs: &[
            OutputDecl { name: "out", shape: &["B", "C"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Like("x"), doc: "the convolved token" },
            STATE_OUT,
        ],
        params: &[SILU],
        invariants: &[INVARIANTS[0], INVARIANTS[1], INVARIANTS[2], "x and out are [B, C] with B > 0"],
        rejections: &[Rejection { invariant: 1, by: Break::Dim("W", 9), reason: "a width W of 2..=8" }, Rejection { invariant: 3, by: Break::InputDim("x", "C", 41), reason: "`x` must have shape" }],
        variants: &[],
        example: Example { dims: &[("B", 3), ("C", 40), ("W", 3)], params: &[("silu", "false")], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::causal_conv1d_update(ctx, &args(a)?, a.params.bool("silu")?),
        #[cfg(feature = "cases")]
        reference: |r| conv_reference(r, 1),
        #[cfg(feature = "cases")]
        kernels: cases::causal_conv1d_update_kernels,
        #[cfg(feature = "cases")]
        cases: cases::decode_cases,
        #[cfg(feature = "cases")]
        benches: cases::decode_benches,
    }
}
