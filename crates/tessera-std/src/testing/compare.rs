//! Compares a kernel's output with its f64 reference under the op's declared per-dtype
//! accuracy; NaN, a length mismatch or an empty comparison always fail.

use crate::registry::Outcome;
use tessera_runtime::DType;

pub use crate::decl::Tolerance;

/// The tolerance `op` declares for outputs of `dtype` ([`crate::decl::OpDecl::accuracy`]):
/// the only tolerance a case or benchmark check compares against.
pub fn accuracy(op: &str, dtype: DType) -> Result<Tolerance, String> {
    crate::registry::ops()
        .into_iter()
        .find(|o| o.name == op)
        .map(|o| o.accuracy.of(dtype))
        .ok_or_else(|| format!("no declared op `{op}` to take the accuracy of"))
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
    use crate::decl::Accuracy;

    #[test]
    fn nan_never_passes() {
        let t = Accuracy::STANDARD.of(DType::F32);
        assert!(compare(&[f64::NAN], &[1.0], t).is_err());
        assert!(compare(&[1.0], &[1.0], t).is_ok());
    }

    #[test]
    fn empty_comparison_fails() {
        assert!(compare(&[], &[], Accuracy::STANDARD.of(DType::F16)).is_err());
    }

    #[test]
    fn tolerance_scales_with_magnitude() {
        let t = Accuracy::STANDARD.of(DType::F16);
        assert!(compare(&[100.3], &[100.0], t).is_ok());
        assert!(compare(&[0.3], &[0.0], t).is_err());
    }

    #[test]
    fn every_op_declares_its_accuracy_and_unknown_ops_have_none() {
        assert_eq!(
            accuracy("rms_norm", DType::BF16),
            Ok(Accuracy::STANDARD.bf16)
        );
        let prefill = accuracy("gdn_chunked_prefill", DType::F16).expect("declared");
        assert!(prefill.atol > Accuracy::STANDARD.f16.atol);
        assert!(accuracy("no_such_op", DType::F32).is_err());
    }
}
