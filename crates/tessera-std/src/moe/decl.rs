//! The declarations of the MoE ops: the router, the permute, the grouped GEMVs (plain and
//! with the fused SiLU·mul), the combine and the grouped GEMMs of prefill (dense and affine).

#[cfg(feature = "cases")]
use super::{cases, reference};
use super::{
    gemm, gemv, moe_combine, moe_gemm_schedule, moe_permute, moe_route, MoeCheck, MoeGemmSchedule,
    MoePlan, RouteConfig, Scoring,
};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Accuracy, Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault,
    ParamKind, Rejection, ShapeFrom, TensorDecl, VariantDecl, WorkspaceDecl, F32, U32,
};
use crate::error::OpError;
use tessera_runtime::{Context, DType};

const I32: &[DType] = &[DType::I32];

// ── moe_route ────────────────────────────────────────────────────────────────────────

const TOP_K: ParamDecl = ParamDecl {
    name: "top_k",
    kind: ParamKind::UInt { min: 1, max: 1024 },
    default: ParamDefault::Required,
    doc: "experts per token (num_experts_per_tok), at most the experts",
};

/// The router's settings from a call's parameters.
pub(super) fn route_config(p: &crate::decl::ParamValues) -> Result<RouteConfig, OpError> {
    Ok(RouteConfig {
        top_k: p.usize("top_k")?,
        scoring: if p.choice("scoring")? == "sigmoid" {
            Scoring::Sigmoid
        } else {
            Scoring::Softmax
        },
        renormalize: p.bool("renormalize")?,
        n_group: p.usize("n_group")?,
        topk_group: p.usize("topk_group")?,
        routed_scaling_factor: p.f32("routed_scaling_factor")?,
    })
}

fn routed_dims(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    let tokens = a.input("logits")?.shape().first().copied().unwrap_or(0);
    Ok(vec![tokens, a.params.usize("top_k")?])
}

#[cfg(feature = "cases")]
fn route_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let cfg = route_config(r.params)?;
    let (ids, weights) = reference::route(r.data("logits")?, r.optional("bias"), r.dim("E")?, &cfg);
    Ok(vec![ids, weights])
}

inventory::submit! {
    OpDecl {
        name: "moe_route",
        family: "moe",
        summary: "MoE router: top-k experts and weights per token from router logits, softmax (Qwen3-MoE, Mixtral) or sigmoid (DeepSeek-V3) scoring, selection bias, grouped top-k, renormalisation, scaling",
        inputs: &[
            TensorDecl::float("logits", &["T", "E"], "router logits, one row per token, 1 ≤ E ≤ 1024"),
            TensorDecl::float("bias", &["E"], "selection bias added to the scores for choosing only (DeepSeek-V3's e_score_correction_bias)").optional(),
        ],
        outputs: &[
            OutputDecl { name: "topk_ids", shape: &["T", "k"], dtype: DtypeRule::OneOf(I32), shape_from: ShapeFrom::Derived(routed_dims), doc: "the chosen experts, best first, ties to the lowest index; −1 for a row with no answer (a NaN logit; under softmax a +∞ or only −∞ logits; a NaN bias)" },
            OutputDecl { name: "topk_weights", shape: &["T", "k"], dtype: DtypeRule::OneOf(F32), shape_from: ShapeFrom::Derived(routed_dims), doc: "their unbiased scores, renormalised (w / (Σw + 1e-20)) if asked, times routed_scaling_factor; NaN where the id is −1" },
        ],
        params: &[
            TOP_K,
            ParamDecl { name: "scoring", kind: ParamKind::Choice(&["softmax", "sigmoid"]), default: ParamDefault::Value("softmax"), doc: "softmax over all experts in f32, or a sigmoid per expert" },
            ParamDecl { name: "renormalize", kind: ParamKind::Bool, default: ParamDefault::Value("true"), doc: "scale the chosen weights to sum 1 (norm_topk_prob)" },
            ParamDecl { name: "n_group", kind: ParamKind::UInt { min: 1, max: 1024 }, default: ParamDefault::Value("1"), doc: "expert groups (contiguous, equal); a group's score is the sum of its two best keys" },
            ParamDecl { name: "topk_group", kind: ParamKind::UInt { min: 1, max: 1024 }, default: ParamDefault::Value("1"), doc: "the best groups whose experts are candidates" },
            ParamDecl { name: "routed_scaling_factor", kind: ParamKind::Float, default: ParamDefault::Value("1"), doc: "multiplies every weight, after renormalisation" },
        ],
        invariants: &[
            "logits is a float [T, E], not empty, E ≤ 1024; bias (optional) a float [E]; topk_ids i32 and topk_weights f32 [T, top_k]",
            "1 ≤ top_k ≤ E",
            "n_group divides E into groups of at least two (or is 1); 1 ≤ topk_group ≤ n_group; the chosen groups hold at least top_k experts",
            "the outputs alias no input nor each other",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("logits", DType::U32), reason: "`logits` must be one of" },
            Rejection { invariant: 0, by: Break::InputDim("bias", "E", 15), reason: "`bias` must have shape [16]" },
            Rejection { invariant: 1, by: Break::Param("top_k", "17"), reason: "top_k = 17 must be in 1..=16" },
            Rejection { invariant: 2, by: Break::Param("n_group", "3"), reason: "must divide the 16 experts" },
            Rejection { invariant: 2, by: Break::Param("topk_group", "5"), reason: "topk_group = 5 must be in 1..=4" },
            Rejection { invariant: 2, by: Break::Param("topk_group", "1"), reason: "fewer than top_k = 5 candidates" },
        ],
        variants: &[VariantDecl { name: "moe_route_kernel", when: "one threadgroup per token, a thread per expert; the top-k by rank counting, no sort" }],
        example: Example {
            dims: &[("T", 5), ("E", 16), ("k", 5)],
            params: &[("top_k", "5"), ("scoring", "sigmoid"), ("n_group", "4"), ("topk_group", "2"), ("routed_scaling_factor", "2.5")],
            ranges: &[("logits", -4.0, 4.0), ("bias", -0.5, 0.5)],
            with: &["bias"],
        },
        workspace: None,
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| moe_route(ctx, a.input("logits")?, a.optional("bias"), &route_config(a.params)?, a.output("topk_ids")?, a.output("topk_weights")?),
        #[cfg(feature = "cases")]
        reference: route_reference,
        #[cfg(feature = "cases")]
        kernels: cases::route_kernels,
        #[cfg(feature = "cases")]
        cases: cases::route_cases,
        #[cfg(feature = "cases")]
        benches: cases::route_benches,
    }
}

