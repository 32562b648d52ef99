//! Registered cases of the GGUF ops: random blocks of every format whose f16 fields take
//! the patterns that matter (scales across f16's range, negative, subnormal, zero; all-zero
//! blocks; Q6_K's signed scales come from the random bytes), dequantized bit-exact against
//! llama.cpp's reference math in every float dtype; non-finite scales that must surface
//! in exactly their rows; the GEMV over every format, activation dtype and M = 1, 3, 16
//! with odd N; Q4_0 / Q8_0 quantization byte-exact against llama.cpp's reference math
//! (ties, equal positive and negative peaks, zero blocks, every binade) and within a
//! scale of its input after the round trip; hand-written rejections; specialisations;
//! bench shapes.

use super::format::{GgufFormat, FORMATS};
use super::kernels::{gguf_dequantize_kernel, gguf_qgemv_kernel, gguf_quantize_kernel};
use super::ops::{gguf_dequantize, gguf_qgemv, gguf_quantize, DEQUANTIZE, QGEMV, QUANTIZE};
use super::reference;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, Outcome, PreparedBench};
use crate::testing::{accuracy, compare, err, random_tensor, rejection, zeros, CaseRng, Refused};
use crate::validate::FLOAT_DTYPES;
use half::{bf16, f16};
use tessera_ir::{Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

/// Byte offsets of a block's f16 fields (`d`, then `dmin` for Q4_K and Q5_K).
fn half_fields(format: GgufFormat) -> &'static [usize] {
    match format {
        GgufFormat::Q4_0 | GgufFormat::Q8_0 => &[0],
        GgufFormat::Q4K | GgufFormat::Q5K => &[0, 2],
        GgufFormat::Q6K => &[208],
    }
}

/// How wide the random f16 scales range.
#[derive(Clone, Copy)]
pub(crate) enum Scales {
    /// Anywhere in f16's finite range (dequantization: overflow to ±inf in f16/bf16
    /// outputs is part of what is checked).
    FullRange,
    /// Around 2^-8, so that a GEMV's sums stay well inside every dtype.
    Moderate,
}

/// An f16 scale: mostly random of either sign, sometimes zero, −0 or subnormal.
fn random_half(rng: &mut CaseRng, scales: Scales) -> f16 {
    let sign = if rng.int(0, 2) == 1 { -1.0 } else { 1.0 };
    let v = match rng.int(0, 12) {
        0 => return f16::from_bits(if rng.int(0, 2) == 1 { 0x8000 } else { 0 }),
        1 => return f16::from_bits(rng.int(1, 0x400) as u16 | ((rng.int(0, 2) as u16) << 15)),
        _ => match scales {
            Scales::FullRange => rng.uniform(1.0, 2.0) * 2f64.powi(rng.int(0, 30) as i32 - 14),
            Scales::Moderate => rng.uniform(1.0, 2.0) * 2f64.powi(rng.int(0, 4) as i32 - 10),
        },
    };
    f16::from_f64(sign * v)
}

/// `rows` rows of `k` weights in `format`: random bytes, f16 fields from
/// [`random_half`], about one block in eight all zero.
pub(crate) fn random_blocks(
    rng: &mut CaseRng,
    format: GgufFormat,
    rows: usize,
    k: usize,
    scales: Scales,
) -> Vec<u8> {
    let size = format.block_bytes();
    let mut bytes = Vec::with_capacity(rows * format.row_bytes(k));
    for _ in 0..rows * k / format.block_elems() {
        let mut block: Vec<u8> = (0..size).map(|_| rng.int(0, 256) as u8).collect();
        if rng.int(0, 8) == 0 {
            block.iter_mut().for_each(|b| *b = 0);
        } else {
            for &at in half_fields(format) {
                let h = random_half(rng, scales).to_bits().to_le_bytes();
                block[at..at + 2].copy_from_slice(&h);
            }
        }
        bytes.extend_from_slice(&block);
    }
    bytes
}

/// `v` rounded once to `dtype`, as f64.
pub(crate) fn rounded(dtype: DType, v: f32) -> f64 {
    match dtype {
        DType::F16 => f16::from_f32(v).to_f64(),
        DType::BF16 => bf16::from_f32(v).to_f64(),
        _ => v as f64,
    }
}

