//! The declarations of the Gated DeltaNet ops: the recurrent decode step, the step fused
//! with its prep, and the chunked prefill. Every op shares the state layout
//! `[N, Hv, Dv, Dk]`, f32 or the activations' dtype.

#[cfg(feature = "cases")]
use super::cases;
#[cfg(feature = "cases")]
use super::reference::{prep, recurrent, GdnInputs, GdnShape};
use super::{
    DecodeArgs, GdnPrefillWorkspace, PrefillArgs, PrefillShape, PrepDecodeArgs, PrepDecodeShape,
};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault, ParamKind,
    Rejection, ShapeFrom, TensorDecl, VariantDecl, Workspace, WorkspaceDecl, F32, FLOATS,
};
use crate::error::OpError;
use tessera_runtime::{Context, DType};

const SCALE: ParamDecl = ParamDecl {
    name: "scale",
    kind: ParamKind::Float,
    default: ParamDefault::Auto("1/sqrt(Dk)"),
    doc: "output scale; finite",
};
const STATE: [&str; 4] = ["B", "Hv", "Dv", "Dk"];
const STATE_OUT: OutputDecl = OutputDecl::like(
    "state_in",
    "state_out",
    &STATE,
    DtypeRule::Like("state_in"),
    "the state after the step",
);
const STATE_INVARIANTS: [&str; 3] = [
    "Dk is 64, 128 or 256; Hv is a positive multiple of Hk (GQA)",
    "state_in and state_out share one dtype, f32 or the activations', and the shape [B, Hv, Dv, Dk]",
    "outputs alias no input nor each other; scale is finite; sizes fit u32",
];

fn scale(a: &crate::decl::ParamValues, dk: usize) -> Result<f32, OpError> {
    Ok(a.opt_f32("scale")?.unwrap_or(1.0 / (dk as f32).sqrt()))
}

#[cfg(feature = "cases")]
fn shape_of(r: &RefArgs, hk: usize) -> Result<GdnShape, OpError> {
    Ok(GdnShape {
        hk,
        hv: r.dim("Hv")?,
        dk: r.dim("Dk")?,
        dv: r.dim("Dv")?,
    })
}

inventory::submit! {
    OpDecl {
        name: "gdn_decode_step",
        family: "gdn",
        summary: "Gated DeltaNet recurrent decode step: state [B, Hv, Dv, Dk] in/out, GQA, Dk 64/128/256",
        inputs: &[
            TensorDecl::new("q", &["B", "Hk", "Dk"], DtypeRule::OneOf(FLOATS), "queries, normalised as the model wants"),
            TensorDecl::new("k", &["B", "Hk", "Dk"], DtypeRule::Like("q"), "keys"),
            TensorDecl::new("v", &["B", "Hv", "Dv"], DtypeRule::Like("q"), "values"),
            TensorDecl::new("g", &["B", "Hv"], DtypeRule::OneOf(F32), "log decay (≤ 0 in models)"),
            TensorDecl::new("beta", &["B", "Hv"], DtypeRule::OneOf(F32), "the delta rule's step"),
            TensorDecl::new("state_in", &STATE, DtypeRule::F32OrLike("q"), "the state before the step"),
        ],
        outputs: &[
            STATE_OUT,
            OutputDecl { name: "o", shape: &["B", "Hv", "Dv"], dtype: DtypeRule::Like("q"), shape_from: ShapeFrom::Like("v"), doc: "scale · S q" },
        ],
        params: &[SCALE],
        invariants: &[
            "q, k, v and o share one float dtype; g and beta are f32 [B, Hv]",
            STATE_INVARIANTS[0],
            STATE_INVARIANTS[1],
            STATE_INVARIANTS[2],
        ],
        rejections: &[Rejection { invariant: 1, by: Break::Dim("Dk", 48), reason: "Dk = 48 is not supported" }, Rejection { invariant: 1, by: Break::Dim("Hk", 3), reason: "must be a multiple of Hk" }, Rejection { invariant: 0, by: Break::Dtype("g", DType::F16), reason: "`g` must be f32" }, Rejection { invariant: 3, by: Break::Param("scale", "nan"), reason: "a finite number" }],
        variants: &[VariantDecl { name: "gdn_decode_kernel", when: "16 lanes a state row for a 2-byte state of Dk 128, else 32" }],
        example: Example {
            dims: &[("B", 2), ("Hk", 1), ("Hv", 2), ("Dk", 64), ("Dv", 16)],
            params: &[],
            ranges: &[("q", -0.2, 0.2), ("k", -0.2, 0.2), ("g", -1.0, 0.0), ("beta", 0.0, 1.0)],
            with: &[],
        },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            let q = a.input("q")?;
            let dk = a.last_dim("q")?;
            super::gdn_decode_step(
                ctx,
                &DecodeArgs {
                    q,
                    k: a.input("k")?,
                    v: a.input("v")?,
                    g: a.input("g")?,
                    beta: a.input("beta")?,
                    state_in: a.input("state_in")?,
                    state_out: a.output("state_out")?,
                    o: a.output("o")?,
                },
                scale(a.params, dk)?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let s = shape_of(r, r.dim("Hk")?)?;
            let b = r.dim("B")?;
            let cu: Vec<usize> = (0..=b).collect();
            let (o, state) = recurrent(&GdnInputs {
                q: r.data("q")?,
                k: r.data("k")?,
                v: r.data("v")?,
                g: r.data("g")?,
                beta: r.data("beta")?,
                h0: Some(r.data("state_in")?),
                cu_seqlens: &cu,
                shape: s,
                scale: f64::from(scale(r.params, s.dk)?),
            });
            Ok(vec![state, o])
        },
        #[cfg(feature = "cases")]
        kernels: cases::gdn_decode_step_kernels,
        #[cfg(feature = "cases")]
        cases: cases::decode_cases,
        #[cfg(feature = "cases")]
        benches: cases::decode_benches,
    }
}

