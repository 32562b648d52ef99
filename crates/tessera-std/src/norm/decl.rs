//! The declarations of the row normalisations: RMSNorm and its five layouts, the fused
//! residual RMSNorm, LayerNorm, the gated mixer norm, softmax and logsumexp.

#[cfg(feature = "cases")]
use super::{cases, reference, row_reference};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault, ParamKind,
    Rejection, ShapeFrom, TensorDecl, VariantDecl, F32,
};
use crate::error::OpError;
use tessera_runtime::{Context, DType, Tensor};

const X: TensorDecl = TensorDecl::float(
    "x",
    &["rows…", "n"],
    "rows to normalise over their last dimension",
);
const W: TensorDecl = TensorDecl::new("w", &["n"], DtypeRule::Like("x"), "the weight");
const OUT: OutputDecl = OutputDecl::like(
    "x",
    "out",
    &["rows…", "n"],
    DtypeRule::Like("x"),
    "the normalised rows",
);
const EPS: ParamDecl = ParamDecl {
    name: "eps",
    kind: ParamKind::Float,
    default: ParamDefault::Value("1e-6"),
    doc: "added to the mean square before the square root; finite, ≥ 0",
};
const GROUPS: ParamDecl = ParamDecl {
    name: "groups",
    kind: ParamKind::UInt {
        min: 1,
        max: u32::MAX as u64,
    },
    default: ParamDefault::Auto("as many threadgroups as the device keeps resident"),
    doc: "threadgroups walking the rows (clamped to the row count)",
};
const ROW_INVARIANTS: &[&str] = &[
    "x, w and out share one float dtype; w is [n]; out is like x",
    "out does not alias x or w",
    "eps is finite and ≥ 0",
    "x is not empty; rows, n and the element count fit u32",
];

/// Rejections every row-norm layout shares: out aliasing x, a negative eps.
const OUT_IS_X: Rejection = Rejection {
    invariant: 1,
    by: Break::Alias("out", "x"),
    reason: "aliases `x`",
};
const NEGATIVE_EPS: Rejection = Rejection {
    invariant: 2,
    by: Break::Param("eps", "-1"),
    reason: "`eps` must be finite",
};

type RowNorm = fn(&Context, &Tensor, &Tensor, &Tensor, f32) -> Result<(), OpError>;

fn row_norm(f: RowNorm, ctx: &Context, a: &OpArgs) -> Result<(), OpError> {
    f(
        ctx,
        a.input("x")?,
        a.input("w")?,
        a.output("out")?,
        a.params.f32("eps")?,
    )
}

#[cfg(feature = "cases")]
fn rms_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let n = r.dim("n")?;
    let eps = r.params.f64("eps")?;
    Ok(vec![reference::rms_norm(
        r.data("x")?,
        r.data("w")?,
        n,
        eps,
    )])
}

/// The declaration of one RMSNorm layout: its tensors, `eps`, and its own row-length rule.
macro_rules! rms_layout {
    ($name:literal, $summary:literal, $rule:literal, $n:literal, $wrapper:path, $rejections:expr, $kernels:path, $cases:path, $benches:path) => {
        inventory::submit! {
            OpDecl {
                name: $name,
                family: "norm",
                summary: $summary,
                inputs: &[X, W],
                outputs: &[OUT],
                params: &[EPS],
                invariants: &[
                    ROW_INVARIANTS[0],
                    ROW_INVARIANTS[1],
                    ROW_INVARIANTS[2],
                    ROW_INVARIANTS[3],
                    $rule,
                ],
                rejections: $rejections,
                variants: &[],
                example: Example { dims: &[("rows", 3), ("n", $n)], params: &[], ranges: &[], with: &[] },
                workspace: None,
                accuracy: crate::decl::Accuracy::STANDARD,
                call: |ctx, a| row_norm($wrapper, ctx, a),
                #[cfg(feature = "cases")]
                reference: rms_reference,
                #[cfg(feature = "cases")]
                kernels: $kernels,
                #[cfg(feature = "cases")]
                cases: $cases,
                #[cfg(feature = "cases")]
                benches: $benches,
            }
        }
    };
}