/// Equal bits (so −0 is not +0), NaN where the reference is NaN.
fn exact(got: &[f64], want: &[f64]) -> Result<Outcome, String> {
    if got.len() != want.len() || got.is_empty() {
        return Err(format!("{} values, expected {}", got.len(), want.len()));
    }
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let same = if w.is_nan() {
            g.is_nan()
        } else {
            g.to_bits() == w.to_bits()
        };
        if !same {
            return Err(format!("out[{i}] = {g:e}, expected {w:e}"));
        }
    }
    Ok(Outcome {
        checked: got.len(),
        ..Outcome::default()
    })
}

pub(crate) fn upload_blocks(ctx: &Context, bytes: &[u8], rows: usize) -> Result<Tensor, String> {
    ctx.tensor(bytes, &[rows, bytes.len() / rows]).map_err(err)
}

/// Dequantizes random blocks; `poison` puts ±inf or NaN in the `d` of a few blocks,
/// whose weights must come out non-finite (the reference says which).
fn dequantize_case(
    format: GgufFormat,
    dtype: DType,
    n: usize,
    blocks: usize,
    poison: bool,
) -> Case {
    let k = blocks * format.block_elems();
    Case {
        op: DEQUANTIZE,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!(
            "{} N={n} K={k}{}",
            format.name(),
            if poison { " non-finite d" } else { "" }
        ),
        run: Box::new(move |ctx, rng| {
            let mut bytes = random_blocks(rng, format, n, k, Scales::FullRange);
            if poison {
                let patterns = [0x7c00u16, 0xfc00, 0x7e00, 0xfe01];
                let total = n * blocks;
                for (i, p) in patterns.iter().enumerate() {
                    let at = (i * 7919 + rng.int(0, total as u32) as usize) % total
                        * format.block_bytes()
                        + half_fields(format)[0];
                    bytes[at..at + 2].copy_from_slice(&p.to_le_bytes());
                }
            }
            let w = upload_blocks(ctx, &bytes, n)?;
            let out = ctx.full_nan(dtype, &[n, k]).map_err(err)?;
            gguf_dequantize(ctx, &w, format, &out).map_err(err)?;
            let want: Vec<f64> = reference::dequantize(format, &bytes, n, k)
                .into_iter()
                .map(|v| rounded(dtype, v))
                .collect();
            exact(&out.to_f64_vec().map_err(err)?, &want)
        }),
    }
}

fn qgemv_case(format: GgufFormat, dtype: DType, m: usize, n: usize, blocks: usize) -> Case {
    let k = blocks * format.block_elems();
    Case {
        op: QGEMV,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("{} M={m} N={n} K={k}", format.name()),
        run: Box::new(move |ctx, rng| {
            let bytes = random_blocks(rng, format, n, k, Scales::Moderate);
            let w = upload_blocks(ctx, &bytes, n)?;
            let (x, xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
            let y = ctx.full_nan(dtype, &[m, n]).map_err(err)?;
            gguf_qgemv(ctx, &x, &w, format, &y).map_err(err)?;
            let wv = reference::dequantize(format, &bytes, n, k);
            let want = reference::qgemv(&xv, &wv, m, n, k);
            compare(
                &y.to_f64_vec().map_err(err)?,
                &want,
                accuracy(QGEMV, dtype)?,
            )
        }),
    }
}

pub(super) fn dequantize_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for format in FORMATS {
        for dtype in FLOAT_DTYPES {
            for (n, blocks) in [(1, 1), (3, 2), (7, 3)] {
                v.push(dequantize_case(format, dtype, n, blocks, false));
            }
            v.push(dequantize_case(format, dtype, 5, 2, true));
        }
    }
    v.push(rejection(
        DEQUANTIZE,
        "K not a multiple of 256",
        "must be a multiple of 256",
        |ctx| {
            let w = zeros(ctx, DType::U8, &[2, 144])?;
            let out = zeros(ctx, DType::F32, &[2, 128])?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || gguf_dequantize(&c, &w, GgufFormat::Q4K, &o)) as Refused,
            ))
        },
    ));
    v.push(rejection(
        DEQUANTIZE,
        "row bytes of another format",
        "`w` must be [2, 36]",
        |ctx| {
            let w = zeros(ctx, DType::U8, &[2, 68])?;
            let out = zeros(ctx, DType::F16, &[2, 64])?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || gguf_dequantize(&c, &w, GgufFormat::Q4_0, &o)) as Refused,
            ))
        },
    ));
    v.push(rejection(
        DEQUANTIZE,
        "blocks as i8",
        "`w` must be u8",
        |ctx| {
            let w = zeros(ctx, DType::I8, &[2, 34])?;
            let out = zeros(ctx, DType::F32, &[2, 32])?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || gguf_dequantize(&c, &w, GgufFormat::Q8_0, &o)) as Refused,
            ))
        },
    ));
    v
}