/// `Hk`: the q/k norm weights hold `Hk·Dk` elements.
fn key_heads(a: &OpArgs) -> Result<usize, OpError> {
    let dk = a.last_dim("state_in")?;
    Ok(a.input("wq")?.len() / dk.max(1))
}

inventory::submit! {
    OpDecl {
        name: "gdn_prep_decode_step",
        family: "gdn",
        summary: "fused GDN decode: conv split, per-head RMSNorm of q/k, gate and beta, delta-rule step",
        inputs: &[
            TensorDecl::new("conv_out", &["B", "2·Hk·Dk + Hv·Dv"], DtypeRule::OneOf(FLOATS), "q | k | v of each batch row, head-major"),
            TensorDecl::new("a_log", &["Hv"], DtypeRule::Like("conv_out"), "log of the decay rate"),
            TensorDecl::new("dt_bias", &["Hv"], DtypeRule::Like("conv_out"), "the gate's bias"),
            TensorDecl::new("a", &["B", "Hv"], DtypeRule::Like("conv_out"), "the raw decay projection"),
            TensorDecl::new("b", &["B", "Hv"], DtypeRule::Like("conv_out"), "the raw beta projection"),
            TensorDecl::new("wq", &["Hk·Dk"], DtypeRule::Like("conv_out"), "q's per-head RMSNorm weight"),
            TensorDecl::new("wk", &["Hk·Dk"], DtypeRule::Like("conv_out"), "k's per-head RMSNorm weight"),
            TensorDecl::new("state_in", &STATE, DtypeRule::F32OrLike("conv_out"), "the state before the step"),
        ],
        outputs: &[
            STATE_OUT,
            OutputDecl { name: "o", shape: &["B", "Hv", "Dv"], dtype: DtypeRule::Like("conv_out"), shape_from: ShapeFrom::Dims, doc: "the step's output" },
        ],
        params: &[
            ParamDecl { name: "eps", kind: ParamKind::Float, default: ParamDefault::Value("1e-6"), doc: "q/k RMSNorm epsilon; finite, ≥ 0" },
            SCALE,
        ],
        invariants: &[
            "every tensor but the state shares conv_out's float dtype",
            "conv_out is [B, 2·Hk·Dk + Hv·Dv] with B > 0; Hk is wq's length over Dk",
            STATE_INVARIANTS[0],
            STATE_INVARIANTS[1],
            STATE_INVARIANTS[2],
            "eps is finite and ≥ 0",
        ],
        rejections: &[Rejection { invariant: 5, by: Break::Param("eps", "-1"), reason: "`eps` must be finite" }, Rejection { invariant: 2, by: Break::Dim("Dk", 32), reason: "Dk = 32 is not supported" }, Rejection { invariant: 1, by: Break::InputDim("conv_out", "Dv", 9), reason: "`conv_out` must be [B, 2·Hk·Dk + Hv·Dv" }, Rejection { invariant: 0, by: Break::Dtype("a", DType::F16), reason: "`a` must be f32" }],
        variants: &[],
        example: Example {
            dims: &[("B", 2), ("Hk", 1), ("Hv", 2), ("Dk", 64), ("Dv", 8)],
            params: &[],
            ranges: &[("a_log", -1.0, 0.5), ("state_in", -0.2, 0.2)],
            with: &[],
        },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            let st = a.input("state_in")?.shape();
            let (hv, dv, dk) = match st {
                &[_, hv, dv, dk] => (hv, dv, dk),
                _ => (0, 0, 0),
            };
            super::gdn_prep_decode_step(
                ctx,
                &PrepDecodeArgs {
                    conv_out: a.input("conv_out")?,
                    a_log: a.input("a_log")?,
                    dt_bias: a.input("dt_bias")?,
                    a: a.input("a")?,
                    b: a.input("b")?,
                    wq: a.input("wq")?,
                    wk: a.input("wk")?,
                    state_in: a.input("state_in")?,
                    state_out: a.output("state_out")?,
                    o: a.output("o")?,
                },
                PrepDecodeShape { hk: key_heads(a)?, hv, dk, dv },
                a.params.f32("eps")?,
                scale(a.params, dk)?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let dk = r.dim("Dk")?;
            let s = shape_of(r, r.data("wq")?.len() / dk.max(1))?;
            let (q, k, v, g, beta) = prep(
                r.data("conv_out")?,
                r.data("a_log")?,
                r.data("dt_bias")?,
                r.data("a")?,
                r.data("b")?,
                r.data("wq")?,
                r.data("wk")?,
                r.params.f64("eps")?,
                s,
            );
            let cu: Vec<usize> = (0..=r.dim("B")?).collect();
            let (o, state) = recurrent(&GdnInputs {
                q: &q,
                k: &k,
                v: &v,
                g: &g,
                beta: &beta,
                h0: Some(r.data("state_in")?),
                cu_seqlens: &cu,
                shape: s,
                scale: f64::from(scale(r.params, dk)?),
            });
            Ok(vec![state, o])
        },
        #[cfg(feature = "cases")]
        kernels: cases::gdn_prep_decode_step_kernels,
        #[cfg(feature = "cases")]
        cases: cases::prep_cases,
        #[cfg(feature = "cases")]
        benches: cases::prep_benches,
    }
}

