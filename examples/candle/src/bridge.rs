//! What the CPU and CUDA bridges share: the op as Tessera tensors in, one output out, and
//! errors carried into candle's.

use tessera::ops::error::OpError;
use tessera::prelude::{Context, DType, Tensor as TesseraTensor};

/// A Tessera op with one output shaped from its inputs.
pub(crate) trait TesseraOp {
    const NAME: &'static str;
    /// The output's shape (its dtype is the first input's); the op itself checks the inputs.
    fn output_shape(&self, inputs: &[&TesseraTensor]) -> Vec<usize>;
    fn call(
        &self,
        ctx: &Context,
        inputs: &[&TesseraTensor],
        out: &TesseraTensor,
    ) -> Result<(), OpError>;
}

/// A Tessera or bridge error as candle's.
pub(crate) fn error(op: &str, e: impl std::fmt::Display) -> candle_core::Error {
    candle_core::Error::Msg(format!("{op}: {e}"))
}

/// The contiguous element range of a layout, or an error naming the op.
pub(crate) fn contiguous(
    op: &str,
    layout: &candle_core::Layout,
) -> candle_core::Result<(usize, usize)> {
    layout.contiguous_offsets().ok_or_else(|| {
        error(
            op,
            format!(
                "takes contiguous tensors; got shape {:?} with strides {:?} (call .contiguous())",
                layout.dims(),
                layout.stride()
            ),
        )
    })
}

/// Tessera's dtype for candle's, where Tessera's float ops take it.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn tessera_dtype(op: &str, dtype: candle_core::DType) -> candle_core::Result<DType> {
    match dtype {
        candle_core::DType::F32 => Ok(DType::F32),
        candle_core::DType::F16 => Ok(DType::F16),
        candle_core::DType::BF16 => Ok(DType::BF16),
        other => Err(error(
            op,
            format!("takes f32, f16 or bf16 tensors, got {other:?}"),
        )),
    }
}
