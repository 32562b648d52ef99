//! The wrappers of the GGUF ops: they check the tensors against the format (a block size
//! that divides K, a byte length that matches N, K and the format) before launching.

use super::format::GgufFormat;
use super::kernels::{
    gguf_dequantize_kernel, gguf_qgemv_kernel, gguf_quantize_kernel, CHUNK, GROUP, ROWS_PER_GROUP,
};
use crate::error::{runtime, OpError};
use crate::quant::qgemm_formats::{gemm_rows, launch_quant_gemm, QgemmScheme, QgemmWeights};
use crate::validate::{
    distinct, distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES,
};
use tessera_runtime::{Context, DType, Tensor};

pub(super) const DEQUANTIZE: &str = "gguf_dequantize";
pub(super) const QGEMV: &str = "gguf_qgemv";
pub(super) const QGEMM: &str = "gguf_qgemm";
pub(super) const QUANTIZE: &str = "gguf_quantize";
/// Activation rows the GEMV takes (decode batches).
pub const MAX_GEMV_ROWS: usize = 16;

/// `[a, b]` of a 2-D tensor, or an error naming it.
fn matrix(op: &'static str, name: &str, t: &Tensor, dims: &str) -> Result<(usize, usize), OpError> {
    match *t.shape() {
        [a, b] if a > 0 && b > 0 => Ok((a, b)),
        _ => Err(OpError::invalid(
            op,
            format!(
                "`{name}` must be a non-empty {dims}, got shape {:?}",
                t.shape()
            ),
        )),
    }
}

/// Checks `w` (`[n, row_bytes]` u8) against `k` weights per row in `format`; returns
/// `row_bytes` as u32.
fn check_blocks(
    op: &'static str,
    w: &Tensor,
    n: usize,
    k: usize,
    format: GgufFormat,
) -> Result<u32, OpError> {
    dtype_is(op, "w", w, DType::U8)?;
    let (wn, row_bytes) = matrix(op, "w", w, "[n, row_bytes] of blocks")?;
    let qk = format.block_elems();
    if !k.is_multiple_of(qk) {
        return Err(OpError::invalid(
            op,
            format!(
                "K = {k} must be a multiple of {qk}, the weights of a {} block",
                format.name()
            ),
        ));
    }
    let want = format.row_bytes(k);
    if wn != n || row_bytes != want {
        return Err(OpError::invalid(
            op,
            format!(
                "`w` must be [{n}, {want}] bytes ({} blocks of {} bytes per row of K = {k}), got {:?}",
                k / qk,
                format.block_bytes(),
                w.shape()
            ),
        ));
    }
    fits_u32(op, "the byte length of `w`", w.len())?;
    fits_u32(op, "row_bytes", row_bytes)
}

