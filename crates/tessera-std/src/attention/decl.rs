//! The declarations of the attention ops: decode over one cache (plain, strided, forced
//! split-KV), batched decode, multi-query over a shared cache and prefill (contiguous or
//! packed sequences), with the decode options (scale, sliding window, sinks, sink logits,
//! split count) as parameters.

#[cfg(feature = "cases")]
use super::cases;
use super::decode::DecodeOptions;
use super::plan::{DecodeWorkspace, MAX_SPLITS};
#[cfg(feature = "cases")]
use super::reference;
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault, ParamKind,
    Rejection, TensorDecl, VariantDecl, Workspace, WorkspaceDecl, U32,
};
use crate::error::OpError;
use tessera_runtime::{Context, DType};

const ANY_U32: ParamKind = ParamKind::UInt {
    min: 0,
    max: u32::MAX as u64,
};

const SCALE: ParamDecl = ParamDecl {
    name: "scale",
    kind: ParamKind::Float,
    default: ParamDefault::Auto("1/sqrt(head_dim)"),
    doc: "softmax scale; finite",
};
const WINDOW: ParamDecl = ParamDecl {
    name: "window",
    kind: ANY_U32,
    default: ParamDefault::Value("0"),
    doc: "sliding window: attend only the last `window` keys (0: the whole cache)",
};
const N_SINK: ParamDecl = ParamDecl {
    name: "n_sink",
    kind: ANY_U32,
    default: ParamDefault::Value("0"),
    doc: "attention sinks: with a window, the first n_sink keys stay visible",
};
const SPLITS: ParamDecl = ParamDecl {
    name: "splits",
    kind: ParamKind::UInt {
        min: 1,
        max: MAX_SPLITS as u64,
    },
    default: ParamDefault::Auto("chosen from the shape and the device"),
    doc: "KV chunks of split-KV (flash-decoding); 1 is a single pass",
};
const KV_LEN: ParamDecl = ParamDecl {
    name: "kv_len",
    kind: ParamKind::UInt {
        min: 1,
        max: u32::MAX as u64,
    },
    default: ParamDefault::Required,
    doc: "filled cache positions, 1..=kv_stride",
};
const CAUSAL: ParamDecl = ParamDecl {
    name: "causal",
    kind: ParamKind::Bool,
    default: ParamDefault::Value("true"),
    doc: "each query sees only keys up to its own position",
};
const OPTIONS: [ParamDecl; 4] = [SCALE, WINDOW, N_SINK, SPLITS];

const SINK_LOGITS: TensorDecl = TensorDecl::new(
    "sink_logits",
    &["n_q_heads"],
    DtypeRule::Like("q"),
    "a learned per-head sink logit, adding exp(sink) to the softmax denominator",
)
.optional();

const fn out(shape: &'static [&'static str]) -> OutputDecl {
    OutputDecl::like(
        "q",
        "out",
        shape,
        DtypeRule::Like("q"),
        "the attention output, like q",
    )
}

const CACHE: [&str; 3] = ["n_kv_heads", "kv_stride", "head_dim"];
const SINGLE_Q: [&str; 2] = ["n_q_heads", "head_dim"];

const COMMON: [&str; 5] = [
    "q, k, v, out (and sink_logits) share one float dtype; out is like q and aliases no input",
    "head_dim is one of 64, 96, 128, 192, 256, 512 and equal in q and k; v is like k",
    "n_q_heads is a multiple of n_kv_heads (GQA: head h reads KV head h / (n_q_heads / n_kv_heads))",
    "sink_logits, when given, is [n_q_heads]; splits is in 1..=1024; scale is finite",
    "the element counts of q and k fit u32",
];

const DECODE_VARIANTS: &[VariantDecl] = &[
    VariantDecl {
        name: "decode_mma",
        when: "f16/bf16 caches of head_dim 64, 128 or 256: matrix fragments",
    },
    VariantDecl {
        name: "decode_kernels",
        when: "every other dtype and head_dim: CUDA-core kernels",
    },
    VariantDecl {
        name: "split-KV + combine",
        when:
            "when splits > 1 (forced or chosen by shape): per-chunk partials, then a combine kernel",
    },
];

fn options<'a>(a: &OpArgs<'a>) -> Result<DecodeOptions<'a>, OpError> {
    Ok(DecodeOptions {
        scale: a.params.opt_f32("scale")?,
        window: a.params.u32("window")?,
        n_sink: a.params.u32("n_sink")?,
        sink_logits: a.optional("sink_logits"),
        splits: a.params.opt_u32("splits")?,
    })
}

/// The split-KV workspace of a decode call: q's leading dimensions are its rows; the split
/// count is `splits` when forced, else every count the plan may pick over the cache
/// ([`DecodeWorkspace::for_cache`]).
fn decode_workspace(ctx: &Context, a: &OpArgs) -> Result<Workspace, OpError> {
    let (qs, ks) = (a.input("q")?.shape(), a.input("k")?.shape());
    let back = |s: &[usize], i: usize| s.len().checked_sub(i).map_or(1, |j| s[j]);
    let rows: usize = qs[..qs.len().saturating_sub(2)].iter().product();
    let (rows, heads, d) = (rows.max(1), back(qs, 2), back(qs, 1));
    let ws = match a.params.opt_u32("splits")? {
        Some(s) => DecodeWorkspace::new(ctx, rows, heads, d, s.clamp(1, MAX_SPLITS) as usize)?,
        None => DecodeWorkspace::for_cache(ctx, rows, heads, d, back(ks, 2))?,
    };
    Ok(Box::new(ws))
}

const DECODE_WORKSPACE: Option<WorkspaceDecl> = Some(WorkspaceDecl {
    bytes: "4·rows·n_q_heads·splits·(head_dim + 2) + 8 (splits: as given, else ⌈kv_stride/32⌉, the most the plan picks)",
    make: decode_workspace,
});

#[cfg(feature = "cases")]
/// The decode reference for rows `rows_at` (cache, visible length) against caches whose
/// last three dimensions are `[n_kv_heads, kv_stride, head_dim]`.
fn decode_reference(r: &RefArgs, rows_at: &[(usize, usize)]) -> Result<Vec<Vec<f64>>, OpError> {
    let qs = r.shape("q")?;
    let ks = r.shape("k")?;
    let (hq, d) = (qs[qs.len() - 2], qs[qs.len() - 1]);
    let (hkv, stride) = (ks[ks.len() - 3], ks[ks.len() - 2]);
    let p = r.params;
    let scale = p.opt_f64("scale")?.unwrap_or(1.0 / (d as f64).sqrt());
    let window = p.opt_uint("window")?.unwrap_or(0) as usize;
    let n_sink = p.opt_uint("n_sink")?.unwrap_or(0) as usize;
    Ok(vec![reference::decode(
        r.data("q")?,
        r.data("k")?,
        r.data("v")?,
        rows_at,
        hq,
        hkv,
        stride,
        d,
        scale,
        window,
        n_sink,
        r.optional("sink_logits"),
    )])
}

