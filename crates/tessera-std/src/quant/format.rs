//! MLX's affine quantization format, as `mx.quantize(w, group_size, bits)` writes it: each
//! row of `w` `[N, K]` is cut into groups of `group_size` values; a group keeps one scale
//! and one bias (in `w`'s dtype) and each value becomes `q = clamp(rint((w − bias) / scale),
//! 0, 2^bits − 1)`, so that `w ≈ scale·q + bias`. A row's `q`s are one little-endian bit
//! stream, value `j` at bits `j·bits .. (j + 1)·bits`, stored as `K·bits/32` u32 words:
//! 3-, 5- and 6-bit values straddle word boundaries. Every group is a whole number of words
//! (`group_size·bits` is a multiple of 32), so 32 values are always `bits` whole words.

use crate::error::OpError;
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_runtime::{DType, Tensor};

/// The bit widths MLX's affine quantization takes.
pub const AFFINE_BITS: [u32; 6] = [2, 3, 4, 5, 6, 8];
/// The group sizes it takes.
pub const AFFINE_GROUP_SIZES: [u32; 3] = [32, 64, 128];

/// One affine format: bits per value and values per group (scale and bias).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AffineFormat {
    pub bits: u32,
    pub group_size: u32,
}

impl AffineFormat {
    /// The format, if MLX defines it; otherwise the error says which values are allowed.
    pub fn new(op: &'static str, bits: u32, group_size: u32) -> Result<Self, OpError> {
        if !AFFINE_BITS.contains(&bits) {
            return Err(OpError::invalid(
                op,
                format!("bits must be one of 2, 3, 4, 5, 6, 8 (MLX's affine widths), got {bits}"),
            ));
        }
        if !AFFINE_GROUP_SIZES.contains(&group_size) {
            return Err(OpError::invalid(
                op,
                format!("group_size must be 32, 64 or 128, got {group_size}"),
            ));
        }
        Ok(AffineFormat { bits, group_size })
    }

    /// u32 words of a row of `k` values.
    pub fn words(self, k: usize) -> usize {
        k * self.bits as usize / 32
    }

    /// Groups (scales, biases) of a row of `k` values.
    pub fn groups(self, k: usize) -> usize {
        k / self.group_size as usize
    }

    /// `k` is a positive multiple of the group size (MLX refuses any other).
    pub fn check_row(self, op: &'static str, k: usize) -> Result<(), OpError> {
        if k > 0 && k.is_multiple_of(self.group_size as usize) {
            return Ok(());
        }
        Err(OpError::invalid(
            op,
            format!(
                "K = {k} must be a positive multiple of the group size {} (each group of K keeps one scale and bias)",
                self.group_size
            ),
        ))
    }

    /// The weights of `y[M, N] = x[M, K]·dequant(W)ᵀ`: `packed` `[N, K·bits/32]` u32,
    /// `scales` and `biases` `[N, K/group_size]` and `y` `[M, N]` in `x`'s dtype, `y`
    /// apart from every input, every count within u32: returns N.
    pub fn check_weights(
        self,
        op: &'static str,
        (x, m, k): (&Tensor, usize, usize),
        (packed, scales, biases): (&Tensor, &Tensor, &Tensor),
        y: &Tensor,
    ) -> Result<usize, OpError> {
        dtype_is(op, "scales", scales, x.dtype())?;
        dtype_is(op, "y", y, x.dtype())?;
        distinct_named(
            op,
            "y",
            y,
            &[
                ("x", x),
                ("packed", packed),
                ("scales", scales),
                ("biases", biases),
            ],
        )?;
        dtype_is(op, "packed", packed, DType::U32)?;
        dtype_is(op, "biases", biases, x.dtype())?;
        let n = match *packed.shape() {
            [n, words] if n > 0 && words == self.words(k) => n,
            ref s => {
                return Err(OpError::invalid(
                    op,
                    format!(
                        "`packed` must be [N, {}] ({k} {}-bit values per row, as `x` has K = {k}), got shape {s:?}",
                        self.words(k),
                        self.bits
                    ),
                ))
            }
        };
        shape_is(op, "scales", scales, &[n, self.groups(k)])?;
        shape_is(op, "biases", biases, &[n, self.groups(k)])?;
        shape_is(op, "y", y, &[m, n])?;
        fits_u32(op, "the element count of `x`", x.len())?;
        fits_u32(op, "the word count of `packed`", packed.len())?;
        fits_u32(op, "the element count of `y`", y.len())?;
        Ok(n)
    }

    /// `packed` `[N, K·bits/32]` u32 with `scales` and `biases` `[N, K/group_size]` of one
    /// float dtype: returns (N, K).
    pub fn check_quantized(
        self,
        op: &'static str,
        packed: &Tensor,
        scales: &Tensor,
        biases: &Tensor,
    ) -> Result<(usize, usize), OpError> {
        dtype_is(op, "packed", packed, DType::U32)?;
        dtype_in(op, "scales", scales, &FLOAT_DTYPES)?;
        dtype_is(op, "biases", biases, scales.dtype())?;
        let (n, words) = match *packed.shape() {
            [n, words] if n > 0 && words > 0 => (n, words),
            ref s => {
                return Err(OpError::invalid(
                    op,
                    format!("`packed` must be a non-empty matrix [N, K·bits/32], got shape {s:?}"),
                ))
            }
        };
        if !(words * 32).is_multiple_of(self.bits as usize) {
            return Err(OpError::invalid(
                op,
                format!(
                    "`packed` has {words} words per row, which hold no whole number of {}-bit values",
                    self.bits
                ),
            ));
        }
        let k = words * 32 / self.bits as usize;
        self.check_row(op, k)?;
        shape_is(op, "scales", scales, &[n, self.groups(k)])?;
        shape_is(op, "biases", biases, &[n, self.groups(k)])?;
        Ok((n, k))
    }
}
