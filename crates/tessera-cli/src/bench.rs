//! `tessera bench [--backend B] [--filter S] [--dtype D] [--json FILE] [--quick]`: times
//! every registered benchmark shape after a warm-up (median of several timed batches, on
//! the device's own clock where the backend has one), reports GB/s or TFLOP/s against the
//! measured copy bandwidth, checks the output against the reference, and exits non-zero if
//! any row fails. With no GPU it runs the `--quick` shapes on the CPU.

use crate::kernels::{context, parse_dtype};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tessera_runtime::{BackendKind, Context, RuntimeError};
use tessera_std::bandwidth::copy_bandwidth;
use tessera_std::registry::PreparedBench;
use tessera_std::testing::{compare, tolerance, CaseRng};
use tessera_std::{ops, BenchCase};

#[derive(clap::Args)]
pub struct Args {
    /// cpu, cuda, metal or metal-emu (default: the best present).
    #[arg(long)]
    backend: Option<String>,
    /// Only shapes whose op or kernel contains this.
    #[arg(long)]
    filter: Option<String>,
    #[arg(long)]
    dtype: Option<String>,
    /// Write the results as JSON (schema: docs/bench-json.md).
    #[arg(long)]
    json: Option<String>,
    /// Only the small shapes (always on for the CPU backend).
    #[arg(long)]
    quick: bool,
}

/// One row of the results; the JSON schema.
#[derive(Serialize)]
struct Row {
    op: String,
    kernel: String,
    shape: String,
    dtype: String,
    us: f64,
    gbps: f64,
    tflops: f64,
    pct_of_peak: f64,
    max_err: f64,
    ok: bool,
    error: Option<String>,
}

#[derive(Serialize)]
struct Report {
    backend: String,
    device: String,
    copy_gbps: f64,
    rows: Vec<Row>,
}

/// Per-launch time: the median over timed batches of `iters` launches each.
fn time(
    ctx: &Context,
    launch: &mut dyn FnMut() -> Result<(), String>,
    budget: Duration,
) -> Result<Duration, String> {
    let kind = ctx.kind();
    let mut wrapped = || {
        launch().map_err(|message| RuntimeError::Backend {
            backend: kind,
            message,
        })
    };
    // Warm-up and a first estimate.
    let t = Instant::now();
    wrapped().map_err(|e| e.to_string())?;
    ctx.synchronize().map_err(|e| e.to_string())?;
    let once = t.elapsed().max(Duration::from_nanos(500));
    let batches = 7u32;
    let iters =
        ((budget.as_secs_f64() / batches as f64 / once.as_secs_f64()) as u32).clamp(1, 1000);
    let mut samples = Vec::new();
    for _ in 0..batches {
        let device = ctx
            .backend()
            .time_launches(&mut wrapped, iters)
            .map_err(|e| e.to_string())?;
        let elapsed = match device {
            Some(d) => d,
            None => {
                let t = Instant::now();
                for _ in 0..iters {
                    wrapped().map_err(|e| e.to_string())?;
                }
                ctx.synchronize().map_err(|e| e.to_string())?;
                t.elapsed()
            }
        };
        samples.push(elapsed / iters);
    }
    samples.sort();
    Ok(samples[samples.len() / 2])
}

fn bench_one(ctx: &Context, case: &BenchCase, copy_gbps: f64, seed: u64, budget: Duration) -> Row {
    let mut row = Row {
        op: case.op.to_string(),
        kernel: case.kernel.to_string(),
        shape: case.shape.clone(),
        dtype: case.dtype.name().to_string(),
        us: 0.0,
        gbps: 0.0,
        tflops: 0.0,
        pct_of_peak: 0.0,
        max_err: 0.0,
        ok: false,
        error: None,
    };
    let result = (|| -> Result<(), String> {
        let mut rng = CaseRng::new(seed);
        let PreparedBench {
            mut launch,
            output,
            reference,
        } = (case.prepare)(ctx, &mut rng)?;
        let per = time(ctx, &mut *launch, budget)?;
        let secs = per.as_secs_f64();
        row.us = secs * 1e6;
        row.gbps = case.bytes as f64 / secs / 1e9;
        row.tflops = case.flops as f64 / secs / 1e12;
        row.pct_of_peak = if copy_gbps > 0.0 {
            100.0 * row.gbps / copy_gbps
        } else {
            0.0
        };
        let got = output.to_f64_vec().map_err(|e| e.to_string())?;
        let outcome = compare(&got, &reference, tolerance(case.dtype))?;
        row.max_err = outcome.max_abs_err;
        Ok(())
    })();
    match result {
        Ok(()) => row.ok = true,
        Err(e) => row.error = Some(e),
    }
    row
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let ctx = context(args.backend.as_deref())?;
    let dtype = args.dtype.as_deref().map(parse_dtype).transpose()?;
    let on_cpu = ctx.kind() == BackendKind::Cpu;
    let quick = args.quick || on_cpu;
    let cases: Vec<BenchCase> = ops()
        .into_iter()
        .flat_map(|o| (o.benches)())
        .filter(|c| !quick || c.quick)
        .filter(|c| dtype.is_none_or(|d| d == c.dtype))
        .filter(|c| {
            args.filter
                .as_deref()
                .is_none_or(|f| c.op.contains(f) || c.kernel.contains(f))
        })
        .collect();
    if cases.is_empty() {
        return Err("no benchmark shape matched the selection".into());
    }
    let (copy_bytes, budget) = if on_cpu {
        (16 << 20, Duration::from_millis(150))
    } else {
        (512 << 20, Duration::from_millis(300))
    };
    let copy_gbps =
        copy_bandwidth(&ctx, copy_bytes, if on_cpu { 5 } else { 50 }).map_err(|e| e.to_string())?;
    println!(
        "bench on {} ({}){}; measured copy bandwidth {:.1} GB/s",
        ctx.kind().name(),
        ctx.info().name,
        if quick { ", quick shapes" } else { "" },
        copy_gbps
    );
    let bar = ProgressBar::new(cases.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let seed = tessera_std::runner::base_seed();
    let mut rows = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        bar.set_message(format!("{} {} {}", c.op, c.shape, c.dtype));
        rows.push(bench_one(
            &ctx,
            c,
            copy_gbps,
            seed.wrapping_add(i as u64),
            budget,
        ));
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!(
        "{:<18} {:<24} {:<20} {:<5} {:>10} {:>9} {:>9} {:>7} {:>9}  ok",
        "op", "kernel", "shape", "dtype", "µs", "GB/s", "TFLOP/s", "% peak", "max err"
    );
    for r in &rows {
        println!(
            "{:<18} {:<24} {:<20} {:<5} {:>10.2} {:>9.1} {:>9.3} {:>6.1}% {:>9.2e}  {}",
            r.op,
            r.kernel,
            r.shape,
            r.dtype,
            r.us,
            r.gbps,
            r.tflops,
            r.pct_of_peak,
            r.max_err,
            if r.ok { "✓" } else { "✗" }
        );
        if let Some(e) = &r.error {
            println!("    ✗ {e}");
        }
    }
    let failed = rows.iter().filter(|r| !r.ok).count();
    println!("{} passed, {failed} failed", rows.len() - failed);
    if let Some(path) = &args.json {
        let report = Report {
            backend: ctx.kind().name().to_string(),
            device: ctx.info().name.clone(),
            copy_gbps,
            rows,
        };
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("cannot write {path}: {e}"))?;
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
