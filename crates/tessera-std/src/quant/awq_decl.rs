//! The declarations of the AWQ int4 ops: dequantize, the quantized GEMV and GEMM.

use super::awq::{awq_dequantize, awq_qgemv};
use super::int4_qgemm::awq_qgemm;
use super::qgemm_decl::{HALVES, QGEMM_ACCURACY, QGEMM_VARIANT};
#[cfg(feature = "cases")]
use super::{awq_cases as cases, awq_reference as reference, qgemm_formats_cases as qgemm_cases};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Accuracy, Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault,
    ParamKind, Rejection, ShapeFrom, TensorDecl, VariantDecl,
};
use crate::error::OpError;
use tessera_runtime::DType;

const GROUP_SIZE: ParamDecl = ParamDecl {
    name: "group_size",
    kind: ParamKind::UInt { min: 0, max: 128 },
    default: ParamDefault::Value("128"),
    doc: "inputs per scale and zero: 32, 64 or 128, or 0 for one group over all of K (a checkpoint's group_size -1)",
};
const I32: &[DType] = &[DType::I32];
const QWEIGHT: TensorDecl = TensorDecl::new(
    "qweight",
    &["K", "NW"],
    DtypeRule::OneOf(I32),
    "the 4-bit codes packed along N, NW = N/8 words a row, column 8c + j at nibble [0, 4, 1, 5, 2, 6, 3, 7][j] of word c (AutoAWQ's order)",
);
const QZEROS: TensorDecl = TensorDecl::new(
    "qzeros",
    &["KG", "NW"],
    DtypeRule::OneOf(I32),
    "the zero points packed as qweight is, NW = N/8 words a group row",
);
/// K = 128 in groups of 64, N = 16.
const EXAMPLE_DIMS: &[(&str, usize)] = &[("M", 3), ("N", 16), ("NW", 2), ("K", 128), ("KG", 2)];
const EXAMPLE_PARAMS: &[(&str, &str)] = &[("group_size", "64")];
/// Any word is a valid run of codes.
const ANY_WORDS: &[(&str, f64, f64)] = &[
    ("qweight", -2147483648.0, 2147483647.0),
    ("qzeros", -2147483648.0, 2147483647.0),
];
const INVARIANTS: [&str; 2] = [
    "group_size is 32, 64, 128 or 0; K is a multiple of 8 and of the group size",
    "qweight is i32 [K, N/8]; qzeros is i32 [K/G, N/8]; scales is [K/G, N]",
];

fn group(a: &OpArgs) -> Result<u32, OpError> {
    a.params.u32("group_size")
}

#[cfg(feature = "cases")]
fn ref_shape(r: &RefArgs) -> Result<(usize, usize, usize), OpError> {
    let (k, n) = (r.dim("K")?, r.dim("NW")? * 8);
    let g = match r.params.usize("group_size")? {
        0 => k,
        g => g,
    };
    Ok((k, n, g))
}

// ── awq_dequantize ──────────────────────────────────────────────────────────────────

fn dequantized_dims(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    match *a.input("qweight")?.shape() {
        [k, nw] => Ok(vec![k, nw * 8]),
        ref s => Err(OpError::invalid(
            a.op.name,
            format!("`qweight` must be a matrix [K, N/8], got shape {s:?}"),
        )),
    }
}

#[cfg(feature = "cases")]
fn dequantize_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (k, n, g) = ref_shape(r)?;
    let scales = r.input("scales")?;
    Ok(vec![reference::dequantize(
        r.data("qweight")?,
        r.data("qzeros")?,
        &scales.data,
        (k, n),
        g,
        scales.dtype,
    )])
}