// ── moe_permute ──────────────────────────────────────────────────────────────────────

const TOPK_IDS: TensorDecl = TensorDecl::new(
    "topk_ids",
    &["T", "k"],
    DtypeRule::OneOf(I32),
    "each token's experts (moe_route's ids), each in 0..E",
);

fn experts_dims(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    Ok(vec![a.params.usize("experts")?])
}

fn pairs_dims(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    Ok(vec![a.input("topk_ids")?.len()])
}

/// The plan tensors of a declared `moe_permute` call.
fn plan_of(a: &OpArgs) -> Result<MoePlan, OpError> {
    Ok(MoePlan {
        expert_counts: a.output("expert_counts")?.clone(),
        expert_offsets: a.output("expert_offsets")?.clone(),
        sorted_pairs: a.output("sorted_pairs")?.clone(),
        active_experts: a.output("active_experts")?.clone(),
    })
}

fn permute_call(ctx: &Context, a: &OpArgs) -> Result<(), OpError> {
    let plan = plan_of(a)?;
    let experts = a.params.usize("experts")?;
    crate::validate::shape_is(
        "moe_permute",
        "expert_counts",
        &plan.expert_counts,
        &[experts],
    )?;
    moe_permute(ctx, a.input("topk_ids")?, &plan, a.workspace::<MoeCheck>()?)
}

#[cfg(feature = "cases")]
fn permute_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    Ok(reference::permute(r.data("topk_ids")?, r.params.usize("experts")?).to_vec())
}

const CHECK_WORD: WorkspaceDecl = WorkspaceDecl {
    bytes: "4: the word the device-side id check writes",
    make: |ctx, _| Ok(Box::new(MoeCheck::new(ctx)?)),
};

inventory::submit! {
    OpDecl {
        name: "moe_permute",
        family: "moe",
        summary: "groups the (token, slot) pairs of a routing by expert: counts, offsets, the pairs in expert order (stable), the experts chosen at all; an id outside 0..E is refused (checked on the device) before anything is written",
        inputs: &[TOPK_IDS],
        outputs: &[
            OutputDecl { name: "expert_counts", shape: &["E"], dtype: DtypeRule::OneOf(U32), shape_from: ShapeFrom::Derived(experts_dims), doc: "pairs per expert" },
            OutputDecl { name: "expert_offsets", shape: &["E"], dtype: DtypeRule::OneOf(U32), shape_from: ShapeFrom::Derived(experts_dims), doc: "where each expert's pairs start in sorted_pairs" },
            OutputDecl { name: "sorted_pairs", shape: &["T·k"], dtype: DtypeRule::OneOf(U32), shape_from: ShapeFrom::Derived(pairs_dims), doc: "the pairs t·k + j grouped by expert, ascending within each" },
            OutputDecl { name: "active_experts", shape: &["E"], dtype: DtypeRule::OneOf(U32), shape_from: ShapeFrom::Derived(experts_dims), doc: "the experts chosen at all, ascending, then E in the slots left" },
        ],
        params: &[ParamDecl { name: "experts", kind: ParamKind::UInt { min: 1, max: 1024 }, default: ParamDefault::Required, doc: "the number of experts E" }],
        invariants: &[
            "topk_ids is i32 [T, k] with 1 ≤ T·k ≤ 4096; the outputs are u32 [E], [E], [T·k], [E] with E ≤ 1024, aliasing nothing",
            "every id is in 0..E (checked on the device; the call is refused, naming the first bad pair, before anything is written; so it cannot be recorded into a graph)",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("topk_ids", DType::U32), reason: "`topk_ids` must be i32" },
            Rejection { invariant: 0, by: Break::Param("experts", "7"), reason: "`expert_counts` must have shape [7]" },
            Rejection { invariant: 0, by: Break::Dim("T", 1400), reason: "1 ≤ pairs ≤ 4096" },
        ],
        variants: &[VariantDecl { name: "moe_permute_kernel", when: "one threadgroup of 1024 threads: a counting sort by rank counting, no atomics" }],
        example: Example { dims: &[("T", 7), ("k", 3), ("E", 8)], params: &[("experts", "8")], ranges: &[("topk_ids", 0.0, 8.0)], with: &[] },
        workspace: Some(CHECK_WORD),
        accuracy: Accuracy::EXACT,
        call: permute_call,
        #[cfg(feature = "cases")]
        reference: permute_reference,
        #[cfg(feature = "cases")]
        kernels: cases::permute_kernels,
        #[cfg(feature = "cases")]
        cases: cases::permute_cases,
        #[cfg(feature = "cases")]
        benches: cases::permute_benches,
    }
}

// ── moe_gemv, moe_gemv_silu_mul ──────────────────────────────────────────────────────

/// A declared grouped GEMV's scratch: the plan it permutes into and the id check's word.
pub(super) struct GemvWorkspace {
    plan: MoePlan,
    check: MoeCheck,
}

fn gemv_workspace(ctx: &Context, a: &OpArgs) -> Result<crate::decl::Workspace, OpError> {
    let experts = a.input("w")?.shape().first().copied().unwrap_or(1);
    let pairs = a.input("topk_ids")?.len();
    Ok(Box::new(GemvWorkspace {
        plan: MoePlan::new(
            ctx,
            experts.clamp(1, super::MAX_EXPERTS),
            pairs.clamp(1, super::permute::MAX_PAIRS),
        )?,
        check: MoeCheck::new(ctx)?,
    }))
}

