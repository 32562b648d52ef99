//! `tessera bench [--backend B] [--filter S] [--dtype D] [--json FILE] [--quick]
//! [--compare PEERS.json] [--list-shapes]`: times every registered benchmark shape (input
//! sets rotated past the L2 cache, warm-up, median of several samples, recorded graphs
//! where the backend has them), reports GB/s or TFLOP/s against the measured copy
//! bandwidth, checks the output against the reference, sets peers' times beside
//! tessera's, and exits non-zero if any row fails. Each row is printed, and the JSON file
//! rewritten, as soon as it is measured, so a run cut short keeps every finished row. With
//! no GPU it runs the `--quick` shapes on the CPU. The JSON schema is docs/bench-json.md.

mod peers;
mod shapes;
mod table;
mod timing;

use crate::kernels::{context, parse_dtype};
use indicatif::{ProgressBar, ProgressStyle};
use peers::{PeerResult, Peers};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Duration;
use tessera_runtime::{BackendKind, Context};
use tessera_std::bandwidth::copy_bandwidth;
use tessera_std::registry::PreparedBench;
use tessera_std::testing::{accuracy, compare, CaseRng};
use tessera_std::{ops, BenchCase};

#[derive(clap::Args)]
pub struct Args {
    /// cpu, cuda, metal or metal-emu (default: the best present).
    #[arg(long)]
    backend: Option<String>,
    /// Only shapes whose op, kernel or shape string contains this (repeatable: any).
    #[arg(long)]
    filter: Vec<String>,
    #[arg(long)]
    dtype: Option<String>,
    /// Write the results (or with --list-shapes, the shapes) as JSON (docs/bench-json.md).
    #[arg(long)]
    json: Option<String>,
    /// Only the small shapes (always on for the CPU backend).
    #[arg(long)]
    quick: bool,
    /// Peer timings (JSON written by bench/peers/; repeatable) to set beside each row.
    #[arg(long)]
    compare: Vec<String>,
    /// List the selected shapes with their parsed parameters instead of timing them.
    #[arg(long)]
    list_shapes: bool,
    /// Time with plain launches only, no graphs.
    #[arg(long)]
    no_graphs: bool,
}

/// One row of the results; the JSON schema.
#[derive(Serialize)]
pub struct Row {
    op: String,
    kernel: String,
    shape: String,
    dtype: String,
    us: f64,
    gbps: f64,
    tflops: f64,
    pct_of_peak: f64,
    /// Largest |out − reference| over every input set; null where the shape has no
    /// reference (too large for the f64 one).
    max_err: Option<f64>,
    ok: bool,
    /// `graph`, `events` or `wall`.
    timing: String,
    /// Input sets rotated through.
    sets: usize,
    /// The sets together fit in twice the L2 cache: the time may be flattered.
    l2_resident: bool,
    peers: Vec<PeerResult>,
    error: Option<String>,
}

#[derive(Serialize)]
struct Report {
    backend: String,
    device: String,
    copy_gbps: f64,
    l2_bytes: usize,
    peer_device: Option<String>,
    rows: Vec<Row>,
}

fn selected(args: &Args, quick: bool) -> Result<Vec<BenchCase>, String> {
    let dtype = args.dtype.as_deref().map(parse_dtype).transpose()?;
    let cases: Vec<BenchCase> = ops()
        .into_iter()
        .flat_map(|o| (o.benches)())
        .filter(|c| !quick || c.quick)
        .filter(|c| dtype.is_none_or(|d| d == c.dtype))
        .filter(|c| {
            args.filter.is_empty()
                || args.filter.iter().any(|f| {
                    c.op.contains(f.as_str())
                        || c.kernel.contains(f.as_str())
                        || c.shape.contains(f.as_str())
                })
        })
        .collect();
    if cases.is_empty() {
        return Err("no benchmark shape matched the selection".into());
    }
    Ok(cases)
}

struct Env<'a> {
    ctx: &'a Context,
    copy_gbps: f64,
    budget: Duration,
    graphs: bool,
    peers: Option<&'a Peers>,
}