/// The sequence boundaries: `cu_seqlens`, else one sequence per batch row of 4-D inputs
/// (one sequence for 3-D ones).
fn boundaries(shape: &[usize], cu: Option<Vec<usize>>) -> Vec<usize> {
    if let Some(cu) = cu {
        return cu;
    }
    match *shape {
        [b, t, _, _] => (0..=b).map(|i| i * t).collect(),
        [t, _, _] => vec![0, t],
        _ => vec![0],
    }
}

/// The prefill's accuracy: twice the standard tolerance of the activations' dtype, for o
/// and the final state alike (f16/bf16 products go through f16/bf16 tiles over 64-token
/// chunks; f32 runs the recurrence token by token in f32).
const PREFILL_ACCURACY: crate::decl::Accuracy = crate::decl::Accuracy {
    f32: crate::decl::Tolerance {
        atol: 4e-5,
        rtol: 4e-4,
    },
    f16: crate::decl::Tolerance {
        atol: 4e-3,
        rtol: 8e-3,
    },
    bf16: crate::decl::Tolerance {
        atol: 3e-2,
        rtol: 3.2e-2,
    },
    codes: crate::decl::Accuracy::STANDARD.codes,
    keyed_by: "by the activations' dtype, for o and the final state alike: f16/bf16 products go through 16-bit tiles",
};