/// Checks the GEMV, then permutes the ids into the workspace's plan and runs it.
fn gemv_call(ctx: &Context, a: &OpArgs, gated: bool) -> Result<(), OpError> {
    let op = a.op.name;
    let ws = a.workspace::<GemvWorkspace>()?;
    let (x, w, y) = (a.input("x")?, a.input("w")?, a.output("y")?);
    let ids = a.input("topk_ids")?;
    if ids.shape() != &y.shape()[..y.shape().len().min(2)] {
        return Err(OpError::invalid(
            op,
            format!(
                "`topk_ids` must be [T, k] as y is [T, k, …] {:?}, got shape {:?}",
                y.shape(),
                ids.shape()
            ),
        ));
    }
    gemv::validate(op, x, w, &ws.plan, y, gated)?;
    moe_permute(ctx, ids, &ws.plan, &ws.check)?;
    if gated {
        super::moe_gemv_silu_mul(ctx, x, w, &ws.plan, y)
    } else {
        super::moe_gemv(ctx, x, w, &ws.plan, y)
    }
}

/// `I` of a gated form's reference: half the weight's second dimension.
#[cfg(feature = "cases")]
fn half_rows(r: &RefArgs, weight: &str) -> Result<usize, OpError> {
    Ok(r.shape(weight)?.get(1).copied().unwrap_or(0) / 2)
}

#[cfg(feature = "cases")]
fn gemv_reference(r: &RefArgs, gated: bool) -> Result<Vec<Vec<f64>>, OpError> {
    let (tokens, top_k, k) = (r.dim("T")?, r.dim("k")?, r.dim("K")?);
    let n = if gated {
        half_rows(r, "w")?
    } else {
        r.dim("N")?
    };
    Ok(vec![reference::gemv(
        r.data("x")?,
        r.data("w")?,
        r.data("topk_ids")?,
        (tokens, top_k, n, k),
        false,
        gated,
    )])
}

const GEMV_INVARIANTS: &[&str] = &[
    "x, w and y share one float dtype; topk_ids is i32 [T, k] with 1 ≤ T·k ≤ 4096",
    "x is [T, K] (or, through the Rust API, [T, k, K]: a row per pair); w is [E, N, K] (silu_mul: [E, 2·I, K]) with E ≤ 1024; y is [T, k, N] (silu_mul: [T, k, I])",
    "every id is in 0..E (checked on the device by moe_permute before anything is written; a hand-written case)",
    "y aliases no input; element counts fit u32 (a hand-written case)",
];

const GEMV_VARIANTS: &[VariantDecl] = &[VariantDecl {
    name: "moe_gemv_kernel",
    when: "a threadgroup per (chosen expert, 4 output columns), a simdgroup per column walking 16-byte runs of the expert's weight row, the expert's pairs in tiles of 1, 2, 4 or 8 rows; gated: the gate and up rows side by side and silu(gate)·up before the store",
}];

inventory::submit! {
    OpDecl {
        name: "moe_gemv",
        family: "moe",
        summary: "grouped gather-GEMV of MoE decode: y[t, j] = x[t]·w[topk_ids[t, j]]ᵀ, only the chosen experts' weights read, each once for all the tokens that chose it",
        inputs: &[
            TensorDecl::float("x", &["T", "K"], "the tokens' activations"),
            TOPK_IDS,
            TensorDecl::new("w", &["E", "N", "K"], DtypeRule::Like("x"), "the experts' weights, [N, K] each (torch.nn.Linear's layout)"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["T", "k", "N"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "each pair's expert output, accumulated in f32" }],
        params: &[],
        invariants: GEMV_INVARIANTS,
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("w", DType::BF16), reason: "`w` must be f32" },
            Rejection { invariant: 0, by: Break::Dtype("topk_ids", DType::U32), reason: "`topk_ids` must be i32" },
            Rejection { invariant: 1, by: Break::InputDim("w", "K", 39), reason: "`w` must be [experts = 6, N = 5, K = 40]" },
            Rejection { invariant: 1, by: Break::InputDim("x", "T", 4), reason: "`x` must be [tokens = 3, K]" },
        ],
        variants: GEMV_VARIANTS,
        example: Example { dims: &[("T", 3), ("k", 2), ("E", 6), ("N", 5), ("K", 40)], params: &[], ranges: &[("topk_ids", 0.0, 6.0)], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: "4·(3·E + T·k) + 4: the plan and the id check's word", make: gemv_workspace }),
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| gemv_call(ctx, a, false),
        #[cfg(feature = "cases")]
        reference: |r| gemv_reference(r, false),
        #[cfg(feature = "cases")]
        kernels: cases::gemv_kernels,
        #[cfg(feature = "cases")]
        cases: cases::gemv_cases,
        #[cfg(feature = "cases")]
        benches: cases::gemv_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "moe_gemv_silu_mul",
        family: "moe",
        summary: "the expert MLP's gate/up half in one pass: y[t, j] = silu(x[t]·gateᵀ)·(x[t]·upᵀ) over a packed gate_up weight [E, 2·I, K] of the chosen experts, each read once",
        inputs: &[
            TensorDecl::float("x", &["T", "K"], "the tokens' activations"),
            TOPK_IDS,
            TensorDecl::new("w", &["E", "2·I", "K"], DtypeRule::Like("x"), "each expert's gate rows (0..I) then up rows (I..2·I)"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["T", "k", "I"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Derived(|a| gated_dims(a, "w")), doc: "silu(gate)·up per pair, in f32 until the store" }],
        params: &[],
        invariants: GEMV_INVARIANTS,
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::U32), reason: "`x` must be one of" },
            Rejection { invariant: 1, by: Break::InputDim("w", "I", 4), reason: "`w` must be [experts = 6, 2·I = 10, K = 40]" },
        ],
        variants: GEMV_VARIANTS,
        example: Example { dims: &[("T", 3), ("k", 2), ("E", 6), ("I", 5), ("K", 40)], params: &[], ranges: &[("topk_ids", 0.0, 6.0)], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: "4·(3·E + T·k) + 4: the plan and the id check's word", make: gemv_workspace }),
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| gemv_call(ctx, a, true),
        #[cfg(feature = "cases")]
        reference: |r| gemv_reference(r, true),
        #[cfg(feature = "cases")]
        kernels: cases::gemv_kernels,
        #[cfg(feature = "cases")]
        cases: cases::gemv_silu_mul_cases,
        #[cfg(feature = "cases")]
        benches: cases::gemv_silu_mul_benches,
    }
}