/// Times and checks one shape; the row, and why it was not graph-timed where a graph was
/// tried and failed.
fn bench_one(env: &Env<'_>, case: &BenchCase, seed: u64) -> (Row, Option<String>) {
    let ctx = env.ctx;
    let mut row = Row {
        op: case.op.to_string(),
        kernel: case.kernel.to_string(),
        shape: case.shape.clone(),
        dtype: case.dtype.name().to_string(),
        us: 0.0,
        gbps: 0.0,
        tflops: 0.0,
        pct_of_peak: 0.0,
        max_err: None,
        ok: false,
        timing: String::new(),
        sets: 0,
        l2_resident: false,
        peers: Vec::new(),
        error: None,
    };
    let l2 = ctx.backend().l2_bytes();
    let n_sets = timing::sets_for(case.bytes, case.flops, l2);
    row.sets = n_sets;
    row.l2_resident = l2 > 0 && (n_sets as u64) * case.bytes < 2 * l2 as u64;
    let mut graph_note = None;
    let result = (|| -> Result<(), String> {
        let mut rng = CaseRng::new(seed);
        let mut sets: Vec<PreparedBench> = Vec::with_capacity(n_sets);
        for _ in 0..n_sets {
            sets.push((case.prepare)(ctx, &mut rng)?);
        }
        let t = timing::time(ctx, &mut sets, env.budget, env.graphs)?;
        let secs = t.per_launch.as_secs_f64();
        row.timing = t.method.name().to_string();
        row.us = secs * 1e6;
        row.gbps = case.bytes as f64 / secs / 1e9;
        row.tflops = case.flops as f64 / secs / 1e12;
        row.pct_of_peak = if env.copy_gbps > 0.0 {
            100.0 * row.gbps / env.copy_gbps
        } else {
            0.0
        };
        if let Some(p) = env.peers {
            row.peers = p.results(&row.op, &row.shape, &row.dtype, row.us);
        }
        for s in &sets {
            if s.reference.is_empty() {
                continue;
            }
            let got = s.output.to_f64_vec().map_err(|e| e.to_string())?;
            let outcome = compare(&got, &s.reference, accuracy(case.op, case.dtype)?)?;
            row.max_err = Some(row.max_err.unwrap_or(0.0).max(outcome.max_abs_err));
        }
        graph_note = t.graph_note;
        Ok(())
    })();
    match result {
        Ok(()) => row.ok = true,
        Err(e) => row.error = Some(e),
    }
    (row, graph_note)
}

/// Replaces `path` with the report through a temporary file and a rename, so that the
/// file holds a whole report at every moment, even if the run is stopped mid-write.
fn write_json(path: &str, report: &Report) -> Result<(), String> {
    let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    let partial = format!("{path}.partial");
    std::fs::write(&partial, text).map_err(|e| format!("cannot write {partial}: {e}"))?;
    std::fs::rename(&partial, path).map_err(|e| format!("cannot write {path}: {e}"))
}

fn list_shapes(cases: &[BenchCase], json: Option<&str>) -> Result<ExitCode, String> {
    let shapes: Vec<shapes::Shape> = cases.iter().map(shapes::shape).collect();
    let text = serde_json::to_string_pretty(&shapes).map_err(|e| e.to_string())?;
    match json {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| format!("cannot write {path}: {e}"))?
        }
        None => {
            for s in &shapes {
                println!("{:<20} {:<5} {}", s.op, s.dtype, s.shape);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    if args.list_shapes {
        return list_shapes(&selected(&args, args.quick)?, args.json.as_deref());
    }
    let ctx = context(args.backend.as_deref())?;
    let on_cpu = ctx.kind() == BackendKind::Cpu;
    let quick = args.quick || on_cpu;
    let cases = selected(&args, quick)?;
    let peers = if args.compare.is_empty() {
        None
    } else {
        Some(Peers::load(&args.compare)?)
    };
    let (copy_bytes, budget) = if on_cpu {
        (16 << 20, Duration::from_millis(150))
    } else {
        (1 << 30, Duration::from_millis(200))
    };
    let copy_gbps =
        copy_bandwidth(&ctx, copy_bytes, if on_cpu { 5 } else { 30 }).map_err(|e| e.to_string())?;
    println!(
        "bench on {} ({}){}; measured copy bandwidth {:.1} GB/s; L2 {} MiB",
        ctx.kind().name(),
        ctx.info().name,
        if quick { ", quick shapes" } else { "" },
        copy_gbps,
        ctx.backend().l2_bytes() >> 20
    );
    let env = Env {
        ctx: &ctx,
        copy_gbps,
        budget,
        graphs: !args.no_graphs,
        peers: peers.as_ref(),
    };
    let seed = tessera_std::runner::base_seed()?;
    let mut report = Report {
        backend: ctx.kind().name().to_string(),
        device: ctx.info().name.clone(),
        copy_gbps,
        l2_bytes: ctx.backend().l2_bytes(),
        peer_device: peers.as_ref().map(|p| p.device.clone()),
        rows: Vec::new(),
    };
    // Written before the first row too: an unwritable path fails now, not after the run.
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    let columns = table::Columns::fit(&cases);
    println!("{}", columns.header());
    // The bar lives on stderr and only on a terminal; rows go to stdout with the bar
    // lifted, once each, whether stdout is a terminal, a pipe or a file.
    let bar = ProgressBar::new(cases.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    for (i, c) in cases.iter().enumerate() {
        bar.set_message(format!("{} {} {}", c.op, c.shape, c.dtype.name()));
        let (row, graph_note) = bench_one(&env, c, seed.wrapping_add(i as u64));
        let text = columns.line(&row);
        report.rows.push(row);
        // The file first: a row on the screen is always in the file too.
        if let Some(path) = &args.json {
            write_json(path, &report)?;
        }
        bar.suspend(|| {
            println!("{text}");
            if let Some(note) = graph_note {
                eprintln!(
                    "note: {} {} {}: timed without a graph ({note})",
                    c.op,
                    c.shape,
                    c.dtype.name()
                );
            }
        });
        bar.inc(1);
    }
    bar.finish_and_clear();
    let failed = report.rows.iter().filter(|r| !r.ok).count();
    println!(
        "{} passed, {failed} failed (ᴸ²: the rotated input sets fit in twice the L2 cache)",
        report.rows.len() - failed
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