inventory::submit! {
    OpDecl {
        name: "sdpa_decode",
        family: "attention",
        summary: "decode SDPA with GQA, head_dim 64/96/128/192/256/512; single pass or split-KV by shape",
        inputs: &[
            TensorDecl::float("q", &SINGLE_Q, "one query token (or [1, n_q_heads, head_dim])"),
            TensorDecl::new("k", &CACHE, DtypeRule::Like("q"), "the key cache, every position filled (or with a leading 1)"),
            TensorDecl::new("v", &CACHE, DtypeRule::Like("q"), "the value cache, like k"),
        ],
        outputs: &[out(&SINGLE_Q)],
        params: &[SCALE],
        invariants: &[COMMON[0], COMMON[1], COMMON[2], "scale is finite", COMMON[4], "q and k are not empty"],
        rejections: &[Rejection { invariant: 1, by: Break::Dim("head_dim", 80), reason: "head_dim 80 is not supported" }, Rejection { invariant: 2, by: Break::Dim("n_kv_heads", 3), reason: "must be a multiple of n_kv_heads" }, Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" }, Rejection { invariant: 3, by: Break::Param("scale", "inf"), reason: "a finite number" }],
        variants: DECODE_VARIANTS,
        example: Example { dims: &[("n_q_heads", 4), ("n_kv_heads", 2), ("kv_stride", 19), ("head_dim", 64)], params: &[], ranges: &[], with: &[] },
        workspace: DECODE_WORKSPACE,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            super::sdpa_decode(
                ctx,
                a.input("q")?,
                a.input("k")?,
                a.input("v")?,
                a.output("out")?,
                a.params.opt_f32("scale")?,
                a.workspace::<DecodeWorkspace>()?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let ks = r.shape("k")?;
            decode_reference(r, &[(0, ks[ks.len() - 2])])
        },
        #[cfg(feature = "cases")]
        kernels: cases::decode_uses,
        #[cfg(feature = "cases")]
        cases: cases::decode_cases,
        #[cfg(feature = "cases")]
        benches: cases::decode_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "sdpa_decode_strided",
        family: "attention",
        summary: "decode SDPA over a strided KV cache: kv_len of kv_stride, sliding window, attention sinks, learned sink logit",
        inputs: &[
            TensorDecl::float("q", &SINGLE_Q, "one query token (or [1, n_q_heads, head_dim])"),
            TensorDecl::new("k", &CACHE, DtypeRule::Like("q"), "the key cache; the first kv_len positions are filled"),
            TensorDecl::new("v", &CACHE, DtypeRule::Like("q"), "the value cache, like k"),
            SINK_LOGITS,
        ],
        outputs: &[out(&SINGLE_Q)],
        params: &[KV_LEN, SCALE, WINDOW, N_SINK, SPLITS],
        invariants: &[COMMON[0], COMMON[1], COMMON[2], COMMON[3], COMMON[4], "kv_len is in 1..=kv_stride"],
        rejections: &[Rejection { invariant: 5, by: Break::Param("kv_len", "30"), reason: "kv_len = 30 must be in 1..=24" }, Rejection { invariant: 3, by: Break::Param("splits", "0"), reason: "a value in 1..=1024" }, Rejection { invariant: 3, by: Break::InputDim("sink_logits", "n_q_heads", 3), reason: "`sink_logits` must have shape" }, Rejection { invariant: 1, by: Break::Dim("head_dim", 80), reason: "head_dim 80 is not supported" }],
        variants: DECODE_VARIANTS,
        example: Example {
            dims: &[("n_q_heads", 4), ("n_kv_heads", 2), ("kv_stride", 24), ("head_dim", 64)],
            params: &[("kv_len", "19"), ("window", "8"), ("n_sink", "2")],
            ranges: &[],
            with: &["sink_logits"],
        },
        workspace: DECODE_WORKSPACE,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            super::sdpa_decode_strided(
                ctx,
                a.input("q")?,
                a.input("k")?,
                a.input("v")?,
                a.output("out")?,
                a.params.usize("kv_len")?,
                &options(a)?,
                a.workspace::<DecodeWorkspace>()?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| decode_reference(r, &[(0, r.params.usize("kv_len")?)]),
        #[cfg(feature = "cases")]
        kernels: cases::decode_uses,
        #[cfg(feature = "cases")]
        cases: cases::strided_cases,
        #[cfg(feature = "cases")]
        benches: cases::no_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "sdpa_decode_split",
        family: "attention",
        summary: "split-KV (flash-decoding) decode SDPA: per-chunk partial max/sum/output, then a combine kernel",
        inputs: &[
            TensorDecl::float("q", &SINGLE_Q, "one query token (or [1, n_q_heads, head_dim])"),
            TensorDecl::new("k", &CACHE, DtypeRule::Like("q"), "the key cache; the first kv_len positions are filled"),
            TensorDecl::new("v", &CACHE, DtypeRule::Like("q"), "the value cache, like k"),
            SINK_LOGITS,
        ],
        outputs: &[out(&SINGLE_Q)],
        params: &[
            KV_LEN,
            ParamDecl { default: ParamDefault::Required, ..SPLITS },
            SCALE,
            WINDOW,
            N_SINK,
        ],
        invariants: &[COMMON[0], COMMON[1], COMMON[2], COMMON[3], COMMON[4], "kv_len is in 1..=kv_stride"],
        rejections: &[Rejection { invariant: 3, by: Break::Param("splits", "2000"), reason: "a value in 1..=1024" }, Rejection { invariant: 5, by: Break::Param("kv_len", "41"), reason: "kv_len = 41 must be in 1..=40" }],
        variants: DECODE_VARIANTS,
        example: Example {
            dims: &[("n_q_heads", 4), ("n_kv_heads", 4), ("kv_stride", 40), ("head_dim", 96)],
            params: &[("kv_len", "37"), ("splits", "3")],
            ranges: &[],
            with: &[],
        },
        workspace: DECODE_WORKSPACE,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            super::sdpa_decode_split(
                ctx,
                a.input("q")?,
                a.input("k")?,
                a.input("v")?,
                a.output("out")?,
                a.params.usize("kv_len")?,
                a.params.u32("splits")?,
                &options(a)?,
                a.workspace::<DecodeWorkspace>()?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| decode_reference(r, &[(0, r.params.usize("kv_len")?)]),
        #[cfg(feature = "cases")]
        kernels: cases::split_uses,
        #[cfg(feature = "cases")]
        cases: cases::split_cases,
        #[cfg(feature = "cases")]
        benches: cases::no_benches,
    }
}

const BATCH_Q: [&str; 3] = ["batch", "n_q_heads", "head_dim"];
const BATCH_CACHE: [&str; 4] = ["batch", "n_kv_heads", "kv_stride", "head_dim"];

inventory::submit! {
    OpDecl {
        name: "sdpa_decode_batched",
        family: "attention",
        summary: "batched decode SDPA: B sequences with their own caches and device-side lengths, one launch + combine",
        inputs: &[
            TensorDecl::float("q", &BATCH_Q, "one query token per sequence"),
            TensorDecl::new("k", &BATCH_CACHE, DtypeRule::Like("q"), "each sequence's key cache"),
            TensorDecl::new("v", &BATCH_CACHE, DtypeRule::Like("q"), "each sequence's value cache, like k"),
            TensorDecl::new("kv_lens", &["batch"], DtypeRule::OneOf(U32), "each sequence's filled length (clamped to kv_stride; 0 gives zeros)"),
            SINK_LOGITS,
        ],
        outputs: &[out(&BATCH_Q)],
        params: &OPTIONS,
        invariants: &[COMMON[0], COMMON[1], COMMON[2], COMMON[3], COMMON[4], "k's batch equals q's; kv_lens is u32 [batch]"],
        rejections: &[Rejection { invariant: 5, by: Break::Dtype("kv_lens", DType::F32), reason: "`kv_lens` must be u32" }, Rejection { invariant: 1, by: Break::InputDim("v", "kv_stride", 23), reason: "`v` must have shape" }, Rejection { invariant: 2, by: Break::Dim("n_kv_heads", 3), reason: "must be a multiple of n_kv_heads" }],
        variants: DECODE_VARIANTS,
        example: Example {
            dims: &[("batch", 3), ("n_q_heads", 8), ("n_kv_heads", 2), ("kv_stride", 24), ("head_dim", 64)],
            params: &[("window", "10"), ("n_sink", "1")],
            ranges: &[("kv_lens", 0.0, 30.0)],
            with: &["sink_logits"],
        },
        workspace: DECODE_WORKSPACE,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            super::sdpa_decode_batched(
                ctx,
                a.input("q")?,
                a.input("k")?,
                a.input("v")?,
                a.input("kv_lens")?,
                a.output("out")?,
                &options(a)?,
                a.workspace::<DecodeWorkspace>()?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let stride = r.dim("kv_stride")?;
            let rows: Vec<(usize, usize)> = r
                .data("kv_lens")?
                .iter()
                .enumerate()
                .map(|(b, &l)| (b, (l as usize).min(stride)))
                .collect();
            decode_reference(r, &rows)
        },
        #[cfg(feature = "cases")]
        kernels: cases::split_uses,
        #[cfg(feature = "cases")]
        cases: cases::batched_cases,
        #[cfg(feature = "cases")]
        benches: cases::batched_benches,
    }
}

const MQ_Q: [&str; 3] = ["n_query", "n_q_heads", "head_dim"];

inventory::submit! {
    OpDecl {
        name: "sdpa_multi_query",
        family: "attention",
        summary: "n_query rows against one shared KV cache, causal within the block or full",
        inputs: &[
            TensorDecl::float("q", &MQ_Q, "a block of new query tokens"),
            TensorDecl::new("k", &CACHE, DtypeRule::Like("q"), "the shared key cache: base_kv cached positions, then the block's own keys"),
            TensorDecl::new("v", &CACHE, DtypeRule::Like("q"), "the value cache, like k"),
            SINK_LOGITS,
        ],
        outputs: &[out(&MQ_Q)],
        params: &[
            ParamDecl { name: "base_kv", kind: ANY_U32, default: ParamDefault::Required, doc: "cached positions before the block" },
            ParamDecl { doc: "query r sees keys [0, base_kv + r] (else [0, base_kv + n_query))", ..CAUSAL },
            SCALE,
            WINDOW,
            N_SINK,
            SPLITS,
        ],
        invariants: &[COMMON[0], COMMON[1], COMMON[2], COMMON[3], COMMON[4], "base_kv + n_query ≤ kv_stride"],
        rejections: &[Rejection { invariant: 5, by: Break::Param("base_kv", "22"), reason: "exceeds the cache depth" }, Rejection { invariant: 0, by: Break::Dtype("k", DType::F16), reason: "`k` must be f32" }],
        variants: DECODE_VARIANTS,
        example: Example {
            dims: &[("n_query", 3), ("n_q_heads", 4), ("n_kv_heads", 1), ("kv_stride", 24), ("head_dim", 128)],
            params: &[("base_kv", "10"), ("window", "6"), ("splits", "2")],
            ranges: &[],
            with: &[],
        },
        workspace: DECODE_WORKSPACE,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            super::sdpa_multi_query(
                ctx,
                a.input("q")?,
                a.input("k")?,
                a.input("v")?,
                a.output("out")?,
                a.params.usize("base_kv")?,
                a.params.bool("causal")?,
                &options(a)?,
                a.workspace::<DecodeWorkspace>()?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let n_query = r.dim("n_query")?;
            let base = r.params.usize("base_kv")?;
            let causal = r.params.bool("causal")?;
            let rows: Vec<(usize, usize)> = (0..n_query)
                .map(|i| (0, if causal { base + i + 1 } else { base + n_query }))
                .collect();
            decode_reference(r, &rows)
        },
        #[cfg(feature = "cases")]
        kernels: cases::decode_uses,
        #[cfg(feature = "cases")]
        cases: cases::mq_cases,
        #[cfg(feature = "cases")]
        benches: cases::mq_benches,
    }
}

const PREFILL_Q: [&str; 3] = ["n_q", "n_q_heads", "head_dim"];
const PREFILL_KV: [&str; 3] = ["n_kv", "n_kv_heads", "head_dim"];

inventory::submit! {
    OpDecl {
        name: "sdpa_prefill",
        family: "attention",
        summary: "flash attention for prefill, causal or full, GQA: matrix fragments for f16/bf16, CUDA-core tiles for f32",
        inputs: &[
            TensorDecl::float("q", &PREFILL_Q, "the prompt's queries; query i sits at position n_kv − n_q + i"),
            TensorDecl::new("k", &PREFILL_KV, DtypeRule::Like("q"), "keys, token-major; the last n_q are the prompt's own"),
            TensorDecl::new("v", &PREFILL_KV, DtypeRule::Like("q"), "values, like k"),
        ],
        outputs: &[out(&PREFILL_Q)],
        params: &[CAUSAL, SCALE],
        invariants: &[
            COMMON[0],
            "head_dim is one of 64, 96, 128, 192, 256 and equal in q and k; v is like k",
            COMMON[2],
            "n_kv ≥ n_q; scale is finite",
            COMMON[4],
        ],
        rejections: &[Rejection { invariant: 3, by: Break::Dim("n_kv", 4), reason: "must be at least n_q" }, Rejection { invariant: 1, by: Break::Dim("head_dim", 512), reason: "head_dim 512 is not supported" }, Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" }],
        variants: &[
            VariantDecl { name: "sdpa_prefill_tiles_kernel", when: "f16 and bf16, head_dim a multiple of 64, where threadgroup memory holds its tiles (CUDA, CPU): warpgroup tile products" },
            VariantDecl { name: "sdpa_prefill_mma_kernel", when: "f16 and bf16 otherwise: matrix fragments" },
            VariantDecl { name: "sdpa_prefill_kernel", when: "f32: CUDA-core tiles" },
        ],
        example: Example {
            dims: &[("n_q", 5), ("n_kv", 9), ("n_q_heads", 4), ("n_kv_heads", 2), ("head_dim", 64)],
            params: &[],
            ranges: &[],
            with: &[],
        },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            super::sdpa_prefill(
                ctx,
                a.input("q")?,
                a.input("k")?,
                a.input("v")?,
                a.output("out")?,
                a.params.bool("causal")?,
                a.params.opt_f32("scale")?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let (qs, ks) = (r.shape("q")?, r.shape("k")?);
            let d = qs[2];
            let scale = r.params.opt_f64("scale")?.unwrap_or(1.0 / (d as f64).sqrt());
            Ok(vec![reference::prefill(
                r.data("q")?,
                r.data("k")?,
                r.data("v")?,
                qs[0],
                ks[0],
                qs[1],
                ks[1],
                d,
                scale,
                r.params.bool("causal")?,
            )])
        },
        #[cfg(feature = "cases")]
        kernels: cases::prefill_uses,
        #[cfg(feature = "cases")]
        cases: cases::prefill_cases,
        #[cfg(feature = "cases")]
        benches: cases::prefill_benches,
    }
}

const VARLEN_Q: [&str; 3] = ["total_q", "n_q_heads", "head_dim"];
const VARLEN_KV: [&str; 3] = ["total_k", "n_kv_heads", "head_dim"];

/// The declared packed prefill's scratch: its offsets uploaded from the parameters (the
/// Rust op takes them as device tensors) and the op's own workspace.
struct DeclaredVarlen {
    cu_seqlens_q: tessera_runtime::Tensor,
    cu_seqlens_k: tessera_runtime::Tensor,
    ws: super::VarlenWorkspace,
}

/// The offsets parameter `name` as i32 on the device.
fn offsets_on_device(
    ctx: &Context,
    a: &OpArgs,
    (op, name): (&'static str, &str),
) -> Result<tessera_runtime::Tensor, OpError> {
    let list = a.params.opt_usize_list(name)?.unwrap_or_default();
    let values: Vec<i32> = list
        .iter()
        .map(|&x| {
            i32::try_from(x).map_err(|_| {
                OpError::invalid(op, format!("`{name}` holds {x}, more than i32 holds"))
            })
        })
        .collect::<Result<_, _>>()?;
    ctx.tensor(&values, &[values.len()])
        .map_err(crate::error::runtime(op))
}

fn varlen_workspace(ctx: &Context, a: &OpArgs) -> Result<Workspace, OpError> {
    let cu_seqlens_q = offsets_on_device(ctx, a, ("sdpa_prefill_varlen", "cu_seqlens_q"))?;
    let cu_seqlens_k = offsets_on_device(ctx, a, ("sdpa_prefill_varlen", "cu_seqlens_k"))?;
    let ws = super::VarlenWorkspace::new(ctx, cu_seqlens_q.len().saturating_sub(1))?;
    Ok(Box::new(DeclaredVarlen {
        cu_seqlens_q,
        cu_seqlens_k,
        ws,
    }))
}

inventory::submit! {
    OpDecl {
        name: "sdpa_prefill_varlen",
        family: "attention",
        summary: "flash attention over packed variable-length sequences (FlashAttention's varlen API): offsets checked on the device, causal aligned bottom-right, GQA",
        inputs: &[
            TensorDecl::float("q", &VARLEN_Q, "every sequence's queries, packed token-major; sequence b's are rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1]"),
            TensorDecl::new("k", &VARLEN_KV, DtypeRule::Like("q"), "every sequence's keys, packed; sequence b's are rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1]"),
            TensorDecl::new("v", &VARLEN_KV, DtypeRule::Like("q"), "values, like k"),
        ],
        outputs: &[out(&VARLEN_Q)],
        params: &[
            ParamDecl { name: "cu_seqlens_q", kind: ParamKind::UIntList, default: ParamDefault::Required, doc: "q's sequence boundaries: batch + 1 offsets rising from 0 to total_q (the Rust op takes them as an i32 or u32 device tensor)" },
            ParamDecl { name: "cu_seqlens_k", kind: ParamKind::UIntList, default: ParamDefault::Required, doc: "k's sequence boundaries: batch + 1 offsets rising from 0 to at most total_k (the Rust op: like cu_seqlens_q)" },
            ParamDecl { name: "max_seqlen_q", kind: ParamKind::UInt { min: 1, max: u32::MAX as u64 }, default: ParamDefault::Auto("the longest sequence's query count"), doc: "the most queries a sequence holds: sizes the grid" },
            ParamDecl { doc: "query i of a sequence of lq queries and lk keys sees keys j ≤ i + lk − lq (bottom-right); a query that sees no key gives zeros", ..CAUSAL },
            SCALE,
        ],
        invariants: &[
            COMMON[0],
            "head_dim is one of 64, 96, 128, 192, 256 and equal in q and k; v is like k",
            COMMON[2],
            "cu_seqlens_q and cu_seqlens_k hold batch + 1 ≥ 2 offsets each (the Rust op: i32 or u32 tensors); max_seqlen_q is in 1..=total_q; scale is finite",
            "the offsets rise from 0, cu_seqlens_q's to total_q and cu_seqlens_k's to at most total_k, and no sequence holds more than max_seqlen_q queries (checked on the device; the call is refused, naming the sequence, before anything is written)",
            COMMON[4],
        ],
        rejections: &[
            Rejection { invariant: 4, by: Break::Param("cu_seqlens_q", "0,6,5,13"), reason: "`cu_seqlens_q` is bad at sequence 1" },
            Rejection { invariant: 4, by: Break::Param("cu_seqlens_k", "0,9,9,40"), reason: "`cu_seqlens_k` is bad at sequence 2" },
            Rejection { invariant: 4, by: Break::Param("max_seqlen_q", "3"), reason: "holds more queries than max_seqlen_q = 3" },
            Rejection { invariant: 3, by: Break::Param("cu_seqlens_k", "0,9,20"), reason: "`cu_seqlens_k` must have shape [4]" },
            Rejection { invariant: 1, by: Break::Dim("head_dim", 512), reason: "head_dim 512 is not supported" },
            Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" },
        ],
        variants: &[
            VariantDecl { name: "sdpa_prefill_tiles_kernel", when: "f16 and bf16, head_dim a multiple of 64, where threadgroup memory holds its tiles (CUDA, CPU): warpgroup tile products, specialised for packed sequences" },
            VariantDecl { name: "sdpa_prefill_mma_kernel", when: "f16 and bf16 otherwise: matrix fragments, specialised for packed sequences" },
            VariantDecl { name: "sdpa_prefill_kernel", when: "f32: CUDA-core tiles, specialised for packed sequences" },
        ],
        example: Example {
            dims: &[("total_q", 13), ("total_k", 20), ("n_q_heads", 4), ("n_kv_heads", 2), ("head_dim", 64)],
            params: &[("cu_seqlens_q", "0,5,6,13"), ("cu_seqlens_k", "0,9,9,20")],
            ranges: &[],
            with: &[],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "16·batch + 12: each sequence's checked rows and the device check's verdict (the declared form also holds the offsets it uploads from its parameters)",
            make: varlen_workspace,
        }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            let d = a.workspace::<DeclaredVarlen>()?;
            let total_q = a.input("q")?.shape().first().copied().unwrap_or(0);
            let cu = a.params.opt_usize_list("cu_seqlens_q")?.unwrap_or_default();
            let longest = cu.windows(2).map(|w| w[1].saturating_sub(w[0])).max().unwrap_or(0);
            let max_seqlen_q = match a.params.opt_uint("max_seqlen_q")? {
                Some(m) => usize::try_from(m).unwrap_or(usize::MAX),
                None => longest.clamp(1, total_q.max(1)),
            };
            let packed = super::Packed { cu_seqlens_q: &d.cu_seqlens_q, cu_seqlens_k: &d.cu_seqlens_k, max_seqlen_q };
            super::sdpa_prefill_varlen(
                ctx,
                a.input("q")?,
                a.input("k")?,
                a.input("v")?,
                &packed,
                a.output("out")?,
                a.params.bool("causal")?,
                a.params.opt_f32("scale")?,
                &d.ws,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| cases::varlen_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::varlen_uses,
        #[cfg(feature = "cases")]
        cases: cases::varlen_cases,
        #[cfg(feature = "cases")]
        benches: cases::varlen_benches,
    }
}

const PAGED_Q: [&str; 3] = ["batch", "n_q_heads", "head_dim"];
const PAGES: [&str; 4] = ["blocks", "page_size", "n_kv_heads", "head_dim"];
const I32: &[DType] = &[DType::I32];

/// The page table of a declared paged call: the block table or the CSR inputs.
fn page_table<'a>(a: &OpArgs<'a>) -> Result<super::PageTable<'a>, OpError> {
    let csr = ["indptr", "indices", "last_page_len"].map(|n| a.optional(n));
    match (a.optional("block_table"), a.optional("seq_lens"), csr) {
        (Some(block_table), Some(seq_lens), [None, None, None]) => Ok(super::PageTable::Blocks { block_table, seq_lens }),
        (None, None, [Some(indptr), Some(indices), Some(last_page_len)]) => Ok(super::PageTable::Csr { indptr, indices, last_page_len }),
        _ => Err(OpError::invalid("sdpa_decode_paged", "give either block_table and seq_lens (vLLM) or indptr, indices and last_page_len (FlashInfer CSR)")),
    }
}

fn paged_kv<'a>(a: &OpArgs<'a>) -> Result<super::PagedKv<'a>, OpError> {
    Ok(super::PagedKv {
        k_cache: a.input("k_cache")?,
        v_cache: a.input("v_cache")?,
        layout: if a.params.choice("layout")? == "hnd" {
            super::KvLayout::Hnd
        } else {
            super::KvLayout::Nhd
        },
        table: page_table(a)?,
    })
}

/// The scratch of a declared paged call: sized by q, the table and what it holds.
fn paged_workspace(ctx: &Context, a: &OpArgs) -> Result<Workspace, OpError> {
    let (qs, ks) = (a.input("q")?.shape(), a.input("k_cache")?.shape());
    let back = |s: &[usize], i: usize| s.get(i).copied().unwrap_or(1);
    let page = if a.params.choice("layout")? == "hnd" {
        back(ks, 2)
    } else {
        back(ks, 1)
    };
    let (entries, width) = match (a.optional("block_table"), a.optional("indices")) {
        (Some(t), _) => (t.len(), back(t.shape(), 1)),
        (None, Some(i)) => (i.len(), i.len()),
        _ => (1, 1),
    };
    let heads = qs.len().saturating_sub(2);
    let rows: usize = qs[..heads].iter().product();
    let (hq, d) = (back(qs, heads), back(qs, heads + 1));
    let ws = super::PagedWorkspace::new(ctx, rows, hq, d, entries, width * page)?;
    Ok(Box::new(ws))
}

inventory::submit! {
    OpDecl {
        name: "sdpa_decode_paged",
        family: "attention",
        summary: "decode SDPA over a paged KV cache (NHD or HND pages; vLLM block table or FlashInfer CSR table), tables checked on the device",
        inputs: &[
            TensorDecl::float("q", &PAGED_Q, "one query token per sequence"),
            TensorDecl::new("k_cache", &PAGES, DtypeRule::Like("q"), "the key pages (HND: [blocks, n_kv_heads, page_size, head_dim])"),
            TensorDecl::new("v_cache", &PAGES, DtypeRule::Like("q"), "the value pages, like k_cache"),
            TensorDecl::new("block_table", &["batch", "max_pages"], DtypeRule::OneOf(I32), "vLLM: each sequence's pages in order (entries past its length are not read)").optional(),
            TensorDecl::new("seq_lens", &["batch"], DtypeRule::OneOf(I32), "vLLM: each sequence's length in tokens, 0..=max_pages·page_size").optional(),
            TensorDecl::new("indptr", &["batch + 1"], DtypeRule::OneOf(I32), "CSR: sequence b's pages are indices[indptr[b] .. indptr[b + 1])").optional(),
            TensorDecl::new("indices", &["n_indices"], DtypeRule::OneOf(I32), "CSR: the page ids of every sequence").optional(),
            TensorDecl::new("last_page_len", &["batch"], DtypeRule::OneOf(I32), "CSR: tokens on each sequence's last page, 1..=page_size (0 without pages)").optional(),
            SINK_LOGITS,
        ],
        outputs: &[out(&PAGED_Q)],
        params: &[
            ParamDecl { name: "layout", kind: ParamKind::Choice(&["nhd", "hnd"]), default: ParamDefault::Value("nhd"), doc: "how a page holds its tokens: [page_size, n_kv_heads, head_dim] or [n_kv_heads, page_size, head_dim]" },
            SCALE,
            WINDOW,
            N_SINK,
            SPLITS,
        ],
        invariants: &[
            COMMON[0],
            COMMON[1],
            COMMON[2],
            COMMON[3],
            "the element counts of q and k_cache fit u32; max_pages·page_size (CSR: n_indices·page_size) stays below 2^31",
            "the table is block_table and seq_lens, or indptr, indices and last_page_len, all i32 of the shapes above",
            "every length is non-negative and within its sequence's pages; every page id a sequence uses is in 0..blocks; CSR row pointers rise within indices (checked on the device; the call is refused, naming the sequence, before anything is written)",
            "a table reduced once for every layer of a step (Rust: `PagedWorkspace::prepare`, then `PageTable::Prepared` in each call) is used only on the workspace that prepared it, before that workspace reduces another table, by calls of the batch, query rows and pool shape it was prepared for",
        ],
        rejections: &[Rejection { invariant: 5, by: Break::Dtype("seq_lens", DType::U32), reason: "`seq_lens` must be i32" }, Rejection { invariant: 1, by: Break::Dim("head_dim", 80), reason: "head_dim 80 is not supported" }, Rejection { invariant: 2, by: Break::Dim("n_kv_heads", 3), reason: "must be a multiple of n_kv_heads" }, Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" }],
        variants: DECODE_VARIANTS,
        example: Example {
            dims: &[("batch", 3), ("n_q_heads", 4), ("n_kv_heads", 2), ("blocks", 12), ("page_size", 4), ("max_pages", 4), ("n_indices", 1), ("head_dim", 64)],
            params: &[("window", "9"), ("n_sink", "2")],
            ranges: &[("block_table", 0.0, 12.0), ("seq_lens", 0.0, 17.0)],
            with: &["block_table", "seq_lens", "sink_logits"],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "the decode workspace for batch rows over max_pages·page_size keys, plus 4·(table entries + 2·batch + 5)",
            make: paged_workspace,
        }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::sdpa_decode_paged(ctx, a.input("q")?, &paged_kv(a)?, a.output("out")?, &options(a)?, a.workspace::<super::PagedWorkspace>()?),
        #[cfg(feature = "cases")]
        reference: |r| cases::paged_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::paged_uses,
        #[cfg(feature = "cases")]
        cases: cases::paged_cases,
        #[cfg(feature = "cases")]
        benches: cases::paged_benches,
    }
}

const PAGED_MQ_Q: [&str; 4] = ["batch", "n_query", "n_q_heads", "head_dim"];

inventory::submit! {
    OpDecl {
        name: "sdpa_multi_query_paged",
        family: "attention",
        summary: "n_query new tokens per sequence (speculative verification) over a paged KV cache, causal or full; tables checked on the device",
        inputs: &[
            TensorDecl::float("q", &PAGED_MQ_Q, "each sequence's block of new queries, its last n_query tokens"),
            TensorDecl::new("k_cache", &PAGES, DtypeRule::Like("q"), "the key pages, the new tokens' keys appended (HND: [blocks, n_kv_heads, page_size, head_dim])"),
            TensorDecl::new("v_cache", &PAGES, DtypeRule::Like("q"), "the value pages, like k_cache"),
            TensorDecl::new("block_table", &["batch", "max_pages"], DtypeRule::OneOf(I32), "vLLM: each sequence's pages in order (entries past its length are not read)").optional(),
            TensorDecl::new("seq_lens", &["batch"], DtypeRule::OneOf(I32), "vLLM: each sequence's length in tokens, new ones included: 0 or n_query..=max_pages·page_size").optional(),
            TensorDecl::new("indptr", &["batch + 1"], DtypeRule::OneOf(I32), "CSR: sequence b's pages are indices[indptr[b] .. indptr[b + 1])").optional(),
            TensorDecl::new("indices", &["n_indices"], DtypeRule::OneOf(I32), "CSR: the page ids of every sequence").optional(),
            TensorDecl::new("last_page_len", &["batch"], DtypeRule::OneOf(I32), "CSR: tokens on each sequence's last page, 1..=page_size (0 without pages)").optional(),
            SINK_LOGITS,
        ],
        outputs: &[out(&PAGED_MQ_Q)],
        params: &[
            ParamDecl { name: "layout", kind: ParamKind::Choice(&["nhd", "hnd"]), default: ParamDefault::Value("nhd"), doc: "how a page holds its tokens: [page_size, n_kv_heads, head_dim] or [n_kv_heads, page_size, head_dim]" },
            ParamDecl { doc: "query i of a sequence of n tokens sees keys [0, n − n_query + i] (else all n)", ..CAUSAL },
            SCALE,
            WINDOW,
            N_SINK,
            SPLITS,
        ],
        invariants: &[
            COMMON[0],
            COMMON[1],
            COMMON[2],
            COMMON[3],
            "the element counts of q and k_cache fit u32; max_pages·page_size (CSR: n_indices·page_size) stays below 2^31",
            "the table is block_table and seq_lens, or indptr, indices and last_page_len, all i32 of the shapes above",
            "every length is non-negative, within its sequence's pages and (causal) 0 or at least n_query; every page id a sequence uses is in 0..blocks; CSR row pointers rise within indices (checked on the device before anything is written)",
            "a table reduced once for every layer of a step (Rust: `PagedWorkspace::prepare`, then `PageTable::Prepared` in each call) is used only on the workspace that prepared it, before that workspace reduces another table, by calls of the batch, query rows and pool shape it was prepared for",
        ],
        rejections: &[Rejection { invariant: 5, by: Break::Dtype("block_table", DType::U32), reason: "`block_table` must be i32" }, Rejection { invariant: 1, by: Break::Dim("head_dim", 80), reason: "head_dim 80 is not supported" }, Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" }],
        variants: DECODE_VARIANTS,
        example: Example {
            dims: &[("batch", 2), ("n_query", 3), ("n_q_heads", 4), ("n_kv_heads", 2), ("blocks", 8), ("page_size", 4), ("max_pages", 4), ("n_indices", 1), ("head_dim", 64)],
            params: &[("window", "7"), ("n_sink", "1")],
            ranges: &[("block_table", 0.0, 8.0), ("seq_lens", 3.0, 17.0)],
            with: &["block_table", "seq_lens"],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "the decode workspace for batch·n_query rows over max_pages·page_size keys, plus 4·(table entries + 2·batch·n_query + 5)",
            make: paged_workspace,
        }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::sdpa_multi_query_paged(ctx, a.input("q")?, &paged_kv(a)?, a.output("out")?, a.params.bool("causal")?, &options(a)?, a.workspace::<super::PagedWorkspace>()?),
        #[cfg(feature = "cases")]
        reference: |r| cases::paged_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::paged_uses,
        #[cfg(feature = "cases")]
        cases: cases::mq_paged_cases,
        #[cfg(feature = "cases")]
        benches: cases::no_benches,
    }
}

/// The declared paged prefill's scratch: its q offsets uploaded from the parameter and
/// the op's own workspace.
struct DeclaredPagedPrefill {
    cu_seqlens_q: tessera_runtime::Tensor,
    ws: super::PagedPrefillWorkspace,
}

fn paged_prefill_workspace(ctx: &Context, a: &OpArgs) -> Result<Workspace, OpError> {
    let cu_seqlens_q = offsets_on_device(ctx, a, ("sdpa_prefill_paged", "cu_seqlens_q"))?;
    let entries = match (a.optional("block_table"), a.optional("indices")) {
        (Some(t), _) => t.len(),
        (None, Some(i)) => i.len(),
        _ => 1,
    };
    let ws = super::PagedPrefillWorkspace::new(ctx, cu_seqlens_q.len().saturating_sub(1), entries)?;
    Ok(Box::new(DeclaredPagedPrefill { cu_seqlens_q, ws }))
}

inventory::submit! {
    OpDecl {
        name: "sdpa_prefill_paged",
        family: "attention",
        summary: "chunked prefill over a paged KV cache: packed new tokens (cu_seqlens_q) attending to their prefix and themselves through NHD or HND pages (vLLM block table or FlashInfer CSR table), checked on the device, causal aligned bottom-right, GQA",
        inputs: &[
            TensorDecl::float("q", &VARLEN_Q, "every sequence's new tokens, packed token-major; sequence b's are rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1]"),
            TensorDecl::new("k_cache", &PAGES, DtypeRule::Like("q"), "the key pages, the new tokens' keys appended after each prefix (HND: [blocks, n_kv_heads, page_size, head_dim])"),
            TensorDecl::new("v_cache", &PAGES, DtypeRule::Like("q"), "the value pages, like k_cache"),
            TensorDecl::new("block_table", &["batch", "max_blocks"], DtypeRule::OneOf(I32), "vLLM: each sequence's pages in order (entries past its length are not read)").optional(),
            TensorDecl::new("seq_lens", &["batch"], DtypeRule::OneOf(I32), "vLLM: each sequence's length in tokens, its new ones included: its query count ..= max_blocks·page_size").optional(),
            TensorDecl::new("indptr", &["batch + 1"], DtypeRule::OneOf(I32), "CSR: sequence b's pages are indices[indptr[b] .. indptr[b + 1])").optional(),
            TensorDecl::new("indices", &["n_indices"], DtypeRule::OneOf(I32), "CSR: the page ids of every sequence").optional(),
            TensorDecl::new("last_page_len", &["batch"], DtypeRule::OneOf(I32), "CSR: tokens on each sequence's last page, 1..=page_size (0 without pages)").optional(),
        ],
        outputs: &[out(&VARLEN_Q)],
        params: &[
            ParamDecl { name: "cu_seqlens_q", kind: ParamKind::UIntList, default: ParamDefault::Required, doc: "q's sequence boundaries: batch + 1 offsets rising from 0 to total_q (the Rust op takes them as an i32 or u32 device tensor)" },
            ParamDecl { name: "max_seqlen_q", kind: ParamKind::UInt { min: 1, max: u32::MAX as u64 }, default: ParamDefault::Auto("the longest sequence's query count"), doc: "the most queries a sequence holds: sizes the grid" },
            ParamDecl { name: "layout", kind: ParamKind::Choice(&["nhd", "hnd"]), default: ParamDefault::Value("nhd"), doc: "how a page holds its tokens: [page_size, n_kv_heads, head_dim] or [n_kv_heads, page_size, head_dim]" },
            ParamDecl { doc: "query i of a sequence of lq queries and len tokens sits at position len − lq + i and sees keys j ≤ len − lq + i (else all len)", ..CAUSAL },
            SCALE,
        ],
        invariants: &[
            "q, k_cache, v_cache, out share one float dtype; out is like q and aliases no input",
            "head_dim is one of 64, 96, 128, 192, 256 and equal in q and k_cache; v_cache is like k_cache",
            "n_q_heads is a multiple of n_kv_heads (GQA: head h reads KV head h / (n_q_heads / n_kv_heads))",
            "cu_seqlens_q holds batch + 1 ≥ 2 offsets (the Rust op: an i32 or u32 tensor); max_seqlen_q is in 1..=total_q; scale is finite",
            "the element counts of q and k_cache fit u32; max_blocks·page_size (CSR: n_indices·page_size) stays below 2^31",
            "the table is block_table and seq_lens, or indptr, indices and last_page_len, all i32 of the shapes above",
            "cu_seqlens_q rises from 0 to total_q with no sequence over max_seqlen_q queries; every length is non-negative, at least its sequence's query count and within its pages; every page id a sequence uses is in 0..blocks; CSR row pointers rise within indices (checked on the device; the call is refused, naming the sequence or entry, before anything is written)",
        ],
        rejections: &[
            Rejection { invariant: 6, by: Break::Param("cu_seqlens_q", "0,6,5"), reason: "`cu_seqlens_q` is bad at sequence 1" },
            Rejection { invariant: 6, by: Break::Param("max_seqlen_q", "3"), reason: "holds more queries than max_seqlen_q = 3" },
            Rejection { invariant: 5, by: Break::Dtype("seq_lens", DType::U32), reason: "`seq_lens` must be i32" },
            Rejection { invariant: 3, by: Break::Param("cu_seqlens_q", "0,7"), reason: "`block_table` must have shape [1, 4]" },
            Rejection { invariant: 1, by: Break::Dim("head_dim", 512), reason: "head_dim 512 is not supported" },
            Rejection { invariant: 2, by: Break::Dim("n_kv_heads", 3), reason: "must be a multiple of n_kv_heads" },
            Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" },
        ],
        variants: &[
            VariantDecl { name: "sdpa_prefill_tiles_kernel", when: "f16 and bf16, head_dim a multiple of 64, where threadgroup memory holds its tiles (CUDA, CPU): warpgroup tile products, specialised for packed sequences over pages" },
            VariantDecl { name: "sdpa_prefill_mma_kernel", when: "f16 and bf16 otherwise: matrix fragments, specialised for packed sequences over pages" },
            VariantDecl { name: "sdpa_prefill_kernel", when: "f32: CUDA-core tiles, specialised for packed sequences over pages" },
        ],
        example: Example {
            dims: &[("total_q", 7), ("batch", 2), ("n_q_heads", 4), ("n_kv_heads", 2), ("blocks", 12), ("page_size", 4), ("max_blocks", 4), ("n_indices", 1), ("head_dim", 64)],
            params: &[("cu_seqlens_q", "0,5,7")],
            ranges: &[("block_table", 0.0, 12.0), ("seq_lens", 5.0, 17.0)],
            with: &["block_table", "seq_lens"],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "4·(3·table entries + 6·batch + 11): the page table's reduction, the kernels' table and the verdict (the declared form also holds the offsets it uploads from its parameter)",
            make: paged_prefill_workspace,
        }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            let d = a.workspace::<DeclaredPagedPrefill>()?;
            let total_q = a.input("q")?.shape().first().copied().unwrap_or(0);
            let cu = a.params.opt_usize_list("cu_seqlens_q")?.unwrap_or_default();
            let longest = cu.windows(2).map(|w| w[1].saturating_sub(w[0])).max().unwrap_or(0);
            let max_seqlen_q = match a.params.opt_uint("max_seqlen_q")? {
                Some(m) => usize::try_from(m).unwrap_or(usize::MAX),
                None => longest.clamp(1, total_q.max(1)),
            };
            let queries = super::PagedQueries { cu_seqlens_q: &d.cu_seqlens_q, max_seqlen_q };
            super::sdpa_prefill_paged(
                ctx,
                a.input("q")?,
                &paged_kv(a)?,
                &queries,
                a.output("out")?,
                a.params.bool("causal")?,
                a.params.opt_f32("scale")?,
                &d.ws,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| cases::prefill_paged_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::prefill_paged_uses,
        #[cfg(feature = "cases")]
        cases: cases::prefill_paged_cases,
        #[cfg(feature = "cases")]
        benches: cases::prefill_paged_benches,
    }
}

const NEW_ROWS: [&str; 3] = ["tokens", "n_kv_heads", "head_dim"];

/// The fused rotation of K the appends take, with the `rope` op's meaning (its `layout`
/// values, `theta` and `rot_dim`; no long-context scaling through the declarations).
const ROPE_PARAMS: [ParamDecl; 3] = [
    ParamDecl { name: "rope", kind: ParamKind::Choice(&["none", "neox", "interleaved"]), default: ParamDefault::Value("none"), doc: "rotate K on its way in exactly as the `rope` op would: not at all, NeoX pairs (i, i + rot_dim/2) or interleaved pairs (2i, 2i+1) (rope's `layout`); V is never rotated" },
    ParamDecl { name: "theta", kind: ParamKind::Float, default: ParamDefault::Value("10000"), doc: "with rope: the frequency base, as rope's theta; finite and above 1" },
    ParamDecl { name: "rot_dim", kind: ParamKind::UInt { min: 2, max: u32::MAX as u64 }, default: ParamDefault::Auto("head_dim"), doc: "with rope: rotated dims, even and at most head_dim, as rope's; the rest pass through" },
];

const ROPE_INVARIANT: &str = "theta and rot_dim are given only with rope; rot_dim is even, positive and at most head_dim; theta is finite and above 1";

/// The rotation op `op`'s parameters ask for, for keys of `head_dim`.
pub(super) fn declared_rope(
    op: &'static str,
    p: &crate::decl::ParamValues,
    head_dim: usize,
) -> Result<Option<crate::rope::RopeConfig>, OpError> {
    use crate::rope::{RopeConfig, RopeLayout, RopeScaling};
    let layout = match p.choice("rope")? {
        "neox" => RopeLayout::NeoX,
        "interleaved" => RopeLayout::Interleaved,
        _ => {
            for name in ["theta", "rot_dim"] {
                if p.is_given(name) {
                    return Err(OpError::invalid(op, format!("`{name}` is given but rope=none does not rotate; give rope=neox or rope=interleaved, or leave it out")));
                }
            }
            return Ok(None);
        }
    };
    let rot_dim = match p.opt_uint("rot_dim")? {
        Some(r) => usize::try_from(r).map_err(|_| OpError::invalid(op, "rot_dim is too large"))?,
        None => head_dim,
    };
    Ok(Some(RopeConfig {
        layout,
        theta: p.f64("theta")?,
        rot_dim,
        scaling: RopeScaling::None,
    }))
}

/// An append's workspace: the slot check's word and, with rope, the frequency table
/// (made before the call, as the `rope` op's is).
struct AppendWorkspace {
    check: super::SlotCheck,
    table: Option<crate::rope::RopeTable>,
}

fn append_workspace(ctx: &Context, a: &OpArgs) -> Result<crate::decl::Workspace, OpError> {
    let table = match declared_rope(a.op.name, a.params, a.last_dim("k")?)? {
        Some(config) => Some(crate::rope::RopeTable::new(ctx, config)?),
        None => None,
    };
    Ok(Box::new(AppendWorkspace {
        check: super::SlotCheck::new(ctx)?,
        table,
    }))
}

const APPEND_WORKSPACE: WorkspaceDecl = WorkspaceDecl {
    bytes: "4: the word the device-side checks write, and with rope 8 per rotated pair: the frequency table",
    make: append_workspace,
};

fn kv_layout(a: &OpArgs) -> Result<super::KvLayout, OpError> {
    Ok(if a.params.choice("layout")? == "hnd" {
        super::KvLayout::Hnd
    } else {
        super::KvLayout::Nhd
    })
}

/// Checks the functional outputs of an append against its caches and inputs, then
/// copies the caches into them.
fn append_outputs(
    ctx: &Context,
    a: &OpArgs,
    op: &'static str,
    inputs: &[(&str, &tessera_runtime::Tensor)],
) -> Result<(), OpError> {
    let (k_out, v_out) = (a.output("k_cache_out")?, a.output("v_cache_out")?);
    let (kc, vc) = (a.input("k_cache")?, a.input("v_cache")?);
    for (name, out, like) in [("k_cache_out", k_out, kc), ("v_cache_out", v_out, vc)] {
        crate::validate::dtype_is(op, name, out, like.dtype())?;
        crate::validate::shape_is(op, name, out, like.shape())?;
        crate::validate::distinct(op, out, inputs)?;
        crate::validate::distinct(op, out, &[("k_cache", kc), ("v_cache", vc)])?;
    }
    crate::validate::distinct(op, k_out, &[("v_cache_out", v_out)])?;
    crate::elementwise::cast(ctx, kc, k_out)?;
    crate::elementwise::cast(ctx, vc, v_out)
}

inventory::submit! {
    OpDecl {
        name: "paged_kv_append",
        family: "attention",
        summary: "new K/V rows written into a paged cache (NHD or HND) at vLLM's slot_mapping (−1 skips); slots checked on the device",
        inputs: &[
            TensorDecl::float("k", &NEW_ROWS, "the new tokens' key rows"),
            TensorDecl::new("v", &NEW_ROWS, DtypeRule::Like("k"), "their value rows"),
            TensorDecl::new("slot_mapping", &["tokens"], DtypeRule::OneOf(I32), "each token's slot page·page_size + offset, or −1 to skip it"),
            TensorDecl::new("k_cache", &PAGES, DtypeRule::Like("k"), "the key pages before the append (HND: [blocks, n_kv_heads, page_size, head_dim])"),
            TensorDecl::new("v_cache", &PAGES, DtypeRule::Like("k"), "the value pages before, like k_cache"),
            TensorDecl::new("positions", &["tokens"], DtypeRule::OneOf(crate::decl::U32), "with rope: each token's position, as rope takes it").optional(),
        ],
        outputs: &[
            OutputDecl::like("k_cache", "k_cache_out", &PAGES, DtypeRule::Like("k"), "the key pages after (the Rust op writes k_cache in place)"),
            OutputDecl::like("v_cache", "v_cache_out", &PAGES, DtypeRule::Like("k"), "the value pages after"),
        ],
        params: &[ParamDecl { name: "layout", kind: ParamKind::Choice(&["nhd", "hnd"]), default: ParamDefault::Value("nhd"), doc: "how a page holds its tokens: [page_size, n_kv_heads, head_dim] or [n_kv_heads, page_size, head_dim]" }, ROPE_PARAMS[0], ROPE_PARAMS[1], ROPE_PARAMS[2]],
        invariants: &[
            "k, v and the caches share one float dtype; v is like k; the caches are alike and hold n_kv_heads heads of head_dim; none is empty",
            "slot_mapping is i32 [tokens]",
            "every slot is −1 or in 0..blocks·page_size, and no two tokens share a slot (checked on the device; the call is refused, naming the token, before anything is written)",
            "the caches hold fewer than 2^31 elements; the outputs alias no input",
            ROPE_INVARIANT,
            "positions, u32 [tokens], is given exactly when rope is not none",
        ],
        rejections: &[Rejection { invariant: 1, by: Break::Dtype("slot_mapping", DType::U32), reason: "`slot_mapping` must be i32" }, Rejection { invariant: 0, by: Break::InputDim("v", "head_dim", 32), reason: "`v` must have shape" }, Rejection { invariant: 0, by: Break::Dtype("k_cache", DType::F16), reason: "`k_cache` must be f32" }, Rejection { invariant: 4, by: Break::Param("theta", "500000"), reason: "`theta` is given but rope=none" }, Rejection { invariant: 5, by: Break::Param("rope", "neox"), reason: "rope=neox needs `positions`" }],
        variants: &[],
        example: Example {
            dims: &[("tokens", 1), ("n_kv_heads", 2), ("head_dim", 64), ("blocks", 4), ("page_size", 4)],
            params: &[],
            ranges: &[("slot_mapping", -1.0, 16.0)],
            with: &[],
        },
        workspace: Some(APPEND_WORKSPACE),
        accuracy: crate::decl::Accuracy::EXACT,
        call: |ctx, a| {
            const OP: &str = "paged_kv_append";
            let ws = a.workspace::<AppendWorkspace>()?;
            let positions = a.optional("positions");
            let rope = match (&ws.table, positions) {
                (Some(table), Some(positions)) => Some(super::KeyRope { positions, table }),
                (None, None) => None,
                (Some(_), None) => return Err(OpError::invalid(OP, format!("rope={} needs `positions`, each token's position", a.params.choice("rope")?))),
                (None, Some(_)) => return Err(OpError::invalid(OP, "`positions` is given but rope=none does not rotate; give rope=neox or rope=interleaved")),
            };
            let rows = (a.input("k")?, a.input("v")?, a.input("slot_mapping")?);
            let (kc, vc) = (a.input("k_cache")?, a.input("v_cache")?);
            let append = super::paged_append::PagedAppend::check(ctx, rows, (kc, vc), kv_layout(a)?, rope, &ws.check)?;
            let mut inputs = vec![("k", rows.0), ("v", rows.1)];
            inputs.extend(positions.map(|p| ("positions", p)));
            append_outputs(ctx, a, OP, &inputs)?;
            append.write(ctx, a.output("k_cache_out")?, a.output("v_cache_out")?)
        },
        #[cfg(feature = "cases")]
        reference: |r| cases::append_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::append_uses,
        #[cfg(feature = "cases")]
        cases: cases::append_cases,
        #[cfg(feature = "cases")]
        benches: cases::no_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "paged_kv_append_ragged",
        family: "attention",
        summary: "the new K/V rows of a ragged batch (cu_seqlens) written into a paged cache through a vLLM block table, each token's slot and RoPE position (length before + index) computed and checked on the device; K optionally rotated",
        inputs: &[
            TensorDecl::float("k", &NEW_ROWS, "the new tokens' key rows, sequence after sequence"),
            TensorDecl::new("v", &NEW_ROWS, DtypeRule::Like("k"), "their value rows"),
            TensorDecl::new("cu_seqlens", &["batch + 1"], DtypeRule::OneOf(I32), "sequence b's new rows are cu_seqlens[b] .. cu_seqlens[b + 1]; rows outside cu_seqlens[0] .. cu_seqlens[batch] pad the batch and are skipped"),
            TensorDecl::new("block_table", &["batch", "max_blocks"], DtypeRule::OneOf(I32), "vLLM: each sequence's pages in order (entries past its new length are not read)"),
            TensorDecl::new("seq_lens", &["batch"], DtypeRule::OneOf(I32), "each sequence's length before the append: its i-th new token goes to position seq_lens[b] + i"),
            TensorDecl::new("k_cache", &PAGES, DtypeRule::Like("k"), "the key pages before the append (HND: [blocks, n_kv_heads, page_size, head_dim])"),
            TensorDecl::new("v_cache", &PAGES, DtypeRule::Like("k"), "the value pages before, like k_cache"),
        ],
        outputs: &[
            OutputDecl::like("k_cache", "k_cache_out", &PAGES, DtypeRule::Like("k"), "the key pages after (the Rust op writes k_cache in place)"),
            OutputDecl::like("v_cache", "v_cache_out", &PAGES, DtypeRule::Like("k"), "the value pages after"),
        ],
        params: &[KV_LAYOUT, ROPE_PARAMS[0], ROPE_PARAMS[1], ROPE_PARAMS[2]],
        invariants: &[
            "k, v and the caches share one float dtype; v is like k; the caches are alike and hold n_kv_heads heads of head_dim; none is empty",
            "cu_seqlens [batch + 1], block_table [batch, max_blocks] (not empty) and seq_lens [batch] are i32",
            "cu_seqlens never decreases and stays within 0..=tokens; every seq_lens is ≥ 0; each token's position is inside its table row, the page there is one of the pool's, and no two tokens land in one slot (checked on the device; the call is refused, naming the entry, before anything is written)",
            "the caches hold fewer than 2^31 elements, max_blocks·page_size + tokens < 2^31; the outputs alias no input",
            ROPE_INVARIANT,
        ],
        rejections: &[Rejection { invariant: 1, by: Break::Dtype("cu_seqlens", DType::U32), reason: "`cu_seqlens` must be i32" }, Rejection { invariant: 1, by: Break::InputDim("seq_lens", "batch", 3), reason: "`seq_lens` must have shape" }, Rejection { invariant: 0, by: Break::Dtype("k_cache", DType::F16), reason: "`k_cache` must be f32" }, Rejection { invariant: 4, by: Break::Param("rot_dim", "7"), reason: "`rot_dim` is given but rope=none" }],
        variants: &[],
        example: Example {
            dims: &[("tokens", 3), ("n_kv_heads", 2), ("head_dim", 64), ("blocks", 4), ("page_size", 4), ("batch", 2), ("max_blocks", 2)],
            params: &[],
            // All-zero cu_seqlens: every row pads (random boundaries could decrease).
            ranges: &[("cu_seqlens", 0.0, 1.0), ("seq_lens", 0.0, 8.0), ("block_table", 0.0, 4.0)],
            with: &[],
        },
        workspace: Some(APPEND_WORKSPACE),
        accuracy: crate::decl::Accuracy::EXACT,
        call: |ctx, a| {
            const OP: &str = "paged_kv_append_ragged";
            let ws = a.workspace::<AppendWorkspace>()?;
            let (k, v) = (a.input("k")?, a.input("v")?);
            let addressing = (a.input("cu_seqlens")?, a.input("block_table")?, a.input("seq_lens")?);
            let (kc, vc) = (a.input("k_cache")?, a.input("v_cache")?);
            // Every check, the device-side ones included, before the outputs are touched.
            let append = super::paged_append_ragged::check_addressing(ctx, (k, v), addressing, (kc, vc), kv_layout(a)?, ws.table.as_ref(), &ws.check)?;
            let inputs = [("k", k), ("v", v), ("cu_seqlens", addressing.0), ("block_table", addressing.1), ("seq_lens", addressing.2)];
            append_outputs(ctx, a, OP, &inputs)?;
            append.write(ctx, (a.output("k_cache_out")?, a.output("v_cache_out")?))
        },
        #[cfg(feature = "cases")]
        reference: |r| cases::ragged_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::ragged_uses,
        #[cfg(feature = "cases")]
        cases: cases::ragged_cases,
        #[cfg(feature = "cases")]
        benches: cases::no_benches,
    }
}

const SCALES: [&str; 3] = ["blocks", "page_size", "n_kv_heads"];
const KV_FORMAT: ParamDecl = ParamDecl {
    name: "kv_format",
    kind: ParamKind::Choice(&["int8", "e4m3"]),
    default: ParamDefault::Required,
    doc: "what the cache bytes are: two's-complement int8 (scale amax/127) or OCP e4m3fn (scale amax/448); the value is code · scale (int4 caches: the `_int4` ops)",
};
const KV_LAYOUT: ParamDecl = ParamDecl { name: "layout", kind: ParamKind::Choice(&["nhd", "hnd"]), default: ParamDefault::Value("nhd"), doc: "how a page holds its tokens: [page_size, n_kv_heads, head_dim] or [n_kv_heads, page_size, head_dim]" };

fn kv_scales<'a>(a: &OpArgs<'a>, k: &str, v: &str) -> Result<super::KvScales<'a>, OpError> {
    Ok(super::KvScales {
        k_scale: a.input(k)?,
        v_scale: a.input(v)?,
        format: super::KvFormat::parse("kv_quant", a.params.choice("kv_format")?)?,
    })
}

inventory::submit! {
    OpDecl {
        name: "kv_quant_append",
        family: "attention",
        summary: "new K/V rows quantized per (token, KV head) to int8 or e4m3 codes and f32 scales and written into a u8 paged cache at vLLM's slot_mapping",
        inputs: &[
            TensorDecl::float("k", &NEW_ROWS, "the new tokens' key rows"),
            TensorDecl::new("v", &NEW_ROWS, DtypeRule::Like("k"), "their value rows"),
            TensorDecl::new("slot_mapping", &["tokens"], DtypeRule::OneOf(I32), "each token's slot page·page_size + offset, or −1 to skip it"),
            TensorDecl::new("k_cache", &PAGES, DtypeRule::OneOf(&[DType::U8]), "the key code pages before the append (HND: [blocks, n_kv_heads, page_size, head_dim])"),
            TensorDecl::new("v_cache", &PAGES, DtypeRule::OneOf(&[DType::U8]), "the value code pages before, like k_cache"),
            TensorDecl::new("k_scale", &SCALES, DtypeRule::OneOf(&[DType::F32]), "each key row's scale before (HND: [blocks, n_kv_heads, page_size])"),
            TensorDecl::new("v_scale", &SCALES, DtypeRule::OneOf(&[DType::F32]), "each value row's scale before, like k_scale"),
        ],
        outputs: &[
            OutputDecl::like("k_cache", "k_cache_out", &PAGES, DtypeRule::OneOf(&[DType::U8]), "the key codes after (the Rust op writes k_cache in place)"),
            OutputDecl::like("k_scale", "k_scale_out", &SCALES, DtypeRule::OneOf(&[DType::F32]), "the key scales after: amax/127 or amax/448 of each written row; 0 for a zero row, NaN for a row holding NaN or inf (its codes 0)"),
            OutputDecl::like("v_cache", "v_cache_out", &PAGES, DtypeRule::OneOf(&[DType::U8]), "the value codes after"),
            OutputDecl::like("v_scale", "v_scale_out", &SCALES, DtypeRule::OneOf(&[DType::F32]), "the value scales after"),
        ],
        params: &[KV_FORMAT, KV_LAYOUT],
        invariants: &[
            "k and v share one float dtype and shape; the caches are u8, alike, and hold n_kv_heads heads of head_dim; none is empty",
            "slot_mapping is i32 [tokens]",
            "every slot is −1 or in 0..blocks·page_size, and no two tokens share a slot (checked on the device; the call is refused, naming the token, before anything is written)",
            "k_scale and v_scale are f32 of the cache's shape without head_dim; the caches hold fewer than 2^31 elements; the outputs alias no input",
        ],
        rejections: &[Rejection { invariant: 1, by: Break::Dtype("slot_mapping", DType::U32), reason: "`slot_mapping` must be i32" }, Rejection { invariant: 0, by: Break::Dtype("k_cache", DType::F32), reason: "`k_cache` must be u8" }, Rejection { invariant: 3, by: Break::Dtype("v_scale", DType::F16), reason: "`v_scale` must be f32" }],
        variants: &[],
        example: Example {
            dims: &[("tokens", 1), ("n_kv_heads", 2), ("head_dim", 64), ("blocks", 4), ("page_size", 4)],
            params: &[("kv_format", "e4m3")],
            ranges: &[("slot_mapping", -1.0, 16.0), ("k_cache", 0.0, 126.0), ("v_cache", 0.0, 126.0), ("k_scale", 0.0, 0.05), ("v_scale", 0.0, 0.05)],
            with: &[],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "4: the word the device-side slot check writes",
            make: |ctx, _| Ok(Box::new(super::SlotCheck::new(ctx)?)),
        }),
        accuracy: crate::decl::Accuracy { keyed_by: "exact: the codes and f32 scales the format's definition gives for f32 arithmetic", ..crate::decl::Accuracy::EXACT },
        call: |ctx, a| {
            const OP: &str = "kv_quant_append";
            let names = ["k_cache", "v_cache", "k_scale", "v_scale"];
            let ins = [a.input(names[0])?, a.input(names[1])?, a.input(names[2])?, a.input(names[3])?];
            let outs = [a.output("k_cache_out")?, a.output("v_cache_out")?, a.output("k_scale_out")?, a.output("v_scale_out")?];
            let rows = [("k", a.input("k")?), ("v", a.input("v")?), ("slot_mapping", a.input("slot_mapping")?)];
            let format = super::KvFormat::parse(OP, a.params.choice("kv_format")?)?;
            let layout = if a.params.choice("layout")? == "hnd" { super::KvLayout::Hnd } else { super::KvLayout::Nhd };
            let check = a.workspace::<super::SlotCheck>()?;
            // Refuse a bad call before the outputs are touched.
            let probe = super::KvScales { k_scale: ins[2], v_scale: ins[3], format };
            super::kv_quant::check_scales(OP, &probe, ins[0].shape(), &rows)?;
            super::paged_append::PagedAppend::check_as(OP, Some(DType::U8), ctx, (rows[0].1, rows[1].1, rows[2].1), (ins[0], ins[1]), layout, None, check)?;
            for (i, out) in outs.iter().enumerate() {
                crate::validate::dtype_is(OP, names[i], out, ins[i].dtype())?;
                crate::validate::shape_is(OP, names[i], out, ins[i].shape())?;
                crate::validate::distinct(OP, out, &rows)?;
                crate::validate::distinct(OP, out, &[(names[0], ins[0]), (names[1], ins[1]), (names[2], ins[2]), (names[3], ins[3])])?;
                for other in &outs[i + 1..] {
                    crate::validate::distinct(OP, out, &[("another output", other)])?;
                }
            }
            let scales = super::KvScales { k_scale: outs[2], v_scale: outs[3], format };
            // The functional form starts from copies: the codes through the host (no float
            // cast takes bytes), the scales on the device.
            for (src, dst) in ins[..2].iter().zip(&outs[..2]) {
                let bytes = src.to_bytes().map_err(crate::error::runtime(OP))?;
                dst.write_bytes(&bytes).map_err(crate::error::runtime(OP))?;
            }
            for (src, dst) in ins[2..].iter().zip(&outs[2..]) {
                crate::elementwise::cast(ctx, src, dst)?;
            }
            super::kv_quant_append(ctx, rows[0].1, rows[1].1, rows[2].1, (outs[0], outs[1]), &scales, layout, None, check)
        },
        #[cfg(feature = "cases")]
        reference: |r| cases::quant_append_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::quant_append_uses,
        #[cfg(feature = "cases")]
        cases: || cases::quant_append_cases().into_iter().chain(cases::quant_rope_cases()).collect(),
        #[cfg(feature = "cases")]
        benches: cases::no_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "sdpa_decode_paged_quant",
        family: "attention",
        summary: "decode SDPA over an int8 or e4m3 paged KV cache with per-(token, KV head) f32 scales, dequantized in registers as the codes are read; tables checked on the device",
        inputs: &[
            TensorDecl::float("q", &PAGED_Q, "one query token per sequence"),
            TensorDecl::new("k_cache", &PAGES, DtypeRule::OneOf(&[DType::U8]), "the key code pages (HND: [blocks, n_kv_heads, page_size, head_dim])"),
            TensorDecl::new("v_cache", &PAGES, DtypeRule::OneOf(&[DType::U8]), "the value code pages, like k_cache"),
            TensorDecl::new("k_scale", &SCALES, DtypeRule::OneOf(&[DType::F32]), "each key row's scale: the key is code · scale (HND: [blocks, n_kv_heads, page_size])"),
            TensorDecl::new("v_scale", &SCALES, DtypeRule::OneOf(&[DType::F32]), "each value row's scale, like k_scale"),
            TensorDecl::new("block_table", &["batch", "max_pages"], DtypeRule::OneOf(I32), "vLLM: each sequence's pages in order (entries past its length are not read)").optional(),
            TensorDecl::new("seq_lens", &["batch"], DtypeRule::OneOf(I32), "vLLM: each sequence's length in tokens, 0..=max_pages·page_size").optional(),
            TensorDecl::new("indptr", &["batch + 1"], DtypeRule::OneOf(I32), "CSR: sequence b's pages are indices[indptr[b] .. indptr[b + 1])").optional(),
            TensorDecl::new("indices", &["n_indices"], DtypeRule::OneOf(I32), "CSR: the page ids of every sequence").optional(),
            TensorDecl::new("last_page_len", &["batch"], DtypeRule::OneOf(I32), "CSR: tokens on each sequence's last page, 1..=page_size (0 without pages)").optional(),
            SINK_LOGITS,
        ],
        outputs: &[out(&PAGED_Q)],
        params: &[KV_FORMAT, KV_LAYOUT, SCALE, WINDOW, N_SINK, SPLITS],
        invariants: &[
            "q and out share one float dtype; the caches are u8 and alike; k_scale and v_scale are f32 of the cache's shape without head_dim; out aliases no input",
            COMMON[1],
            COMMON[2],
            COMMON[3],
            "the element counts of q and k_cache fit u32; max_pages·page_size (CSR: n_indices·page_size) stays below 2^31",
            "the table is block_table and seq_lens, or indptr, indices and last_page_len, all i32 of the shapes above",
            "every length is non-negative and within its sequence's pages; every page id a sequence uses is in 0..blocks; CSR row pointers rise within indices (checked on the device; the call is refused, naming the sequence, before anything is written)",
            "a table reduced once for every layer of a step (Rust: `PagedWorkspace::prepare`, then `PageTable::Prepared` in each call) is used only on the workspace that prepared it, before that workspace reduces another table, by calls of the batch, query rows and pool shape it was prepared for",
        ],
        rejections: &[Rejection { invariant: 5, by: Break::Dtype("seq_lens", DType::U32), reason: "`seq_lens` must be i32" }, Rejection { invariant: 0, by: Break::Dtype("k_scale", DType::F16), reason: "`k_scale` must be f32" }, Rejection { invariant: 2, by: Break::Dim("n_kv_heads", 3), reason: "must be a multiple of n_kv_heads" }, Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" }],
        variants: &[],
        example: Example {
            dims: &[("batch", 3), ("n_q_heads", 4), ("n_kv_heads", 2), ("blocks", 12), ("page_size", 4), ("max_pages", 4), ("n_indices", 1), ("head_dim", 64)],
            params: &[("kv_format", "int8"), ("window", "9"), ("n_sink", "2")],
            ranges: &[("block_table", 0.0, 12.0), ("seq_lens", 0.0, 17.0), ("k_cache", 0.0, 255.0), ("v_cache", 0.0, 255.0), ("k_scale", 0.0, 0.02), ("v_scale", 0.0, 0.02)],
            with: &["block_table", "seq_lens", "sink_logits"],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "the decode workspace for batch rows over max_pages·page_size keys, plus 4·(table entries + 2·batch + 5)",
            make: paged_workspace,
        }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::sdpa_decode_paged_quant(ctx, a.input("q")?, &paged_kv(a)?, &kv_scales(a, "k_scale", "v_scale")?, a.output("out")?, &options(a)?, a.workspace::<super::PagedWorkspace>()?),
        #[cfg(feature = "cases")]
        reference: |r| cases::quant_decode_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::quant_decode_uses,
        #[cfg(feature = "cases")]
        cases: cases::quant_decode_cases,
        #[cfg(feature = "cases")]
        benches: cases::quant_decode_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "sdpa_multi_query_paged_quant",
        family: "attention",
        summary: "n_query new tokens per sequence (speculative verification) over an int8 or e4m3 paged KV cache with per-(token, KV head) f32 scales, causal or full, dequantized in registers; tables checked on the device",
        inputs: &[
            TensorDecl::float("q", &PAGED_MQ_Q, "each sequence's block of new queries, its last n_query tokens"),
            TensorDecl::new("k_cache", &PAGES, DtypeRule::OneOf(&[DType::U8]), "the key code pages, the new tokens' keys appended (HND: [blocks, n_kv_heads, page_size, head_dim])"),
            TensorDecl::new("v_cache", &PAGES, DtypeRule::OneOf(&[DType::U8]), "the value code pages, like k_cache"),
            TensorDecl::new("k_scale", &SCALES, DtypeRule::OneOf(&[DType::F32]), "each key row's scale: the key is code · scale (HND: [blocks, n_kv_heads, page_size])"),
            TensorDecl::new("v_scale", &SCALES, DtypeRule::OneOf(&[DType::F32]), "each value row's scale, like k_scale"),
            TensorDecl::new("block_table", &["batch", "max_pages"], DtypeRule::OneOf(I32), "vLLM: each sequence's pages in order (entries past its length are not read)").optional(),
            TensorDecl::new("seq_lens", &["batch"], DtypeRule::OneOf(I32), "vLLM: each sequence's length in tokens, new ones included: 0 or n_query..=max_pages·page_size").optional(),
            TensorDecl::new("indptr", &["batch + 1"], DtypeRule::OneOf(I32), "CSR: sequence b's pages are indices[indptr[b] .. indptr[b + 1])").optional(),
            TensorDecl::new("indices", &["n_indices"], DtypeRule::OneOf(I32), "CSR: the page ids of every sequence").optional(),
            TensorDecl::new("last_page_len", &["batch"], DtypeRule::OneOf(I32), "CSR: tokens on each sequence's last page, 1..=page_size (0 without pages)").optional(),
            SINK_LOGITS,
        ],
        outputs: &[out(&PAGED_MQ_Q)],
        params: &[
            KV_FORMAT,
            KV_LAYOUT,
            ParamDecl { doc: "query i of a sequence of n tokens sees keys [0, n − n_query + i] (else all n)", ..CAUSAL },
            SCALE,
            WINDOW,
            N_SINK,
            SPLITS,
        ],
        invariants: &[
            "q and out share one float dtype; the caches are u8 and alike; k_scale and v_scale are f32 of the cache's shape without head_dim; out aliases no input",
            COMMON[1],
            COMMON[2],
            COMMON[3],
            "the element counts of q and k_cache fit u32; max_pages·page_size (CSR: n_indices·page_size) stays below 2^31",
            "the table is block_table and seq_lens, or indptr, indices and last_page_len, all i32 of the shapes above",
            "every length is non-negative, within its sequence's pages and (causal) 0 or at least n_query; every page id a sequence uses is in 0..blocks; CSR row pointers rise within indices (checked on the device before anything is written)",
            "a table reduced once for every layer of a step (Rust: `PagedWorkspace::prepare`, then `PageTable::Prepared` in each call) is used only on the workspace that prepared it, before that workspace reduces another table, by calls of the batch, query rows and pool shape it was prepared for",
        ],
        rejections: &[Rejection { invariant: 0, by: Break::Dtype("v_scale", DType::BF16), reason: "`v_scale` must be f32" }, Rejection { invariant: 5, by: Break::Dtype("block_table", DType::U32), reason: "`block_table` must be i32" }, Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" }],
        variants: &[],
        example: Example {
            dims: &[("batch", 2), ("n_query", 3), ("n_q_heads", 4), ("n_kv_heads", 2), ("blocks", 8), ("page_size", 4), ("max_pages", 4), ("n_indices", 1), ("head_dim", 64)],
            params: &[("kv_format", "e4m3"), ("window", "7"), ("n_sink", "1")],
            ranges: &[("block_table", 0.0, 8.0), ("seq_lens", 3.0, 17.0), ("k_cache", 0.0, 126.0), ("v_cache", 0.0, 126.0), ("k_scale", 0.0, 0.02), ("v_scale", 0.0, 0.02)],
            with: &["block_table", "seq_lens"],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "the decode workspace for batch·n_query rows over max_pages·page_size keys, plus 4·(table entries + 2·batch·n_query + 5)",
            make: paged_workspace,
        }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::sdpa_multi_query_paged_quant(ctx, a.input("q")?, &paged_kv(a)?, &kv_scales(a, "k_scale", "v_scale")?, a.output("out")?, a.params.bool("causal")?, &options(a)?, a.workspace::<super::PagedWorkspace>()?),
        #[cfg(feature = "cases")]
        reference: |r| cases::quant_decode_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::quant_decode_uses,
        #[cfg(feature = "cases")]
        cases: cases::quant_mq_cases,
        #[cfg(feature = "cases")]
        benches: cases::no_benches,
    }
}

const INT4_PAGES: [&str; 4] = ["blocks", "page_size", "n_kv_heads", "row_bytes"];
const INT4_SCALES: [&str; 4] = ["blocks", "page_size", "n_kv_heads", "groups"];
const INT4_GROUP: ParamDecl = ParamDecl {
    name: "group",
    kind: ParamKind::UInt { min: 1, max: 512 },
    default: ParamDefault::Value("32"),
    doc: "dims a scale covers: a power of two of at least 32 that divides head_dim (32 or 64 as engines group, or head_dim for one scale a row)",
};
const INT4_CACHE: &str = "the caches are u8 [.., row_bytes] with head_dim = 2·row_bytes one of 64, 128, 256, 512 (two codes a byte, element 2i in the low nibble); group is a power of two of at least 32 that divides head_dim; k_scale and v_scale are f32 [.., groups] with groups = head_dim / group";

fn int4_scales<'a>(a: &OpArgs<'a>) -> Result<super::KvScales<'a>, OpError> {
    Ok(super::KvScales {
        k_scale: a.input("k_scale")?,
        v_scale: a.input("v_scale")?,
        format: super::KvFormat::Int4 {
            group: a.params.u32("group")?,
        },
    })
}

inventory::submit! {
    OpDecl {
        name: "kv_quant_append_int4",
        family: "attention",
        summary: "new K/V rows quantized to packed int4 codes (two a byte) with an f32 scale per group of dims and written into a u8 paged cache at vLLM's slot_mapping",
        inputs: &[
            TensorDecl::float("k", &NEW_ROWS, "the new tokens' key rows"),
            TensorDecl::new("v", &NEW_ROWS, DtypeRule::Like("k"), "their value rows"),
            TensorDecl::new("slot_mapping", &["tokens"], DtypeRule::OneOf(I32), "each token's slot page·page_size + offset, or −1 to skip it"),
            TensorDecl::new("k_cache", &INT4_PAGES, DtypeRule::OneOf(&[DType::U8]), "the key code pages before the append, head_dim / 2 bytes a row (HND: [blocks, n_kv_heads, page_size, row_bytes])"),
            TensorDecl::new("v_cache", &INT4_PAGES, DtypeRule::OneOf(&[DType::U8]), "the value code pages before, like k_cache"),
            TensorDecl::new("k_scale", &INT4_SCALES, DtypeRule::OneOf(&[DType::F32]), "each key row's group scales before (HND: [blocks, n_kv_heads, page_size, groups])"),
            TensorDecl::new("v_scale", &INT4_SCALES, DtypeRule::OneOf(&[DType::F32]), "each value row's group scales before, like k_scale"),
        ],
        outputs: &[
            OutputDecl::like("k_cache", "k_cache_out", &INT4_PAGES, DtypeRule::OneOf(&[DType::U8]), "the key codes after (the Rust op writes k_cache in place)"),
            OutputDecl::like("k_scale", "k_scale_out", &INT4_SCALES, DtypeRule::OneOf(&[DType::F32]), "the key scales after: amax/7 of each written group; 0 for a zero group, NaN in every group of a row holding NaN or inf (its codes 0)"),
            OutputDecl::like("v_cache", "v_cache_out", &INT4_PAGES, DtypeRule::OneOf(&[DType::U8]), "the value codes after"),
            OutputDecl::like("v_scale", "v_scale_out", &INT4_SCALES, DtypeRule::OneOf(&[DType::F32]), "the value scales after"),
        ],
        params: &[INT4_GROUP, KV_LAYOUT],
        invariants: &[
            "k and v share one float dtype and shape; the caches are u8, alike, and hold n_kv_heads heads; none is empty",
            "slot_mapping is i32 [tokens]",
            "every slot is −1 or in 0..blocks·page_size, and no two tokens share a slot (checked on the device; the call is refused, naming the token, before anything is written)",
            INT4_CACHE,
            "the caches hold fewer than 2^31 elements; the outputs alias no input",
        ],
        rejections: &[
            Rejection { invariant: 1, by: Break::Dtype("slot_mapping", DType::U32), reason: "`slot_mapping` must be i32" },
            Rejection { invariant: 0, by: Break::Dtype("k_cache", DType::F32), reason: "`k_cache` must be u8" },
            Rejection { invariant: 3, by: Break::Param("group", "16"), reason: "the int4 group must be a power of two of at least 32" },
            Rejection { invariant: 3, by: Break::Dim("row_bytes", 64), reason: "`k_scale` must have shape" },
            Rejection { invariant: 3, by: Break::InputDim("v_scale", "groups", 1), reason: "`v_scale` must have shape" },
        ],
        variants: &[],
        example: Example {
            dims: &[("tokens", 1), ("n_kv_heads", 2), ("head_dim", 64), ("row_bytes", 32), ("groups", 2), ("blocks", 4), ("page_size", 4)],
            params: &[("group", "32")],
            ranges: &[("slot_mapping", -1.0, 16.0), ("k_cache", 0.0, 255.0), ("v_cache", 0.0, 255.0), ("k_scale", 0.0, 0.05), ("v_scale", 0.0, 0.05)],
            with: &[],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "4: the word the device-side slot check writes",
            make: |ctx, _| Ok(Box::new(super::SlotCheck::new(ctx)?)),
        }),
        accuracy: crate::decl::Accuracy { keyed_by: "exact: the codes and f32 scales the format's definition gives for f32 arithmetic", ..crate::decl::Accuracy::EXACT },
        call: |ctx, a| {
            const OP: &str = "kv_quant_append";
            let names = ["k_cache", "v_cache", "k_scale", "v_scale"];
            let ins = [a.input(names[0])?, a.input(names[1])?, a.input(names[2])?, a.input(names[3])?];
            let outs = [a.output("k_cache_out")?, a.output("v_cache_out")?, a.output("k_scale_out")?, a.output("v_scale_out")?];
            let rows = [("k", a.input("k")?), ("v", a.input("v")?), ("slot_mapping", a.input("slot_mapping")?)];
            let format = super::KvFormat::Int4 { group: a.params.u32("group")? };
            let layout = if a.params.choice("layout")? == "hnd" { super::KvLayout::Hnd } else { super::KvLayout::Nhd };
            let check = a.workspace::<super::SlotCheck>()?;
            // Refuse a bad call before the outputs are touched.
            let probe = super::KvScales { k_scale: ins[2], v_scale: ins[3], format };
            super::kv_quant::check_quant_append(ctx, (rows[0].1, rows[1].1, rows[2].1), (ins[0], ins[1]), &probe, layout, None, check)?;
            for (i, out) in outs.iter().enumerate() {
                crate::validate::dtype_is(OP, names[i], out, ins[i].dtype())?;
                crate::validate::shape_is(OP, names[i], out, ins[i].shape())?;
                crate::validate::distinct(OP, out, &rows)?;
                crate::validate::distinct(OP, out, &[(names[0], ins[0]), (names[1], ins[1]), (names[2], ins[2]), (names[3], ins[3])])?;
                for other in &outs[i + 1..] {
                    crate::validate::distinct(OP, out, &[("another output", other)])?;
                }
            }
            let scales = super::KvScales { k_scale: outs[2], v_scale: outs[3], format };
            for (src, dst) in ins[..2].iter().zip(&outs[..2]) {
                let bytes = src.to_bytes().map_err(crate::error::runtime(OP))?;
                dst.write_bytes(&bytes).map_err(crate::error::runtime(OP))?;
            }
            for (src, dst) in ins[2..].iter().zip(&outs[2..]) {
                crate::elementwise::cast(ctx, src, dst)?;
            }
            super::kv_quant_append(ctx, rows[0].1, rows[1].1, rows[2].1, (outs[0], outs[1]), &scales, layout, None, check)
        },
        #[cfg(feature = "cases")]
        reference: |r| cases::quant_append_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::quant_int4_append_uses,
        #[cfg(feature = "cases")]
        cases: cases::quant_int4_append_cases,
        #[cfg(feature = "cases")]
        benches: cases::no_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "sdpa_decode_paged_quant_int4",
        family: "attention",
        summary: "decode SDPA over an int4 paged KV cache (two codes a byte, an f32 scale per group of dims), dequantized in registers as the codes are read; tables checked on the device",
        inputs: &[
            TensorDecl::float("q", &PAGED_Q, "one query token per sequence"),
            TensorDecl::new("k_cache", &INT4_PAGES, DtypeRule::OneOf(&[DType::U8]), "the key code pages, head_dim / 2 bytes a row (HND: [blocks, n_kv_heads, page_size, row_bytes])"),
            TensorDecl::new("v_cache", &INT4_PAGES, DtypeRule::OneOf(&[DType::U8]), "the value code pages, like k_cache"),
            TensorDecl::new("k_scale", &INT4_SCALES, DtypeRule::OneOf(&[DType::F32]), "each key row's group scales: element e is its nibble's code · scale of group e / group"),
            TensorDecl::new("v_scale", &INT4_SCALES, DtypeRule::OneOf(&[DType::F32]), "each value row's group scales, like k_scale"),
            TensorDecl::new("block_table", &["batch", "max_pages"], DtypeRule::OneOf(I32), "vLLM: each sequence's pages in order (entries past its length are not read)").optional(),
            TensorDecl::new("seq_lens", &["batch"], DtypeRule::OneOf(I32), "vLLM: each sequence's length in tokens, 0..=max_pages·page_size").optional(),
            TensorDecl::new("indptr", &["batch + 1"], DtypeRule::OneOf(I32), "CSR: sequence b's pages are indices[indptr[b] .. indptr[b + 1])").optional(),
            TensorDecl::new("indices", &["n_indices"], DtypeRule::OneOf(I32), "CSR: the page ids of every sequence").optional(),
            TensorDecl::new("last_page_len", &["batch"], DtypeRule::OneOf(I32), "CSR: tokens on each sequence's last page, 1..=page_size (0 without pages)").optional(),
            SINK_LOGITS,
        ],
        outputs: &[out(&PAGED_Q)],
        params: &[INT4_GROUP, KV_LAYOUT, SCALE, WINDOW, N_SINK, SPLITS],
        invariants: &[
            "q and out share one float dtype; the caches are u8 and alike; out aliases no input",
            INT4_CACHE,
            COMMON[2],
            COMMON[3],
            "the element counts of q and k_cache fit u32; max_pages·page_size (CSR: n_indices·page_size) stays below 2^31",
            "the table is block_table and seq_lens, or indptr, indices and last_page_len, all i32 of the shapes above",
            "every length is non-negative and within its sequence's pages; every page id a sequence uses is in 0..blocks; CSR row pointers rise within indices (checked on the device; the call is refused, naming the sequence, before anything is written)",
        ],
        rejections: &[
            Rejection { invariant: 5, by: Break::Dtype("seq_lens", DType::U32), reason: "`seq_lens` must be i32" },
            Rejection { invariant: 1, by: Break::Param("group", "128"), reason: "the int4 group must be a power of two of at least 32 that divides head_dim 64" },
            Rejection { invariant: 1, by: Break::InputDim("k_scale", "groups", 1), reason: "`k_scale` must have shape" },
            Rejection { invariant: 2, by: Break::Dim("n_kv_heads", 3), reason: "must be a multiple of n_kv_heads" },
            Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" },
        ],
        variants: &[],
        example: Example {
            dims: &[("batch", 3), ("n_q_heads", 4), ("n_kv_heads", 2), ("blocks", 12), ("page_size", 4), ("max_pages", 4), ("n_indices", 1), ("head_dim", 64), ("row_bytes", 32), ("groups", 2)],
            params: &[("group", "32"), ("window", "9"), ("n_sink", "2")],
            ranges: &[("block_table", 0.0, 12.0), ("seq_lens", 0.0, 17.0), ("k_cache", 0.0, 255.0), ("v_cache", 0.0, 255.0), ("k_scale", 0.0, 0.02), ("v_scale", 0.0, 0.02)],
            with: &["block_table", "seq_lens", "sink_logits"],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "the decode workspace for batch rows over max_pages·page_size keys, plus 4·(table entries + 2·batch + 5)",
            make: paged_workspace,
        }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::sdpa_decode_paged_quant(ctx, a.input("q")?, &paged_kv(a)?, &int4_scales(a)?, a.output("out")?, &options(a)?, a.workspace::<super::PagedWorkspace>()?),
        #[cfg(feature = "cases")]
        reference: |r| cases::quant_decode_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::quant_int4_decode_uses,
        #[cfg(feature = "cases")]
        cases: cases::quant_int4_decode_cases,
        #[cfg(feature = "cases")]
        benches: cases::no_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "sdpa_multi_query_paged_quant_int4",
        family: "attention",
        summary: "n_query new tokens per sequence (speculative verification) over an int4 paged KV cache with f32 group scales, causal or full, dequantized in registers; tables checked on the device",
        inputs: &[
            TensorDecl::float("q", &PAGED_MQ_Q, "each sequence's block of new queries, its last n_query tokens"),
            TensorDecl::new("k_cache", &INT4_PAGES, DtypeRule::OneOf(&[DType::U8]), "the key code pages, the new tokens' keys appended, head_dim / 2 bytes a row"),
            TensorDecl::new("v_cache", &INT4_PAGES, DtypeRule::OneOf(&[DType::U8]), "the value code pages, like k_cache"),
            TensorDecl::new("k_scale", &INT4_SCALES, DtypeRule::OneOf(&[DType::F32]), "each key row's group scales"),
            TensorDecl::new("v_scale", &INT4_SCALES, DtypeRule::OneOf(&[DType::F32]), "each value row's group scales, like k_scale"),
            TensorDecl::new("block_table", &["batch", "max_pages"], DtypeRule::OneOf(I32), "vLLM: each sequence's pages in order (entries past its length are not read)").optional(),
            TensorDecl::new("seq_lens", &["batch"], DtypeRule::OneOf(I32), "vLLM: each sequence's length in tokens, new ones included: 0 or n_query..=max_pages·page_size").optional(),
            TensorDecl::new("indptr", &["batch + 1"], DtypeRule::OneOf(I32), "CSR: sequence b's pages are indices[indptr[b] .. indptr[b + 1])").optional(),
            TensorDecl::new("indices", &["n_indices"], DtypeRule::OneOf(I32), "CSR: the page ids of every sequence").optional(),
            TensorDecl::new("last_page_len", &["batch"], DtypeRule::OneOf(I32), "CSR: tokens on each sequence's last page, 1..=page_size (0 without pages)").optional(),
            SINK_LOGITS,
        ],
        outputs: &[out(&PAGED_MQ_Q)],
        params: &[
            INT4_GROUP,
            KV_LAYOUT,
            ParamDecl { doc: "query i of a sequence of n tokens sees keys [0, n − n_query + i] (else all n)", ..CAUSAL },
            SCALE,
            WINDOW,
            N_SINK,
            SPLITS,
        ],
        invariants: &[
            "q and out share one float dtype; the caches are u8 and alike; out aliases no input",
            INT4_CACHE,
            COMMON[2],
            COMMON[3],
            "the element counts of q and k_cache fit u32; max_pages·page_size (CSR: n_indices·page_size) stays below 2^31",
            "the table is block_table and seq_lens, or indptr, indices and last_page_len, all i32 of the shapes above",
            "every length is non-negative, within its sequence's pages and (causal) 0 or at least n_query; every page id a sequence uses is in 0..blocks; CSR row pointers rise within indices (checked on the device before anything is written)",
        ],
        rejections: &[
            Rejection { invariant: 1, by: Break::InputDim("v_scale", "groups", 4), reason: "`v_scale` must have shape" },
            Rejection { invariant: 5, by: Break::Dtype("block_table", DType::U32), reason: "`block_table` must be i32" },
            Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" },
        ],
        variants: &[],
        example: Example {
            dims: &[("batch", 2), ("n_query", 3), ("n_q_heads", 4), ("n_kv_heads", 2), ("blocks", 8), ("page_size", 4), ("max_pages", 4), ("n_indices", 1), ("head_dim", 64), ("row_bytes", 32), ("groups", 1)],
            params: &[("group", "64"), ("window", "7"), ("n_sink", "1")],
            ranges: &[("block_table", 0.0, 8.0), ("seq_lens", 3.0, 17.0), ("k_cache", 0.0, 255.0), ("v_cache", 0.0, 255.0), ("k_scale", 0.0, 0.02), ("v_scale", 0.0, 0.02)],
            with: &["block_table", "seq_lens"],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "the decode workspace for batch·n_query rows over max_pages·page_size keys, plus 4·(table entries + 2·batch·n_query + 5)",
            make: paged_workspace,
        }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::sdpa_multi_query_paged_quant(ctx, a.input("q")?, &paged_kv(a)?, &int4_scales(a)?, a.output("out")?, a.params.bool("causal")?, &options(a)?, a.workspace::<super::PagedWorkspace>()?),
        #[cfg(feature = "cases")]
        reference: |r| cases::quant_decode_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::quant_int4_decode_uses,
        #[cfg(feature = "cases")]
        cases: cases::quant_int4_mq_cases,
        #[cfg(feature = "cases")]
        benches: cases::no_benches,
    }
}

/// The offsets of a declared paged prefill: `max_seqlen_q` as given, else the longest
/// sequence's query count.
fn declared_queries<'a>(
    a: &OpArgs,
    cu_seqlens_q: &'a tessera_runtime::Tensor,
) -> Result<super::PagedQueries<'a>, OpError> {
    let total_q = a.input("q")?.shape().first().copied().unwrap_or(0);
    let cu = a.params.opt_usize_list("cu_seqlens_q")?.unwrap_or_default();
    let longest = cu
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .max()
        .unwrap_or(0);
    let max_seqlen_q = match a.params.opt_uint("max_seqlen_q")? {
        Some(m) => usize::try_from(m).unwrap_or(usize::MAX),
        None => longest.clamp(1, total_q.max(1)),
    };
    Ok(super::PagedQueries {
        cu_seqlens_q,
        max_seqlen_q,
    })
}