/// `[T, k, I]` of a gated GEMV: `I` is half the weight's second dimension (`2·I` binds no
/// name of its own).
fn gated_dims(a: &OpArgs, weight: &str) -> Result<Vec<usize>, OpError> {
    let ids = a.input("topk_ids")?.shape();
    let rows = a.input(weight)?.shape().get(1).copied().unwrap_or(0);
    Ok(vec![
        ids.first().copied().unwrap_or(0),
        ids.get(1).copied().unwrap_or(0),
        rows / 2,
    ])
}

// ── moe_combine ──────────────────────────────────────────────────────────────────────

#[cfg(feature = "cases")]
fn combine_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let dims = (r.dim("T")?, r.dim("k")?, r.dim("D")?);
    Ok(vec![reference::combine(
        r.data("y")?,
        r.data("topk_weights")?,
        r.optional("shared"),
        dims,
    )])
}

inventory::submit! {
    OpDecl {
        name: "moe_combine",
        family: "moe",
        summary: "the weighted combine of MoE: out[t] = Σ_j topk_weights[t, j]·y[t, j] (+ a shared expert's output), in f32",
        inputs: &[
            TensorDecl::float("y", &["T", "k", "D"], "each pair's expert output (the down projection's)"),
            TensorDecl::new("topk_weights", &["T", "k"], DtypeRule::OneOf(F32), "the router's weights"),
            TensorDecl::new("shared", &["T", "D"], DtypeRule::Like("y"), "a shared expert's output, added").optional(),
        ],
        outputs: &[OutputDecl { name: "out", shape: &["T", "D"], dtype: DtypeRule::Like("y"), shape_from: ShapeFrom::Dims, doc: "the layer's output; a NaN weight makes its token's row NaN" }],
        params: &[],
        invariants: &[
            "y is a non-empty float [T, k, D]; topk_weights f32 [T, k]; shared (optional) and out [T, D] in y's dtype",
            "out aliases no input",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("topk_weights", DType::F16), reason: "`topk_weights` must be f32" },
            Rejection { invariant: 0, by: Break::InputDim("shared", "D", 9), reason: "`shared` must have shape [4, 37]" },
            Rejection { invariant: 1, by: Break::Alias("out", "shared"), reason: "`out` aliases `shared`" },
        ],
        variants: &[VariantDecl { name: "moe_combine_kernel", when: "a thread per output element" }],
        example: Example { dims: &[("T", 4), ("k", 3), ("D", 37)], params: &[], ranges: &[], with: &["shared"] },
        workspace: None,
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| moe_combine(ctx, a.input("y")?, a.input("topk_weights")?, a.optional("shared"), a.output("out")?),
        #[cfg(feature = "cases")]
        reference: combine_reference,
        #[cfg(feature = "cases")]
        kernels: cases::combine_kernels,
        #[cfg(feature = "cases")]
        cases: cases::combine_cases,
        #[cfg(feature = "cases")]
        benches: cases::combine_benches,
    }
}

// ── moe_qgemv, moe_qgemv_silu_mul ────────────────────────────────────────────────────

const BITS: ParamDecl = ParamDecl {
    name: "bits",
    kind: ParamKind::UInt { min: 2, max: 8 },
    default: ParamDefault::Value("4"),
    doc: "bits per value: 2, 3, 4, 5, 6 or 8",
};
const GROUP_SIZE: ParamDecl = ParamDecl {
    name: "group_size",
    kind: ParamKind::UInt { min: 32, max: 128 },
    default: ParamDefault::Value("64"),
    doc: "values per scale and bias along K: 32, 64 or 128",
};

fn qgemv_workspace(ctx: &Context, a: &OpArgs) -> Result<crate::decl::Workspace, OpError> {
    let experts = a.input("packed")?.shape().first().copied().unwrap_or(1);
    let pairs = a.input("topk_ids")?.len();
    Ok(Box::new(GemvWorkspace {
        plan: MoePlan::new(
            ctx,
            experts.clamp(1, super::MAX_EXPERTS),
            pairs.clamp(1, super::permute::MAX_PAIRS),
        )?,
        check: MoeCheck::new(ctx)?,
    }))
}

/// Permutes the ids into the workspace's plan (after the shapes are checked) and runs the
/// quantized GEMV.
fn qgemv_call(ctx: &Context, a: &OpArgs, gated: bool) -> Result<(), OpError> {
    let ws = a.workspace::<GemvWorkspace>()?;
    let (x, y, ids) = (a.input("x")?, a.output("y")?, a.input("topk_ids")?);
    let w = super::AffineExperts {
        packed: a.input("packed")?,
        scales: a.input("scales")?,
        biases: a.input("biases")?,
        bits: a.params.u32("bits")?,
        group_size: a.params.u32("group_size")?,
    };
    let run = |plan: &MoePlan| {
        if gated {
            super::moe_qgemv_silu_mul(ctx, x, &w, plan, y)
        } else {
            super::moe_qgemv(ctx, x, &w, plan, y)
        }
    };
    if ids.shape() != &y.shape()[..y.shape().len().min(2)] {
        return Err(OpError::invalid(
            a.op.name,
            format!(
                "`topk_ids` must be [T, k] as y is [T, k, …] {:?}, got shape {:?}",
                y.shape(),
                ids.shape()
            ),
        ));
    }
    super::qgemv::check(a.op.name, x, &w, &ws.plan, y, gated)?;
    moe_permute(ctx, ids, &ws.plan, &ws.check)?;
    run(&ws.plan)
}

#[cfg(feature = "cases")]
fn qgemv_reference(r: &RefArgs, gated: bool) -> Result<Vec<Vec<f64>>, OpError> {
    let (bits, group) = (r.params.u32("bits")?, r.params.usize("group_size")?);
    let (tokens, top_k, experts, k) = (r.dim("T")?, r.dim("k")?, r.dim("E")?, r.dim("KG")? * group);
    let n = if gated {
        half_rows(r, "packed")?
    } else {
        r.dim("N")?
    };
    let rows = if gated { 2 * n } else { n };
    let w = reference::affine_weights(
        r.data("packed")?,
        r.data("scales")?,
        r.data("biases")?,
        (experts * rows, k),
        bits,
        group,
    );
    Ok(vec![reference::gemv(
        r.data("x")?,
        &w,
        r.data("topk_ids")?,
        (tokens, top_k, n, k),
        false,
        gated,
    )])
}

