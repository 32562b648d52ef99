//! The declarations of the GGUF ops.

use super::format::{GgufFormat, FORMAT_NAMES};
use super::ops::{
    gguf_dequantize, gguf_qgemm, gguf_qgemv, gguf_quantize, DEQUANTIZE, QGEMM, QGEMV, QUANTIZE,
};
#[cfg(feature = "cases")]
use super::{cases, reference};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault, ParamKind,
    Rejection, ShapeFrom, TensorDecl,
};
use crate::error::OpError;
use tessera_runtime::{Context, DType};

const FORMAT: ParamDecl = ParamDecl {
    name: "format",
    kind: ParamKind::Choice(&FORMAT_NAMES),
    default: ParamDefault::Required,
    doc:
        "the llama.cpp block format of `w`: q4_0, q8_0 (32 weights a block), q4_k, q5_k, q6_k (256)",
};

const BLOCKS: TensorDecl = TensorDecl::new(
    "w",
    &["n", "row_bytes"],
    DtypeRule::OneOf(&[DType::U8]),
    "n rows of K weights as GGUF stores them: K / block_elems blocks of block_bytes each (18, 34, 144, 176, 210 bytes)",
);

fn format_of(a: &OpArgs) -> Result<GgufFormat, OpError> {
    GgufFormat::parse(a.op.name, a.params.choice("format")?)
}

#[cfg(feature = "cases")]
fn ref_format(r: &RefArgs) -> Result<GgufFormat, OpError> {
    GgufFormat::parse(r.op.name, r.params.choice("format")?)
}

#[cfg(feature = "cases")]
fn ref_blocks(r: &RefArgs) -> Result<Vec<u8>, OpError> {
    Ok(r.data("w")?.iter().map(|&b| b as u8).collect())
}

// ── dequantize ───────────────────────────────────────────────────────────────────────

fn out_dtype(a: &OpArgs) -> Result<DType, OpError> {
    Ok(match a.params.choice("dtype")? {
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        _ => DType::F32,
    })
}

/// `[n, K]` with K the weights of `w`'s whole blocks per row.
fn dequantized_shape(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    let format = format_of(a)?;
    match *a.input("w")?.shape() {
        [n, row_bytes] if row_bytes >= format.block_bytes() => Ok(vec![
            n,
            row_bytes / format.block_bytes() * format.block_elems(),
        ]),
        ref s => Err(OpError::invalid(
            DEQUANTIZE,
            format!(
                "`w` must be [n, row_bytes] with at least one {}-byte {} block a row, got {s:?}",
                format.block_bytes(),
                format.name()
            ),
        )),
    }
}

fn dequantize_call(ctx: &Context, a: &OpArgs) -> Result<(), OpError> {
    let out = a.output("out")?;
    let want = out_dtype(a)?;
    if out.dtype() != want {
        return Err(OpError::invalid(
            DEQUANTIZE,
            format!("`out` must be {want} (dtype={want}), got {}", out.dtype()),
        ));
    }
    gguf_dequantize(ctx, a.input("w")?, format_of(a)?, out)
}

#[cfg(feature = "cases")]
fn dequantize_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let format = ref_format(r)?;
    let shape = r.shape("w")?;
    let (n, k) = (
        shape[0],
        shape[1] / format.block_bytes() * format.block_elems(),
    );
    let dtype = r.params.choice("dtype")?;
    // llama.cpp's f32 values, rounded once to the output's dtype.
    Ok(vec![reference::dequantize(format, &ref_blocks(r)?, n, k)
        .into_iter()
        .map(|v| match dtype {
            "f16" => half::f16::from_f32(v).to_f64(),
            "bf16" => half::bf16::from_f32(v).to_f64(),
            _ => f64::from(v),
        })
        .collect()])
}

