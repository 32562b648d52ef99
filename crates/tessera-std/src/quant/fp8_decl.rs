//! The declarations of the fp8 ops: quantize, dequantize, the quantized GEMV and GEMM.

use super::fp8::{fp8_dequantize, fp8_quantize};
use super::fp8_format::{Fp8Format, Fp8Scaling, FP8_FORMAT_NAMES, FP8_SCALING_NAMES};
use super::fp8_qgemm::fp8_qgemm;
use super::fp8_qgemv::fp8_qgemv;
use super::qgemm_decl::{HALVES, QGEMM_ACCURACY, QGEMM_VARIANT};
#[cfg(feature = "cases")]
use super::{fp8_cases as cases, fp8_reference as reference, qgemm_formats_cases as qgemm_cases};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Accuracy, Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault,
    ParamKind, Rejection, ShapeFrom, TensorDecl, F32,
};
use crate::error::OpError;
use tessera_runtime::DType;

const FORMAT: ParamDecl = ParamDecl {
    name: "format",
    kind: ParamKind::Choice(&FP8_FORMAT_NAMES),
    default: ParamDefault::Value("e4m3"),
    doc: "e4m3 (torch.float8_e4m3fn: bias 7, max 448, no inf) or e5m2 (torch.float8_e5m2: bias 15, max 57344, IEEE inf/NaN)",
};
const SCALING: ParamDecl = ParamDecl {
    name: "scaling",
    kind: ParamKind::Choice(&FP8_SCALING_NAMES),
    default: ParamDefault::Required,
    doc: "one f32 scale per tensor ([1, 1]), per 128 values of a row ([N, ceil(K/128)], DeepSeek-V3's activations) or per 128×128 tile ([ceil(N/128), ceil(K/128)], its weights' weight_scale_inv)",
};

const BYTES_DOC: &str = "fp8 values, one byte each (a checkpoint's float8 tensor viewed as uint8)";
const SCALE_IN: TensorDecl = TensorDecl::new(
    "scale",
    &["SN", "SK"],
    DtypeRule::OneOf(F32),
    "the scales as `scaling` lays them out; the value is fp8 · scale",
);
/// N = 5, K = 144 (a partial last 128-wide block), 128×128 tiles: SN = 1, SK = 2.
const EXAMPLE_DIMS: &[(&str, usize)] = &[("M", 3), ("N", 5), ("K", 144), ("SN", 1), ("SK", 2)];
const EXAMPLE_PARAMS: &[(&str, &str)] = &[("format", "e4m3"), ("scaling", "128x128")];
const DEQUANTIZE_PARAMS: &[(&str, &str)] =
    &[("format", "e5m2"), ("scaling", "128x128"), ("dtype", "f32")];
/// Bytes 0–123 are finite and positive in both formats (the NaN and inf bytes are the
/// cases' business; signs come from x); the GEMV's scales are positive, as quantizers
/// write them.
const EXAMPLE_RANGES: &[(&str, f64, f64)] = &[("w", 0.0, 124.0), ("scale", 0.0, 0.01)];

/// Dequantizing takes a scale of either sign (huge ones too: the product overflows as the
/// f32 product does).
const DEQUANTIZE_RANGES: &[(&str, f64, f64)] = &[("q", 0.0, 124.0), ("scale", -0.01, 0.01)];

const FORMAT_INVARIANT: &str = "format is e4m3 or e5m2; scaling is tensor, 1x128 or 128x128";
const FORMAT_REJECTIONS: [Rejection; 2] = [
    Rejection {
        invariant: 0,
        by: Break::Param("format", "e4m4"),
        reason: "one of e4m3, e5m2",
    },
    Rejection {
        invariant: 0,
        by: Break::Param("scaling", "64x64"),
        reason: "one of tensor, 1x128, 128x128",
    },
];

fn format_of(a: &OpArgs) -> Result<(Fp8Format, Fp8Scaling), OpError> {
    Ok((
        Fp8Format::parse(a.op.name, a.params.choice("format")?)?,
        Fp8Scaling::parse(a.op.name, a.params.choice("scaling")?)?,
    ))
}

#[cfg(feature = "cases")]
fn ref_format(r: &RefArgs) -> Result<(Fp8Format, Fp8Scaling), OpError> {
    Ok((
        Fp8Format::parse(r.op.name, r.params.choice("format")?)?,
        Fp8Scaling::parse(r.op.name, r.params.choice("scaling")?)?,
    ))
}