pub(super) fn qgemv_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for format in FORMATS {
        for dtype in FLOAT_DTYPES {
            let blocks = if format.block_elems() == 32 { 24 } else { 3 };
            for (m, n) in [(1, 7), (3, 33), (16, 5)] {
                v.push(qgemv_case(format, dtype, m, n, blocks));
            }
            v.push(qgemv_case(format, dtype, 2, 1, 1));
        }
    }
    let bad = |what: &str,
               reason: &'static str,
               x: [usize; 2],
               w: (DType, [usize; 2]),
               y: (DType, [usize; 2])| {
        rejection(QGEMV, what, reason, move |ctx| {
            let x = zeros(ctx, DType::BF16, &x)?;
            let w = zeros(ctx, w.0, &w.1)?;
            let out = zeros(ctx, y.0, &y.1)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || gguf_qgemv(&c, &x, &w, GgufFormat::Q4K, &o)) as Refused,
            ))
        })
    };
    v.push(bad(
        "17 activation rows",
        "the GEMV takes 1 to 16",
        [17, 256],
        (DType::U8, [3, 144]),
        (DType::BF16, [17, 3]),
    ));
    v.push(bad(
        "K of half a block",
        "must be a multiple of 256",
        [1, 128],
        (DType::U8, [3, 72]),
        (DType::BF16, [1, 3]),
    ));
    v.push(bad(
        "a row of blocks too short",
        "`w` must be [3, 144]",
        [1, 256],
        (DType::U8, [3, 143]),
        (DType::BF16, [1, 3]),
    ));
    v.push(bad(
        "y in f32 for bf16 x",
        "`y` must be bf16",
        [1, 256],
        (DType::U8, [3, 144]),
        (DType::F32, [1, 3]),
    ));
    v.push(bad(
        "y with other rows",
        "`y` must have 1 rows",
        [1, 256],
        (DType::U8, [3, 144]),
        (DType::BF16, [2, 3]),
    ));
    v
}

pub(super) fn dequantize_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for format in FORMATS {
        for dtype in FLOAT_DTYPES {
            v.push(KernelUse {
                def: &gguf_dequantize_kernel::DEF,
                spec: Specialization::new(vec![dtype], vec![Literal::U32(format as u32)]),
            });
        }
    }
    v
}

/// The activation-row counts compiled ahead (any 1..=16 compiles on first use).
const GEMV_ROWS: [u32; 6] = [1, 2, 3, 4, 8, 16];

pub(super) fn qgemv_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for format in FORMATS {
        for dtype in FLOAT_DTYPES {
            for m in GEMV_ROWS {
                v.push(KernelUse {
                    def: &gguf_qgemv_kernel::DEF,
                    spec: Specialization::new(
                        vec![dtype],
                        vec![Literal::U32(format as u32), Literal::U32(m)],
                    ),
                });
            }
        }
    }
    v
}

/// The formats benchmarked, and the weight shapes `[N, K]` (a Llama-3-8B MLP's).
const BENCH_FORMATS: [GgufFormat; 4] = [
    GgufFormat::Q4_0,
    GgufFormat::Q8_0,
    GgufFormat::Q4K,
    GgufFormat::Q6K,
];
const BENCH_SHAPES: [(usize, usize, bool); 3] = [
    (256, 1024, true),
    (4096, 14336, false),
    (14336, 4096, false),
];

