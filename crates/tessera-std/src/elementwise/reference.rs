//! The f64 references of the elementwise ops, written from the math.

use half::{bf16, f16};
use tessera_runtime::DType;

/// `a + b` in f64.
pub fn add(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// `x · sigmoid(x)`.
pub fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// The exact GELU, `x/2 · (1 + erf(x/√2))`, with libm's f64 erf (erfc for negative x,
/// where `1 + erf` would cancel).
pub fn gelu_erf(x: f64) -> f64 {
    let z = x / std::f64::consts::SQRT_2;
    let one_plus_erf = if z < 0.0 {
        libm::erfc(-z)
    } else {
        1.0 + libm::erf(z)
    };
    0.5 * x * one_plus_erf
}

/// The tanh GELU, `x/2 · (1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
pub fn gelu_tanh(x: f64) -> f64 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
}

/// `act(gate) · up`, elementwise.
pub fn act_mul(act: fn(f64) -> f64, gate: &[f64], up: &[f64]) -> Vec<f64> {
    gate.iter().zip(up).map(|(&g, &u)| act(g) * u).collect()
}

/// `act(gate) · up` from rows of `2·d` holding the gate then the up projection.
pub fn act_mul_packed(act: fn(f64) -> f64, gate_up: &[f64], d: usize) -> Vec<f64> {
    gate_up
        .chunks_exact(2 * d)
        .flat_map(|row| {
            let (gate, up) = row.split_at(d);
            act_mul(act, gate, up)
        })
        .collect()
}

/// `v` rounded to the nearest `dtype` value, ties to even (NaN stays NaN, beyond the
/// range is ±inf): what an IEEE conversion gives. `v` is a value of f32, f16 or bf16, so
/// `v as f32` is exact and the one rounding is `half`'s from_f32 (its bf16 `from_f64`
/// rounds down some values just above a halfway point, e.g. f32 bits 0x3d208006).
pub fn round_to(dtype: DType, v: f64) -> f64 {
    let exact = v as f32;
    match dtype {
        DType::F16 => f16::from_f32(exact).to_f64(),
        DType::BF16 => bf16::from_f32(exact).to_f64(),
        _ => exact as f64,
    }
}

/// Every value of `x` rounded to `dtype`.
pub fn cast(dtype: DType, x: &[f64]) -> Vec<f64> {
    x.iter().map(|&v| round_to(dtype, v)).collect()
}

/// Rows `ids[t]` of a `[vocab, d]` table, one after another.
pub fn embedding(ids: &[f64], table: &[f64], d: usize) -> Vec<f64> {
    ids.iter()
        .flat_map(|&id| table[id as usize * d..][..d].iter().copied())
        .collect()
}
