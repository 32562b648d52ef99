//! `tessera check [--backend B] [--filter S] [--dtype D]`: runs every registered
//! correctness and rejection case, printing a row per case as it finishes and
//! `N passed, N failed` last; exits non-zero on any failure.

use crate::kernels::{context, parse_dtype};
use std::process::ExitCode;
use tessera_std::runner::{base_seed, run_cases, Selection};
use tessera_std::CaseKind;

#[derive(clap::Args)]
pub struct Args {
    /// cpu, cuda, metal or metal-emu (default: the best present).
    #[arg(long)]
    backend: Option<String>,
    /// Only cases whose op or name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Only cases of this dtype (rejection cases always run).
    #[arg(long)]
    dtype: Option<String>,
    /// Print the failure message of every failing case in full.
    #[arg(long)]
    verbose: bool,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let ctx = context(args.backend.as_deref())?;
    let dtype = args.dtype.as_deref().map(parse_dtype).transpose()?;
    let sel = Selection {
        filter: args.filter.clone(),
        dtype,
    };
    let seed = base_seed()?;
    println!(
        "checking on {} ({}), seed {seed} (set TESSERA_SEED={seed} to reproduce)",
        ctx.kind().name(),
        ctx.info().name
    );
    println!(
        "{:<4} {:<20} {:<10} {:<5} {:<28} {:>9}  result",
        "", "op", "kind", "dtype", "case", "ms"
    );
    let (passed, failed) = run_cases(&ctx, &sel, seed, |r| {
        let kind = match r.kind {
            CaseKind::Correctness => "correct",
            CaseKind::Rejection => "rejects",
        };
        let dtype = r.dtype.map(|d| d.name()).unwrap_or("-");
        let (mark, detail) = match &r.outcome {
            Ok(o) if o.checked > 0 => match r.kind {
                CaseKind::Correctness => (
                    "ok",
                    format!("{} values, max err {:.2e}", o.checked, o.max_abs_err),
                ),
                CaseKind::Rejection => ("ok", o.note.clone()),
            },
            Ok(_) => ("FAIL", "checked nothing".to_string()),
            Err(e) => ("FAIL", format!("{e} (seed {})", r.seed)),
        };
        let detail = if args.verbose || detail.len() <= 100 || mark == "FAIL" {
            detail
        } else {
            format!("{}…", detail.chars().take(99).collect::<String>())
        };
        println!(
            "{mark:<4} {:<20} {kind:<10} {dtype:<5} {:<28} {:>9.2}  {detail}",
            r.op,
            r.name,
            r.elapsed.as_secs_f64() * 1e3
        );
    });
    println!("{passed} passed, {failed} failed");
    if passed + failed == 0 {
        eprintln!("error: no case matched the selection");
        return Ok(ExitCode::FAILURE);
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
