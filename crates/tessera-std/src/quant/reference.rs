//! References for MLX's affine format, written from MLX's definition
//! (`mlx/backend/cpu/quantized.cpp`, `quantize`; `mlx/ops.cpp`, `affine_dequantize`), not
//! from our kernels. Quantization is defined by f32 arithmetic (MLX computes it in f32 and
//! our bytes must be its bytes), so the reference does that arithmetic in f32, one IEEE
//! operation at a time; the packing is a plain bit stream, built bit by bit. The GEMV
//! reference is the exact math in f64 on the values the format stands for.

use crate::elementwise::reference::round_to;
use tessera_runtime::DType;

/// `packed` words, scales and biases (the latter rounded to `dtype`) of `w` `[n, k]`.
pub struct Quantized {
    pub packed: Vec<f64>,
    pub scales: Vec<f64>,
    pub biases: Vec<f64>,
}

/// MLX's affine quantization of `w` (values of `dtype`, rows a multiple of `group` long).
pub fn quantize(w: &[f64], bits: u32, group: usize, dtype: DType) -> Quantized {
    let n_bins = ((1u32 << bits) - 1) as f32;
    let mut codes: Vec<u32> = Vec::with_capacity(w.len());
    let mut scales = Vec::with_capacity(w.len() / group);
    let mut biases = Vec::with_capacity(w.len() / group);
    for chunk in w.chunks(group) {
        let vals: Vec<f32> = chunk.iter().map(|&v| v as f32).collect();
        // f32::min/max ignore a NaN, as MLX's std::min/std::max loop over the group does.
        let lo = vals.iter().fold(f32::INFINITY, |a, &v| a.min(v));
        let hi = vals.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v));
        let below = lo.abs() > hi.abs();
        let step = ((hi - lo) / n_bins).max(1e-7);
        let step = if below { step } else { -step };
        let edge = if below { lo } else { hi };
        let q0 = (edge / step).round_ties_even();
        let (scale, bias) = if q0 != 0.0 {
            (edge / q0, edge)
        } else {
            (step, 0.0)
        };
        for &v in &vals {
            // NaN quantizes to 0 (a NaN clamped against 0 gives 0, as in the kernel).
            let q = ((v - bias) / scale).round_ties_even().max(0.0).min(n_bins);
            codes.push(q as u32);
        }
        scales.push(round_to(dtype, scale as f64));
        biases.push(round_to(dtype, bias as f64));
    }
    Quantized {
        packed: pack(&codes, bits).into_iter().map(f64::from).collect(),
        scales,
        biases,
    }
}

/// Codes as one little-endian bit stream, code `j` at bits `j·bits ..`, cut into u32
/// words (the stream's length is a multiple of 32 for every affine row).
pub fn pack(codes: &[u32], bits: u32) -> Vec<u32> {
    let total = codes.len() * bits as usize;
    let mut words = vec![0u32; total.div_ceil(32)];
    for (j, &c) in codes.iter().enumerate() {
        for b in 0..bits as usize {
            if (c >> b) & 1 == 1 {
                let at = j * bits as usize + b;
                words[at / 32] |= 1 << (at % 32);
            }
        }
    }
    words
}

/// Code `j` of a packed bit stream.
pub fn code(words: &[f64], j: usize, bits: u32) -> u32 {
    (0..bits as usize).fold(0, |c, b| {
        let at = j * bits as usize + b;
        let word = words[at / 32] as u32;
        c | (((word >> (at % 32)) & 1) << b)
    })
}

/// MLX's dequantization of `packed` `[n, k·bits/32]` with `scales`, `biases` `[n,
/// k/group]` of `dtype`: `q·scale` rounded to `dtype`, plus `bias`, summed in f32 and
/// rounded to `dtype` (MLX's half types compute in f32; for f32 both are f32 operations).
pub fn dequantize(
    packed: &[f64],
    scales: &[f64],
    biases: &[f64],
    (n, k): (usize, usize),
    bits: u32,
    group: usize,
    dtype: DType,
) -> Vec<f64> {
    let words = k * bits as usize / 32;
    let mut out = Vec::with_capacity(n * k);
    for r in 0..n {
        let row = &packed[r * words..(r + 1) * words];
        for c in 0..k {
            let g = r * (k / group) + c / group;
            let q = code(row, c, bits) as f32;
            let product = round_to(dtype, (q * scales[g] as f32) as f64) as f32;
            out.push(round_to(dtype, (product + biases[g] as f32) as f64));
        }
    }
    out
}

