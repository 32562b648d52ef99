//! The declarations of the sampling ops.

use super::{argmax, penalties, sample_split, Penalties, SamplingParams, SamplingWorkspace};
#[cfg(feature = "cases")]
use super::{cases, reference};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Accuracy, Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, Rejection, ShapeFrom,
    TensorDecl, Workspace, WorkspaceDecl, F32, U32,
};
use crate::error::OpError;
use tessera_runtime::{Context, DType};

const I32: &[DType] = &[DType::I32];

const SPLIT_BYTES: &str = "1056·batch·slices (slices > 1 only for fewer rows than the GPU has cores, vocab ≥ 8192: about 2·cores/batch, each slice ≥ 1024 logits, at most 128)";

fn split_workspace(ctx: &Context, a: &OpArgs) -> Result<Workspace, OpError> {
    let &[batch, vocab] = a.input("logits")?.shape() else {
        // A wrong rank is refused by the call itself; no split for it.
        return Ok(Box::new(SamplingWorkspace::with_slices(ctx, 1, 1)?));
    };
    Ok(Box::new(SamplingWorkspace::new(ctx, batch, vocab)?))
}

const LOGITS: TensorDecl = TensorDecl::float(
    "logits",
    &["batch", "vocab"],
    "one row of logits per sequence",
);

const TOKEN: OutputDecl = OutputDecl {
    name: "token",
    shape: &["batch"],
    dtype: DtypeRule::OneOf(I32),
    shape_from: ShapeFrom::Dims,
    doc: "one token id per row; −1 for a row with no distribution",
};

inventory::submit! {
    OpDecl {
        name: "argmax",
        family: "sampling",
        summary: "greedy decoding: the lowest index of each row's maximum logit; −1 for a row holding a NaN",
        accuracy: Accuracy::EXACT,
        inputs: &[LOGITS],
        outputs: &[OutputDecl { doc: "the lowest index of the row's maximum (+∞ counts; an all −∞ row gives 0); −1 where the row holds a NaN", ..TOKEN }],
        params: &[],
        invariants: &[
            "logits is a float [batch, vocab], not empty, vocab ≤ 262144; token is i32 [batch]",
            "token does not alias logits",
            "the workspace was made for at least these rows",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("logits", DType::U32), reason: "`logits` must be one of" },
            Rejection { invariant: 0, by: Break::Dim("vocab", 262_145), reason: "above the largest supported" },
        ],
        variants: &[],
        example: Example { dims: &[("batch", 3), ("vocab", 257)], params: &[], ranges: &[], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: SPLIT_BYTES, make: split_workspace }),
        call: |ctx, a| argmax::argmax_split(ctx, a.input("logits")?, a.workspace::<SamplingWorkspace>()?, a.output("token")?),
        #[cfg(feature = "cases")]
        reference: |r| Ok(vec![reference::argmax(r.data("logits")?, r.dim("vocab")?)]),
        #[cfg(feature = "cases")]
        kernels: cases::argmax_kernels,
        #[cfg(feature = "cases")]
        cases: cases::argmax_cases,
        #[cfg(feature = "cases")]
        benches: cases::argmax_benches,
    }
}

fn sample_call(ctx: &Context, a: &OpArgs) -> Result<(), OpError> {
    let params = SamplingParams {
        temperature: a.input("temperature")?,
        top_k: a.input("top_k")?,
        top_p: a.input("top_p")?,
        min_p: a.input("min_p")?,
        seed: a.input("seed")?,
        offset: a.input("offset")?,
    };
    sample_split::sample_split(
        ctx,
        a.input("logits")?,
        &params,
        a.workspace::<SamplingWorkspace>()?,
        a.output("token")?,
    )
}

#[cfg(feature = "cases")]
fn sample_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    Ok(vec![reference::sample(
        r.data("logits")?,
        r.dim("vocab")?,
        r.data("temperature")?,
        r.data("top_k")?,
        r.data("top_p")?,
        r.data("min_p")?,
        r.data("seed")?,
        r.data("offset")?,
    )])
}