inventory::submit! {
    OpDecl {
        name: "rms_norm",
        family: "norm",
        summary: "RMSNorm over the last dimension; picks the 16-byte, shuffle-only, 2-per-thread or strided kernel by n",
        inputs: &[X, W],
        outputs: &[OUT],
        params: &[EPS],
        invariants: ROW_INVARIANTS,
        rejections: &[Rejection { invariant: 0, by: Break::InputDim("w", "n", 39), reason: "`w` must have shape" }, Rejection { invariant: 1, by: Break::Alias("out", "x"), reason: "aliases `x`" }, Rejection { invariant: 2, by: Break::Param("eps", "-1"), reason: "`eps` must be finite" }, Rejection { invariant: 0, by: Break::Dtype("x", DType::U32), reason: "`x` must be one of" }],
        variants: &[
            VariantDecl { name: "rms_norm_vec", when: "n is a layout of 16-byte accesses (see rms_norm_vec)" },
            VariantDecl { name: "rms_norm_tpg4", when: "else n a multiple of 128, at most 4096" },
            VariantDecl { name: "rms_norm_small", when: "else n a multiple of 64, at most 2048" },
            VariantDecl { name: "rms_norm_wide", when: "any other n" },
        ],
        example: Example { dims: &[("rows", 3), ("n", 40)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| row_norm(super::rms_norm, ctx, a),
        #[cfg(feature = "cases")]
        reference: rms_reference,
        #[cfg(feature = "cases")]
        kernels: cases::rms_norm_kernels,
        #[cfg(feature = "cases")]
        cases: cases::rms_norm_cases,
        #[cfg(feature = "cases")]
        benches: cases::rms_norm_benches,
    }
}

rms_layout!(
    "rms_norm_vec",
    "RMSNorm with 16-byte accesses: one row per threadgroup, or several short rows per threadgroup reduced with shuffles",
    "n is 16 bytes' worth of elements times a power of two up to 32, or times a multiple of 32 up to 1024 threads",
    128,
    super::rms_norm_vec,
    &[Rejection { invariant: 4, by: Break::Dim("n", 100), reason: "is not a layout of 16-byte accesses" }, OUT_IS_X, NEGATIVE_EPS],
    cases::rms_norm_vec_kernels,
    cases::vec_cases,
    cases::none_benches
);
rms_layout!(
    "rms_norm_tpg4",
    "RMSNorm, 4 elements per thread: n a multiple of 128, at most 4096",
    "n is a multiple of 128, at most 4096",
    128,
    super::rms_norm_tpg4,
    &[
        Rejection {
            invariant: 4,
            by: Break::Dim("n", 192),
            reason: "must be a multiple of 128"
        },
        OUT_IS_X,
        NEGATIVE_EPS
    ],
    cases::rms_norm_tpg4_kernels,
    cases::tpg4_cases,
    cases::none_benches
);
rms_layout!(
    "rms_norm_small",
    "RMSNorm, 2 elements per thread (head_dim rows): n a multiple of 64, at most 2048",
    "n is a multiple of 64, at most 2048",
    64,
    super::rms_norm_small,
    &[
        Rejection {
            invariant: 4,
            by: Break::Dim("n", 96),
            reason: "must be a multiple of 64"
        },
        OUT_IS_X,
        NEGATIVE_EPS
    ],
    cases::rms_norm_small_kernels,
    cases::small_cases,
    cases::none_benches
);
rms_layout!(
    "rms_norm_wide",
    "RMSNorm for any n, each thread striding over the row",
    "any n",
    37,
    super::rms_norm_wide,
    &[
        Rejection {
            invariant: 2,
            by: Break::Param("eps", "nan"),
            reason: "a finite number"
        },
        Rejection {
            invariant: 0,
            by: Break::Dtype("w", DType::F16),
            reason: "`w` must be f32"
        }
    ],
    cases::rms_norm_wide_kernels,
    cases::wide_cases,
    cases::none_benches
);

inventory::submit! {
    OpDecl {
        name: "rms_norm_pipe",
        family: "norm",
        summary: "RMSNorm on a resident grid walking rows, the next row's 16-byte loads issued before this row's reduction",
        inputs: &[X, W],
        outputs: &[OUT],
        params: &[EPS, GROUPS],
        invariants: &[
            ROW_INVARIANTS[0],
            ROW_INVARIANTS[1],
            ROW_INVARIANTS[2],
            ROW_INVARIANTS[3],
            "n is a whole number of 16-byte accesses per thread for 32..=1024 threads (rms_norm_vec's one-row layout)",
        ],
        rejections: &[Rejection { invariant: 4, by: Break::Dim("n", 100), reason: "is not a whole number of 16-byte accesses" }, Rejection { invariant: 1, by: Break::Alias("out", "x"), reason: "aliases `x`" }, Rejection { invariant: 2, by: Break::Param("eps", "-1"), reason: "`eps` must be finite" }],
        variants: &[],
        example: Example { dims: &[("rows", 5), ("n", 512)], params: &[("groups", "2")], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            super::rms_norm_pipe::rms_norm_pipe_on(
                ctx,
                a.input("x")?,
                a.input("w")?,
                a.output("out")?,
                a.params.f32("eps")?,
                a.params.opt_u32("groups")?,
            )
        },
        #[cfg(feature = "cases")]
        reference: rms_reference,
        #[cfg(feature = "cases")]
        kernels: cases::rms_norm_pipe_kernels,
        #[cfg(feature = "cases")]
        cases: cases::pipe_cases,
        #[cfg(feature = "cases")]
        benches: cases::pipe_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "gated_mixer_norm",
        family: "norm",
        summary: "out = rms_norm(y, w) · silu(z), y in f32; n a multiple of 128, at most 4096",
        inputs: &[
            TensorDecl::new("y", &["rows…", "n"], DtypeRule::OneOf(F32), "the mixer output, f32"),
            TensorDecl::float("z", &["rows…", "n"], "the gate"),
            TensorDecl::new("w", &["n"], DtypeRule::Like("z"), "the norm weight"),
        ],
        outputs: &[OutputDecl { name: "out", shape: &["rows…", "n"], dtype: DtypeRule::Like("z"), shape_from: ShapeFrom::Like("z"), doc: "rms_norm(y, w) · silu(z)" }],
        params: &[EPS],
        invariants: &[
            "y is f32; z, w and out share one float dtype",
            "z and out are like y; w is [n]",
            "n is a multiple of 128, at most 4096",
            "out does not alias an input; eps is finite and ≥ 0",
        ],
        rejections: &[Rejection { invariant: 0, by: Break::Dtype("y", DType::F16), reason: "`y` must be f32" }, Rejection { invariant: 2, by: Break::Dim("n", 100), reason: "must be a multiple of 128" }, Rejection { invariant: 3, by: Break::Param("eps", "-1"), reason: "`eps` must be finite" }],
        variants: &[],
        example: Example { dims: &[("rows", 3), ("n", 128)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            super::gated_mixer_norm(
                ctx,
                a.input("y")?,
                a.input("z")?,
                a.input("w")?,
                a.output("out")?,
                a.params.f32("eps")?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let n = r.dim("n")?;
            Ok(vec![reference::gated_mixer_norm(
                r.data("y")?,
                r.data("z")?,
                r.data("w")?,
                n,
                r.params.f64("eps")?,
            )])
        },
        #[cfg(feature = "cases")]
        kernels: cases::gated_mixer_norm_kernels,
        #[cfg(feature = "cases")]
        cases: cases::gated_cases,
        #[cfg(feature = "cases")]
        benches: cases::gated_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "rms_norm_residual",
        family: "norm",
        summary: "sum = x + residual and out = rms_norm(sum, w) in one pass; any n",
        inputs: &[
            X,
            TensorDecl::new("residual", &["rows…", "n"], DtypeRule::Like("x"), "the residual stream"),
            W,
        ],
        outputs: &[
            OutputDecl { name: "sum", shape: &["rows…", "n"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Like("x"), doc: "x + residual, the next residual stream" },
            OutputDecl { name: "out", shape: &["rows…", "n"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Like("x"), doc: "rms_norm(sum, w)" },
        ],
        params: &[EPS, GROUPS],
        invariants: &[
            ROW_INVARIANTS[0],
            "residual and sum are like x in dtype and shape",
            "neither output aliases an input or the other",
            ROW_INVARIANTS[2],
            ROW_INVARIANTS[3],
        ],
        rejections: &[Rejection { invariant: 1, by: Break::InputDim("residual", "n", 39), reason: "`residual` must have shape" }, Rejection { invariant: 2, by: Break::Alias("sum", "x"), reason: "`sum` aliases an input" }, Rejection { invariant: 3, by: Break::Param("eps", "-1"), reason: "`eps` must be finite" }],
        variants: &[],
        example: Example { dims: &[("rows", 4), ("n", 40)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            super::rms_norm_residual::rms_norm_residual_on(
                ctx,
                a.input("x")?,
                a.input("residual")?,
                a.input("w")?,
                a.output("sum")?,
                a.output("out")?,
                a.params.f32("eps")?,
                a.params.opt_u32("groups")?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let (sum, out) = row_reference::rms_norm_residual(
                r.data("x")?,
                r.data("residual")?,
                r.data("w")?,
                r.dim("n")?,
                r.params.f64("eps")?,
            );
            Ok(vec![sum, out])
        },
        #[cfg(feature = "cases")]
        kernels: cases::residual_kernels,
        #[cfg(feature = "cases")]
        cases: cases::residual_cases,
        #[cfg(feature = "cases")]
        benches: cases::residual_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "layer_norm",
        family: "norm",
        summary: "LayerNorm with weight and bias over the last dimension; any n",
        inputs: &[
            X,
            W,
            TensorDecl::new("b", &["n"], DtypeRule::Like("x"), "the bias"),
        ],
        outputs: &[OUT],
        params: &[ParamDecl { default: ParamDefault::Value("1e-5"), ..EPS }],
        invariants: &[
            ROW_INVARIANTS[0],
            "b is [n] in x's dtype",
            "out does not alias x, w or b",
            ROW_INVARIANTS[2],
            ROW_INVARIANTS[3],
        ],
        rejections: &[Rejection { invariant: 1, by: Break::InputDim("b", "n", 39), reason: "`b` must have shape" }, Rejection { invariant: 2, by: Break::Alias("out", "x"), reason: "aliases `x`" }, Rejection { invariant: 3, by: Break::Param("eps", "-1"), reason: "`eps` must be finite" }],
        variants: &[],
        example: Example { dims: &[("rows", 3), ("n", 40)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            super::layer_norm(
                ctx,
                a.input("x")?,
                a.input("w")?,
                a.input("b")?,
                a.output("out")?,
                a.params.f32("eps")?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            Ok(vec![row_reference::layer_norm(
                r.data("x")?,
                r.data("w")?,
                r.data("b")?,
                r.dim("n")?,
                r.params.f64("eps")?,
            )])
        },
        #[cfg(feature = "cases")]
        kernels: cases::layer_norm_kernels,
        #[cfg(feature = "cases")]
        cases: cases::ln_cases,
        #[cfg(feature = "cases")]
        benches: cases::ln_benches,
    }
}

const SOFTMAX_X: TensorDecl = TensorDecl {
    doc: "rows over whose last dimension to reduce",
    ..X
};

inventory::submit! {
    OpDecl {
        name: "softmax",
        family: "norm",
        summary: "softmax over the last dimension, f32 inside; any n",
        inputs: &[SOFTMAX_X],
        outputs: &[OutputDecl { doc: "exp(x) / Σ exp(x) per row", ..OUT }],
        params: &[],
        invariants: &[
            "x and out share one float dtype and shape; out does not alias x",
            "x is not empty; its element count fits u32",
        ],
        rejections: &[Rejection { invariant: 0, by: Break::Alias("out", "x"), reason: "aliases `x`" }, Rejection { invariant: 0, by: Break::Dtype("x", DType::U32), reason: "`x` must be one of" }],
        variants: &[],
        example: Example { dims: &[("rows", 3), ("n", 40)], params: &[], ranges: &[("x", -4.0, 4.0)], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::softmax(ctx, a.input("x")?, a.output("out")?),
        #[cfg(feature = "cases")]
        reference: |r| Ok(vec![row_reference::softmax(r.data("x")?, r.dim("n")?)]),
        #[cfg(feature = "cases")]
        kernels: cases::softmax_kernels,
        #[cfg(feature = "cases")]
        cases: cases::softmax_cases,
        #[cfg(feature = "cases")]
        benches: cases::softmax_benches,
    }
}

/// `[rows…]`, or `[1]` for a 1-D x.
fn lse_shape(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    let s = a.input("x")?.shape();
    Ok(match s.len() {
        0 | 1 => vec![1],
        n => s[..n - 1].to_vec(),
    })
}

inventory::submit! {
    OpDecl {
        name: "logsumexp",
        family: "norm",
        summary: "logsumexp over the last dimension into f32 [rows…]; any n",
        inputs: &[SOFTMAX_X],
        outputs: &[OutputDecl {
            name: "out",
            shape: &["rows…"],
            dtype: DtypeRule::OneOf(F32),
            shape_from: ShapeFrom::Derived(lse_shape),
            doc: "ln Σ exp(x) per row, f32; [1] for a 1-D x",
        }],
        params: &[],
        invariants: &[
            "x is a float dtype; out is f32 [rows…] ([1] for a 1-D x) and does not alias x",
            "x is not empty; its element count fits u32",
        ],
        rejections: &[Rejection { invariant: 0, by: Break::Dtype("x", DType::U32), reason: "`x` must be one of" }],
        variants: &[],
        example: Example { dims: &[("rows", 3), ("n", 40)], params: &[], ranges: &[("x", -4.0, 4.0)], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::logsumexp(ctx, a.input("x")?, a.output("out")?),
        #[cfg(feature = "cases")]
        reference: |r| Ok(vec![row_reference::logsumexp(r.data("x")?, r.dim("n")?)]),
        #[cfg(feature = "cases")]
        kernels: cases::logsumexp_kernels,
        #[cfg(feature = "cases")]
        cases: cases::lse_cases,
        #[cfg(feature = "cases")]
        benches: cases::lse_benches,
    }
}

// ── RMSNorm + per-row activation quantization ────────────────────────────────────────

const QUANT_FORMAT: ParamDecl = ParamDecl {
    name: "format",
    kind: ParamKind::Choice(&super::rms_norm_quant::ACT_QUANT_NAMES),
    default: ParamDefault::Value("e4m3"),
    doc: "e4m3 or e5m2 (fp8 bytes, u8) or int8 (i8)",
};
const STATIC_SCALE: ParamDecl = ParamDecl {
    name: "static_scale",
    kind: ParamKind::Float,
    default: ParamDefault::Auto("each row's own amax / max (dynamic per-token scales)"),
    doc: "one scale for every row (a checkpoint's input_scale); finite, > 0",
};
const QUANT_OUTPUTS_DOC: &str =
    "the codes of the normalised rows: fp8 bytes (u8) or int8 values (i8); row ≈ q · scale";
const SCALE_OUT: OutputDecl = OutputDecl {
    name: "scale",
    shape: &["rows…"],
    dtype: DtypeRule::OneOf(F32),
    shape_from: ShapeFrom::Dims,
    doc: "each row's scale: amax / max (1 for a row of zeros; NaN or inf for a row holding one), or static_scale",
};
const QUANT_INVARIANTS: [&str; 4] = [
    "x is a non-empty float [rows…, n]; w is [n] in x's dtype",
    "q is [rows…, n] u8 (fp8) or i8 (int8) as `format` says; scale is f32 [rows…]; no output aliases an input or another output",
    "eps is finite and ≥ 0; static_scale, when given, is finite and > 0",
    "format is e4m3, e5m2 or int8",
];
/// The accuracy of both: a code may move one step where the stored normalised value
/// lands on the other side of a rounding boundary (the f32 sum of squares is not the
/// reference's), and a scale one step of x's dtype where the row's largest value does.
const QUANT_ACCURACY: crate::decl::Accuracy = crate::decl::Accuracy {
    f32: crate::decl::Tolerance { atol: 0.0, rtol: 8e-3 },
    f16: crate::decl::Tolerance { atol: 0.0, rtol: 8e-3 },
    bf16: crate::decl::Tolerance { atol: 0.0, rtol: 8e-3 },
    codes: crate::decl::Tolerance { atol: 1.0, rtol: 0.0 },
    keyed_by: "codes within one step and scales within one unit in the last place of x's dtype: the normalised value is rounded to x's dtype before it is quantized, and may round the other way than the f64 reference's",
};

fn quant_dtype(a: &OpArgs) -> Result<DType, OpError> {
    Ok(super::rms_norm_quant::ActQuant::parse(a.op.name, a.params.choice("format")?)?.dtype())
}

fn quant_format(a: &OpArgs) -> Result<(super::rms_norm_quant::ActQuant, Option<f32>), OpError> {
    Ok((
        super::rms_norm_quant::ActQuant::parse(a.op.name, a.params.choice("format")?)?,
        a.params.opt_f32("static_scale")?,
    ))
}

#[cfg(feature = "cases")]
fn quant_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let format = super::rms_norm_quant::ActQuant::parse(r.op.name, r.params.choice("format")?)?;
    let out = super::quant_reference::rms_norm_quant(
        r.data("x")?,
        r.optional("residual"),
        r.data("w")?,
        r.dim("n")?,
        r.params.f64("eps")?,
        r.input("x")?.dtype,
        format,
        r.params.opt_f64("static_scale")?,
    );
    let mut v = Vec::new();
    if r.optional("residual").is_some() {
        v.push(out.sum);
    }
    v.push(out.codes);
    v.push(out.scales);
    Ok(v)
}

inventory::submit! {
    OpDecl {
        name: "rms_norm_quant",
        family: "norm",
        summary: "out = rms_norm(x, w) quantized per row (per token) to fp8 e4m3/e5m2 or int8 with an f32 scale per row, dynamic or static, in one pass (the activations of a W8A8 linear layer)",
        inputs: &[X, W],
        outputs: &[
            OutputDecl { name: "q", shape: &["rows…", "n"], dtype: DtypeRule::Derived(quant_dtype, "u8 for fp8, i8 for int8"), shape_from: ShapeFrom::Like("x"), doc: QUANT_OUTPUTS_DOC },
            SCALE_OUT,
        ],
        params: &[EPS, QUANT_FORMAT, STATIC_SCALE],
        invariants: &QUANT_INVARIANTS,
        rejections: &[
            Rejection { invariant: 0, by: Break::InputDim("w", "n", 39), reason: "`w` must have shape" },
            Rejection { invariant: 1, by: Break::Alias("q", "x"), reason: "`q` aliases `x`" },
            Rejection { invariant: 2, by: Break::Param("static_scale", "0"), reason: "must be finite and > 0" },
            Rejection { invariant: 3, by: Break::Param("format", "int4"), reason: "one of e4m3, e5m2, int8" },
        ],
        variants: &[],
        example: Example { dims: &[("rows", 4), ("n", 72)], params: &[("format", "int8")], ranges: &[], with: &[] },
        workspace: None,
        accuracy: QUANT_ACCURACY,
        call: |ctx, a| {
            let (format, static_scale) = quant_format(a)?;
            super::rms_norm_quant::rms_norm_quant(
                ctx,
                a.input("x")?,
                a.input("w")?,
                a.output("q")?,
                a.output("scale")?,
                a.params.f32("eps")?,
                format,
                static_scale,
            )
        },
        #[cfg(feature = "cases")]
        reference: quant_reference,
        #[cfg(feature = "cases")]
        kernels: cases::norm_quant_kernels,
        #[cfg(feature = "cases")]
        cases: cases::norm_quant_cases,
        #[cfg(feature = "cases")]
        benches: cases::norm_quant_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "rms_norm_residual_quant",
        family: "norm",
        summary: "sum = x + residual, then rms_norm(sum, w) quantized per row to fp8 e4m3/e5m2 or int8 with an f32 scale per row, in one pass (vLLM's fused add + RMSNorm + quant)",
        inputs: &[
            X,
            TensorDecl::new("residual", &["rows…", "n"], DtypeRule::Like("x"), "the residual stream"),
            W,
        ],
        outputs: &[
            OutputDecl { name: "sum", shape: &["rows…", "n"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Like("x"), doc: "x + residual rounded to x's dtype, the next residual stream (normalised as stored)" },
            OutputDecl { name: "q", shape: &["rows…", "n"], dtype: DtypeRule::Derived(quant_dtype, "u8 for fp8, i8 for int8"), shape_from: ShapeFrom::Like("x"), doc: QUANT_OUTPUTS_DOC },
            SCALE_OUT,
        ],
        params: &[EPS, QUANT_FORMAT, STATIC_SCALE],
        invariants: &[
            QUANT_INVARIANTS[0],
            QUANT_INVARIANTS[1],
            QUANT_INVARIANTS[2],
            QUANT_INVARIANTS[3],
            "residual and sum are like x in dtype and shape; sum aliases nothing",
        ],
        rejections: &[
            Rejection { invariant: 1, by: Break::Alias("q", "x"), reason: "`q` aliases `x`" },
            Rejection { invariant: 2, by: Break::Param("eps", "-1"), reason: "`eps` must be finite" },
            Rejection { invariant: 3, by: Break::Param("format", "fp4"), reason: "one of e4m3, e5m2, int8" },
            Rejection { invariant: 4, by: Break::InputDim("residual", "n", 39), reason: "`residual` must have shape" },
            Rejection { invariant: 4, by: Break::Alias("sum", "residual"), reason: "`sum` aliases `residual`" },
        ],
        variants: &[],
        example: Example { dims: &[("rows", 3), ("n", 136)], params: &[("format", "e4m3")], ranges: &[], with: &[] },
        workspace: None,
        accuracy: QUANT_ACCURACY,
        call: |ctx, a| {
            let (format, static_scale) = quant_format(a)?;
            super::rms_norm_quant::rms_norm_residual_quant(
                ctx,
                a.input("x")?,
                a.input("residual")?,
                a.input("w")?,
                a.output("sum")?,
                a.output("q")?,
                a.output("scale")?,
                a.params.f32("eps")?,
                format,
                static_scale,
            )
        },
        #[cfg(feature = "cases")]
        reference: quant_reference,
        #[cfg(feature = "cases")]
        kernels: cases::residual_quant_kernels,
        #[cfg(feature = "cases")]
        cases: cases::residual_quant_cases,
        #[cfg(feature = "cases")]
        benches: cases::residual_quant_benches,
    }
}