inventory::submit! {
    OpDecl {
        name: DEQUANTIZE,
        family: "gguf",
        summary: "out[n, K] = the weights of GGUF blocks (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K), bit-exact with llama.cpp's dequantize_row_* in f32, rounded once to f16/bf16",
        accuracy: crate::decl::Accuracy::EXACT,
        inputs: &[BLOCKS],
        outputs: &[OutputDecl { name: "out", shape: &["n", "K"], dtype: DtypeRule::Derived(out_dtype, "the dtype `dtype` names"), shape_from: ShapeFrom::Derived(dequantized_shape), doc: "the weights, K = row_bytes / block_bytes · block_elems" }],
        params: &[FORMAT, ParamDecl { name: "dtype", kind: ParamKind::Choice(&["f32", "f16", "bf16"]), default: ParamDefault::Value("f32"), doc: "the output dtype" }],
        invariants: &[
            "w is u8 [n, row_bytes], each row whole blocks of `format` (K = row_bytes / block_bytes · block_elems, a multiple of 32 or 256)",
            "out is [n, K] in the dtype `dtype` names and does not alias w",
            "n·K and w's byte length are below 2^32",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("w", DType::I8), reason: "`w` must be u8" },
            Rejection { invariant: 0, by: Break::InputDim("w", "row_bytes", 145), reason: "`w` must be [3, 144]" },
            Rejection { invariant: 1, by: Break::Param("dtype", "f64"), reason: "one of f32, f16, bf16" },
        ],
        variants: &[],
        example: Example { dims: &[("n", 3), ("K", 256), ("row_bytes", 144)], params: &[("format", "q4_k"), ("dtype", "f32")], ranges: &[("w", 0.0, 16.0)], with: &[] },
        workspace: None,
        call: dequantize_call,
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

// ── GEMV ─────────────────────────────────────────────────────────────────────────────

#[cfg(feature = "cases")]
fn qgemv_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let format = ref_format(r)?;
    let (m, k) = (r.shape("x")?[0], r.shape("x")?[1]);
    let n = r.shape("w")?[0];
    let w = reference::dequantize(format, &ref_blocks(r)?, n, k);
    Ok(vec![reference::qgemv(r.data("x")?, &w, m, n, k)])
}

inventory::submit! {
    OpDecl {
        name: QGEMV,
        family: "gguf",
        summary: "y[m, n] = x[m, K] · dequant(w)ᵀ for m = 1–16 on GGUF blocks read directly, f32 accumulation",
        accuracy: crate::decl::Accuracy::STANDARD,
        inputs: &[
            TensorDecl::float("x", &["m", "K"], "the activations, 1 to 16 rows"),
            BLOCKS,
        ],
        outputs: &[OutputDecl { name: "y", shape: &["m", "n"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "x · Wᵀ" }],
        params: &[FORMAT],
        invariants: &[
            "x is a float [m, K] with 1 ≤ m ≤ 16; y is [m, n] in x's dtype and aliases neither input",
            "w is u8 [n, row_bytes] with row_bytes = K / block_elems · block_bytes of `format`; K is a multiple of the block (32 or 256)",
            "m·K, m·n and w's byte length are below 2^32",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dim("m", 17), reason: "the GEMV takes 1 to 16" },
            Rejection { invariant: 0, by: Break::Dtype("x", DType::U32), reason: "`x` must be one of" },
            Rejection { invariant: 1, by: Break::InputDim("w", "row_bytes", 143), reason: "`w` must be [5, 144]" },
            Rejection { invariant: 1, by: Break::Dim("K", 128), reason: "must be a multiple of 256" },
            Rejection { invariant: 1, by: Break::Param("format", "q8_0"), reason: "`w` must be [5, 272]" },
        ],
        variants: &[],
        example: Example { dims: &[("m", 3), ("n", 5), ("K", 256), ("row_bytes", 144)], params: &[("format", "q4_k")], ranges: &[("w", 0.0, 16.0)], with: &[] },
        workspace: None,
        call: |ctx, a| gguf_qgemv(ctx, a.input("x")?, a.input("w")?, format_of(a)?, a.output("y")?),
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

// ── GEMM ─────────────────────────────────────────────────────────────────────────────

#[cfg(feature = "cases")]
fn qgemm_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let format = ref_format(r)?;
    let x = r.input("x")?;
    let (m, k) = (r.shape("x")?[0], r.shape("x")?[1]);
    let n = r.shape("w")?[0];
    let w: Vec<f64> = reference::dequantize(format, &ref_blocks(r)?, n, k)
        .into_iter()
        .map(|v| crate::elementwise::reference::round_to(x.dtype, f64::from(v)))
        .collect();
    Ok(vec![crate::matmul::reference::matmul(
        &x.data,
        &w,
        (m, n, k),
        true,
    )])
}

inventory::submit! {
    OpDecl {
        name: QGEMM,
        family: "gguf",
        summary: "quantized GEMM for prefill: y[m, n] = x[m, K] · dequant(w)ᵀ on GGUF blocks, each weight computed as gguf_dequantize does and rounded to x's dtype on its way into the tensor cores' tiles, never to memory; f32 accumulation",
        accuracy: crate::decl::Accuracy { keyed_by: crate::quant::qgemm_decl::QGEMM_ACCURACY, ..crate::decl::Accuracy::STANDARD },
        inputs: &[
            TensorDecl::new("x", &["m", "K"], DtypeRule::OneOf(&[DType::F16, DType::BF16]), "the activations, any m ≥ 1 (gguf_qgemv is faster for m ≤ 16)"),
            BLOCKS,
        ],
        outputs: &[OutputDecl { name: "y", shape: &["m", "n"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "x · Ŵᵀ with Ŵ the weights rounded once to x's dtype, accumulated in f32" }],
        params: &[FORMAT],
        invariants: &[
            "x is a non-empty f16 or bf16 [m, K]; y is [m, n] in x's dtype and aliases neither input",
            "w is u8 [n, row_bytes] with row_bytes = K / block_elems · block_bytes of `format`; K is a multiple of the block (32 or 256)",
            "m·K, m·n and w's byte length are below 2^32",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::F32), reason: "`x` must be one of f16, bf16" },
            Rejection { invariant: 1, by: Break::InputDim("w", "row_bytes", 143), reason: "`w` must be [5, 144]" },
            Rejection { invariant: 1, by: Break::Dim("K", 128), reason: "must be a multiple of 256" },
            Rejection { invariant: 1, by: Break::Param("format", "q8_0"), reason: "`w` must be [5, 272]" },
        ],
        variants: &[crate::decl::VariantDecl { name: "quant_gemm_kernel", when: crate::quant::qgemm_decl::QGEMM_VARIANT }],
        example: Example { dims: &[("m", 3), ("n", 5), ("K", 256), ("row_bytes", 144)], params: &[("format", "q4_k")], ranges: &[("w", 0.0, 16.0)], with: &[] },
        workspace: None,
        call: |ctx, a| gguf_qgemm(ctx, a.input("x")?, a.input("w")?, format_of(a)?, a.output("y")?),
        #[cfg(feature = "cases")]
        reference: qgemm_reference,
        #[cfg(feature = "cases")]
        kernels: crate::quant::qgemm_formats_cases::gguf_kernels,
        #[cfg(feature = "cases")]
        cases: crate::quant::qgemm_formats_cases::gguf_cases,
        #[cfg(feature = "cases")]
        benches: crate::quant::qgemm_formats_cases::gguf_benches,
    }
}

