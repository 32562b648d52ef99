//! Tessera's RMSNorm and single-sequence decode attention as candle custom ops. On CPU
//! tensors the inputs are copied into Tessera's CPU backend and the result copied back; on
//! CUDA tensors (feature `cuda`) the kernels run on candle's own stream, reading candle's
//! device memory in place and writing into a buffer candle allocated: no copy, no
//! synchronisation.

mod bridge;
mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

use bridge::TesseraOp;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};
use tessera::ops::attention::{sdpa_decode, DecodeWorkspace};
use tessera::ops::error::OpError;
use tessera::prelude::{Context, Tensor as TesseraTensor};

/// `x / sqrt(mean(x²) + eps) · w` over the last dimension of `x`, `w` of that length.
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
    x.apply_op2_no_bwd(w, &RmsNorm { eps })
}

/// Decode attention for one sequence: `q [heads, D]` over `k, v [kv_heads, n, D]` (GQA when
/// `heads` is a multiple of `kv_heads`), softmax scale `scale` (default `1/sqrt(D)`).
pub fn decode_attention(q: &Tensor, k: &Tensor, v: &Tensor, scale: Option<f32>) -> Result<Tensor> {
    q.apply_op3_no_bwd(k, v, &DecodeAttention { scale })
}

/// Tessera's `rms_norm` as a [`CustomOp2`].
pub struct RmsNorm {
    pub eps: f32,
}

impl TesseraOp for RmsNorm {
    const NAME: &'static str = "tessera-rms-norm";

    fn output_shape(&self, inputs: &[&TesseraTensor]) -> Vec<usize> {
        inputs[0].shape().to_vec()
    }

    fn call(
        &self,
        ctx: &Context,
        inputs: &[&TesseraTensor],
        out: &TesseraTensor,
    ) -> std::result::Result<(), OpError> {
        tessera::ops::norm::rms_norm::rms_norm(ctx, inputs[0], inputs[1], out, self.eps)
    }
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        cpu::run(self, &[(s1, l1), (s2, l2)])
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        cuda::run(self, &[(s1, l1), (s2, l2)])
    }
}

/// Tessera's `sdpa_decode` as a [`CustomOp3`]. Its split-KV scratch is allocated on the
/// call's own context (stream-ordered on CUDA) for each call.
pub struct DecodeAttention {
    pub scale: Option<f32>,
}

impl TesseraOp for DecodeAttention {
    const NAME: &'static str = "tessera-decode-attention";

    fn output_shape(&self, inputs: &[&TesseraTensor]) -> Vec<usize> {
        inputs[0].shape().to_vec()
    }

    fn call(
        &self,
        ctx: &Context,
        inputs: &[&TesseraTensor],
        out: &TesseraTensor,
    ) -> std::result::Result<(), OpError> {
        let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
        // The op checks every shape; the workspace only needs them to size its scratch.
        let dim = |t: &TesseraTensor, i: usize| t.shape().get(i).copied().unwrap_or(0);
        let (heads, head_dim, n_kv) = (dim(q, 0), dim(q, 1), dim(k, 1));
        let ws = DecodeWorkspace::for_cache(ctx, 1, heads, head_dim, n_kv)?;
        sdpa_decode(ctx, q, k, v, out, self.scale, &ws)
    }
}

impl CustomOp3 for DecodeAttention {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        cpu::run(self, &[(s1, l1), (s2, l2), (s3, l3)])
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
        s3: &candle_core::CudaStorage,
        l3: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        cuda::run(self, &[(s1, l1), (s2, l2), (s3, l3)])
    }
}