const PREFILL_QUANT_PARAMS_DOC: &str = "query i of a sequence of lq queries and len tokens sits at position len − lq + i and sees keys j ≤ len − lq + i (else all len)";

inventory::submit! {
    OpDecl {
        name: "sdpa_prefill_paged_quant",
        family: "attention",
        summary: "chunked prefill over an int8 or e4m3 paged KV cache with per-(token, KV head) f32 scales: sdpa_prefill_paged with each block's codes dequantized straight into the attention kernel's tiles; tables checked on the device",
        inputs: &[
            TensorDecl::new("q", &VARLEN_Q, DtypeRule::OneOf(&[DType::F16, DType::BF16]), "every sequence's new tokens, packed token-major; sequence b's are rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1]"),
            TensorDecl::new("k_cache", &PAGES, DtypeRule::OneOf(&[DType::U8]), "the key code pages as kv_quant_append writes them, the new tokens' keys appended after each prefix (HND: [blocks, n_kv_heads, page_size, head_dim])"),
            TensorDecl::new("v_cache", &PAGES, DtypeRule::OneOf(&[DType::U8]), "the value code pages, like k_cache"),
            TensorDecl::new("k_scale", &SCALES, DtypeRule::OneOf(&[DType::F32]), "each key row's scale: the key is code · scale (HND: [blocks, n_kv_heads, page_size])"),
            TensorDecl::new("v_scale", &SCALES, DtypeRule::OneOf(&[DType::F32]), "each value row's scale, like k_scale"),
            TensorDecl::new("block_table", &["batch", "max_blocks"], DtypeRule::OneOf(I32), "vLLM: each sequence's pages in order (entries past its length are not read)").optional(),
            TensorDecl::new("seq_lens", &["batch"], DtypeRule::OneOf(I32), "vLLM: each sequence's length in tokens, its new ones included: its query count ..= max_blocks·page_size").optional(),
            TensorDecl::new("indptr", &["batch + 1"], DtypeRule::OneOf(I32), "CSR: sequence b's pages are indices[indptr[b] .. indptr[b + 1])").optional(),
            TensorDecl::new("indices", &["n_indices"], DtypeRule::OneOf(I32), "CSR: the page ids of every sequence").optional(),
            TensorDecl::new("last_page_len", &["batch"], DtypeRule::OneOf(I32), "CSR: tokens on each sequence's last page, 1..=page_size (0 without pages)").optional(),
        ],
        outputs: &[out(&VARLEN_Q)],
        params: &[
            ParamDecl { name: "cu_seqlens_q", kind: ParamKind::UIntList, default: ParamDefault::Required, doc: "q's sequence boundaries: batch + 1 offsets rising from 0 to total_q (the Rust op takes them as an i32 or u32 device tensor)" },
            ParamDecl { name: "max_seqlen_q", kind: ParamKind::UInt { min: 1, max: u32::MAX as u64 }, default: ParamDefault::Auto("the longest sequence's query count"), doc: "the most queries a sequence holds: sizes the grid" },
            KV_FORMAT,
            KV_LAYOUT,
            ParamDecl { doc: PREFILL_QUANT_PARAMS_DOC, ..CAUSAL },
            SCALE,
        ],
        invariants: &[
            "q is f16 or bf16 and out is like q; the caches are u8 and alike; k_scale and v_scale are f32 of the cache's shape without head_dim; out aliases no input",
            "head_dim is one of 64, 96, 128, 192, 256 and equal in q and k_cache",
            "n_q_heads is a multiple of n_kv_heads (GQA: head h reads KV head h / (n_q_heads / n_kv_heads))",
            "cu_seqlens_q holds batch + 1 ≥ 2 offsets (the Rust op: an i32 or u32 tensor); max_seqlen_q is in 1..=total_q; scale is finite",
            "the element counts of q and k_cache fit u32; max_blocks·page_size (CSR: n_indices·page_size) stays below 2^31",
            "the table is block_table and seq_lens, or indptr, indices and last_page_len, all i32 of the shapes above",
            "cu_seqlens_q rises from 0 to total_q with no sequence over max_seqlen_q queries; every length is non-negative, at least its sequence's query count and within its pages; every page id a sequence uses is in 0..blocks; CSR row pointers rise within indices (checked on the device; the call is refused, naming the sequence or entry, before anything is written)",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("k_scale", DType::F16), reason: "`k_scale` must be f32" },
            Rejection { invariant: 6, by: Break::Param("cu_seqlens_q", "0,6,5"), reason: "`cu_seqlens_q` is bad at sequence 1" },
            Rejection { invariant: 6, by: Break::Param("max_seqlen_q", "3"), reason: "holds more queries than max_seqlen_q = 3" },
            Rejection { invariant: 5, by: Break::Dtype("seq_lens", DType::U32), reason: "`seq_lens` must be i32" },
            Rejection { invariant: 3, by: Break::Param("cu_seqlens_q", "0,7"), reason: "`block_table` must have shape [1, 4]" },
            Rejection { invariant: 1, by: Break::Dim("head_dim", 512), reason: "head_dim 512 is not supported" },
            Rejection { invariant: 2, by: Break::Dim("n_kv_heads", 3), reason: "must be a multiple of n_kv_heads" },
            Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" },
        ],
        variants: &[
            VariantDecl { name: "sdpa_prefill_tiles_kernel", when: "head_dim a multiple of 64 where threadgroup memory holds its tiles (CUDA, CPU) and the call makes a wave, as for a float cache: warpgroup tile products, each next K/V block's codes loaded and their values stored into the other buffers under the block's P·V (quant 1: int8, 2: e4m3)" },
            VariantDecl { name: "sdpa_prefill_mma_kernel", when: "otherwise (every Apple GPU): matrix fragments, each block's codes held in registers until its tile is free, then their values stored into it" },
        ],
        example: Example {
            dims: &[("total_q", 7), ("batch", 2), ("n_q_heads", 4), ("n_kv_heads", 2), ("blocks", 12), ("page_size", 4), ("max_blocks", 4), ("n_indices", 1), ("head_dim", 64)],
            params: &[("cu_seqlens_q", "0,5,7"), ("kv_format", "int8")],
            ranges: &[("block_table", 0.0, 12.0), ("seq_lens", 5.0, 17.0), ("k_cache", 0.0, 255.0), ("v_cache", 0.0, 255.0), ("k_scale", 0.0, 0.02), ("v_scale", 0.0, 0.02)],
            with: &["block_table", "seq_lens"],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "4·(3·table entries + 6·batch + 11): the page table's reduction, the kernels' table and the verdict (the declared form also holds the offsets it uploads from its parameter)",
            make: paged_prefill_workspace,
        }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            let d = a.workspace::<DeclaredPagedPrefill>()?;
            let queries = declared_queries(a, &d.cu_seqlens_q)?;
            let scales = kv_scales(a, "k_scale", "v_scale")?;
            super::sdpa_prefill_paged_quant(ctx, a.input("q")?, &paged_kv(a)?, &scales, &queries, a.output("out")?, a.params.bool("causal")?, a.params.opt_f32("scale")?, &d.ws)
        },
        #[cfg(feature = "cases")]
        reference: |r| cases::quant_prefill_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::quant_prefill_int8_uses,
        #[cfg(feature = "cases")]
        cases: cases::quant_prefill_int8_cases,
        #[cfg(feature = "cases")]
        benches: cases::quant_prefill_int8_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "sdpa_prefill_paged_quant_int4",
        family: "attention",
        summary: "chunked prefill over an int4 paged KV cache (two codes a byte, an f32 scale per group of dims): sdpa_prefill_paged with each block's codes dequantized straight into the attention kernel's tiles; tables checked on the device",
        inputs: &[
            TensorDecl::new("q", &VARLEN_Q, DtypeRule::OneOf(&[DType::F16, DType::BF16]), "every sequence's new tokens, packed token-major; sequence b's are rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1]"),
            TensorDecl::new("k_cache", &INT4_PAGES, DtypeRule::OneOf(&[DType::U8]), "the key code pages as kv_quant_append writes them, head_dim / 2 bytes a row, the new tokens' keys appended after each prefix (HND: [blocks, n_kv_heads, page_size, row_bytes])"),
            TensorDecl::new("v_cache", &INT4_PAGES, DtypeRule::OneOf(&[DType::U8]), "the value code pages, like k_cache"),
            TensorDecl::new("k_scale", &INT4_SCALES, DtypeRule::OneOf(&[DType::F32]), "each key row's group scales: element e is its nibble's code · scale of group e / group"),
            TensorDecl::new("v_scale", &INT4_SCALES, DtypeRule::OneOf(&[DType::F32]), "each value row's group scales, like k_scale"),
            TensorDecl::new("block_table", &["batch", "max_blocks"], DtypeRule::OneOf(I32), "vLLM: each sequence's pages in order (entries past its length are not read)").optional(),
            TensorDecl::new("seq_lens", &["batch"], DtypeRule::OneOf(I32), "vLLM: each sequence's length in tokens, its new ones included: its query count ..= max_blocks·page_size").optional(),
            TensorDecl::new("indptr", &["batch + 1"], DtypeRule::OneOf(I32), "CSR: sequence b's pages are indices[indptr[b] .. indptr[b + 1])").optional(),
            TensorDecl::new("indices", &["n_indices"], DtypeRule::OneOf(I32), "CSR: the page ids of every sequence").optional(),
            TensorDecl::new("last_page_len", &["batch"], DtypeRule::OneOf(I32), "CSR: tokens on each sequence's last page, 1..=page_size (0 without pages)").optional(),
        ],
        outputs: &[out(&VARLEN_Q)],
        params: &[
            ParamDecl { name: "cu_seqlens_q", kind: ParamKind::UIntList, default: ParamDefault::Required, doc: "q's sequence boundaries: batch + 1 offsets rising from 0 to total_q (the Rust op takes them as an i32 or u32 device tensor)" },
            ParamDecl { name: "max_seqlen_q", kind: ParamKind::UInt { min: 1, max: u32::MAX as u64 }, default: ParamDefault::Auto("the longest sequence's query count"), doc: "the most queries a sequence holds: sizes the grid" },
            INT4_GROUP,
            KV_LAYOUT,
            ParamDecl { doc: PREFILL_QUANT_PARAMS_DOC, ..CAUSAL },
            SCALE,
        ],
        invariants: &[
            "q is f16 or bf16 and out is like q; the caches are u8 and alike; out aliases no input",
            "the caches are u8 [.., row_bytes] with head_dim = 2·row_bytes one of 64, 128, 256 and equal to q's (two codes a byte, element 2i in the low nibble); group is a power of two of at least 32 that divides head_dim; k_scale and v_scale are f32 [.., groups] with groups = head_dim / group",
            "n_q_heads is a multiple of n_kv_heads (GQA: head h reads KV head h / (n_q_heads / n_kv_heads))",
            "cu_seqlens_q holds batch + 1 ≥ 2 offsets (the Rust op: an i32 or u32 tensor); max_seqlen_q is in 1..=total_q; scale is finite",
            "the element counts of q and k_cache fit u32; max_blocks·page_size (CSR: n_indices·page_size) stays below 2^31",
            "the table is block_table and seq_lens, or indptr, indices and last_page_len, all i32 of the shapes above",
            "cu_seqlens_q rises from 0 to total_q with no sequence over max_seqlen_q queries; every length is non-negative, at least its sequence's query count and within its pages; every page id a sequence uses is in 0..blocks; CSR row pointers rise within indices (checked on the device; the call is refused, naming the sequence or entry, before anything is written)",
        ],
        rejections: &[
            Rejection { invariant: 1, by: Break::Param("group", "128"), reason: "the int4 group must be a power of two of at least 32 that divides head_dim 64" },
            Rejection { invariant: 1, by: Break::InputDim("k_scale", "groups", 1), reason: "`k_scale` must have shape" },
            Rejection { invariant: 6, by: Break::Param("cu_seqlens_q", "0,6,5"), reason: "`cu_seqlens_q` is bad at sequence 1" },
            Rejection { invariant: 5, by: Break::Dtype("block_table", DType::U32), reason: "`block_table` must be i32" },
            Rejection { invariant: 2, by: Break::Dim("n_kv_heads", 3), reason: "must be a multiple of n_kv_heads" },
            Rejection { invariant: 0, by: Break::Alias("out", "q"), reason: "aliases `q`" },
        ],
        variants: &[
            VariantDecl { name: "sdpa_prefill_tiles_kernel", when: "where threadgroup memory holds its tiles (CUDA, CPU) and the call makes a wave, as for a float cache: warpgroup tile products, each next K/V block's packed codes and group scales loaded and their values stored into the other buffers under the block's P·V (quant 3)" },
            VariantDecl { name: "sdpa_prefill_mma_kernel", when: "otherwise (every Apple GPU): matrix fragments, each block's codes held in registers until its tile is free, then their values stored into it" },
        ],
        example: Example {
            dims: &[("total_q", 7), ("batch", 2), ("n_q_heads", 4), ("n_kv_heads", 2), ("blocks", 12), ("page_size", 4), ("max_blocks", 4), ("n_indices", 1), ("head_dim", 64), ("row_bytes", 32), ("groups", 2)],
            params: &[("cu_seqlens_q", "0,5,7"), ("group", "32")],
            ranges: &[("block_table", 0.0, 12.0), ("seq_lens", 5.0, 17.0), ("k_cache", 0.0, 255.0), ("v_cache", 0.0, 255.0), ("k_scale", 0.0, 0.05), ("v_scale", 0.0, 0.05)],
            with: &["block_table", "seq_lens"],
        },
        workspace: Some(WorkspaceDecl {
            bytes: "4·(3·table entries + 6·batch + 11): the page table's reduction, the kernels' table and the verdict (the declared form also holds the offsets it uploads from its parameter)",
            make: paged_prefill_workspace,
        }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            let d = a.workspace::<DeclaredPagedPrefill>()?;
            let queries = declared_queries(a, &d.cu_seqlens_q)?;
            super::sdpa_prefill_paged_quant(ctx, a.input("q")?, &paged_kv(a)?, &int4_scales(a)?, &queries, a.output("out")?, a.params.bool("causal")?, a.params.opt_f32("scale")?, &d.ws)
        },
        #[cfg(feature = "cases")]
        reference: |r| cases::quant_prefill_reference(r),
        #[cfg(feature = "cases")]
        kernels: cases::quant_prefill_int4_uses,
        #[cfg(feature = "cases")]
        cases: cases::quant_prefill_int4_cases,
        #[cfg(feature = "cases")]
        benches: cases::quant_prefill_int4_benches,
    }
}