/// `out[n, k]` = the weights of `w`'s blocks in `format`, computed in f32 as llama.cpp's
/// reference dequantization does (bit-exact in f32) and rounded once to `out`'s dtype.
pub fn gguf_dequantize(
    ctx: &Context,
    w: &Tensor,
    format: GgufFormat,
    out: &Tensor,
) -> Result<(), OpError> {
    let op = DEQUANTIZE;
    dtype_in(op, "out", out, &FLOAT_DTYPES)?;
    let (n, k) = matrix(op, "out", out, "[n, k]")?;
    let row_bytes = check_blocks(op, w, n, k, format)?;
    distinct(op, out, &[("w", w)])?;
    fits_u32(op, "the element count of `out`", out.len())?;
    let chunks = (n * k / CHUNK as usize) as u32;
    gguf_dequantize_kernel::launch(
        ctx,
        gguf_dequantize_kernel::Args {
            w,
            out,
            n: n as u32,
            k: k as u32,
            row_bytes,
        },
        gguf_dequantize_kernel::Consts {
            format: format as u32,
        },
    )
    .grid([chunks.div_ceil(GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(op))
}

/// `y[m, n] = x[m, k] · dequant(w)ᵀ` for 1 ≤ m ≤ 16 with f32 accumulation, reading `w`'s
/// blocks directly (never dequantized to memory). `y` has `x`'s dtype.
pub fn gguf_qgemv(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    format: GgufFormat,
    y: &Tensor,
) -> Result<(), OpError> {
    let op = QGEMV;
    dtype_in(op, "x", x, &FLOAT_DTYPES)?;
    let (m, k) = matrix(op, "x", x, "[m, k]")?;
    if m > MAX_GEMV_ROWS {
        return Err(OpError::invalid(
            op,
            format!("`x` has {m} rows; the GEMV takes 1 to {MAX_GEMV_ROWS}"),
        ));
    }
    dtype_is(op, "y", y, x.dtype())?;
    let (ym, n) = matrix(op, "y", y, "[m, n]")?;
    if ym != m {
        return Err(OpError::invalid(
            op,
            format!("`y` must have {m} rows like `x`, got shape {:?}", y.shape()),
        ));
    }
    let row_bytes = check_blocks(op, w, n, k, format)?;
    distinct(op, y, &[("x", x), ("w", w)])?;
    fits_u32(op, "the element count of `x`", x.len())?;
    fits_u32(op, "the element count of `y`", y.len())?;
    let groups = fits_u32(
        op,
        "the threadgroup count",
        n.div_ceil(ROWS_PER_GROUP as usize),
    )?;
    gguf_qgemv_kernel::launch(
        ctx,
        gguf_qgemv_kernel::Args {
            x,
            w,
            y,
            n: n as u32,
            k: k as u32,
            row_bytes,
        },
        gguf_qgemv_kernel::Consts {
            format: format as u32,
            m: m as u32,
        },
    )
    .grid([groups, 1, 1])
    .group_size(ROWS_PER_GROUP * 32)
    .run()
    .map_err(runtime(op))
}

/// `y[m, n] = x[m, k] · dequant(w)ᵀ` for any m ≥ 1 (the GEMM of prefill; `gguf_qgemv` is
/// the faster path for m ≤ 16) on `quant_gemm_kernel`'s tiles: each weight computed in f32
/// as `gguf_dequantize` does and rounded once to `x`'s dtype (f16 or bf16) on its way into
/// the tensor cores' tiles, never to memory; accumulated in f32. K is a multiple of 8 and
/// of the block.
pub fn gguf_qgemm(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    format: GgufFormat,
    y: &Tensor,
) -> Result<(), OpError> {
    let op = QGEMM;
    let (m, k) = gemm_rows(op, x)?;
    dtype_is(op, "y", y, x.dtype())?;
    let (n, _) = matrix(op, "w", w, "[n, row_bytes] of blocks")?;
    let row_bytes = check_blocks(op, w, n, k, format)?;
    shape_is(op, "y", y, &[m, n])?;
    distinct(op, y, &[("x", x), ("w", w)])?;
    let weights = QgemmWeights {
        w,
        zeros: w,
        scales: x,
        dims: row_bytes,
        blocks: (1, 1, 0),
        scheme: QgemmScheme::Gguf(format),
    };
    launch_quant_gemm(ctx, op, (x, y), weights, (m, n, k))
}

/// `w[n, row_bytes]` = the float `x[n, k]` in Q4_0 or Q8_0 blocks, byte for byte what
/// llama.cpp's `quantize_row_q4_0_ref` / `quantize_row_q8_0_ref` write (a NaN scale is
/// stored as 0x7e00). The K formats' quantizers are not provided.
pub fn gguf_quantize(
    ctx: &Context,
    x: &Tensor,
    format: GgufFormat,
    w: &Tensor,
) -> Result<(), OpError> {
    let op = QUANTIZE;
    if !matches!(format, GgufFormat::Q4_0 | GgufFormat::Q8_0) {
        return Err(OpError::invalid(
            op,
            format!(
                "quantizing to {} is not provided; q4_0 and q8_0 are",
                format.name()
            ),
        ));
    }
    dtype_in(op, "x", x, &FLOAT_DTYPES)?;
    let (n, k) = matrix(op, "x", x, "[n, k]")?;
    check_blocks(op, w, n, k, format)?;
    distinct_named(op, "w", w, &[("x", x)])?;
    fits_u32(op, "the element count of `x`", x.len())?;
    let blocks = (n * k / format.block_elems()) as u32;
    gguf_quantize_kernel::launch(
        ctx,
        gguf_quantize_kernel::Args { x, w, blocks },
        gguf_quantize_kernel::Consts {
            format: format as u32,
        },
    )
    .grid([blocks.div_ceil(GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(op))
}
