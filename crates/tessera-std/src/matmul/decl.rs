//! The declarations of the tiled GEMMs (`c = a·b` and `c = a·bᵀ`), the dense GEMV and the
//! fused gate/up SiLU·mul GEMV.

#[cfg(feature = "cases")]
use super::{cases, gemv_cases, reference};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, Rejection, ShapeFrom, TensorDecl,
    VariantDecl,
};
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

// ── dense GEMV / skinny GEMM ─────────────────────────────────────────────────────────

#[cfg(feature = "cases")]
fn gemv_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (m, n, k) = (r.dim("M")?, r.dim("N")?, r.dim("K")?);
    Ok(vec![reference::matmul(
        r.data("x")?,
        r.data("w")?,
        (m, n, k),
        true,
    )])
}

inventory::submit! {
    OpDecl {
        name: "gemv",
        family: "matmul",
        summary: "dense GEMV / skinny GEMM for decode: y[M, N] = x[M, K]·wᵀ with w [N, K] (linear-layer weights), M = 1–16, f32 accumulation, bandwidth-bound",
        inputs: &[
            TensorDecl::float("x", &["M", "K"], "the activations, 1 ≤ M ≤ 16 rows"),
            TensorDecl::new("w", &["N", "K"], DtypeRule::Like("x"), "the weights, row-major, one row per output column (torch.nn.Linear's layout)"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["M", "N"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Dims, doc: "x·wᵀ, accumulated in f32" }],
        params: &[],
        invariants: &[
            "x, w and y share one float dtype",
            "x is [M, K] with 1 ≤ M ≤ 16 and K > 0; w is [N, K] with N > 0; y is [M, N]",
            "y aliases neither x nor w; element counts fit u32",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::U32), reason: "`x` must be one of" },
            Rejection { invariant: 0, by: Break::Dtype("w", DType::BF16), reason: "`w` must be f32" },
            Rejection { invariant: 1, by: Break::Dim("M", 17), reason: "at most 16 rows" },
            Rejection { invariant: 1, by: Break::InputDim("w", "K", 39), reason: "`w` must be [N, K = 40]" },
            Rejection { invariant: 2, by: Break::Alias("y", "x"), reason: "aliases `x`" },
        ],
        variants: &[
            VariantDecl {
                name: "gemv_kernel",
                when: "f32, M = 1, or K not a multiple of 8: a simdgroup per output column, 16-byte runs of w (the widest run dividing K), M rounded up to a row tile of 1, 2, 4, 8 or 16",
            },
            VariantDecl {
                name: "gemv_mma_kernel",
                when: "f16/bf16 with M ≥ 2 and K a multiple of 8: matrix fragments, x rows as the A operand and 16 weight rows as B, four simdgroups splitting K",
            },
        ],
        example: Example { dims: &[("M", 3), ("K", 40), ("N", 7)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::gemv(ctx, a.input("x")?, a.input("w")?, a.output("y")?),
        #[cfg(feature = "cases")]
        reference: gemv_reference,
        #[cfg(feature = "cases")]
        kernels: gemv_cases::kernels,
        #[cfg(feature = "cases")]
        cases: gemv_cases::cases,
        #[cfg(feature = "cases")]
        benches: gemv_cases::benches,
    }
}

#[cfg(feature = "cases")]
fn gemv_silu_mul_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (m, k) = (r.dim("M")?, r.dim("K")?);
    let i = r.shape("w_gate_up")?[0] / 2;
    let w = r.data("w_gate_up")?;
    let x = r.data("x")?;
    let gate = reference::matmul(x, &w[..i * k], (m, i, k), true);
    let up = reference::matmul(x, &w[i * k..], (m, i, k), true);
    Ok(vec![gate
        .iter()
        .zip(&up)
        .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
        .collect()])
}

fn gemv_silu_mul_shape(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    match (a.input("x")?.shape(), a.input("w_gate_up")?.shape()) {
        ([m, _], [rows, _]) => Ok(vec![*m, rows / 2]),
        _ => Err(OpError::invalid(
            a.op.name,
            "`x` and `w_gate_up` must be matrices",
        )),
    }
}

inventory::submit! {
    OpDecl {
        name: "gemv_silu_mul",
        family: "matmul",
        summary: "a dense MLP's first half for decode in one pass: y[M, I] = silu(x·gateᵀ)·(x·upᵀ) from a merged gate_up weight [2·I, K] (gate rows first, vLLM's gate_up_proj), M = 1–16, f32 accumulation",
        inputs: &[
            TensorDecl::float("x", &["M", "K"], "the activations, 1 ≤ M ≤ 16 rows"),
            TensorDecl::new("w_gate_up", &["R", "K"], DtypeRule::Like("x"), "the gate rows [I, K] then the up rows [I, K] (R = 2·I)"),
        ],
        outputs: &[OutputDecl { name: "y", shape: &["M", "I"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Derived(gemv_silu_mul_shape), doc: "silu(x·gateᵀ)·(x·upᵀ), both sums in f32, rounded once" }],
        params: &[],
        invariants: &[
            "x, w_gate_up and y share one float dtype",
            "x is [M, K] with 1 ≤ M ≤ 16 and K > 0; w_gate_up is [2·I, K] with I > 0; y is [M, I]",
            "y aliases neither x nor w_gate_up; element counts fit u32",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("w_gate_up", DType::BF16), reason: "`w_gate_up` must be f32" },
            Rejection { invariant: 1, by: Break::Dim("M", 17), reason: "at most 16 rows" },
            Rejection { invariant: 1, by: Break::InputDim("w_gate_up", "R", 7), reason: "`w_gate_up` must be [2·I, K = 40]" },
            Rejection { invariant: 2, by: Break::Alias("y", "x"), reason: "aliases `x`" },
        ],
        variants: &[],
        example: Example { dims: &[("M", 3), ("K", 40), ("R", 14), ("I", 7)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| super::gemv_silu_mul(ctx, a.input("x")?, a.input("w_gate_up")?, a.output("y")?),
        #[cfg(feature = "cases")]
        reference: gemv_silu_mul_reference,
        #[cfg(feature = "cases")]
        kernels: gemv_cases::silu_kernels,
        #[cfg(feature = "cases")]
        cases: gemv_cases::silu_cases,
        #[cfg(feature = "cases")]
        benches: gemv_cases::silu_benches,
    }
}
