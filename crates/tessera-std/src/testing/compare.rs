//! Compares a kernel's output with its f64 reference under a per-dtype tolerance; NaN,
//! a length mismatch or an empty comparison always fail.

use crate::registry::Outcome;
use tessera_runtime::DType;

/// `|got - want| <= atol + rtol * |want|`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
}

/// The default tolerance for outputs stored in `dtype` (f32 accumulation inside).
pub fn tolerance(dtype: DType) -> Tolerance {
    match dtype {
        DType::F16 => Tolerance {
            atol: 2e-3,
            rtol: 4e-3,
        },
        DType::BF16 => Tolerance {
            atol: 1.5e-2,
            rtol: 1.6e-2,
        },
        _ => Tolerance {
            atol: 2e-5,
            rtol: 2e-4,
        },
    }
}

/// Checks every element; the first failure is reported with its index.
pub fn compare(got: &[f64], want: &[f64], tol: Tolerance) -> Result<Outcome, String> {
    if got.len() != want.len() {
        return Err(format!(
            "output has {} elements, the reference {}",
            got.len(),
            want.len()
        ));
    }
    if got.is_empty() {
        return Err("nothing was compared".to_string());
    }
    let mut out = Outcome {
        checked: got.len(),
        ..Outcome::default()
    };
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if !w.is_finite() {
            return Err(format!(
                "reference[{i}] is {w}: the case's inputs are out of range"
            ));
        }
        if !g.is_finite() {
            return Err(format!(
                "output[{i}] is {g} (expected {w}): unwritten or overflowed"
            ));
        }
        let abs = (g - w).abs();
        let rel = abs / w.abs().max(f64::MIN_POSITIVE);
        if abs > tol.atol + tol.rtol * w.abs() {
            return Err(format!(
                "output[{i}] = {g}, expected {w} (error {abs:.3e} > {:.1e} + {:.1e}·|expected|)",
                tol.atol, tol.rtol
            ));
        }
        out.max_abs_err = out.max_abs_err.max(abs);
        if w.abs() > tol.atol {
            out.max_rel_err = out.max_rel_err.max(rel);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_never_passes() {
        let t = tolerance(DType::F32);
        assert!(compare(&[f64::NAN], &[1.0], t).is_err());
        assert!(compare(&[1.0], &[1.0], t).is_ok());
    }

    #[test]
    fn empty_comparison_fails() {
        assert!(compare(&[], &[], tolerance(DType::F16)).is_err());
    }

    #[test]
    fn tolerance_scales_with_magnitude() {
        let t = tolerance(DType::F16);
        assert!(compare(&[100.3], &[100.0], t).is_ok());
        assert!(compare(&[0.3], &[0.0], t).is_err());
    }
}
