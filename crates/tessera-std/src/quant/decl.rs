//! The declarations of MLX's affine quantize, dequantize and quantized GEMV.

use super::{affine_dequantize, affine_qgemv, affine_quantize};
#[cfg(feature = "cases")]
use super::{cases, reference};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Accuracy, Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault,
    ParamKind, Rejection, ShapeFrom, TensorDecl, VariantDecl, U32,
};
use crate::error::OpError;
use tessera_runtime::DType;

pub(super) const BITS: ParamDecl = ParamDecl {
    name: "bits",
    kind: ParamKind::UInt { min: 2, max: 8 },
    default: ParamDefault::Value("4"),
    doc: "bits per value: 2, 3, 4, 5, 6 or 8",
};
pub(super) const GROUP_SIZE: ParamDecl = ParamDecl {
    name: "group_size",
    kind: ParamKind::UInt { min: 32, max: 128 },
    default: ParamDefault::Value("64"),
    doc: "values per scale and bias along K: 32, 64 or 128",
};

/// (bits, group_size) of a call.
pub(super) fn format(a: &OpArgs) -> Result<(u32, u32), OpError> {
    Ok((a.params.u32("bits")?, a.params.u32("group_size")?))
}

#[cfg(feature = "cases")]
pub(super) fn ref_format(r: &RefArgs) -> Result<(u32, usize), OpError> {
    Ok((r.params.u32("bits")?, r.params.usize("group_size")?))
}

pub(super) const PACKED: TensorDecl = TensorDecl::new(
    "packed",
    &["N", "KW"],
    DtypeRule::OneOf(U32),
    "the values, a little-endian bit stream per row in KW = K·bits/32 u32 words (MLX's layout)",
);
const SCALES_IN: TensorDecl = TensorDecl::float(
    "scales",
    &["N", "KG"],
    "one scale per group, KG = K/group_size",
);
pub(super) const BIASES_IN: TensorDecl = TensorDecl::new(
    "biases",
    &["N", "KG"],
    DtypeRule::Like("scales"),
    "one bias per group",
);
/// A 4-bit, group-64 example: K = 128, so KW = 16 and KG = 2.
pub(super) const EXAMPLE_DIMS: &[(&str, usize)] =
    &[("M", 3), ("N", 5), ("K", 128), ("KW", 16), ("KG", 2)];
pub(super) const EXAMPLE_PARAMS: &[(&str, &str)] = &[("bits", "4"), ("group_size", "64")];
/// Any u32 word is a valid run of codes.
pub(super) const ANY_WORD: (&str, f64, f64) = ("packed", 0.0, 4294967295.0);

pub(super) const FORMAT_INVARIANT: &str = "bits is 2, 3, 4, 5, 6 or 8; group_size is 32, 64 or 128";
pub(super) const FORMAT_REJECTIONS: [Rejection; 2] = [
    Rejection {
        invariant: 0,
        by: Break::Param("bits", "7"),
        reason: "bits must be one of 2, 3, 4, 5, 6, 8",
    },
    Rejection {
        invariant: 0,
        by: Break::Param("group_size", "48"),
        reason: "group_size must be 32, 64 or 128",
    },
];

// ── affine_quantize ──────────────────────────────────────────────────────────────────

fn quantized_dims(a: &OpArgs, groups: bool) -> Result<Vec<usize>, OpError> {
    let (bits, group) = format(a)?;
    match *a.input("w")?.shape() {
        [n, k] if groups => Ok(vec![n, k / group as usize]),
        [n, k] => Ok(vec![n, k * bits as usize / 32]),
        ref s => Err(OpError::invalid(
            a.op.name,
            format!("`w` must be a matrix [N, K], got shape {s:?}"),
        )),
    }
}

#[cfg(feature = "cases")]
fn quantize_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (bits, group) = ref_format(r)?;
    let w = r.input("w")?;
    let q = reference::quantize(&w.data, bits, group, w.dtype);
    Ok(vec![q.packed, q.scales, q.biases])
}

