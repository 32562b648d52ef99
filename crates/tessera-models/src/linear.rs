//! A linear layer `y = x·Wᵀ` (weights `[out, in]`, Hugging Face's layout) on the op that
//! fits the rows: the GEMV for up to [`GEMV_ROWS`] rows (decode, and f32 models, whose
//! every call is kept that short), the tiled GEMM above that (f16 / bf16 only: the library
//! has no f32 GEMM). The gate/up projection of the MLP comes fused with SiLU·mul.

use crate::error::ModelError;
use tessera_runtime::{Context, DType, Tensor};
use tessera_std::elementwise::silu_mul_packed;
use tessera_std::matmul::{gemv, gemv_silu_mul, matmul_bt};

/// The most rows the GEMV takes (`tessera_std::matmul::gemv`'s skinny bound).
pub const GEMV_ROWS: usize = 16;

/// The most rows one linear call of `dtype` takes: any for the GEMM's dtypes, the GEMV's
/// bound for f32.
pub fn max_rows(dtype: DType) -> usize {
    match dtype {
        DType::F16 | DType::BF16 => usize::MAX,
        _ => GEMV_ROWS,
    }
}

/// `y [M, N] = x [M, K] · w [N, K]ᵀ`.
pub fn linear(ctx: &Context, x: &Tensor, w: &Tensor, y: &Tensor) -> Result<(), ModelError> {
    if x.shape()[0] <= GEMV_ROWS {
        gemv(ctx, x, w, y)?;
    } else {
        matmul_bt(ctx, x, w, y)?;
    }
    Ok(())
}

/// `y [M, I] = silu(x·gateᵀ) · (x·upᵀ)` from `w_gate_up [2·I, K]` (gate rows first): the
/// fused GEMV for up to [`GEMV_ROWS`] rows, else the GEMM into `gate_up [M, 2·I]` and the
/// packed SiLU·mul.
pub fn gate_up_silu(
    ctx: &Context,
    x: &Tensor,
    w_gate_up: &Tensor,
    gate_up: &Tensor,
    y: &Tensor,
) -> Result<(), ModelError> {
    if x.shape()[0] <= GEMV_ROWS {
        gemv_silu_mul(ctx, x, w_gate_up, y)?;
    } else {
        matmul_bt(ctx, x, w_gate_up, gate_up)?;
        silu_mul_packed(ctx, gate_up, y)?;
    }
    Ok(())
}
