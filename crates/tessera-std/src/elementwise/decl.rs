//! The declarations of the elementwise ops.

#[cfg(feature = "cases")]
use super::activation::Activation;
use super::{add, cast, embedding, gated, GeluApproximation};
#[cfg(feature = "cases")]
use super::{cases, reference};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault, ParamKind,
    Rejection, ShapeFrom, TensorDecl, WorkspaceDecl,
};
use crate::error::OpError;
use tessera_runtime::{Context, DType};

fn call(ctx: &Context, a: &OpArgs) -> Result<(), OpError> {
    add::add(ctx, a.input("a")?, a.input("b")?, a.output("out")?)
}

#[cfg(feature = "cases")]
fn reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    Ok(vec![reference::add(r.data("a")?, r.data("b")?)])
}

inventory::submit! {
    OpDecl {
        name: "add",
        family: "elementwise",
        summary: "out = a + b, elementwise",
        inputs: &[
            TensorDecl::float("a", &["dims…"], "any shape"),
            TensorDecl::new("b", &["dims…"], DtypeRule::Like("a"), "like a"),
        ],
        outputs: &[OutputDecl { name: "out", shape: &["dims…"], dtype: DtypeRule::Like("a"), shape_from: ShapeFrom::Like("a"), doc: "a + b" }],
        params: &[],
        invariants: &[
            "a, b and out share one float dtype and one shape",
            "out does not alias a or b",
            "the tensors are not empty and their element count fits u32",
        ],
        rejections: &[Rejection { invariant: 0, by: Break::InputDim("b", "dims", 36), reason: "`b` must have shape" }, Rejection { invariant: 0, by: Break::Dtype("a", DType::U32), reason: "`a` must be one of" }, Rejection { invariant: 1, by: Break::Alias("out", "a"), reason: "aliases `a`" }],
        variants: &[],
        example: Example { dims: &[("dims", 37)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call,
        #[cfg(feature = "cases")]
        reference,
        #[cfg(feature = "cases")]
        kernels: cases::add_kernels,
        #[cfg(feature = "cases")]
        cases: cases::add_cases,
        #[cfg(feature = "cases")]
        benches: cases::add_benches,
    }
}

// ── gated activations ────────────────────────────────────────────────────────────────

const GATE: TensorDecl = TensorDecl::float("gate", &["rows…", "d"], "the gate projection");
const UP: TensorDecl = TensorDecl::new(
    "up",
    &["rows…", "d"],
    DtypeRule::Like("gate"),
    "the up projection",
);
const GATE_UP: TensorDecl = TensorDecl::float(
    "gate_up",
    &["rows…", "2·d"],
    "each row the gate (first d) then the up projection (last d)",
);

const SEPARATE_INVARIANTS: [&str; 3] = [
    "gate, up and out share one float dtype and one non-empty shape [rows…, d]",
    "out does not alias gate or up",
    "the element count is below 2^31",
];
const PACKED_INVARIANTS: [&str; 3] = [
    "gate_up is a non-empty float [rows…, 2·d] with an even last dimension; out is [rows…, d] in its dtype",
    "out does not alias gate_up",
    "gate_up's element count is below 2^31",
];

const APPROXIMATE: ParamDecl = ParamDecl {
    name: "approximate",
    kind: ParamKind::Choice(&["none", "tanh"]),
    default: ParamDefault::Value("none"),
    doc: "none: x/2·(1 + erf(x/√2)); tanh: x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as PyTorch's gelu",
};

fn approximation(a: &OpArgs) -> Result<GeluApproximation, OpError> {
    Ok(match a.params.choice("approximate")? {
        "tanh" => GeluApproximation::Tanh,
        _ => GeluApproximation::None,
    })
}

/// `[rows…, d]` from `gate_up`'s `[rows…, 2·d]`.
fn half_width(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    let mut shape = a.input("gate_up")?.shape().to_vec();
    match shape.last_mut() {
        Some(last) if last.is_multiple_of(2) => *last /= 2,
        _ => {
            return Err(OpError::invalid(
                a.op.name,
                "the last dimension of `gate_up` must be even (gate then up, d each)",
            ))
        }
    }
    Ok(shape)
}

#[cfg(feature = "cases")]
fn gelu_of(r: &RefArgs) -> Result<fn(f64) -> f64, OpError> {
    Ok(match r.params.choice("approximate")? {
        "tanh" => reference::gelu_tanh,
        _ => reference::gelu_erf,
    })
}

#[cfg(feature = "cases")]
fn packed_reference(r: &RefArgs, f: fn(f64) -> f64) -> Result<Vec<Vec<f64>>, OpError> {
    let width = r.shape("gate_up")?.last().copied().unwrap_or(0);
    Ok(vec![reference::act_mul_packed(
        f,
        r.data("gate_up")?,
        width / 2,
    )])
}

const SEPARATE_REJECTIONS: &[Rejection] = &[
    Rejection {
        invariant: 0,
        by: Break::InputDim("up", "d", 38),
        reason: "`up` must have shape",
    },
    Rejection {
        invariant: 0,
        by: Break::Dtype("gate", DType::U32),
        reason: "`gate` must be one of",
    },
    Rejection {
        invariant: 0,
        by: Break::Dtype("up", DType::F16),
        reason: "`up` must be f32",
    },
    Rejection {
        invariant: 1,
        by: Break::Alias("out", "up"),
        reason: "aliases `up`",
    },
];
const PACKED_REJECTIONS: &[Rejection] = &[
    Rejection {
        invariant: 0,
        by: Break::Dtype("gate_up", DType::I32),
        reason: "`gate_up` must be one of",
    },
    Rejection {
        invariant: 1,
        by: Break::Alias("out", "gate_up"),
        reason: "aliases `gate_up`",
    },
];

inventory::submit! {
    OpDecl {
        name: "silu_mul",
        family: "elementwise",
        summary: "out = silu(gate) · up, gate and up as two tensors (SwiGLU)",
        accuracy: crate::decl::Accuracy::STANDARD,
        inputs: &[GATE, UP],
        outputs: &[OutputDecl { name: "out", shape: &["rows…", "d"], dtype: DtypeRule::Like("gate"), shape_from: ShapeFrom::Like("gate"), doc: "silu(gate) · up" }],
        params: &[],
        invariants: &SEPARATE_INVARIANTS,
        rejections: SEPARATE_REJECTIONS,
        variants: &[],
        example: Example { dims: &[("rows", 3), ("d", 37)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        call: |ctx, a| gated::silu_mul(ctx, a.input("gate")?, a.input("up")?, a.output("out")?),
        #[cfg(feature = "cases")]
        reference: |r| Ok(vec![reference::act_mul(reference::silu, r.data("gate")?, r.data("up")?)]),
        #[cfg(feature = "cases")]
        kernels: || cases::gated_kernels(&[Activation::Silu]),
        #[cfg(feature = "cases")]
        cases: || cases::gated_cases(cases::SILU),
        #[cfg(feature = "cases")]
        benches: || cases::gated_benches(cases::SILU),
    }
}

inventory::submit! {
    OpDecl {
        name: "silu_mul_packed",
        family: "elementwise",
        summary: "out = silu(gate) · up from one [rows…, 2·d] tensor, gate first (vLLM's silu_and_mul)",
        accuracy: crate::decl::Accuracy::STANDARD,
        inputs: &[GATE_UP],
        outputs: &[OutputDecl { name: "out", shape: &["rows…", "d"], dtype: DtypeRule::Like("gate_up"), shape_from: ShapeFrom::Derived(half_width), doc: "silu(gate) · up" }],
        params: &[],
        invariants: &PACKED_INVARIANTS,
        rejections: PACKED_REJECTIONS,
        variants: &[],
        example: Example { dims: &[("rows", 3), ("d", 37)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        call: |ctx, a| gated::silu_mul_packed(ctx, a.input("gate_up")?, a.output("out")?),
        #[cfg(feature = "cases")]
        reference: |r| packed_reference(r, reference::silu),
        #[cfg(feature = "cases")]
        kernels: || cases::gated_packed_kernels(&[Activation::Silu]),
        #[cfg(feature = "cases")]
        cases: || cases::gated_packed_cases(cases::SILU),
        #[cfg(feature = "cases")]
        benches: || cases::gated_packed_benches(cases::SILU),
    }
}

inventory::submit! {
    OpDecl {
        name: "gelu_mul",
        family: "elementwise",
        summary: "out = gelu(gate) · up (erf or tanh GELU), gate and up as two tensors (GeGLU)",
        accuracy: crate::decl::Accuracy::STANDARD,
        inputs: &[GATE, UP],
        outputs: &[OutputDecl { name: "out", shape: &["rows…", "d"], dtype: DtypeRule::Like("gate"), shape_from: ShapeFrom::Like("gate"), doc: "gelu(gate) · up" }],
        params: &[APPROXIMATE],
        invariants: &SEPARATE_INVARIANTS,
        rejections: SEPARATE_REJECTIONS,
        variants: &[],
        example: Example { dims: &[("rows", 3), ("d", 37)], params: &[("approximate", "tanh")], ranges: &[], with: &[] },
        workspace: None,
        call: |ctx, a| gated::gelu_mul(ctx, a.input("gate")?, a.input("up")?, a.output("out")?, approximation(a)?),
        #[cfg(feature = "cases")]
        reference: |r| Ok(vec![reference::act_mul(gelu_of(r)?, r.data("gate")?, r.data("up")?)]),
        #[cfg(feature = "cases")]
        kernels: || cases::gated_kernels(&[Activation::GeluErf, Activation::GeluTanh]),
        #[cfg(feature = "cases")]
        cases: || [cases::gated_cases(cases::GELU_ERF), cases::gated_cases(cases::GELU_TANH)].into_iter().flatten().collect(),
        #[cfg(feature = "cases")]
        benches: || [cases::gated_benches(cases::GELU_ERF), cases::gated_benches(cases::GELU_TANH)].into_iter().flatten().collect(),
    }
}

inventory::submit! {
    OpDecl {
        name: "gelu_mul_packed",
        family: "elementwise",
        summary: "out = gelu(gate) · up (erf or tanh GELU) from one [rows…, 2·d] tensor, gate first (vLLM's gelu_and_mul)",
        accuracy: crate::decl::Accuracy::STANDARD,
        inputs: &[GATE_UP],
        outputs: &[OutputDecl { name: "out", shape: &["rows…", "d"], dtype: DtypeRule::Like("gate_up"), shape_from: ShapeFrom::Derived(half_width), doc: "gelu(gate) · up" }],
        params: &[APPROXIMATE],
        invariants: &PACKED_INVARIANTS,
        rejections: PACKED_REJECTIONS,
        variants: &[],
        example: Example { dims: &[("rows", 3), ("d", 37)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        call: |ctx, a| gated::gelu_mul_packed(ctx, a.input("gate_up")?, a.output("out")?, approximation(a)?),
        #[cfg(feature = "cases")]
        reference: |r| packed_reference(r, gelu_of(r)?),
        #[cfg(feature = "cases")]
        kernels: || cases::gated_packed_kernels(&[Activation::GeluErf, Activation::GeluTanh]),
        #[cfg(feature = "cases")]
        cases: || [cases::gated_packed_cases(cases::GELU_ERF), cases::gated_packed_cases(cases::GELU_TANH)].into_iter().flatten().collect(),
        #[cfg(feature = "cases")]
        benches: || [cases::gated_packed_benches(cases::GELU_ERF), cases::gated_packed_benches(cases::GELU_TANH)].into_iter().flatten().collect(),
    }
}

// ── cast ─────────────────────────────────────────────────────────────────────────────

fn cast_target(a: &OpArgs) -> Result<DType, OpError> {
    Ok(match a.params.choice("to")? {
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        _ => DType::F32,
    })
}

fn cast_call(ctx: &Context, a: &OpArgs) -> Result<(), OpError> {
    let out = a.output("out")?;
    let to = cast_target(a)?;
    if out.dtype() != to {
        return Err(OpError::invalid(
            "cast",
            format!("`out` must be {to} (to={to}), got {}", out.dtype()),
        ));
    }
    cast::cast(ctx, a.input("x")?, out)
}

#[cfg(feature = "cases")]
fn cast_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let to = match r.params.choice("to")? {
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        _ => DType::F32,
    };
    Ok(vec![reference::cast(to, r.data("x")?)])
}

inventory::submit! {
    OpDecl {
        name: "cast",
        family: "elementwise",
        summary: "x converted to another float dtype: round to nearest even, NaN and ±inf kept, overflow to ±inf",
        accuracy: crate::decl::Accuracy::EXACT,
        inputs: &[TensorDecl::float("x", &["dims…"], "any shape")],
        outputs: &[OutputDecl { name: "out", shape: &["dims…"], dtype: DtypeRule::Derived(cast_target, "the dtype `to` names"), shape_from: ShapeFrom::Like("x"), doc: "x in the dtype `to`" }],
        params: &[ParamDecl { name: "to", kind: ParamKind::Choice(&["f32", "f16", "bf16"]), default: ParamDefault::Required, doc: "the output dtype" }],
        invariants: &[
            "x and out are float tensors of one shape; out's dtype is `to`",
            "out does not alias x",
            "x is not empty and holds fewer than 2^31 elements",
        ],
        rejections: &[Rejection { invariant: 0, by: Break::Dtype("x", DType::U32), reason: "`x` must be one of" }, Rejection { invariant: 0, by: Break::Param("to", "f64"), reason: "one of f32, f16, bf16" }, Rejection { invariant: 0, by: Break::Param("to", "bf16"), reason: "`out` must be bf16" }, Rejection { invariant: 1, by: Break::Alias("out", "x"), reason: "aliases `x`" }],
        variants: &[],
        example: Example { dims: &[("dims", 37)], params: &[("to", "f32")], ranges: &[], with: &[] },
        workspace: None,
        call: cast_call,
        #[cfg(feature = "cases")]
        reference: cast_reference,
        #[cfg(feature = "cases")]
        kernels: cases::cast_kernels,
        #[cfg(feature = "cases")]
        cases: cases::cast_cases,
        #[cfg(feature = "cases")]
        benches: cases::cast_benches,
    }
}

// ── embedding ────────────────────────────────────────────────────────────────────────

inventory::submit! {
    OpDecl {
        name: "embedding",
        family: "elementwise",
        summary: "out[t, :] = table[ids[t], :]; an id outside 0..vocab is refused (checked on the device) before anything is written",
        accuracy: crate::decl::Accuracy::EXACT,
        inputs: &[
            TensorDecl::new("ids", &["tokens"], DtypeRule::OneOf(&embedding::ID_DTYPES), "token ids, each in 0..vocab"),
            TensorDecl::float("table", &["vocab", "d"], "the embedding table"),
        ],
        outputs: &[OutputDecl { name: "out", shape: &["tokens", "d"], dtype: DtypeRule::Like("table"), shape_from: ShapeFrom::Dims, doc: "the rows of the ids" }],
        params: &[],
        invariants: &[
            "ids is i32 or u32 [tokens]; table is a float [vocab, d]; out is [tokens, d] in table's dtype; none empty",
            "out does not alias ids or table",
            "every id is in 0..vocab (checked on the device; the call is refused, naming the first bad token, before the gather writes anything)",
            "table and out hold fewer than 2^31 elements",
        ],
        rejections: &[Rejection { invariant: 0, by: Break::Dtype("ids", DType::F32), reason: "`ids` must be one of" }, Rejection { invariant: 0, by: Break::Dtype("table", DType::U32), reason: "`table` must be one of" }, Rejection { invariant: 1, by: Break::Alias("out", "table"), reason: "aliases `table`" }],
        variants: &[],
        example: Example { dims: &[("tokens", 7), ("vocab", 50), ("d", 37)], params: &[], ranges: &[("ids", 0.0, 50.0)], with: &[] },
        workspace: Some(WorkspaceDecl {
            bytes: "4: the word the device-side id check writes",
            make: |ctx, _| Ok(Box::new(embedding::EmbeddingCheck::new(ctx)?)),
        }),
        call: |ctx, a| embedding::embedding(ctx, a.input("ids")?, a.input("table")?, a.output("out")?, a.workspace::<embedding::EmbeddingCheck>()?),
        #[cfg(feature = "cases")]
        reference: |r| Ok(vec![reference::embedding(r.data("ids")?, r.data("table")?, r.dim("d")?)]),
        #[cfg(feature = "cases")]
        kernels: cases::embedding_kernels,
        #[cfg(feature = "cases")]
        cases: cases::embedding_cases,
        #[cfg(feature = "cases")]
        benches: cases::embedding_benches,
    }
}