/// The prefill's workspace for a call: sized for its shape and planned for its sequence
/// boundaries (`cu_seqlens`, else one sequence per batch row).
fn prefill_workspace(ctx: &Context, a: &OpArgs) -> Result<Workspace, OpError> {
    let q = a.input("q")?;
    let (qs, vs) = (q.shape(), a.input("v")?.shape());
    let cu = boundaries(qs, a.params.opt_usize_list("cu_seqlens")?);
    let total: usize = qs[..qs.len().saturating_sub(2)].iter().product();
    if cu.len() < 2 || cu.last() != Some(&total) {
        return Err(OpError::invalid(
            "gdn_chunked_prefill",
            format!(
                "`cu_seqlens` must be N + 1 >= 2 non-decreasing offsets from 0 to T = {total}, got {cu:?}"
            ),
        ));
    }
    let back = |s: &[usize], i: usize| s.len().checked_sub(i).map_or(0, |j| s[j]);
    let shape = PrefillShape {
        dtype: q.dtype(),
        hv: back(vs, 2),
        dk: back(qs, 1),
        dv: back(vs, 1),
        cu_seqlens: &cu,
    };
    Ok(Box::new(GdnPrefillWorkspace::new(ctx, &shape)?))
}

/// `state_dtype` when given, else h0's dtype, else f32.
fn final_state_dtype(a: &OpArgs) -> Result<DType, OpError> {
    Ok(
        match (a.params.opt_choice("state_dtype")?, a.optional("h0")) {
            (Some("activations"), _) => a.input("q")?.dtype(),
            (Some(_), _) => DType::F32,
            (None, Some(h0)) => h0.dtype(),
            (None, None) => DType::F32,
        },
    )
}

fn final_state_shape(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    let q = a.input("q")?.shape();
    let v = a.input("v")?.shape();
    let n = boundaries(q, a.params.opt_usize_list("cu_seqlens")?)
        .len()
        .saturating_sub(1);
    let hv_dv = &v[v.len().saturating_sub(2)..];
    let dk = q.last().copied().unwrap_or(0);
    Ok([&[n], hv_dv, &[dk]].concat())
}

const TOKENS_Q: [&str; 4] = ["batch…", "T", "Hk", "Dk"];
const TOKENS_V: [&str; 4] = ["batch…", "T", "Hv", "Dv"];
const TOKENS_G: [&str; 3] = ["batch…", "T", "Hv"];

