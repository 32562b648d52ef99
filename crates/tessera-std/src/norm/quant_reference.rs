//! The f64 reference of the RMSNorm + per-row quantization ops: the residual sum and the
//! normalised row rounded to x's dtype as the unfused ops store them, the row's scale and
//! each code computed from those stored values in f32 as the format defines them.

use super::rms_norm_quant::ActQuant;
use crate::elementwise::reference::round_to;
use crate::quant::fp8_reference;
use tessera_runtime::DType;

/// What the reference gives: the residual sums (empty without a residual), the codes (fp8
/// bytes or int8 values) and one scale per row.
pub struct NormQuant {
    pub sum: Vec<f64>,
    pub codes: Vec<f64>,
    pub scales: Vec<f64>,
}

/// The code of the f32 quotient `v / scale` in `format`.
fn code(format: ActQuant, v: f32, scale: f32) -> f64 {
    let s = v / scale;
    match format {
        ActQuant::Fp8(f) => f64::from(fp8_reference::encode(f, f64::from(s))),
        ActQuant::Int8 if s.is_nan() => 0.0,
        ActQuant::Int8 => f64::from(s.clamp(-128.0, 127.0).round_ties_even()),
    }
}

/// `x` `[rows, n]` (plus `residual`), `w` `[n]`, values of `dtype`; `static_scale` for every
/// row, else each row's `amax / max`.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_quant(
    x: &[f64],
    residual: Option<&[f64]>,
    w: &[f64],
    n: usize,
    eps: f64,
    dtype: DType,
    format: ActQuant,
    static_scale: Option<f64>,
) -> NormQuant {
    let mut out = NormQuant {
        sum: Vec::new(),
        codes: Vec::with_capacity(x.len()),
        scales: Vec::with_capacity(x.len() / n.max(1)),
    };
    for (r, row) in x.chunks(n).enumerate() {
        let summed: Vec<f64> = match residual {
            Some(res) => row
                .iter()
                .zip(&res[r * n..(r + 1) * n])
                .map(|(a, b)| round_to(dtype, a + b))
                .collect(),
            None => row.to_vec(),
        };
        if residual.is_some() {
            out.sum.extend(&summed);
        }
        let mean_sq = summed.iter().map(|v| v * v).sum::<f64>() / n as f64;
        let inv = 1.0 / (mean_sq + eps).sqrt();
        let y: Vec<f32> = summed
            .iter()
            .zip(w)
            .map(|(v, wi)| round_to(dtype, v * inv * wi) as f32)
            .collect();
        let scale = if y.iter().any(|v| v.is_nan()) {
            f32::NAN
        } else if let Some(s) = static_scale {
            s as f32
        } else {
            let amax = y.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            if amax > 0.0 {
                amax / format.max()
            } else {
                1.0
            }
        };
        out.scales.push(f64::from(scale));
        out.codes.extend(y.iter().map(|&v| code(format, v, scale)));
    }
    out
}