const QGEMV_INVARIANTS: &[&str] = &[
    "bits is 2, 3, 4, 5, 6 or 8; group_size is 32, 64 or 128",
    "x is a float [T, K] (or, through the Rust API, [T, k, K]) with K a multiple of group_size; topk_ids i32 [T, k] with 1 ≤ T·k ≤ 4096",
    "packed is u32 [E, N, K·bits/32] (silu_mul: [E, 2·I, …]); scales and biases [E, N, K/group_size] in x's dtype; y [T, k, N] (silu_mul: [T, k, I]); E ≤ 1024",
    "every id is in 0..E (checked on the device by moe_permute before anything is written)",
    "y aliases no input",
];

const QGEMV_VARIANTS: &[VariantDecl] = &[VariantDecl {
    name: "moe_qgemv_kernel",
    when: "a threadgroup per (chosen expert, 4 output columns), a simdgroup per column walking units of 32 values (bits whole words) two at a time, dequantized in registers through affine_weight; the expert's pairs in tiles of 1, 2, 4 or 8 rows; gated: gate and up rows side by side",
}];

/// A 4-bit, group-64 example: K = 128, so KW = 16 and KG = 2.
const Q_PACKED_RANGE: (&str, f64, f64) = ("packed", 0.0, 4294967295.0);

inventory::submit! {
    OpDecl {
        name: "moe_qgemv",
        family: "moe",
        summary: "grouped gather-GEMV over experts in MLX's affine format (an MLX SwitchLinear): y[t, j] = x[t]·dequant(W[topk_ids[t, j]])ᵀ, the chosen experts read once each, never dequantized to memory",
        inputs: &[
            TensorDecl::float("x", &["T", "K"], "the tokens' activations"),
            TOPK_IDS,
            TensorDecl::new("packed", &["E", "N", "KW"], DtypeRule::OneOf(U32), "each expert's codes, KW = K·bits/32 words per row (MLX's layout)"),
            TensorDecl::new("scales", &["E", "N", "KG"], DtypeRule::Like("x"), "one scale per group, KG = K/group_size"),
            TensorDecl::new("biases", &["E", "N", "KG"], DtypeRule::Like("x"), "one bias per group"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["T", "k", "N"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "each pair's expert output, accumulated in f32" }],
        params: &[BITS, GROUP_SIZE],
        invariants: QGEMV_INVARIANTS,
        rejections: &[
            Rejection { invariant: 0, by: Break::Param("bits", "7"), reason: "bits must be one of 2, 3, 4, 5, 6, 8" },
            Rejection { invariant: 1, by: Break::InputDim("x", "K", 96), reason: "must be a positive multiple of the group size 64" },
            Rejection { invariant: 2, by: Break::InputDim("packed", "KW", 12), reason: "`packed` must be [experts = 4, N = 5, 16]" },
            Rejection { invariant: 2, by: Break::Dtype("scales", DType::F16), reason: "`scales` must be f32" },
        ],
        variants: QGEMV_VARIANTS,
        example: Example { dims: &[("T", 3), ("k", 2), ("E", 4), ("N", 5), ("K", 128), ("KW", 16), ("KG", 2)], params: &[("bits", "4"), ("group_size", "64")], ranges: &[Q_PACKED_RANGE, ("topk_ids", 0.0, 4.0)], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: "4·(3·E + T·k) + 4: the plan and the id check's word", make: qgemv_workspace }),
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| qgemv_call(ctx, a, false),
        #[cfg(feature = "cases")]
        reference: |r| qgemv_reference(r, false),
        #[cfg(feature = "cases")]
        kernels: cases::qgemv_kernels,
        #[cfg(feature = "cases")]
        cases: cases::qgemv_cases,
        #[cfg(feature = "cases")]
        benches: cases::qgemv_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "moe_qgemv_silu_mul",
        family: "moe",
        summary: "the expert MLP's gate/up half over MLX affine experts in one pass: silu(x·gateᵀ)·(x·upᵀ) from packed gate_up codes [E, 2·I, K·bits/32]",
        inputs: &[
            TensorDecl::float("x", &["T", "K"], "the tokens' activations"),
            TOPK_IDS,
            TensorDecl::new("packed", &["E", "2·I", "KW"], DtypeRule::OneOf(U32), "each expert's gate rows then up rows, KW = K·bits/32 words per row"),
            TensorDecl::new("scales", &["E", "2·I", "KG"], DtypeRule::Like("x"), "one scale per group, KG = K/group_size"),
            TensorDecl::new("biases", &["E", "2·I", "KG"], DtypeRule::Like("x"), "one bias per group"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["T", "k", "I"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Derived(|a| gated_dims(a, "packed")), doc: "silu(gate)·up per pair, in f32 until the store" }],
        params: &[BITS, GROUP_SIZE],
        invariants: QGEMV_INVARIANTS,
        rejections: &[
            Rejection { invariant: 0, by: Break::Param("group_size", "48"), reason: "group_size must be 32, 64 or 128" },
            Rejection { invariant: 2, by: Break::InputDim("scales", "KG", 3), reason: "`scales` must have shape [4, 10, 2]" },
        ],
        variants: QGEMV_VARIANTS,
        example: Example { dims: &[("T", 3), ("k", 2), ("E", 4), ("I", 5), ("K", 128), ("KW", 16), ("KG", 2)], params: &[("bits", "4"), ("group_size", "64")], ranges: &[Q_PACKED_RANGE, ("topk_ids", 0.0, 4.0)], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: "4·(3·E + T·k) + 4: the plan and the id check's word", make: qgemv_workspace }),
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| qgemv_call(ctx, a, true),
        #[cfg(feature = "cases")]
        reference: |r| qgemv_reference(r, true),
        #[cfg(feature = "cases")]
        kernels: cases::qgemv_kernels,
        #[cfg(feature = "cases")]
        cases: cases::qgemv_silu_mul_cases,
        #[cfg(feature = "cases")]
        benches: cases::qgemv_silu_mul_benches,
    }
}

