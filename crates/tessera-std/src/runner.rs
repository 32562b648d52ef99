//! Runs registered cases on a context, each from its own fresh seed, turning panics into
//! failures so one broken case never stops the run.

use crate::registry::{ops, Case, CaseKind, Outcome};
use crate::testing::CaseRng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};
use tessera_runtime::{Context, DType};

/// Which cases to run.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Substring of `op` or of the case name.
    pub filter: Option<String>,
    pub dtype: Option<DType>,
}

impl Selection {
    pub fn matches(&self, case: &Case) -> bool {
        let name_ok = match &self.filter {
            Some(f) => case.op.contains(f.as_str()) || case.name.contains(f.as_str()),
            None => true,
        };
        let dtype_ok = match (self.dtype, case.dtype) {
            (Some(want), Some(have)) => want == have,
            (Some(_), None) => case.kind == CaseKind::Rejection,
            (None, _) => true,
        };
        name_ok && dtype_ok
    }
}

/// The result of one case.
pub struct CaseResult {
    pub op: &'static str,
    pub kind: CaseKind,
    pub dtype: Option<DType>,
    pub name: String,
    pub seed: u64,
    pub elapsed: Duration,
    pub outcome: Result<Outcome, String>,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        matches!(&self.outcome, Ok(o) if o.checked > 0)
    }
}

/// Every selected case, in registry order.
pub fn selected_cases(sel: &Selection) -> Vec<Case> {
    ops()
        .into_iter()
        .flat_map(|op| op.all_cases())
        .filter(|c| sel.matches(c))
        .collect()
}

/// A fresh base seed: `TESSERA_SEED` when set (to reproduce a run), else from the clock.
/// A `TESSERA_SEED` that is not an unsigned 64-bit integer is an error, never ignored.
pub fn base_seed() -> Result<u64, String> {
    match std::env::var("TESSERA_SEED") {
        Ok(s) => parse_seed(&s),
        Err(std::env::VarError::NotPresent) => Ok(clock_seed()),
        Err(std::env::VarError::NotUnicode(s)) => Err(format!(
            "TESSERA_SEED = {s:?} is not a seed; set it to an unsigned integer (the seed a run printed)"
        )),
    }
}

/// A `TESSERA_SEED` value: an unsigned 64-bit integer.
fn parse_seed(s: &str) -> Result<u64, String> {
    s.trim().parse().map_err(|_| {
        format!(
            "TESSERA_SEED = {s:?} is not a seed; set it to an unsigned integer (the seed a run printed), or unset it for a fresh one"
        )
    })
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x5eed)
}

/// Runs one case with the given seed.
pub fn run_case(ctx: &Context, case: &Case, seed: u64) -> CaseResult {
    let start = Instant::now();
    let mut rng = CaseRng::new(seed);
    let outcome = match catch_unwind(AssertUnwindSafe(|| (case.run)(ctx, &mut rng))) {
        Ok(Ok(o)) if o.checked == 0 => Err("the case checked nothing".to_string()),
        Ok(r) => r,
        Err(p) => Err(format!(
            "panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    };
    CaseResult {
        op: case.op,
        kind: case.kind,
        dtype: case.dtype,
        name: case.name.clone(),
        seed,
        elapsed: start.elapsed(),
        outcome,
    }
}

/// Runs every selected case, calling `report` after each; case `i` uses seed `base + i`.
pub fn run_cases(
    ctx: &Context,
    sel: &Selection,
    base: u64,
    mut report: impl FnMut(&CaseResult),
) -> (usize, usize) {
    let (mut passed, mut failed) = (0, 0);
    for (i, case) in selected_cases(sel).iter().enumerate() {
        let r = run_case(ctx, case, base.wrapping_add(i as u64));
        if r.passed() {
            passed += 1;
        } else {
            failed += 1;
        }
        report(&r);
    }
    (passed, failed)
}

#[cfg(test)]
mod tests {
    use super::parse_seed;

    #[test]
    fn a_seed_is_an_unsigned_integer() {
        assert_eq!(parse_seed("1795485158397869593"), Ok(1795485158397869593));
        assert_eq!(parse_seed(" 42 "), Ok(42));
        for bad in ["abc", "", "-1", "1.5", "18446744073709551616"] {
            let e = parse_seed(bad).unwrap_err();
            assert!(e.contains("is not a seed"), "{bad}: {e}");
        }
    }
}
