//! Every registered case passes on the CPU backend (the reference), and the registry
//! holds what the library promises: cases for every op, rejections for the invariants.

use tessera_runtime::Context;
use tessera_std::runner::{base_seed, run_cases, Selection};
use tessera_std::{ops, CaseKind};

#[test]
fn every_case_passes_on_the_cpu() {
    let ctx = Context::cpu();
    let seed = base_seed().expect("TESSERA_SEED");
    let mut failures = Vec::new();
    let (passed, failed) = run_cases(&ctx, &Selection::default(), seed, |r| {
        if !r.passed() {
            failures.push(format!(
                "{} {} {:?}: {:?} (seed {})",
                r.op, r.name, r.dtype, r.outcome, r.seed
            ));
        }
    });
    assert!(
        failures.is_empty(),
        "{failed} failed:\n{}",
        failures.join("\n")
    );
    assert!(passed >= 30, "only {passed} cases ran");
}

#[test]
fn every_op_has_correctness_and_rejection_cases() {
    for op in ops() {
        let cases = (op.cases)();
        assert!(
            cases.iter().any(|c| c.kind == CaseKind::Correctness),
            "{} has no correctness case",
            op.name
        );
        assert!(
            cases.iter().any(|c| c.kind == CaseKind::Rejection),
            "{} has no rejection case",
            op.name
        );
        assert!(!(op.kernels)().is_empty(), "{} lists no kernels", op.name);
    }
}

#[test]
#[ignore = "prints every case result"]
fn print_results() {
    let ctx = Context::cpu();
    run_cases(
        &ctx,
        &Selection::default(),
        base_seed().expect("TESSERA_SEED"),
        |r| {
            println!(
                "{:20} {:28} {:?} {:?} {:?}",
                r.op,
                r.name,
                r.dtype,
                r.elapsed,
                r.outcome.as_ref().map(|o| (o.checked, o.max_abs_err))
            );
        },
    );
}