pub(super) fn qgemv_benches() -> Vec<BenchCase> {
    let dtype = DType::BF16;
    let mut v = Vec::new();
    for format in BENCH_FORMATS {
        for (n, k, quick) in BENCH_SHAPES {
            for m in [1usize, 16] {
                let w_bytes = n * format.row_bytes(k);
                v.push(BenchCase {
                    op: QGEMV,
                    kernel: "gguf_qgemv_kernel",
                    dtype,
                    shape: format!("{} M={m} N={n} K={k}", format.name()),
                    // What the kernel reads: the blocks and the activations.
                    bytes: (w_bytes + m * k * dtype.size_bytes()) as u64,
                    flops: (2 * m * n * k) as u64,
                    quick,
                    prepare: Box::new(move |ctx, rng| {
                        let bytes = random_blocks(rng, format, n, k, Scales::Moderate);
                        let w = upload_blocks(ctx, &bytes, n)?;
                        let (x, xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
                        let y = ctx.full_nan(dtype, &[m, n]).map_err(err)?;
                        let wv = reference::dequantize(format, &bytes, n, k);
                        let (c, o) = (ctx.clone(), y.clone());
                        Ok(PreparedBench {
                            launch: Box::new(move || {
                                gguf_qgemv(&c, &x, &w, format, &o).map_err(err)
                            }),
                            output: y,
                            reference: reference::qgemv(&xv, &wv, m, n, k),
                        })
                    }),
                });
            }
        }
    }
    v
}

pub(super) fn dequantize_benches() -> Vec<BenchCase> {
    let dtype = DType::BF16;
    let mut v = Vec::new();
    for format in BENCH_FORMATS {
        for (n, k, quick) in BENCH_SHAPES.into_iter().take(2) {
            let w_bytes = n * format.row_bytes(k);
            v.push(BenchCase {
                op: DEQUANTIZE,
                kernel: "gguf_dequantize_kernel",
                dtype,
                shape: format!("{} N={n} K={k}", format.name()),
                bytes: (w_bytes + n * k * dtype.size_bytes()) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let bytes = random_blocks(rng, format, n, k, Scales::Moderate);
                    let w = upload_blocks(ctx, &bytes, n)?;
                    let out = ctx.full_nan(dtype, &[n, k]).map_err(err)?;
                    let reference = reference::dequantize(format, &bytes, n, k)
                        .into_iter()
                        .map(|v| rounded(dtype, v))
                        .collect();
                    let (c, o) = (ctx.clone(), out.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || gguf_dequantize(&c, &w, format, &o).map_err(err)),
                        output: out,
                        reference,
                    })
                }),
            });
        }
    }
    v
}

/// Values to quantize, block by block: uniform over a random binade, all zero, a lone
/// value, equal positive and negative peaks (the first wins Q4_0's scale), or multiples
/// of a quarter of a power of two (exact ties of the rounding).
fn quantize_inputs(rng: &mut CaseRng, len: usize) -> Vec<f64> {
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        let scale = 2f64.powi(rng.int(0, 40) as i32 - 20);
        let kind = rng.int(0, 6);
        for j in 0..32 {
            v.push(match kind {
                0 => 0.0,
                1 => {
                    if j == 5 {
                        scale
                    } else {
                        0.0
                    }
                }
                2 => match j {
                    3 => scale,
                    9 => -scale,
                    _ => rng.uniform(-scale, scale) / 2.0,
                },
                3 => f64::from(rng.int(0, 65) as i32 - 32) * scale / 4.0,
                _ => rng.uniform(-scale, scale),
            });
        }
    }
    v.truncate(len);
    v
}