#[cfg(feature = "cases")]
fn ref_matrix(r: &RefArgs, name: &str) -> Result<(usize, usize), OpError> {
    match *r.shape(name)? {
        [n, k] => Ok((n, k)),
        ref s => Err(OpError::invalid(
            r.op.name,
            format!("`{name}` must be a matrix, got {s:?}"),
        )),
    }
}

// ── fp8_quantize ─────────────────────────────────────────────────────────────────────

fn scale_dims(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    let (_, scaling) = format_of(a)?;
    match *a.input("x")?.shape() {
        [n, k] => Ok(scaling.scale_shape((n, k)).to_vec()),
        ref s => Err(OpError::invalid(
            a.op.name,
            format!("`x` must be a matrix [N, K], got shape {s:?}"),
        )),
    }
}

#[cfg(feature = "cases")]
fn quantize_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (format, scaling) = ref_format(r)?;
    let (q, s) = reference::quantize(r.data("x")?, ref_matrix(r, "x")?, format, scaling);
    Ok(vec![q, s])
}

inventory::submit! {
    OpDecl {
        name: "fp8_quantize",
        family: "quant",
        summary: "fp8 (e4m3/e5m2) quantization of x [N, K] with f32 scales per tensor, per 1×128 or per 128×128 block: scale = amax/max, bytes = round-to-nearest-even of x/scale, saturating",
        inputs: &[TensorDecl::float("x", &["N", "K"], "the values, row-major (activations or weights)")],
        outputs: &[
            OutputDecl::like("x", "q", &["N", "K"], DtypeRule::OneOf(&[DType::U8]), BYTES_DOC),
            OutputDecl { name: "scale", shape: &["SN", "SK"], dtype: DtypeRule::OneOf(F32), shape_from: ShapeFrom::Derived(scale_dims), doc: "each block's amax / max (1 for an all-zero block)" },
        ],
        params: &[FORMAT, SCALING],
        invariants: &[
            FORMAT_INVARIANT,
            "x is a non-empty float [N, K] (any N and K: the last blocks may be partial)",
            "q is u8 [N, K]; scale is f32 [SN, SK] as `scaling` lays it out for [N, K]",
            "no output aliases x or another output",
        ],
        rejections: &[
            FORMAT_REJECTIONS[0],
            FORMAT_REJECTIONS[1],
            Rejection { invariant: 1, by: Break::Dtype("x", DType::U8), reason: "`x` must be one of" },
            Rejection { invariant: 3, by: Break::Alias("q", "x"), reason: "`q` aliases `x`" },
        ],
        variants: &[VARIANT_QUANTIZE],
        example: Example { dims: EXAMPLE_DIMS, params: EXAMPLE_PARAMS, ranges: &[], with: &[] },
        workspace: None,
        accuracy: Accuracy { keyed_by: "exact: the bytes and f32 scales the format's definition gives for f32 arithmetic", ..Accuracy::EXACT },
        call: |ctx, a| {
            let (format, scaling) = format_of(a)?;
            fp8_quantize(ctx, a.input("x")?, a.output("q")?, a.output("scale")?, format, scaling)
        },
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

const VARIANT_QUANTIZE: crate::decl::VariantDecl = crate::decl::VariantDecl {
    name: "fp8_quantize_kernel",
    when: "a threadgroup of 128 threads per scale block (one for the whole tensor at `tensor`)",
};

// ── fp8_dequantize ───────────────────────────────────────────────────────────────────

fn out_dtype(a: &OpArgs) -> Result<DType, OpError> {
    Ok(match a.params.choice("dtype")? {
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        _ => DType::F32,
    })
}

fn dequantize_call(ctx: &tessera_runtime::Context, a: &OpArgs) -> Result<(), OpError> {
    let (format, scaling) = format_of(a)?;
    let out = a.output("out")?;
    let want = out_dtype(a)?;
    if out.dtype() != want {
        return Err(OpError::invalid(
            a.op.name,
            format!("`out` must be {want} (dtype={want}), got {}", out.dtype()),
        ));
    }
    fp8_dequantize(ctx, a.input("q")?, a.input("scale")?, out, format, scaling)
}

#[cfg(feature = "cases")]
fn dequantize_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (format, scaling) = ref_format(r)?;
    let dtype = match r.params.choice("dtype")? {
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        _ => DType::F32,
    };
    Ok(vec![reference::dequantize(
        r.data("q")?,
        r.data("scale")?,
        ref_matrix(r, "q")?,
        format,
        scaling,
        dtype,
    )])
}

inventory::submit! {
    OpDecl {
        name: "fp8_dequantize",
        family: "quant",
        summary: "out[N, K] = fp8(q)·scale from fp8 bytes (e4m3/e5m2) and f32 scales per tensor, 1×128 or 128×128 block, in f32 rounded once to f32/f16/bf16 (DeepSeek-V3's weight_dequant)",
        inputs: &[TensorDecl::new("q", &["N", "K"], DtypeRule::OneOf(&[DType::U8]), BYTES_DOC), SCALE_IN],
        outputs: &[OutputDecl::like("q", "out", &["N", "K"], DtypeRule::Derived(out_dtype, "the dtype `dtype` names"), "the values, fp8 · scale")],
        params: &[FORMAT, SCALING, ParamDecl { name: "dtype", kind: ParamKind::Choice(&["f32", "f16", "bf16"]), default: ParamDefault::Value("bf16"), doc: "the output dtype" }],
        invariants: &[
            FORMAT_INVARIANT,
            "q is a non-empty u8 [N, K]",
            "scale is f32 [SN, SK] as `scaling` lays it out for [N, K]",
            "out is [N, K] in the dtype `dtype` names and aliases no input",
        ],
        rejections: &[
            FORMAT_REJECTIONS[0],
            FORMAT_REJECTIONS[1],
            Rejection { invariant: 1, by: Break::Dtype("q", DType::I8), reason: "`q` must be u8" },
            Rejection { invariant: 2, by: Break::InputDim("scale", "SK", 3), reason: "`scale` must have shape [1, 2]" },
            Rejection { invariant: 2, by: Break::Dtype("scale", DType::F16), reason: "`scale` must be f32" },
            Rejection { invariant: 3, by: Break::Param("dtype", "f64"), reason: "one of f32, f16, bf16" },
        ],
        variants: &[crate::decl::VariantDecl { name: "fp8_dequantize_kernel", when: "a thread per value" }],
        example: Example { dims: EXAMPLE_DIMS, params: DEQUANTIZE_PARAMS, ranges: DEQUANTIZE_RANGES, with: &[] },
        workspace: None,
        accuracy: Accuracy { keyed_by: "exact: fp8 · scale in f32, rounded once to the output dtype", ..Accuracy::EXACT },
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

// ── fp8_qgemv ────────────────────────────────────────────────────────────────────────

#[cfg(feature = "cases")]
fn qgemv_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (format, scaling) = ref_format(r)?;
    let (m, k) = ref_matrix(r, "x")?;
    let (n, _) = ref_matrix(r, "w")?;
    Ok(vec![reference::qgemv(
        r.data("x")?,
        r.data("w")?,
        r.data("scale")?,
        (m, n, k),
        format,
        scaling,
    )])
}

inventory::submit! {
    OpDecl {
        name: "fp8_qgemv",
        family: "quant",
        summary: "quantized GEMV / skinny GEMM: y[M, N] = x[M, K]·(fp8(W)·scale)ᵀ on fp8 weights W [N, K] (e4m3/e5m2; f32 scales per tensor, per 1×128 or per 128×128 tile as DeepSeek-V3 stores them), M = 1–16, f32 accumulation, never dequantized to memory",
        inputs: &[
            TensorDecl::float("x", &["M", "K"], "the activations, 1 ≤ M ≤ 16 rows"),
            TensorDecl::new("w", &["N", "K"], DtypeRule::OneOf(&[DType::U8]), BYTES_DOC),
            SCALE_IN,
        ],
        outputs: &[OutputDecl { name: "y", shape: &["M", "N"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "x·(fp8(w)·scale)ᵀ, accumulated in f32" }],
        params: &[FORMAT, SCALING],
        invariants: &[
            FORMAT_INVARIANT,
            "x is a float [M, K] with 1 ≤ M ≤ 16 and K a multiple of 16",
            "w is u8 [N, K]; scale is f32 [SN, SK] as `scaling` lays it out for [N, K]; y is [M, N] in x's dtype",
            "y aliases no input",
        ],
        rejections: &[
            FORMAT_REJECTIONS[0],
            FORMAT_REJECTIONS[1],
            Rejection { invariant: 1, by: Break::Dim("M", 17), reason: "at most 16 rows" },
            Rejection { invariant: 1, by: Break::Dim("K", 136), reason: "must be a multiple of 16" },
            Rejection { invariant: 2, by: Break::InputDim("w", "K", 160), reason: "`w` must be [N, 144]" },
            Rejection { invariant: 2, by: Break::InputDim("scale", "SN", 2), reason: "`scale` must have shape [1, 2]" },
            Rejection { invariant: 2, by: Break::Dtype("w", DType::I8), reason: "`w` must be u8" },
            Rejection { invariant: 3, by: Break::Alias("y", "x"), reason: "`y` aliases `x`" },
        ],
        variants: &[crate::decl::VariantDecl { name: "fp8_qgemv_kernel", when: "a simdgroup per output column, 16-byte units of a row per lane, M rounded up to a row tile of 1, 2, 4, 8 or 16" }],
        example: Example { dims: EXAMPLE_DIMS, params: EXAMPLE_PARAMS, ranges: EXAMPLE_RANGES, with: &[] },
        workspace: None,
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| {
            let (format, scaling) = format_of(a)?;
            fp8_qgemv(ctx, a.input("x")?, a.input("w")?, a.input("scale")?, a.output("y")?, format, scaling)
        },
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

// ── fp8_qgemm ────────────────────────────────────────────────────────────────────────

#[cfg(feature = "cases")]
fn qgemm_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (format, scaling) = ref_format(r)?;
    let x = r.input("x")?;
    let (m, k) = ref_matrix(r, "x")?;
    let (n, _) = ref_matrix(r, "w")?;
    let w = reference::dequantize(
        r.data("w")?,
        r.data("scale")?,
        (n, k),
        format,
        scaling,
        x.dtype,
    );
    Ok(vec![crate::matmul::reference::matmul(
        &x.data,
        &w,
        (m, n, k),
        true,
    )])
}

inventory::submit! {
    OpDecl {
        name: "fp8_qgemm",
        family: "quant",
        summary: "quantized GEMM for prefill on fp8 weights W [N, K] (e4m3/e5m2; f32 scales per tensor, per 1×128 or per 128×128 tile as DeepSeek-V3 stores them): y[M, N] = x[M, K]·(fp8(W)·scale)ᵀ, each weight rounded to x's dtype on its way into the tensor cores' tiles, never to memory",
        inputs: &[
            TensorDecl::new("x", &["M", "K"], DtypeRule::OneOf(HALVES), "the activations, any M ≥ 1 (fp8_qgemv is faster for M ≤ 16)"),
            TensorDecl::new("w", &["N", "K"], DtypeRule::OneOf(&[DType::U8]), BYTES_DOC),
            SCALE_IN,
        ],
        outputs: &[OutputDecl { name: "y", shape: &["M", "N"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "x·Ŵᵀ with Ŵ = fp8(w)·scale rounded once to x's dtype, accumulated in f32" }],
        params: &[FORMAT, SCALING],
        invariants: &[
            FORMAT_INVARIANT,
            "x is a non-empty f16 or bf16 [M, K] with K a multiple of 8",
            "w is u8 [N, K]; scale is f32 [SN, SK] as `scaling` lays it out for [N, K]; y is [M, N] in x's dtype",
            "y aliases no input",
        ],
        rejections: &[
            FORMAT_REJECTIONS[0],
            FORMAT_REJECTIONS[1],
            Rejection { invariant: 1, by: Break::Dim("K", 140), reason: "with K a multiple of 8" },
            Rejection { invariant: 1, by: Break::Dtype("x", DType::F32), reason: "`x` must be one of f16, bf16" },
            Rejection { invariant: 2, by: Break::InputDim("w", "K", 160), reason: "`w` must be [N, 144]" },
            Rejection { invariant: 2, by: Break::InputDim("scale", "SN", 2), reason: "`scale` must have shape [1, 2]" },
            Rejection { invariant: 2, by: Break::Dtype("w", DType::I8), reason: "`w` must be u8" },
            Rejection { invariant: 3, by: Break::Alias("y", "x"), reason: "`y` aliases `x`" },
        ],
        variants: &[crate::decl::VariantDecl { name: "quant_gemm_kernel", when: QGEMM_VARIANT }],
        example: Example { dims: EXAMPLE_DIMS, params: EXAMPLE_PARAMS, ranges: EXAMPLE_RANGES, with: &[] },
        workspace: None,
        accuracy: Accuracy { keyed_by: QGEMM_ACCURACY, ..Accuracy::STANDARD },
        call: |ctx, a| {
            let (format, scaling) = format_of(a)?;
            fp8_qgemm(ctx, a.input("x")?, a.input("w")?, a.input("scale")?, a.output("y")?, format, scaling)
        },
        #[cfg(feature = "cases")]
        reference: qgemm_reference,
        #[cfg(feature = "cases")]
        kernels: qgemm_cases::fp8_kernels,
        #[cfg(feature = "cases")]
        cases: qgemm_cases::fp8_cases,
        #[cfg(feature = "cases")]
        benches: qgemm_cases::fp8_benches,
    }
}