inventory::submit! {
    OpDecl {
        name: "gdn_chunked_prefill",
        family: "gdn",
        summary: "Gated DeltaNet chunked prefill (chunks of 64 on matrix fragments for f16/bf16, f32 token by token in f32): varlen, GQA, initial state, final state in the decode layout",
        inputs: &[
            TensorDecl::float("q", &TOKENS_Q, "queries, token-major: [T, …] packed or [B, T, …] of equal lengths"),
            TensorDecl::new("k", &TOKENS_Q, DtypeRule::Like("q"), "keys, like q"),
            TensorDecl::new("v", &TOKENS_V, DtypeRule::Like("q"), "values"),
            TensorDecl::new("g", &TOKENS_G, DtypeRule::OneOf(F32), "log decay (≤ 0 in models)"),
            TensorDecl::new("beta", &TOKENS_G, DtypeRule::OneOf(F32), "the delta rule's step"),
            TensorDecl::new("h0", &["N", "Hv", "Dv", "Dk"], DtypeRule::F32OrLike("q"), "each sequence's initial state (zero when absent)").optional(),
        ],
        outputs: &[
            OutputDecl { name: "o", shape: &TOKENS_V, dtype: DtypeRule::Like("q"), shape_from: ShapeFrom::Like("v"), doc: "the outputs, like v" },
            OutputDecl { name: "final_state", shape: &["N", "Hv", "Dv", "Dk"], dtype: DtypeRule::Derived(final_state_dtype, "state_dtype, else h0's dtype, else f32"), shape_from: ShapeFrom::Derived(final_state_shape), doc: "each sequence's final state, in the decode step's layout" },
        ],
        params: &[
            ParamDecl { name: "cu_seqlens", kind: ParamKind::UIntList, default: ParamDefault::Auto("one sequence per batch row (one for 3-D inputs)"), doc: "packed sequence boundaries: N + 1 non-decreasing offsets from 0 to T" },
            SCALE,
            ParamDecl { name: "state_dtype", kind: ParamKind::Choice(&["f32", "activations"]), default: ParamDefault::Auto("h0's dtype, else f32"), doc: "the final state's dtype: f32 or q's (a 2-byte state halves the state traffic); h0 must match" },
        ],
        invariants: &[
            "q, k, v and o share one float dtype; g and beta are f32 [batch…, T, Hv]",
            "Dk is 64, 128 or 256; Dv is a multiple of 16, at most 256; Hv is a positive multiple of Hk",
            "with cu_seqlens the inputs are packed ([T, …] or [1, T, …]) and the offsets run from 0 to T",
            "final_state is [N, Hv, Dv, Dk], f32 or q's dtype; h0, when given, is like final_state",
            "outputs alias no input nor each other; scale is finite",
        ],
        rejections: &[Rejection { invariant: 1, by: Break::Dim("Dv", 20), reason: "must be a multiple of 16" }, Rejection { invariant: 2, by: Break::Param("cu_seqlens", "0,30,60"), reason: "`cu_seqlens` must be N + 1" }, Rejection { invariant: 3, by: Break::InputDim("h0", "Dv", 8), reason: "`h0` must have shape" }, Rejection { invariant: 0, by: Break::Dtype("beta", DType::F16), reason: "`beta` must be f32" }],
        variants: &[VariantDecl { name: "gdn_chunk_state_wide_kernel", when: "Dk above 128: the state walk reads its operands from device memory" }],
        example: Example {
            dims: &[("batch", 1), ("T", 70), ("Hk", 1), ("Hv", 2), ("Dk", 64), ("Dv", 16), ("N", 2)],
            params: &[("cu_seqlens", "0,30,70")],
            ranges: &[("q", -0.2, 0.2), ("k", -0.2, 0.2), ("g", -0.5, 0.0), ("beta", 0.0, 1.0), ("h0", -0.2, 0.2)],
            with: &["h0"],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "2·C·Hv·(64·(3·Dk + 64) + 128·Dv + Dv·Dk) + 8·C·Hv + 4·(2·C + N + 1), C = Σ⌈len/64⌉ chunks (Dk > 128: 2·C·Hv·(64·(3·Dk + 64) + 64·Dv) + …); the chunk table is planned from cu_seqlens on the host when it is made",
            make: prefill_workspace,
        }),
        accuracy: PREFILL_ACCURACY,
        call: |ctx, a| {
            let dk = a.last_dim("q")?;
            super::gdn_chunked_prefill(
                ctx,
                &PrefillArgs {
                    q: a.input("q")?,
                    k: a.input("k")?,
                    v: a.input("v")?,
                    g: a.input("g")?,
                    beta: a.input("beta")?,
                    h0: a.optional("h0"),
                    o: a.output("o")?,
                    final_state: a.output("final_state")?,
                },
                a.workspace::<GdnPrefillWorkspace>()?,
                scale(a.params, dk)?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let qs = r.shape("q")?;
            let vs = r.shape("v")?;
            let cu = boundaries(qs, r.params.opt_usize_list("cu_seqlens")?);
            let s = GdnShape {
                hk: qs[qs.len() - 2],
                dk: qs[qs.len() - 1],
                hv: vs[vs.len() - 2],
                dv: vs[vs.len() - 1],
            };
            let (o, state) = recurrent(&GdnInputs {
                q: r.data("q")?,
                k: r.data("k")?,
                v: r.data("v")?,
                g: r.data("g")?,
                beta: r.data("beta")?,
                h0: r.optional("h0"),
                cu_seqlens: &cu,
                shape: s,
                scale: f64::from(scale(r.params, s.dk)?),
            });
            Ok(vec![o, state])
        },
        #[cfg(feature = "cases")]
        kernels: cases::kernels,
        #[cfg(feature = "cases")]
        cases: cases::cases,
        #[cfg(feature = "cases")]
        benches: cases::benches,
    }
}