// ── quantize ─────────────────────────────────────────────────────────────────────────

/// `[n, row_bytes]` of `x`'s `[n, K]` in the format's blocks.
fn quantized_shape(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    let format = format_of(a)?;
    match *a.input("x")?.shape() {
        [n, k] => Ok(vec![n, format.row_bytes(k)]),
        ref s => Err(OpError::invalid(
            QUANTIZE,
            format!("`x` must be [n, K], got {s:?}"),
        )),
    }
}

#[cfg(feature = "cases")]
fn quantize_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let x: Vec<f32> = r.data("x")?.iter().map(|&v| v as f32).collect();
    Ok(vec![reference::quantize(ref_format(r)?, &x)
        .into_iter()
        .map(f64::from)
        .collect()])
}

inventory::submit! {
    OpDecl {
        name: QUANTIZE,
        family: "gguf",
        summary: "w[n, row_bytes] = x[n, K] in Q4_0 or Q8_0 blocks, byte-exact with llama.cpp's quantize_row_q4_0_ref / quantize_row_q8_0_ref",
        accuracy: crate::decl::Accuracy::EXACT,
        inputs: &[TensorDecl::float("x", &["n", "K"], "the values, K a multiple of 32")],
        outputs: &[OutputDecl { name: "w", shape: &["n", "row_bytes"], dtype: DtypeRule::OneOf(&[DType::U8]), shape_from: ShapeFrom::Derived(quantized_shape), doc: "the blocks, row_bytes = K / 32 · (18 or 34)" }],
        params: &[ParamDecl { name: "format", kind: ParamKind::Choice(&["q4_0", "q8_0"]), default: ParamDefault::Required, doc: "the block format written: q4_0 or q8_0" }],
        invariants: &[
            "x is a float [n, K] with K a multiple of 32",
            "w is u8 [n, K / 32 · block_bytes] and does not alias x",
            "n·K is below 2^32",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::I32), reason: "`x` must be one of" },
            Rejection { invariant: 0, by: Break::Dim("K", 48), reason: "must be a multiple of 32" },
            Rejection { invariant: 1, by: Break::Dim("row_bytes", 35), reason: "`w` must be [3, 36]" },
        ],
        variants: &[],
        example: Example { dims: &[("n", 3), ("K", 64), ("row_bytes", 36)], params: &[("format", "q4_0")], ranges: &[], with: &[] },
        workspace: None,
        call: |ctx, a| gguf_quantize(ctx, a.input("x")?, format_of(a)?, a.output("w")?),
        #[cfg(feature = "cases")]
        reference: quantize_reference,
        #[cfg(feature = "cases")]
        kernels: cases::quantize_kernels,
        #[cfg(feature = "cases")]
        cases: cases::quantize_cases,
        #[cfg(feature = "cases")]
        benches: cases::quantize_benches,
    }
}