inventory::submit! {
    OpDecl {
        name: "awq_dequantize",
        family: "quant",
        summary: "AWQ int4 dequantization (AutoAWQ's GEMM checkpoints, as vLLM loads them): w[K, N] = (q − z)·scale from qweight, qzeros (packed along N in AWQ's interleaved nibble order) and scales as the checkpoint holds them",
        inputs: &[QWEIGHT, QZEROS, TensorDecl::float("scales", &["KG", "N"], "one scale per group of G inputs and output")],
        outputs: &[OutputDecl { name: "out", shape: &["K", "N"], dtype: DtypeRule::Like("scales"), shape_from: ShapeFrom::Derived(dequantized_dims), doc: "the weights [K, N] (the linear layer's transpose, as stored), in the scales' dtype" }],
        params: &[GROUP_SIZE],
        invariants: &[INVARIANTS[0], INVARIANTS[1], "out is [K, N] in the scales' dtype and aliases no input"],
        rejections: &[
            Rejection { invariant: 0, by: Break::Param("group_size", "48"), reason: "group_size must be 32, 64, 128 or 0" },
            Rejection { invariant: 1, by: Break::Dtype("qweight", DType::U32), reason: "`qweight` must be i32" },
            Rejection { invariant: 1, by: Break::InputDim("qzeros", "NW", 3), reason: "`qzeros` must have shape [2, 2]" },
            Rejection { invariant: 1, by: Break::InputDim("scales", "N", 12), reason: "`scales` must have shape [2, 16]" },
            Rejection { invariant: 2, by: Break::Alias("out", "scales"), reason: "`out` aliases `scales`" },
        ],
        variants: &[VariantDecl { name: "awq_dequantize_kernel", when: "a thread per word (eight weights of a column)" }],
        example: Example { dims: EXAMPLE_DIMS, params: EXAMPLE_PARAMS, ranges: ANY_WORDS, with: &[] },
        workspace: None,
        accuracy: Accuracy { keyed_by: "exact: scale·(q − zero) rounded once to the scales' dtype", ..Accuracy::EXACT },
        call: |ctx, a| awq_dequantize(ctx, a.input("qweight")?, a.input("qzeros")?, a.input("scales")?, a.output("out")?, group(a)?),
        #[cfg(feature = "cases")]
        reference: dequantize_reference,
        #[cfg(feature = "cases")]
        kernels: cases::dequantize_kernels,
        #[cfg(feature = "cases")]
        cases: cases::dequantize_cases,
        #[cfg(feature = "cases")]
        benches: cases::dequantize_benches,
    }
}

// ── awq_qgemv ───────────────────────────────────────────────────────────────────────

#[cfg(feature = "cases")]
fn qgemv_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (k, n, g) = ref_shape(r)?;
    let m = r.dim("M")?;
    Ok(vec![reference::qgemv(
        r.data("x")?,
        r.data("qweight")?,
        r.data("qzeros")?,
        r.data("scales")?,
        (m, n, k),
        g,
    )])
}

inventory::submit! {
    OpDecl {
        name: "awq_qgemv",
        family: "quant",
        summary: "quantized GEMV / skinny GEMM on AWQ int4 weights (AutoAWQ's GEMM checkpoints): y[M, N] = x[M, K]·w[K, N], M = 1–16, f32 accumulation, never dequantized to memory",
        inputs: &[
            TensorDecl::float("x", &["M", "K"], "the activations, 1 ≤ M ≤ 16 rows"),
            QWEIGHT,
            QZEROS,
            TensorDecl::new("scales", &["KG", "N"], DtypeRule::Like("x"), "one scale per group and output, in x's dtype"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["M", "N"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "x·w, accumulated in f32" }],
        params: &[GROUP_SIZE],
        invariants: &[
            INVARIANTS[0],
            INVARIANTS[1],
            "x is a float [M, K] with 1 ≤ M ≤ 16; scales and y are in x's dtype; y is [M, N] and aliases no input",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Param("group_size", "48"), reason: "group_size must be 32, 64, 128 or 0" },
            Rejection { invariant: 0, by: Break::InputDim("qweight", "K", 96), reason: "must be a positive multiple of 8 and of the group size 64" },
            Rejection { invariant: 1, by: Break::Dtype("qzeros", DType::U32), reason: "`qzeros` must be i32" },
            Rejection { invariant: 1, by: Break::InputDim("scales", "KG", 3), reason: "`scales` must have shape [2, 16]" },
            Rejection { invariant: 2, by: Break::Dim("M", 17), reason: "at most 16 rows" },
            Rejection { invariant: 2, by: Break::Dtype("scales", DType::F16), reason: "`scales` must be f32" },
            Rejection { invariant: 2, by: Break::Alias("y", "x"), reason: "`y` aliases `x`" },
        ],
        variants: &[VariantDecl { name: "awq_qgemv_kernel", when: "32 columns a threadgroup of 256 threads (16 where 32 would not make two threadgroups a compute unit): a word (8 columns) a lane, K in 64 or 128 contiguous chunks, four rows of words in flight a thread, the chunks summed by shuffles and in threadgroup memory; M rounded up to a row tile of 1, 2, 4, 8 or 16" }],
        example: Example { dims: EXAMPLE_DIMS, params: EXAMPLE_PARAMS, ranges: ANY_WORDS, with: &[] },
        workspace: None,
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| awq_qgemv(ctx, a.input("x")?, a.input("qweight")?, a.input("qzeros")?, a.input("scales")?, a.output("y")?, group(a)?),
        #[cfg(feature = "cases")]
        reference: qgemv_reference,
        #[cfg(feature = "cases")]
        kernels: cases::qgemv_kernels,
        #[cfg(feature = "cases")]
        cases: cases::qgemv_cases,
        #[cfg(feature = "cases")]
        benches: cases::qgemv_benches,
    }
}

