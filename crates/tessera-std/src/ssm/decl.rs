//! The declaration of the Mamba selective-scan decode step.

#[cfg(feature = "cases")]
use super::cases;
#[cfg(feature = "cases")]
use super::reference::{self, ScanStep};
use super::ScanArgs;
use crate::decl::{
    Break, DtypeRule, Example, OpDecl, OutputDecl, Rejection, ShapeFrom, TensorDecl, F32,
};
use tessera_runtime::DType;

inventory::submit! {
    OpDecl {
        name: "selective_scan_step",
        family: "ssm",
        summary: "Mamba selective-scan decode step: softplus(dt), state [B, D, N] decay + input, C·h + D·x, silu(z) gate",
        inputs: &[
            TensorDecl::new("state_in", &["B", "D", "N"], DtypeRule::F32OrLike("x"), "the state before the step"),
            TensorDecl::float("x", &["B", "D"], "the input"),
            TensorDecl::new("dt", &["B", "D"], DtypeRule::Like("x"), "the step size before softplus"),
            TensorDecl::new("a", &["D", "N"], DtypeRule::OneOf(F32), "the state matrix (−e^{A_log} in models)"),
            TensorDecl::new("b", &["B", "N"], DtypeRule::Like("x"), "the input projection"),
            TensorDecl::new("c", &["B", "N"], DtypeRule::Like("x"), "the output projection"),
            TensorDecl::new("d", &["D"], DtypeRule::Like("x"), "the skip weight"),
            TensorDecl::new("z", &["B", "D"], DtypeRule::Like("x"), "the gate"),
            TensorDecl::new("dt_bias", &["D"], DtypeRule::Like("x"), "the step size's bias"),
        ],
        outputs: &[
            OutputDecl { name: "state_out", shape: &["B", "D", "N"], dtype: DtypeRule::Like("state_in"), shape_from: ShapeFrom::Like("state_in"), doc: "the state after the step" },
            OutputDecl { name: "y", shape: &["B", "D"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Like("x"), doc: "(C·h + D·x) · silu(z)" },
        ],
        params: &[],
        invariants: &[
            "x, dt, b, c, d, z, dt_bias and y share one float dtype; a is f32",
            "state_in and state_out share one dtype, f32 or x's, and the shape [B, D, N] with B, D > 0 and 1 ≤ N ≤ 256",
            "outputs alias no input; the state size fits u32",
        ],
        rejections: &[Rejection { invariant: 0, by: Break::Dtype("a", DType::F16), reason: "`a` must be f32" }, Rejection { invariant: 1, by: Break::Dim("N", 300), reason: "1 <= N <= 256" }, Rejection { invariant: 1, by: Break::InputDim("c", "N", 15), reason: "`c` must have shape" }, Rejection { invariant: 2, by: Break::Alias("y", "x"), reason: "aliases `x`" }],
        variants: &[],
        example: Example {
            dims: &[("B", 2), ("D", 20), ("N", 16)],
            params: &[],
            ranges: &[("a", -2.0, -0.1)],
            with: &[],
        },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            super::selective_scan_step(
                ctx,
                &ScanArgs {
                    state_in: a.input("state_in")?,
                    x: a.input("x")?,
                    dt: a.input("dt")?,
                    a: a.input("a")?,
                    b: a.input("b")?,
                    c: a.input("c")?,
                    d: a.input("d")?,
                    z: a.input("z")?,
                    dt_bias: a.input("dt_bias")?,
                    state_out: a.output("state_out")?,
                    y: a.output("y")?,
                },
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let (y, state) = reference::selective_scan_step(&ScanStep {
                state: r.data("state_in")?,
                x: r.data("x")?,
                dt: r.data("dt")?,
                a: r.data("a")?,
                b: r.data("b")?,
                c: r.data("c")?,
                d: r.data("d")?,
                z: r.data("z")?,
                dt_bias: r.data("dt_bias")?,
                dims: (r.dim("B")?, r.dim("D")?, r.dim("N")?),
            });
            Ok(vec![state, y])
        },
        #[cfg(feature = "cases")]
        kernels: cases::kernels,
        #[cfg(feature = "cases")]
        cases: cases::cases,
        #[cfg(feature = "cases")]
        benches: cases::benches,
    }
}