inventory::submit! {
    OpDecl {
        name: "affine_quantize",
        family: "quant",
        summary: "MLX affine quantization of w [N, K]: packed u32 codes, a scale and a bias per group, the bytes mx.quantize gives",
        inputs: &[TensorDecl::float("w", &["N", "K"], "the weights, row-major")],
        outputs: &[
            OutputDecl { name: "packed", shape: &["N", "KW"], dtype: DtypeRule::OneOf(U32), shape_from: ShapeFrom::Derived(|a| quantized_dims(a, false)), doc: "the codes, KW = K·bits/32 words per row" },
            OutputDecl { name: "scales", shape: &["N", "KG"], dtype: DtypeRule::Like("w"), shape_from: ShapeFrom::Derived(|a| quantized_dims(a, true)), doc: "the groups' scales, KG = K/group_size" },
            OutputDecl { name: "biases", shape: &["N", "KG"], dtype: DtypeRule::Like("w"), shape_from: ShapeFrom::Derived(|a| quantized_dims(a, true)), doc: "the groups' biases" },
        ],
        params: &[BITS, GROUP_SIZE],
        invariants: &[
            FORMAT_INVARIANT,
            "w is a non-empty float [N, K] with K a multiple of group_size (MLX refuses any other K)",
            "packed is u32 [N, K·bits/32]; scales and biases are [N, K/group_size] in w's dtype",
            "no output aliases w or another output",
        ],
        rejections: &[
            FORMAT_REJECTIONS[0],
            FORMAT_REJECTIONS[1],
            Rejection { invariant: 1, by: Break::Dim("K", 96), reason: "must be a positive multiple of the group size 64" },
            Rejection { invariant: 1, by: Break::Dtype("w", DType::U32), reason: "`w` must be one of" },
            Rejection { invariant: 3, by: Break::Alias("scales", "w"), reason: "`scales` aliases `w`" },
        ],
        variants: &[VariantDecl { name: "affine_quantize_kernel", when: "a thread per group" }],
        example: Example { dims: EXAMPLE_DIMS, params: EXAMPLE_PARAMS, ranges: &[], with: &[] },
        workspace: None,
        accuracy: Accuracy { keyed_by: "exact: the words, scales and biases MLX's f32 arithmetic gives", ..Accuracy::EXACT },
        call: |ctx, a| {
            let (bits, group) = format(a)?;
            affine_quantize(ctx, a.input("w")?, a.output("packed")?, a.output("scales")?, a.output("biases")?, bits, group)
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

// ── affine_dequantize ────────────────────────────────────────────────────────────────

fn dequantized_dims(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    let (bits, _) = format(a)?;
    match *a.input("packed")?.shape() {
        [n, words] => Ok(vec![n, words * 32 / bits.max(1) as usize]),
        ref s => Err(OpError::invalid(
            a.op.name,
            format!("`packed` must be a matrix [N, KW], got shape {s:?}"),
        )),
    }
}

#[cfg(feature = "cases")]
fn dequantize_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (bits, group) = ref_format(r)?;
    let (n, kg) = (r.dim("N")?, r.dim("KG")?);
    let scales = r.input("scales")?;
    Ok(vec![reference::dequantize(
        r.data("packed")?,
        &scales.data,
        r.data("biases")?,
        (n, kg * group),
        bits,
        group,
        scales.dtype,
    )])
}

inventory::submit! {
    OpDecl {
        name: "affine_dequantize",
        family: "quant",
        summary: "MLX affine dequantization: w = scale·q + bias from packed u32 codes, mx.dequantize's values bit for bit",
        inputs: &[PACKED, SCALES_IN, BIASES_IN],
        outputs: &[OutputDecl { name: "out", shape: &["N", "K"], dtype: DtypeRule::Like("scales"), shape_from: ShapeFrom::Derived(dequantized_dims), doc: "the weights, K = KW·32/bits, in the scales' dtype" }],
        params: &[BITS, GROUP_SIZE],
        invariants: &[
            FORMAT_INVARIANT,
            "packed is a non-empty u32 [N, KW] whose K = KW·32/bits is a multiple of group_size",
            "scales and biases are [N, K/group_size] of one float dtype; out is [N, K] in it",
            "out aliases no input",
        ],
        rejections: &[
            FORMAT_REJECTIONS[0],
            FORMAT_REJECTIONS[1],
            Rejection { invariant: 1, by: Break::Dtype("packed", DType::I32), reason: "`packed` must be u32" },
            Rejection { invariant: 2, by: Break::Param("bits", "8"), reason: "`scales` must have shape [5, 1]" },
            Rejection { invariant: 2, by: Break::InputDim("biases", "KG", 3), reason: "`biases` must have shape [5, 2]" },
            Rejection { invariant: 2, by: Break::Dtype("biases", DType::F16), reason: "`biases` must be f32" },
            Rejection { invariant: 3, by: Break::Alias("out", "scales"), reason: "`out` aliases `scales`" },
        ],
        variants: &[VariantDecl { name: "affine_dequantize_kernel", when: "a thread per unit of 32 values (bits whole words)" }],
        example: Example { dims: EXAMPLE_DIMS, params: EXAMPLE_PARAMS, ranges: &[ANY_WORD], with: &[] },
        workspace: None,
        accuracy: Accuracy { keyed_by: "exact: MLX's q·scale + bias, rounded to the dtype after the product and the sum", ..Accuracy::EXACT },
        call: |ctx, a| {
            let (bits, group) = format(a)?;
            affine_dequantize(ctx, a.input("packed")?, a.input("scales")?, a.input("biases")?, a.output("out")?, bits, group)
        },
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

// ── affine_qgemv ─────────────────────────────────────────────────────────────────────

#[cfg(feature = "cases")]
fn qgemv_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (bits, group) = ref_format(r)?;
    let (m, n, k) = (r.dim("M")?, r.dim("N")?, r.dim("K")?);
    Ok(vec![reference::qgemv(
        r.data("x")?,
        r.data("packed")?,
        r.data("scales")?,
        r.data("biases")?,
        (m, n, k),
        bits,
        group,
    )])
}

inventory::submit! {
    OpDecl {
        name: "affine_qgemv",
        family: "quant",
        summary: "quantized GEMV / skinny GEMM: y[M, N] = x[M, K]·dequant(W)ᵀ on MLX affine weights W [N, K], M = 1–16, never dequantized to memory",
        inputs: &[
            TensorDecl::float("x", &["M", "K"], "the activations, 1 ≤ M ≤ 16 rows"),
            PACKED,
            TensorDecl::new("scales", &["N", "KG"], DtypeRule::Like("x"), "one scale per group, KG = K/group_size"),
            BIASES_IN,
        ],
        outputs: &[OutputDecl { name: "y", shape: &["M", "N"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "x·(scale·q + bias)ᵀ, accumulated in f32" }],
        params: &[BITS, GROUP_SIZE],
        invariants: &[
            FORMAT_INVARIANT,
            "x is a float [M, K] with 1 ≤ M ≤ 16 and K a multiple of group_size",
            "packed is u32 [N, K·bits/32]; scales and biases are [N, K/group_size] in x's dtype; y is [M, N]",
            "y aliases no input",
        ],
        rejections: &[
            FORMAT_REJECTIONS[0],
            FORMAT_REJECTIONS[1],
            Rejection { invariant: 1, by: Break::Dim("M", 17), reason: "at most 16 rows" },
            Rejection { invariant: 1, by: Break::InputDim("x", "K", 96), reason: "must be a positive multiple of the group size 64" },
            Rejection { invariant: 2, by: Break::InputDim("packed", "KW", 12), reason: "`packed` must be [N, 16]" },
            Rejection { invariant: 2, by: Break::Dtype("scales", DType::F16), reason: "`scales` must be f32" },
            Rejection { invariant: 3, by: Break::Alias("y", "x"), reason: "`y` aliases `x`" },
        ],
        variants: &[
            VariantDecl { name: "affine_qgemv_kernel", when: "f32, f16, or M = 1: a simdgroup per 4 output columns (2 at row tiles 8 and 16), each x load shared by them, K split over 2 or 4 simdgroups for long rows over few columns, units of 32 values (bits whole words) per lane, M rounded up to a row tile of 1, 2, 4, 8 or 16" },
            VariantDecl { name: "affine_qgemv_mma_kernel", when: "bf16 with M ≥ 2: matrix fragments, x rows as the A operand and 16 weight rows dequantized in f32 and split into high and low parts of the input dtype as two B operands, four simdgroups splitting K" },
        ],
        example: Example { dims: EXAMPLE_DIMS, params: EXAMPLE_PARAMS, ranges: &[ANY_WORD], with: &[] },
        workspace: None,
        accuracy: Accuracy::STANDARD,
        call: |ctx, a| {
            let (bits, group) = format(a)?;
            affine_qgemv(ctx, a.input("x")?, a.input("packed")?, a.input("scales")?, a.input("biases")?, a.output("y")?, bits, group)
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