// ── moe_gemm, moe_gemm_silu_mul ──────────────────────────────────────────────────────

/// A declared grouped GEMM's scratch: the tile schedule and the offset check's word.
pub(super) struct GemmWorkspace {
    schedule: MoeGemmSchedule,
    check: MoeCheck,
}

fn gemm_workspace(ctx: &Context, a: &OpArgs) -> Result<crate::decl::Workspace, OpError> {
    let experts = a.input("w")?.shape().first().copied().unwrap_or(1);
    let rows = a.input("x")?.shape().first().copied().unwrap_or(1);
    Ok(Box::new(GemmWorkspace {
        schedule: MoeGemmSchedule::new(ctx, experts.clamp(1, super::MAX_EXPERTS), rows.max(1))?,
        check: MoeCheck::new(ctx)?,
    }))
}

/// Checks the GEMM's shapes, then builds the schedule from the offsets (checked on the
/// device) and runs it.
fn gemm_call(ctx: &Context, a: &OpArgs, gated: bool) -> Result<(), OpError> {
    let op = a.op.name;
    let ws = a.workspace::<GemmWorkspace>()?;
    let (x, w, y, offsets) = (
        a.input("x")?,
        a.input("w")?,
        a.output("y")?,
        a.input("offsets")?,
    );
    crate::validate::dtype_is(op, "offsets", offsets, DType::U32)?;
    let experts = w.shape().first().copied().unwrap_or(0);
    if offsets.shape() != [experts] {
        return Err(OpError::invalid(
            op,
            format!(
                "`offsets` must be [experts = {experts}] (w's experts; each expert's end row), got shape {:?}",
                offsets.shape()
            ),
        ));
    }
    gemm::validate(op, x, w, &ws.schedule, y, gated)?;
    moe_gemm_schedule(ctx, offsets, &ws.schedule, &ws.check)?;
    if gated {
        super::moe_gemm_silu_mul(ctx, x, w, &ws.schedule, y)
    } else {
        super::moe_gemm(ctx, x, w, &ws.schedule, y)
    }
}

#[cfg(feature = "cases")]
fn gemm_reference(r: &RefArgs, gated: bool) -> Result<Vec<Vec<f64>>, OpError> {
    let (rows, k) = (r.dim("R")?, r.dim("K")?);
    let n = if gated {
        half_rows(r, "w")?
    } else {
        r.dim("N")?
    };
    Ok(vec![reference::grouped_gemm(
        r.data("x")?,
        r.data("w")?,
        r.data("offsets")?,
        (rows, n, k),
        gated,
    )])
}

const HALVES: &[DType] = &[DType::F16, DType::BF16];
const GEMM_OFFSETS: TensorDecl = TensorDecl::new(
    "offsets",
    &["E"],
    DtypeRule::OneOf(U32),
    "where each expert's rows end (cumulative counts, torch._grouped_mm's offs): expert e owns rows offsets[e−1] .. offsets[e]",
);

const GEMM_INVARIANTS: &[&str] = &[
    "x, w and y share one dtype, f16 or bf16; offsets is u32 [E]",
    "x is a non-empty [R, K] with K a multiple of 8; w is [E, N, K] (silu_mul: [E, 2·I, K]) with 1 ≤ E ≤ 1024; y is [R, N] (silu_mul: [R, I])",
    "offsets never decrease and the last is R (checked on the device by moe_gemm_schedule before anything is written; hand-written cases)",
    "y aliases no input; element counts fit u32 (a hand-written case)",
];

const GEMM_VARIANTS: &[VariantDecl] = &[VariantDecl {
    name: "moe_gemm_kernel",
    when: "warpgroup tile products on a tile schedule built on the device from the offsets (moe_gemm_schedule_kernel): a threadgroup per (expert row tile, column tile), x and the expert's weights by 16-byte asynchronous copies masked at the expert's rows, K 64 at a time a few tiles ahead; 128 × 256 tiles (gated 128 × 128 outputs) on CUDA when the experts average 64 rows or more, 64 × 128 below, 64 × 32 on the CPU and Metal",
}];

