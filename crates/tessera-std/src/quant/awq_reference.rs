//! References for AWQ's int4 words, written from the format's description (AutoAWQ's GEMM
//! layout; see [`super::awq`]), not from our kernels: column `8c + j` of a word is its
//! nibble `[0, 4, 1, 5, 2, 6, 3, 7][j]`, the weight the exact `(q − z)·scale`; the GEMV is
//! the exact product in f64.

use crate::elementwise::reference::round_to;
use tessera_runtime::DType;

/// The nibble AWQ's interleaved order puts column `j` (0–7) of a word in.
const NIBBLE_OF_COLUMN: [usize; 8] = [0, 4, 1, 5, 2, 6, 3, 7];

/// The code of column `j` of `word` (an i32 as f64).
fn code(word: f64, j: usize) -> u32 {
    ((word as i64 as u32) >> (4 * NIBBLE_OF_COLUMN[j])) & 15
}

/// `w` `[k, n]` in f64, exact.
pub fn weights(
    qweight: &[f64],
    qzeros: &[f64],
    scales: &[f64],
    (k, n): (usize, usize),
    group: usize,
) -> Vec<f64> {
    let nw = n / 8;
    let mut w = Vec::with_capacity(k * n);
    for kk in 0..k {
        let g = kk / group;
        for col in 0..n {
            let q = code(qweight[kk * nw + col / 8], col % 8);
            let z = code(qzeros[g * nw + col / 8], col % 8);
            w.push((f64::from(q) - f64::from(z)) * scales[g * n + col]);
        }
    }
    w
}

/// The weights rounded once to `dtype`.
pub fn dequantize(
    qweight: &[f64],
    qzeros: &[f64],
    scales: &[f64],
    (k, n): (usize, usize),
    group: usize,
    dtype: DType,
) -> Vec<f64> {
    weights(qweight, qzeros, scales, (k, n), group)
        .into_iter()
        .map(|v| round_to(dtype, v))
        .collect()
}

/// `y[m, n] = Σ_k x[m, k]·w[k, n]` in f64.
pub fn qgemv(
    x: &[f64],
    qweight: &[f64],
    qzeros: &[f64],
    scales: &[f64],
    (m, n, k): (usize, usize, usize),
    group: usize,
) -> Vec<f64> {
    let w = weights(qweight, qzeros, scales, (k, n), group);
    crate::matmul::reference::matmul(x, &w, (m, n, k), false)
}
