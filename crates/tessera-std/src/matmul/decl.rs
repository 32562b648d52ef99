//! The declarations of the tiled GEMMs: `c = a·b` and `c = a·bᵀ`.

#[cfg(feature = "cases")]
use super::{cases, reference};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Break, DtypeRule, Example, OpDecl, OutputDecl, Rejection, ShapeFrom, TensorDecl, VariantDecl,
};
#[cfg(feature = "cases")]
use crate::error::OpError;
use tessera_runtime::DType;

const HALVES: &[DType] = &[DType::F16, DType::BF16];
const A: TensorDecl = TensorDecl::new(
    "a",
    &["M", "K"],
    DtypeRule::OneOf(HALVES),
    "the left matrix, non-empty",
);
const C: OutputDecl = OutputDecl {
    name: "c",
    shape: &["M", "N"],
    dtype: DtypeRule::Like("a"),
    shape_from: ShapeFrom::Dims,
    doc: "the product, accumulated in f32",
};
const INVARIANTS: &[&str] = &[
    "a, b and c share one dtype, f16 or bf16",
    "a is a non-empty [M, K]; b's K equals a's and N > 0; c is [M, N]",
    "c aliases neither a nor b; element counts fit u32",
];
const VARIANTS: &[VariantDecl] = &[VariantDecl {
    name: "matmul_tiled_kernel",
    when: "32×32 output tiles on four simdgroups of 16×16 fragments",
}];

#[cfg(feature = "cases")]
fn product(r: &RefArgs, bt: bool) -> Result<Vec<Vec<f64>>, OpError> {
    let (m, n, k) = (r.dim("M")?, r.dim("N")?, r.dim("K")?);
    Ok(vec![reference::matmul(
        r.data("a")?,
        r.data("b")?,
        (m, n, k),
        bt,
    )])
}

inventory::submit! {
    OpDecl {
        name: "matmul",
        family: "matmul",
        summary: "tiled GEMM on simdgroup matrix fragments: c[M, N] = a[M, K]·b[K, N], f16/bf16 in, f32 accumulation",
        inputs: &[A, TensorDecl::new("b", &["K", "N"], DtypeRule::Like("a"), "the right matrix")],
        outputs: &[C],
        params: &[],
        invariants: INVARIANTS,
        rejections: &[Rejection { invariant: 0, by: Break::Dtype("a", DType::F32), reason: "`a` must be one of" }, Rejection { invariant: 1, by: Break::InputDim("b", "K", 25), reason: "`b` must be [K = 24" }],
        variants: VARIANTS,
        example: Example { dims: &[("M", 40), ("K", 24), ("N", 36)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::matmul(ctx, a.input("a")?, a.input("b")?, a.output("c")?),
        #[cfg(feature = "cases")]
        reference: |r| product(r, false),
        #[cfg(feature = "cases")]
        kernels: cases::matmul_kernels,
        #[cfg(feature = "cases")]
        cases: cases::matmul_cases,
        #[cfg(feature = "cases")]
        benches: cases::matmul_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "matmul_bt",
        family: "matmul",
        summary: "tiled GEMM with b as [N, K] (linear-layer weights), read by transposed fragment loads",
        inputs: &[A, TensorDecl::new("b", &["N", "K"], DtypeRule::Like("a"), "the weights, one row per output column")],
        outputs: &[C],
        params: &[],
        invariants: INVARIANTS,
        rejections: &[Rejection { invariant: 1, by: Break::InputDim("b", "K", 47), reason: "`b` must be [N, K = 48]" }],
        variants: VARIANTS,
        example: Example { dims: &[("M", 33), ("K", 48), ("N", 20)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::matmul_bt(ctx, a.input("a")?, a.input("b")?, a.output("c")?),
        #[cfg(feature = "cases")]
        reference: |r| product(r, true),
        #[cfg(feature = "cases")]
        kernels: cases::matmul_bt_kernels,
        #[cfg(feature = "cases")]
        cases: cases::matmul_bt_cases,
        #[cfg(feature = "cases")]
        benches: cases::matmul_bt_benches,
    }
}