// ── awq_qgemm ────────────────────────────────────────────────────────────────────────

#[cfg(feature = "cases")]
fn qgemm_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (k, n, g) = ref_shape(r)?;
    let x = r.input("x")?;
    let w = reference::dequantize(
        r.data("qweight")?,
        r.data("qzeros")?,
        r.data("scales")?,
        (k, n),
        g,
        x.dtype,
    );
    Ok(vec![crate::matmul::reference::matmul(
        &x.data,
        &w,
        (r.dim("M")?, n, k),
        false,
    )])
}

inventory::submit! {
    OpDecl {
        name: "awq_qgemm",
        family: "quant",
        summary: "quantized GEMM for prefill on AWQ int4 weights (AutoAWQ's GEMM checkpoints): y[M, N] = x[M, K]·w[K, N], each weight (q − z)·scale rounded to x's dtype on its way into the tensor cores' tiles, never to memory",
        inputs: &[
            TensorDecl::new("x", &["M", "K"], DtypeRule::OneOf(HALVES), "the activations, any M ≥ 1 (awq_qgemv is faster for M ≤ 16)"),
            QWEIGHT,
            QZEROS,
            TensorDecl::new("scales", &["KG", "N"], DtypeRule::Like("x"), "one scale per group and output, in x's dtype"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["M", "N"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "x·w with each weight rounded once to x's dtype, accumulated in f32" }],
        params: &[GROUP_SIZE],
        invariants: &[
            INVARIANTS[0],
            INVARIANTS[1],
            "x is a non-empty f16 or bf16 [M, K]; scales and y are in x's dtype; y is [M, N] and aliases no input",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Param("group_size", "48"), reason: "group_size must be 32, 64, 128 or 0" },
            Rejection { invariant: 0, by: Break::InputDim("qweight", "K", 96), reason: "must be a positive multiple of 8 and of the group size 64" },
            Rejection { invariant: 1, by: Break::Dtype("qzeros", DType::U32), reason: "`qzeros` must be i32" },
            Rejection { invariant: 1, by: Break::InputDim("scales", "KG", 3), reason: "`scales` must have shape [2, 16]" },
            Rejection { invariant: 2, by: Break::Dtype("x", DType::F32), reason: "`x` must be one of f16, bf16" },
            Rejection { invariant: 2, by: Break::Dtype("scales", DType::BF16), reason: "`scales` must be f16" },
            Rejection { invariant: 2, by: Break::Alias("y", "x"), reason: "`y` aliases `x`" },
        ],
        variants: &[VariantDecl { name: "quant_gemm_kernel", when: QGEMM_VARIANT }],
        example: Example { dims: EXAMPLE_DIMS, params: EXAMPLE_PARAMS, ranges: ANY_WORDS, with: &[] },
        workspace: None,
        accuracy: Accuracy { keyed_by: QGEMM_ACCURACY, ..Accuracy::STANDARD },
        call: |ctx, a| awq_qgemm(ctx, a.input("x")?, a.input("qweight")?, a.input("qzeros")?, a.input("scales")?, a.output("y")?, group(a)?),
        #[cfg(feature = "cases")]
        reference: qgemm_reference,
        #[cfg(feature = "cases")]
        kernels: qgemm_cases::awq_kernels,
        #[cfg(feature = "cases")]
        cases: qgemm_cases::awq_cases,
        #[cfg(feature = "cases")]
        benches: qgemm_cases::awq_benches,
    }
}