inventory::submit! {
    OpDecl {
        name: "sample",
        family: "sampling",
        summary: "temperature → top-k → top-p → min-p per row, then a Philox4x32-10 draw seeded per row; no sort; one threadgroup per row, or for few long rows slices and a combine (the same token); the same seed gives the same token on every backend",
        accuracy: Accuracy::EXACT,
        inputs: &[
            LOGITS,
            TensorDecl::new("temperature", &["batch"], DtypeRule::OneOf(F32), "≥ 0 and finite; 0 is greedy (the argmax)"),
            TensorDecl::new("top_k", &["batch"], DtypeRule::OneOf(I32), "≥ 0: keep the logits at least the k-th largest (ties kept); 0 or ≥ vocab disables"),
            TensorDecl::new("top_p", &["batch"], DtypeRule::OneOf(F32), "in (0, 1]: keep a token while the mass strictly more likely than it is below top_p of the top-k survivors' (boundary included, ties kept); 1 disables"),
            TensorDecl::new("min_p", &["batch"], DtypeRule::OneOf(F32), "in [0, 1]: keep a token at least min_p times as likely as the most likely, applied last; 0 disables"),
            TensorDecl::new("seed", &["batch", "2"], DtypeRule::OneOf(U32), "each row's Philox4x32-10 key"),
            TensorDecl::new("offset", &["batch"], DtypeRule::OneOf(U32), "each row's Philox counter word 0 (the request's step): the draw is the top 24 bits of the first output word of counter (offset, 0, 0, 0), times 2⁻²⁴"),
        ],
        outputs: &[OutputDecl { doc: "the first survivor in index order whose inclusive prefix of weight exceeds u·total; −1 for a row holding a NaN or +∞, or no finite logit (and, in a graph replay, a row with parameters out of range)", ..TOKEN }],
        params: &[],
        invariants: &[
            "logits is a float [batch, vocab], not empty, vocab ≤ 262144; temperature, top_p, min_p f32 [batch]; top_k i32 [batch]; seed u32 [batch, 2]; offset u32 [batch]; token i32 [batch]",
            "token aliases no input",
            "every row's temperature is finite and ≥ 0, top_k ≥ 0, top_p in (0, 1], min_p in [0, 1] (an eager call reads them back and refuses the first bad row before anything runs)",
            "the workspace was made for at least these rows",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("logits", DType::I32), reason: "`logits` must be one of" },
            Rejection { invariant: 0, by: Break::Dtype("top_k", DType::U32), reason: "`top_k` must be i32" },
            Rejection { invariant: 0, by: Break::InputDim("temperature", "batch", 4), reason: "`temperature` must have shape" },
            Rejection { invariant: 0, by: Break::Dim("vocab", 262_145), reason: "above the largest supported" },
            Rejection { invariant: 1, by: Break::Alias("token", "top_k"), reason: "aliases `top_k`" },
        ],
        variants: &[],
        example: Example {
            dims: &[("batch", 3), ("vocab", 257)],
            params: &[],
            ranges: &[("logits", -4.0, 4.0), ("temperature", 0.5, 1.5), ("top_k", 0.0, 40.0), ("top_p", 0.5, 1.0), ("min_p", 0.0, 0.1)],
            with: &[],
        },
        workspace: Some(WorkspaceDecl { bytes: SPLIT_BYTES, make: split_workspace }),
        call: sample_call,
        #[cfg(feature = "cases")]
        reference: sample_reference,
        #[cfg(feature = "cases")]
        kernels: cases::sample_kernels,
        #[cfg(feature = "cases")]
        cases: cases::sample_cases,
        #[cfg(feature = "cases")]
        benches: cases::sample_benches,
    }
}

fn penalties_call(ctx: &Context, a: &OpArgs) -> Result<(), OpError> {
    let pen = Penalties {
        output_counts: a.input("output_counts")?,
        prompt_mask: a.input("prompt_mask")?,
        repetition: a.input("repetition")?,
        frequency: a.input("frequency")?,
        presence: a.input("presence")?,
    };
    penalties::apply_penalties(ctx, a.input("logits")?, &pen, a.output("out")?)
}

#[cfg(feature = "cases")]
fn penalties_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    Ok(vec![reference::penalties(
        r.data("logits")?,
        r.dim("vocab")?,
        r.data("output_counts")?,
        r.data("prompt_mask")?,
        r.data("repetition")?,
        r.data("frequency")?,
        r.data("presence")?,
    )])
}

inventory::submit! {
    OpDecl {
        name: "apply_penalties",
        family: "sampling",
        summary: "repetition (HF/vLLM: divide a positive logit, multiply a negative one, where the token is in the prompt or output), then frequency and presence penalties from per-row output counts; out-of-place",
        accuracy: Accuracy::STANDARD,
        inputs: &[
            LOGITS,
            TensorDecl::new("output_counts", &["batch", "vocab"], DtypeRule::OneOf(I32), "how often each token was generated so far (vLLM's output_bin_counts)"),
            TensorDecl::new("prompt_mask", &["batch", "vocab"], DtypeRule::OneOf(I32), "nonzero where the token is in the prompt"),
            TensorDecl::new("repetition", &["batch"], DtypeRule::OneOf(F32), "> 0 and finite; 1 disables"),
            TensorDecl::new("frequency", &["batch"], DtypeRule::OneOf(F32), "finite; subtracted once per generated occurrence; 0 disables"),
            TensorDecl::new("presence", &["batch"], DtypeRule::OneOf(F32), "finite; subtracted once from every generated token; 0 disables"),
        ],
        outputs: &[OutputDecl { name: "out", shape: &["batch", "vocab"], dtype: DtypeRule::Like("logits"), shape_from: ShapeFrom::Like("logits"), doc: "the penalised logits" }],
        params: &[],
        invariants: &[
            "logits is a float [batch, vocab], not empty, vocab ≤ 262144; output_counts and prompt_mask i32 [batch, vocab]; repetition, frequency, presence f32 [batch]; out like logits",
            "out aliases no input",
            "every row's repetition is finite and > 0, frequency and presence finite (an eager call reads them back and refuses the first bad row before anything runs)",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("logits", DType::I32), reason: "`logits` must be one of" },
            Rejection { invariant: 0, by: Break::Dtype("output_counts", DType::U32), reason: "`output_counts` must be i32" },
            Rejection { invariant: 0, by: Break::InputDim("output_counts", "vocab", 300), reason: "`output_counts` must have shape" },
            Rejection { invariant: 0, by: Break::InputDim("repetition", "batch", 5), reason: "`repetition` must have shape" },
            Rejection { invariant: 1, by: Break::Alias("out", "logits"), reason: "aliases `logits`" },
        ],
        variants: &[],
        example: Example {
            dims: &[("batch", 3), ("vocab", 257)],
            params: &[],
            ranges: &[("output_counts", 0.0, 3.0), ("prompt_mask", 0.0, 2.0), ("repetition", 0.5, 2.0), ("frequency", 0.0, 0.5), ("presence", 0.0, 0.5)],
            with: &[],
        },
        workspace: None,
        call: penalties_call,
        #[cfg(feature = "cases")]
        reference: penalties_reference,
        #[cfg(feature = "cases")]
        kernels: cases::penalties_kernels,
        #[cfg(feature = "cases")]
        cases: cases::penalties_cases,
        #[cfg(feature = "cases")]
        benches: cases::penalties_benches,
    }
}