inventory::submit! {
    OpDecl {
        name: "moe_gemm",
        family: "moe",
        summary: "contiguous grouped GEMM of MoE prefill: the rows of x grouped by expert (expert e's rows end at offsets[e]), y[rows_e] = x[rows_e]·w[e]ᵀ, on warpgroup tile products",
        inputs: &[
            TensorDecl::new("x", &["R", "K"], DtypeRule::OneOf(HALVES), "the rows, grouped by expert (a permute's output)"),
            GEMM_OFFSETS,
            TensorDecl::new("w", &["E", "N", "K"], DtypeRule::Like("x"), "the experts' weights, [N, K] each (torch.nn.Linear's layout)"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["R", "N"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "each row times its expert's weights, accumulated in f32" }],
        params: &[],
        invariants: GEMM_INVARIANTS,
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::F32), reason: "`x` must be one of f16, bf16" },
            Rejection { invariant: 0, by: Break::Dtype("offsets", DType::I32), reason: "`offsets` must be u32" },
            Rejection { invariant: 1, by: Break::InputDim("x", "K", 36), reason: "K a multiple of 8" },
            Rejection { invariant: 1, by: Break::InputDim("w", "K", 48), reason: "`w` must be [experts, N, K = 40]" },
            Rejection { invariant: 1, by: Break::InputDim("offsets", "E", 5), reason: "`offsets` must be [experts = 4]" },
        ],
        variants: GEMM_VARIANTS,
        // Every offset at R (drawn from [20, 20.5), stored as 20): all rows are expert 0's.
        example: Example { dims: &[("R", 20), ("E", 4), ("N", 24), ("K", 40)], params: &[], ranges: &[("offsets", 20.0, 20.5)], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: "12·slots + 4, slots = min(R, ⌈R/64⌉ + E) (⌈R/128⌉ with CUDA's large tiles): the tile schedule and the offset check's word", make: gemm_workspace }),
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| gemm_call(ctx, a, false),
        #[cfg(feature = "cases")]
        reference: |r| gemm_reference(r, false),
        #[cfg(feature = "cases")]
        kernels: cases::gemm_kernels,
        #[cfg(feature = "cases")]
        cases: cases::gemm_cases,
        #[cfg(feature = "cases")]
        benches: cases::gemm_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "moe_gemm_silu_mul",
        family: "moe",
        summary: "the expert MLP's gate/up half for MoE prefill in one pass: y[rows_e] = silu(x[rows_e]·gateᵀ)·(x[rows_e]·upᵀ) over the stacked gate_up weight [E, 2·I, K], rows grouped by expert",
        inputs: &[
            TensorDecl::new("x", &["R", "K"], DtypeRule::OneOf(HALVES), "the rows, grouped by expert (a permute's output)"),
            GEMM_OFFSETS,
            TensorDecl::new("w", &["E", "2·I", "K"], DtypeRule::Like("x"), "each expert's gate rows (0..I) then up rows (I..2·I)"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["R", "I"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Derived(|a| gemm_rows_by_half(a, "w")), doc: "silu(gate)·up per row, in f32 until the store" }],
        params: &[],
        invariants: GEMM_INVARIANTS,
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("w", DType::BF16), reason: "`w` must be f16" },
            Rejection { invariant: 1, by: Break::InputDim("w", "K", 32), reason: "`w` must be [experts, 2·I, K = 40]" },
        ],
        variants: GEMM_VARIANTS,
        example: Example { dims: &[("R", 20), ("E", 4), ("I", 12), ("K", 40)], params: &[], ranges: &[("offsets", 20.0, 20.5)], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: "12·slots + 4, slots = min(R, ⌈R/64⌉ + E) (⌈R/128⌉ with CUDA's large tiles): the tile schedule and the offset check's word", make: gemm_workspace }),
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| gemm_call(ctx, a, true),
        #[cfg(feature = "cases")]
        reference: |r| gemm_reference(r, true),
        #[cfg(feature = "cases")]
        kernels: cases::gemm_kernels,
        #[cfg(feature = "cases")]
        cases: cases::gemm_silu_mul_cases,
        #[cfg(feature = "cases")]
        benches: cases::gemm_silu_mul_benches,
    }
}

/// `[R, I]` of a gated grouped GEMM: `I` is half the weight's second dimension.
fn gemm_rows_by_half(a: &OpArgs, weight: &str) -> Result<Vec<usize>, OpError> {
    let rows = a.input("x")?.shape().first().copied().unwrap_or(0);
    let wrows = a.input(weight)?.shape().get(1).copied().unwrap_or(0);
    Ok(vec![rows, wrows / 2])
}

// ── moe_qgemm, moe_qgemm_silu_mul ────────────────────────────────────────────────────

/// Checks the quantized GEMM's shapes, then builds the schedule from the offsets (checked
/// on the device) and runs it.
fn qgemm_call(ctx: &Context, a: &OpArgs, gated: bool) -> Result<(), OpError> {
    let op = a.op.name;
    let ws = a.workspace::<GemmWorkspace>()?;
    let (x, y, offsets) = (a.input("x")?, a.output("y")?, a.input("offsets")?);
    let w = super::AffineExperts {
        packed: a.input("packed")?,
        scales: a.input("scales")?,
        biases: a.input("biases")?,
        bits: a.params.u32("bits")?,
        group_size: a.params.u32("group_size")?,
    };
    crate::validate::dtype_is(op, "offsets", offsets, DType::U32)?;
    let experts = w.packed.shape().first().copied().unwrap_or(0);
    if offsets.shape() != [experts] {
        return Err(OpError::invalid(
            op,
            format!(
                "`offsets` must be [experts = {experts}] (packed's experts; each expert's end row), got shape {:?}",
                offsets.shape()
            ),
        ));
    }
    super::qgemm::validate(op, x, &w, &ws.schedule, y, gated)?;
    moe_gemm_schedule(ctx, offsets, &ws.schedule, &ws.check)?;
    if gated {
        super::moe_qgemm_silu_mul(ctx, x, &w, &ws.schedule, y)
    } else {
        super::moe_qgemm(ctx, x, &w, &ws.schedule, y)
    }
}

fn qgemm_workspace(ctx: &Context, a: &OpArgs) -> Result<crate::decl::Workspace, OpError> {
    let experts = a.input("packed")?.shape().first().copied().unwrap_or(1);
    let rows = a.input("x")?.shape().first().copied().unwrap_or(1);
    Ok(Box::new(GemmWorkspace {
        schedule: MoeGemmSchedule::new(ctx, experts.clamp(1, super::MAX_EXPERTS), rows.max(1))?,
        check: MoeCheck::new(ctx)?,
    }))
}

#[cfg(feature = "cases")]
fn qgemm_reference(r: &RefArgs, gated: bool) -> Result<Vec<Vec<f64>>, OpError> {
    let (bits, group) = (r.params.u32("bits")?, r.params.usize("group_size")?);
    let (rows, experts, k) = (r.dim("R")?, r.dim("E")?, r.dim("KG")? * group);
    let n = if gated {
        half_rows(r, "packed")?
    } else {
        r.dim("N")?
    };
    let wrows = if gated { 2 * n } else { n };
    let dtype = r.input("x")?.dtype;
    let w: Vec<f64> = reference::affine_weights(
        r.data("packed")?,
        r.data("scales")?,
        r.data("biases")?,
        (experts * wrows, k),
        bits,
        group,
    )
    .into_iter()
    .map(|v| crate::elementwise::reference::round_to(dtype, v))
    .collect();
    Ok(vec![reference::grouped_gemm(
        r.data("x")?,
        &w,
        r.data("offsets")?,
        (rows, n, k),
        gated,
    )])
}

const QGEMM_INVARIANTS: &[&str] = &[
    "bits is 2, 3, 4, 5, 6 or 8; group_size is 32, 64 or 128",
    "x is a non-empty f16 or bf16 [R, K] with K a multiple of group_size; offsets u32 [E]",
    "packed is u32 [E, N, K·bits/32] (silu_mul: [E, 2·I, …]) with 1 ≤ E ≤ 1024; scales and biases [E, N, K/group_size] in x's dtype; y [R, N] (silu_mul: [R, I])",
    "offsets never decrease and the last is R (checked on the device by moe_gemm_schedule before anything is written)",
    "y aliases no input; element counts fit u32",
];

