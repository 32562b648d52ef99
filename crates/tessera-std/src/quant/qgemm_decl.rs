//! The declaration of `affine_qgemm`, the quantized GEMM of prefill on MLX affine weights
//! (the skinny M = 1–16 form is `affine_qgemv`, in decl.rs).

use super::affine_qgemm;
#[cfg(feature = "cases")]
use super::decl::ref_format;
use super::decl::{
    format, ANY_WORD, BIASES_IN, BITS, EXAMPLE_DIMS, EXAMPLE_PARAMS, FORMAT_INVARIANT,
    FORMAT_REJECTIONS, GROUP_SIZE, PACKED,
};
#[cfg(feature = "cases")]
use super::{cases, reference};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Accuracy, Break, DtypeRule, Example, OpDecl, OutputDecl, Rejection, ShapeFrom, TensorDecl,
    VariantDecl,
};
#[cfg(feature = "cases")]
use crate::error::OpError;
use tessera_runtime::DType;

/// The activation dtypes of the quantized GEMMs.
pub(super) const HALVES: &[DType] = &[DType::F16, DType::BF16];

/// How every quantized GEMM's results are checked.
pub(crate) const QGEMM_ACCURACY: &str = "against x·Ŵᵀ in f64 with Ŵ the weights rounded once to x's dtype, what the tensor cores multiply";

/// What `quant_gemm_kernel` does, for the declarations of the formats it serves.
pub(crate) const QGEMM_VARIANT: &str = "warpgroup tile products as affine_qgemm_kernel runs them (x by 16-byte asynchronous copies into swizzled tiles; the weights' raw data loaded into registers before each product and dequantized by the threads into swizzled tiles); 128 × 128 output tiles where threadgroup memory holds 96 KiB (64 × 128 at M ≤ 256), 64 × 64 elsewhere";

#[cfg(feature = "cases")]
fn qgemm_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (bits, group) = ref_format(r)?;
    let (m, n, k) = (r.dim("M")?, r.dim("N")?, r.dim("K")?);
    let x = r.input("x")?;
    Ok(vec![reference::qgemm(
        &x.data,
        r.data("packed")?,
        r.data("scales")?,
        r.data("biases")?,
        (m, n, k),
        bits,
        group,
        x.dtype,
    )])
}

inventory::submit! {
    OpDecl {
        name: "affine_qgemm",
        family: "quant",
        summary: "quantized GEMM for prefill: y[M, N] = x[M, K]·Ŵᵀ on MLX affine weights W [N, K], each weight dequantized in f32 and rounded to x's dtype on its way into the tensor cores' tiles, never to memory",
        inputs: &[
            TensorDecl::new("x", &["M", "K"], DtypeRule::OneOf(HALVES), "the activations, any M ≥ 1 (affine_qgemv is faster for M ≤ 16)"),
            PACKED,
            TensorDecl::new("scales", &["N", "KG"], DtypeRule::Like("x"), "one scale per group, KG = K/group_size"),
            BIASES_IN,
        ],
        outputs: &[OutputDecl { name: "y", shape: &["M", "N"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "x·Ŵᵀ with Ŵ = scale·q + bias rounded once to x's dtype, accumulated in f32" }],
        params: &[BITS, GROUP_SIZE],
        invariants: &[
            FORMAT_INVARIANT,
            "x is a non-empty f16 or bf16 [M, K] with K a multiple of group_size",
            "packed is u32 [N, K·bits/32]; scales and biases are [N, K/group_size] in x's dtype; y is [M, N]",
            "y aliases no input; element counts fit u32",
        ],
        rejections: &[
            FORMAT_REJECTIONS[0],
            FORMAT_REJECTIONS[1],
            Rejection { invariant: 1, by: Break::InputDim("x", "K", 96), reason: "must be a positive multiple of the group size 64" },
            Rejection { invariant: 1, by: Break::Dtype("x", DType::F32), reason: "`x` must be one of f16, bf16" },
            Rejection { invariant: 2, by: Break::InputDim("packed", "KW", 12), reason: "`packed` must be [N, 16]" },
            Rejection { invariant: 2, by: Break::Dtype("scales", DType::BF16), reason: "`scales` must be f16" },
            Rejection { invariant: 3, by: Break::Alias("y", "x"), reason: "`y` aliases `x`" },
        ],
        variants: &[VariantDecl { name: "affine_qgemm_kernel", when: "warpgroup tile products: x by 16-byte asynchronous copies into swizzled tiles, the weights dequantized by the threads into swizzled tiles, the next tile's words loaded before each product; 128 × 128 output tiles where threadgroup memory holds 96 KiB (64 × 128 at M ≤ 256), 64 × 64 elsewhere" }],
        example: Example { dims: EXAMPLE_DIMS, params: EXAMPLE_PARAMS, ranges: &[ANY_WORD], with: &[] },
        workspace: None,
        accuracy: Accuracy {
            keyed_by: "against x·Ŵᵀ in f64 with Ŵ the weights rounded once to x's dtype, what the tensor cores multiply (MLX's dequantize-then-matmul rounds q·scale and then the sum, so its weights differ from Ŵ by at most one unit in the last place)",
            ..Accuracy::STANDARD
        },
        call: |ctx, a| {
            let (bits, group) = format(a)?;
            affine_qgemm(ctx, a.input("x")?, a.input("packed")?, a.input("scales")?, a.input("biases")?, a.output("y")?, bits, group)
        },
        #[cfg(feature = "cases")]
        reference: qgemm_reference,
        #[cfg(feature = "cases")]
        kernels: cases::qgemm_kernels,
        #[cfg(feature = "cases")]
        cases: cases::qgemm_cases,
        #[cfg(feature = "cases")]
        benches: cases::qgemm_benches,
    }
}