/// `y[m, n] = Σ_k x[m, k]·(scale·q + bias)` in f64: the exact value of the product the
/// format stands for.
#[allow(clippy::too_many_arguments)]
pub fn qgemv(
    x: &[f64],
    packed: &[f64],
    scales: &[f64],
    biases: &[f64],
    (m, n, k): (usize, usize, usize),
    bits: u32,
    group: usize,
) -> Vec<f64> {
    let words = k * bits as usize / 32;
    let w: Vec<f64> = (0..n)
        .flat_map(|r| {
            let row = &packed[r * words..(r + 1) * words];
            (0..k).map(move |c| {
                let g = r * (k / group) + c / group;
                scales[g] * code(row, c, bits) as f64 + biases[g]
            })
        })
        .collect();
    crate::matmul::reference::matmul(x, &w, (m, n, k), true)
}

/// `y[m, n] = Σ_k x[m, k]·Ŵ[n, k]` in f64 with `Ŵ = scale·q + bias` rounded once to
/// `dtype` (the sum is exact in f64 for the inputs the cases make, and `round_to` goes
/// through f32 as the GEMM's f32 `scale·q + bias` does): the product of x with the weights
/// in the activation dtype, which the quantized GEMM multiplies on the tensor cores.
#[allow(clippy::too_many_arguments)]
pub fn qgemm(
    x: &[f64],
    packed: &[f64],
    scales: &[f64],
    biases: &[f64],
    (m, n, k): (usize, usize, usize),
    bits: u32,
    group: usize,
    dtype: DType,
) -> Vec<f64> {
    let words = k * bits as usize / 32;
    let w: Vec<f64> = (0..n)
        .flat_map(|r| {
            let row = &packed[r * words..(r + 1) * words];
            (0..k).map(move |c| {
                let g = r * (k / group) + c / group;
                round_to(dtype, scales[g] * code(row, c, bits) as f64 + biases[g])
            })
        })
        .collect();
    crate::matmul::reference::matmul(x, &w, (m, n, k), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 3-, 5- and 6-bit layouts, from MLX's `quantize` in
    /// `mlx/backend/cpu/quantized.cpp`: 8 (3- and 5-bit) or 4 (6-bit) codes are OR-ed into
    /// one integer, code `k` shifted left by `k·bits`, and that integer's low 3 (5, 3) bytes
    /// are written out in order, least significant first: a little-endian bit stream,
    /// viewed as u32 words.
    #[test]
    fn odd_widths_pack_as_a_little_endian_bit_stream() {
        // 3 bits, codes 0..8: 0b111_110_101_100_011_010_001_000 = 0xFAC688 in bytes
        // 88 C6 FA; the next eight codes (7,6,…,0) give 0b000_001_010_011_100_101_110_111
        // = 0x053977 in bytes 77 39 05. Bytes 88 C6 FA 77 | 39 05 … → words 0x77FAC688, …
        let codes: Vec<u32> = (0..8).chain((0..8).rev()).chain([0; 16]).collect();
        let w = pack(&codes, 3);
        assert_eq!(w.len(), 3);
        assert_eq!(w[0], 0x77FA_C688);
        assert_eq!(w[1] & 0xFFFF, 0x0539);
        // 5 bits, codes 31, 1, then zeros: 31 | 1 << 5 = 0x3F.
        let mut codes = vec![0u32; 32];
        codes[0] = 31;
        codes[1] = 1;
        // Code 6 sits at bits 30..35: its value 0b10011 puts 0b11 in word 0's top bits and
        // 0b100 in word 1's low bits.
        codes[6] = 0b10011;
        let w = pack(&codes, 5);
        assert_eq!(w.len(), 5);
        assert_eq!(w[0], 0x3F | (0b11 << 30));
        assert_eq!(w[1], 0b100);
        // 6 bits: four codes per three bytes; code 5 (bits 30..36) = 0b111101 straddles.
        let mut codes = vec![0u32; 32];
        codes[0] = 63;
        codes[5] = 0b111101;
        let w = pack(&codes, 6);
        assert_eq!(w.len(), 6);
        assert_eq!(w[0], 63 | (0b01 << 30));
        assert_eq!(w[1], 0b1111);
        let words: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
        for (j, &c) in codes.iter().enumerate() {
            assert_eq!(code(&words, j, 6), c);
        }
    }

    /// A constant group: the step is the 1e-7 floor, the edge is a whole number of steps,
    /// and every value is exactly the bias (code 0).
    #[test]
    fn a_constant_group_dequantizes_to_itself() {
        let w = vec![0.75; 32];
        let q = quantize(&w, 4, 32, DType::F32);
        assert!(q.packed.iter().all(|&p| p == 0.0));
        assert_eq!(q.biases, vec![0.75]);
        let d = dequantize(&q.packed, &q.scales, &q.biases, (1, 32), 4, 32, DType::F32);
        assert_eq!(d, w);
    }
}
