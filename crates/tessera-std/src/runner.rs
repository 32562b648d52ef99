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
pub fn base_seed() -> u64 {
    if let Some(s) = std::env::var("TESSERA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return s;
    }
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