const QGEMM_VARIANTS: &[VariantDecl] = &[VariantDecl {
    name: "moe_qgemm_kernel",
    when: "moe_gemm_kernel's schedule and x tiles with affine_qgemm_kernel's weight tiles: two units of 32 codes a tile row dequantized by the threads (scale·q + bias in f32, rounded to x's dtype) into two swizzled buffers, the next tile's words loaded before each product; 128 × 128 tiles on CUDA when the experts average 64 rows or more, 64 × 128 below, 64 × 32 on the CPU and Metal",
}];

inventory::submit! {
    OpDecl {
        name: "moe_qgemm",
        family: "moe",
        summary: "contiguous grouped GEMM of MoE prefill over experts in MLX's affine format (an MLX SwitchLinear): y[rows_e] = x[rows_e]·dequant(W[e])ᵀ, rows grouped by expert, the weights dequantized into the tiles, never to memory",
        inputs: &[
            TensorDecl::new("x", &["R", "K"], DtypeRule::OneOf(HALVES), "the rows, grouped by expert (a permute's output)"),
            GEMM_OFFSETS,
            TensorDecl::new("packed", &["E", "N", "KW"], DtypeRule::OneOf(U32), "each expert's codes, KW = K·bits/32 words per row (MLX's layout)"),
            TensorDecl::new("scales", &["E", "N", "KG"], DtypeRule::Like("x"), "one scale per group, KG = K/group_size"),
            TensorDecl::new("biases", &["E", "N", "KG"], DtypeRule::Like("x"), "one bias per group"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["R", "N"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "each row times its expert's dequantized weights (rounded to x's dtype), accumulated in f32" }],
        params: &[BITS, GROUP_SIZE],
        invariants: QGEMM_INVARIANTS,
        rejections: &[
            Rejection { invariant: 0, by: Break::Param("bits", "7"), reason: "bits must be one of 2, 3, 4, 5, 6, 8" },
            Rejection { invariant: 1, by: Break::Dtype("x", DType::F32), reason: "`x` must be one of f16, bf16" },
            Rejection { invariant: 1, by: Break::InputDim("x", "K", 96), reason: "must be a positive multiple of the group size 64" },
            Rejection { invariant: 1, by: Break::InputDim("offsets", "E", 5), reason: "`offsets` must be [experts = 4]" },
            Rejection { invariant: 2, by: Break::InputDim("packed", "KW", 12), reason: "`packed` must be [experts (1..=1024), rows, 16]" },
            Rejection { invariant: 2, by: Break::InputDim("scales", "KG", 3), reason: "`scales` must have shape [4, 24, 2]" },
        ],
        variants: QGEMM_VARIANTS,
        // Every offset at R (drawn from [20, 20.5), stored as 20): all rows are expert 0's.
        example: Example { dims: &[("R", 20), ("E", 4), ("N", 24), ("K", 128), ("KW", 16), ("KG", 2)], params: &[("bits", "4"), ("group_size", "64")], ranges: &[Q_PACKED_RANGE, ("offsets", 20.0, 20.5)], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: "12·slots + 4, slots = min(R, ⌈R/64⌉ + E) (⌈R/128⌉ with CUDA's large tiles): the tile schedule and the offset check's word", make: qgemm_workspace }),
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| qgemm_call(ctx, a, false),
        #[cfg(feature = "cases")]
        reference: |r| qgemm_reference(r, false),
        #[cfg(feature = "cases")]
        kernels: cases::qgemm_kernels,
        #[cfg(feature = "cases")]
        cases: cases::qgemm_cases,
        #[cfg(feature = "cases")]
        benches: cases::qgemm_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "moe_qgemm_silu_mul",
        family: "moe",
        summary: "the expert MLP's gate/up half for MoE prefill over MLX affine experts in one pass: silu(x·Ĝᵀ)·(x·Ûᵀ) from packed gate_up codes [E, 2·I, K·bits/32], rows grouped by expert",
        inputs: &[
            TensorDecl::new("x", &["R", "K"], DtypeRule::OneOf(HALVES), "the rows, grouped by expert (a permute's output)"),
            GEMM_OFFSETS,
            TensorDecl::new("packed", &["E", "2·I", "KW"], DtypeRule::OneOf(U32), "each expert's gate rows then up rows, KW = K·bits/32 words per row"),
            TensorDecl::new("scales", &["E", "2·I", "KG"], DtypeRule::Like("x"), "one scale per group, KG = K/group_size"),
            TensorDecl::new("biases", &["E", "2·I", "KG"], DtypeRule::Like("x"), "one bias per group"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["R", "I"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Derived(|a| gemm_rows_by_half(a, "packed")), doc: "silu(gate)·up per row, in f32 until the store" }],
        params: &[BITS, GROUP_SIZE],
        invariants: QGEMM_INVARIANTS,
        rejections: &[
            Rejection { invariant: 0, by: Break::Param("group_size", "48"), reason: "group_size must be 32, 64 or 128" },
            Rejection { invariant: 2, by: Break::InputDim("biases", "KG", 3), reason: "`biases` must have shape [4, 24, 2]" },
        ],
        variants: QGEMM_VARIANTS,
        example: Example { dims: &[("R", 20), ("E", 4), ("I", 12), ("K", 128), ("KW", 16), ("KG", 2)], params: &[("bits", "4"), ("group_size", "64")], ranges: &[Q_PACKED_RANGE, ("offsets", 20.0, 20.5)], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: "12·slots + 4, slots = min(R, ⌈R/64⌉ + E) (⌈R/128⌉ with CUDA's large tiles): the tile schedule and the offset check's word", make: qgemm_workspace }),
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| qgemm_call(ctx, a, true),
        #[cfg(feature = "cases")]
        reference: |r| qgemm_reference(r, true),
        #[cfg(feature = "cases")]
        kernels: cases::qgemm_kernels,
        #[cfg(feature = "cases")]
        cases: cases::qgemm_silu_mul_cases,
        #[cfg(feature = "cases")]
        benches: cases::qgemm_silu_mul_benches,
    }
}
