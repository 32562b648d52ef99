//! CUDA smoke test: runs every hand-built sample kernel on the GPU and on the CPU
//! reference and compares them, measures the first NVRTC compile against a warm on-disk
//! PTX cache load, times launches with CUDA events, and checks that a zero loop step traps
//! with an error instead of hanging. Exits non-zero on any failure.
//!
//! `cargo run -p tessera-runtime --example cuda_smoke`

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use tessera_compiler::cuda::samples;
use tessera_runtime::cuda::{nvrtc::Nvrtc, selftest, CudaBackend, PtxOrigin};
use tessera_runtime::{Backend, Context, DeviceBuffer, KernelArg};

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The input, per-group output and scratch buffers of `samples::threadgroup_reduce`.
fn reduce_buffers(b: &CudaBackend) -> tessera_runtime::Result<[Arc<dyn DeviceBuffer>; 3]> {
    Ok([b.alloc(4 * 256 * 4)?, b.alloc(16)?, b.alloc(4 * 256 * 4)?])
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cuda_smoke: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    match Nvrtc::get() {
        Ok(n) => println!(
            "nvrtc {}.{} at {}",
            n.version().0,
            n.version().1,
            n.path().display()
        ),
        Err(e) => println!("nvrtc: {e}"),
    }
    let ctx = Context::cuda(0)?;
    let info = ctx.info().clone();
    println!(
        "device: {} — {} SMs, {} threads/group, {} B shared/group (opt-in), {:.1} GiB",
        info.name,
        info.compute_units,
        info.max_threads_per_group,
        info.max_shared_bytes,
        info.memory_bytes as f64 / (1u64 << 30) as f64
    );
    // The same context through Context::new() (CUDA first when present).
    let auto = Context::new()?;
    println!("Context::new() picked: {}", auto.kind());

    let mut ok = true;
    let outcomes = selftest::run_all(&ctx, 0x7e55e4a)?;
    for o in &outcomes {
        let status = match (&o.skipped, o.passed()) {
            (Some(_), _) => "SKIP",
            (None, true) => "PASS",
            (None, false) => "FAIL",
        };
        println!(
            "{status} {:<20} {:>6} elements, {} mismatches, max |diff| {:.3e}{}",
            o.name,
            o.elements,
            o.mismatches,
            o.max_abs_diff,
            o.skipped
                .as_deref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default()
        );
        for e in &o.examples {
            println!("     {e}");
        }
        ok &= o.passed() && o.skipped.is_none();
    }
    let passed = outcomes
        .iter()
        .filter(|o| o.passed() && o.skipped.is_none())
        .count();
    println!(
        "selftest: {passed} passed, {} failed",
        outcomes.len() - passed
    );

    // Cold NVRTC compile vs warm disk cache, in a fresh cache directory.
    let cache = std::env::temp_dir().join(format!("tessera-smoke-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    std::env::set_var("TESSERA_CACHE_DIR", &cache);
    let all = samples::all()?;
    let cold = CudaBackend::new(0)?;
    let warm = CudaBackend::new(0)?;
    println!("compile times (ms): kernel, cold [emit + nvrtc + module load], warm disk [emit + read + module load], memory");
    let (mut cold_total, mut warm_total) = (Vec::new(), Vec::new());
    for s in &all {
        let c = cold.compile_cuda(&s.kernel)?.compile_times();
        let w = warm.compile_cuda(&s.kernel)?.compile_times();
        let m = warm.compile_cuda(&s.kernel)?.compile_times();
        if c.origin != PtxOrigin::Nvrtc
            || w.origin != PtxOrigin::Disk
            || m.origin != PtxOrigin::Memory
        {
            println!(
                "FAIL cache origins for {}: {:?} {:?} {:?}",
                s.name, c.origin, w.origin, m.origin
            );
            ok = false;
        }
        println!(
            "  {:<20} cold {:7.2} [{:.2} + {:.2} + {:.2}]  warm {:6.2} [{:.2} + {:.2} + {:.2}]  mem {:6.2}",
            s.name,
            ms(c.total()),
            ms(c.emit),
            ms(c.ptx),
            ms(c.load),
            ms(w.total()),
            ms(w.emit),
            ms(w.ptx),
            ms(w.load),
            ms(m.total())
        );
        cold_total.push(ms(c.total()));
        warm_total.push(ms(w.total()));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    println!(
        "compile median over {} kernels: cold {:.2} ms, warm disk {:.2} ms",
        all.len(),
        median(&mut cold_total),
        median(&mut warm_total)
    );

    // End to end for one kernel on fresh backends: compile, first launch (where the driver
    // turns PTX into machine code, loading lazily) and synchronise; cold cache, then warm.
    let s = samples::threadgroup_reduce()?;
    let _ = std::fs::remove_dir_all(&cache);
    for label in ["cold (NVRTC)", "warm disk cache"] {
        let b = CudaBackend::new(0)?;
        let bufs = reduce_buffers(&b)?;
        let args = bufs.each_ref().map(|b| KernelArg::Buffer(&**b));
        let mut s2 = s.kernel.clone();
        // A name no earlier step used, so neither cache nor driver has seen this module.
        s2.name = "threadgroup_reduce_e2e".into();
        let t = Instant::now();
        let k = b.compile_cuda(&s2)?;
        let compiled = t.elapsed();
        b.launch(&*k, &args, s.grid, s.group_size)?;
        b.synchronize()?;
        println!(
            "end to end, {label}: compile {:.2} ms ({:?}), + first launch and sync {:.2} ms",
            ms(compiled),
            k.compile_times().origin,
            ms(t.elapsed() - compiled)
        );
    }
    let _ = std::fs::remove_dir_all(&cache);

    // Event timing of repeated launches.
    let k = cold.compile_cuda(&s.kernel)?;
    let bufs = reduce_buffers(&cold)?;
    let args = bufs.each_ref().map(|b| KernelArg::Buffer(&**b));
    let t = Instant::now();
    let dev = cold
        .time_launches(&mut || cold.launch(&*k, &args, s.grid, s.group_size), 1000)?
        .unwrap_or_default();
    println!(
        "1000 launches of threadgroup_reduce: {:.2} us each on the GPU (events), {:.2} us wall",
        dev.as_secs_f64() * 1e6 / 1000.0,
        t.elapsed().as_secs_f64() * 1e6 / 1000.0
    );

    // A runtime loop step of zero must trap, not hang; the error must say so.
    let s = samples::strided_loop()?;
    let k = cold.compile_cuda(&s.kernel)?;
    let x = cold.alloc(2000)?;
    let o = cold.alloc(96 * 5 * 4)?;
    let args = [
        tessera_runtime::KernelArg::Buffer(&*x),
        tessera_runtime::KernelArg::Buffer(&*o),
        tessera_runtime::KernelArg::Scalar(tessera_runtime::Literal::U32(1000)),
        tessera_runtime::KernelArg::Scalar(tessera_runtime::Literal::U32(0)),
    ];
    let t = Instant::now();
    let trapped = cold
        .launch(&*k, &args, s.grid, s.group_size)
        .and_then(|_| cold.synchronize());
    match trapped {
        Err(e) => println!(
            "zero step: error after {:.1} ms, as it should: {e}",
            ms(t.elapsed())
        ),
        Ok(()) => {
            println!("FAIL zero step: the launch succeeded");
            ok = false;
        }
    }
    println!(
        "{}",
        if ok {
            "cuda_smoke: all good"
        } else {
            "cuda_smoke: FAILURES"
        }
    );
    Ok(ok)
}
