//! The two 8-bit float formats of checkpoints, stored one byte a value (u8 tensors), and
//! how their scales tile a matrix.
//!
//! - **e4m3** is PyTorch's `torch.float8_e4m3fn` (OCP E4M3FN): sign, 4 exponent bits with
//!   bias 7, 3 mantissa bits; no infinities, the largest finite value 448 (`S.1111.110`),
//!   NaN `S.1111.111`; subnormals `m·2^-9`.
//! - **e5m2** is `torch.float8_e5m2`: sign, 5 exponent bits with bias 15, 2 mantissa bits,
//!   IEEE-style: exponent 31 is ±inf (mantissa 0) or NaN; the largest finite value 57344;
//!   subnormals `m·2^-16`.
//!
//! A value is `fp8 · scale` with f32 scales: one for the whole tensor (`tensor`, scale
//! `[1, 1]`), one per 128 consecutive values of a row (`1x128`, DeepSeek-V3's per-token
//! groups of activations, scale `[N, ceil(K/128)]`) or one per 128×128 tile (`128x128`,
//! DeepSeek-V3's weights, whose `weight_scale_inv` is this `[ceil(N/128), ceil(K/128)]`
//! scale: `w = fp8 · weight_scale_inv`). The last tiles of a row or column may be partial.

use crate::error::OpError;
use crate::validate::{distinct_named, dtype_is, shape_is};
use tessera_runtime::{DType, Tensor};

/// The fp8 formats, by the name the ops take.
pub const FP8_FORMAT_NAMES: [&str; 2] = ["e4m3", "e5m2"];
/// The scale layouts, by the name the ops take.
pub const FP8_SCALING_NAMES: [&str; 3] = ["tensor", "1x128", "128x128"];

/// One fp8 format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Format {
    /// `torch.float8_e4m3fn`.
    E4m3,
    /// `torch.float8_e5m2`.
    E5m2,
}

impl Fp8Format {
    /// The format named `name` (`e4m3` or `e5m2`).
    pub fn parse(op: &'static str, name: &str) -> Result<Self, OpError> {
        match name {
            "e4m3" => Ok(Fp8Format::E4m3),
            "e5m2" => Ok(Fp8Format::E5m2),
            _ => Err(OpError::invalid(
                op,
                format!("format must be e4m3 or e5m2, got `{name}`"),
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Fp8Format::E4m3 => "e4m3",
            Fp8Format::E5m2 => "e5m2",
        }
    }

    /// The kernels' constexpr: 0 for e4m3, 1 for e5m2.
    pub fn code(self) -> u32 {
        match self {
            Fp8Format::E4m3 => 0,
            Fp8Format::E5m2 => 1,
        }
    }

    /// The largest finite value: what a quantizer's scale maps a block's largest
    /// magnitude to, and where it saturates.
    pub fn max(self) -> f32 {
        match self {
            Fp8Format::E4m3 => 448.0,
            Fp8Format::E5m2 => 57344.0,
        }
    }
}

/// One layout of the scales over an `[N, K]` matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Scaling {
    /// One scale, `[1, 1]`.
    Tensor,
    /// One scale per 128 values of a row, `[N, ceil(K/128)]`.
    Row128,
    /// One scale per 128×128 tile, `[ceil(N/128), ceil(K/128)]`.
    Tile128,
}

impl Fp8Scaling {
    /// The layout named `name` (`tensor`, `1x128` or `128x128`).
    pub fn parse(op: &'static str, name: &str) -> Result<Self, OpError> {
        match name {
            "tensor" => Ok(Fp8Scaling::Tensor),
            "1x128" => Ok(Fp8Scaling::Row128),
            "128x128" => Ok(Fp8Scaling::Tile128),
            _ => Err(OpError::invalid(
                op,
                format!("scaling must be tensor, 1x128 or 128x128, got `{name}`"),
            )),
        }
    }

    /// (rows, columns) of `[n, k]` one scale covers.
    pub fn block(self, (n, k): (usize, usize)) -> (usize, usize) {
        match self {
            Fp8Scaling::Tensor => (n, k),
            Fp8Scaling::Row128 => (1, 128),
            Fp8Scaling::Tile128 => (128, 128),
        }
    }

    /// The scale's shape for `[n, k]`.
    pub fn scale_shape(self, (n, k): (usize, usize)) -> [usize; 2] {
        let (bn, bk) = self.block((n, k));
        [n.div_ceil(bn.max(1)), k.div_ceil(bk.max(1))]
    }

    /// `scale` is f32 of the shape this layout gives `[n, k]`.
    pub fn check_scale(
        self,
        op: &'static str,
        scale: &Tensor,
        (n, k): (usize, usize),
    ) -> Result<(), OpError> {
        dtype_is(op, "scale", scale, DType::F32)?;
        shape_is(op, "scale", scale, &self.scale_shape((n, k)))
    }
}

/// A non-empty `[N, K]` matrix: (N, K).
pub fn matrix(op: &'static str, name: &str, t: &Tensor) -> Result<(usize, usize), OpError> {
    match *t.shape() {
        [n, k] if n > 0 && k > 0 => Ok((n, k)),
        ref s => Err(OpError::invalid(
            op,
            format!("`{name}` must be a non-empty matrix [N, K], got shape {s:?}"),
        )),
    }
}

/// The weights of a product `y[m, n] = x[m, k]·(fp8(w)·scale)ᵀ`: `w` u8 `[N, k]`, `scale` as
/// `scaling` lays it out, `y` `[m, N]` in x's dtype aliasing no input. Returns N.
pub fn check_weights(
    op: &'static str,
    (x, w, scale, y): (&Tensor, &Tensor, &Tensor, &Tensor),
    (m, k): (usize, usize),
    scaling: Fp8Scaling,
) -> Result<usize, OpError> {
    dtype_is(op, "w", w, DType::U8)?;
    dtype_is(op, "y", y, x.dtype())?;
    distinct_named(op, "y", y, &[("x", x), ("w", w), ("scale", scale)])?;
    let (n, wk) = matrix(op, "w", w)?;
    if wk != k {
        return Err(OpError::invalid(
            op,
            format!(
                "`w` must be [N, {k}] (as `x` has K = {k}), got shape {:?}",
                w.shape()
            ),
        ));
    }
    scaling.check_scale(op, scale, (n, k))?;
    shape_is(op, "y", y, &[m, n])?;
    Ok(n)
}