fn quantize_case(format: GgufFormat, dtype: DType, n: usize, k: usize) -> Case {
    Case {
        op: QUANTIZE,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("{} N={n} K={k}", format.name()),
        run: Box::new(move |ctx, rng| {
            let (x, xv) =
                crate::testing::upload(ctx, dtype, &quantize_inputs(rng, n * k), &[n, k])?;
            let w = ctx
                .zeros(DType::U8, &[n, format.row_bytes(k)])
                .map_err(err)?;
            gguf_quantize(ctx, &x, format, &w).map_err(err)?;
            let got: Vec<u8> = w.to_vec().map_err(err)?;
            let xf: Vec<f32> = xv.iter().map(|&v| v as f32).collect();
            let want = reference::quantize(format, &xf);
            if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                return Err(format!(
                    "byte {i} (block {}, offset {}) = {:#04x}, llama.cpp writes {:#04x}",
                    i / format.block_bytes(),
                    i % format.block_bytes(),
                    got[i],
                    want[i]
                ));
            }
            // The round trip lands within one scale of every input, where the scale is a
            // normal f16 (a smaller one is rounded coarsely or to zero, as llama.cpp does).
            let back = reference::dequantize(format, &got, n, k);
            for (b, (&y, &xx)) in back.iter().zip(&xf).enumerate() {
                let block = &got[b / 32 * format.block_bytes()..];
                let d = f16::from_le_bytes([block[0], block[1]]).to_f32().abs();
                if d >= 6.103_515_6e-5 && (y - xx).abs() > d * 1.01 {
                    return Err(format!("x[{b}] = {xx} comes back as {y} (scale {d})"));
                }
            }
            Ok(Outcome {
                checked: got.len(),
                ..Outcome::default()
            })
        }),
    }
}

pub(super) fn quantize_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for format in [GgufFormat::Q4_0, GgufFormat::Q8_0] {
        for dtype in FLOAT_DTYPES {
            for (n, k) in [(1, 32), (3, 64), (7, 256)] {
                v.push(quantize_case(format, dtype, n, k));
            }
        }
    }
    v.push(rejection(
        QUANTIZE,
        "a K format",
        "quantizing to q4_k is not provided",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 256])?;
            let w = zeros(ctx, DType::U8, &[2, 144])?;
            let (c, o) = (ctx.clone(), w.clone());
            Ok((
                w,
                Box::new(move || gguf_quantize(&c, &x, GgufFormat::Q4K, &o)) as Refused,
            ))
        },
    ));
    v.push(rejection(
        QUANTIZE,
        "blocks as i8",
        "`w` must be u8",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[2, 32])?;
            let w = zeros(ctx, DType::I8, &[2, 34])?;
            let (c, o) = (ctx.clone(), w.clone());
            Ok((
                w,
                Box::new(move || gguf_quantize(&c, &x, GgufFormat::Q8_0, &o)) as Refused,
            ))
        },
    ));
    v
}

pub(super) fn quantize_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for format in [GgufFormat::Q4_0, GgufFormat::Q8_0] {
        for dtype in FLOAT_DTYPES {
            v.push(KernelUse {
                def: &gguf_quantize_kernel::DEF,
                spec: Specialization::new(vec![dtype], vec![Literal::U32(format as u32)]),
            });
        }
    }
    v
}

pub(super) fn quantize_benches() -> Vec<BenchCase> {
    let dtype = DType::BF16;
    let mut v = Vec::new();
    for format in [GgufFormat::Q4_0, GgufFormat::Q8_0] {
        for (n, k, quick) in BENCH_SHAPES.into_iter().take(2) {
            v.push(BenchCase {
                op: QUANTIZE,
                kernel: "gguf_quantize_kernel",
                dtype,
                shape: format!("{} N={n} K={k}", format.name()),
                bytes: (n * k * dtype.size_bytes() + n * format.row_bytes(k)) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = random_tensor(ctx, rng, dtype, &[n, k], -1.0, 1.0)?;
                    let w = ctx
                        .zeros(DType::U8, &[n, format.row_bytes(k)])
                        .map_err(err)?;
                    let xf: Vec<f32> = xv.iter().map(|&v| v as f32).collect();
                    let reference = reference::quantize(format, &xf)
                        .into_iter()
                        .map(f64::from)
                        .collect();
                    let (c, o) = (ctx.clone(), w.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || gguf_quantize(&c, &x, format, &o).map_err(err)),
                        output: w,
                        reference,
                    })
                }),
            });
        }
    }
    v
}
