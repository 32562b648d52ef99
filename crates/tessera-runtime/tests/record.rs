//! `Context::record` and `Recorded::replay`: on a backend without graphs (the CPU
//! interpreter) recording runs nothing and says so; on one with graphs (here a stand-in
//! that runs the closure on the CPU interpreter while "recording" and counts replays,
//! refusing allocations and copies meanwhile as the CUDA backend does) the recorded
//! launches' buffers are kept alive by the graph, a closure's error comes back with no
//! graph, recordings do not nest, and a replay inside a recording is refused. On a
//! machine with a CUDA GPU the last test records two chained launches for real and
//! checks that each replay reads what the input holds at that replay.

mod common;

use common::{iota_kernel, Rng};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tessera_runtime::backend::{CompiledKernel, KernelArg};
use tessera_runtime::cpu::CpuBackend;
use tessera_runtime::{Backend, Context, DType, DeviceBuffer, DeviceGraph, DeviceInfo, Result};

/// The CPU interpreter, plus graphs that are the closure run once and replays counted.
struct CountingGraphs {
    cpu: CpuBackend,
    recording: AtomicBool,
    replays: Arc<AtomicUsize>,
}

struct CountedGraph(Arc<AtomicUsize>);

impl DeviceGraph for CountedGraph {
    fn replay(&self) -> Result<()> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl CountingGraphs {
    fn refuse_while_recording(&self, what: &str) -> Result<()> {
        if self.recording.load(Ordering::Acquire) {
            return Err(tessera_runtime::RuntimeError::Backend {
                backend: self.cpu.info().kind,
                message: format!("{what} while a graph is being recorded"),
            });
        }
        Ok(())
    }
}

impl Backend for CountingGraphs {
    fn info(&self) -> &DeviceInfo {
        self.cpu.info()
    }
    fn alloc(&self, bytes: usize) -> Result<Arc<dyn DeviceBuffer>> {
        self.refuse_while_recording("an allocation")?;
        self.cpu.alloc(bytes)
    }
    fn upload(&self, dst: &dyn DeviceBuffer, offset: usize, src: &[u8]) -> Result<()> {
        self.refuse_while_recording("an upload")?;
        self.cpu.upload(dst, offset, src)
    }
    fn download(&self, src: &dyn DeviceBuffer, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.refuse_while_recording("a download")?;
        self.cpu.download(src, offset, dst)
    }
    fn compile(&self, kernel: &tessera_ir::Kernel) -> Result<Arc<dyn CompiledKernel>> {
        self.cpu.compile(kernel)
    }
    fn launch(
        &self,
        kernel: &dyn CompiledKernel,
        args: &[KernelArg<'_>],
        grid: [u32; 3],
        group_size: u32,
    ) -> Result<()> {
        self.cpu.launch(kernel, args, grid, group_size)
    }
    fn synchronize(&self) -> Result<()> {
        self.cpu.synchronize()
    }
    fn time_launches(
        &self,
        f: &mut dyn FnMut() -> Result<()>,
        iters: u32,
    ) -> Result<Option<Duration>> {
        self.cpu.time_launches(f, iters)
    }
    fn recording_graph(&self) -> bool {
        self.recording.load(Ordering::Acquire)
    }
    fn record(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<Option<Box<dyn DeviceGraph>>> {
        self.recording.store(true, Ordering::Release);
        let ran = f();
        self.recording.store(false, Ordering::Release);
        ran?;
        Ok(Some(Box::new(CountedGraph(self.replays.clone()))))
    }
}

fn with_graphs() -> (Context, Arc<AtomicUsize>) {
    let replays = Arc::new(AtomicUsize::new(0));
    let backend = CountingGraphs {
        cpu: CpuBackend::new(),
        recording: AtomicBool::new(false),
        replays: replays.clone(),
    };
    (Context::with_backend(Arc::new(backend)), replays)
}

/// Launches `out[i] = i + k` over `out`'s elements (at most a threadgroup's).
fn iota(ctx: &Context, out: &tessera_runtime::Tensor, k: u32) -> Result<()> {
    ctx.launch_ir(&iota_kernel(k))
        .no_optimize()
        .arg("out", out)
        .grid([1, 1, 1])
        .group_size(out.len() as u32)
        .run()
}

#[test]
fn a_backend_without_graphs_records_nothing_and_runs_nothing() {
    let ctx = Context::cpu();
    let out = ctx.zeros(DType::U32, &[32]).unwrap();
    let mut called = false;
    let recorded = ctx
        .record(|| {
            called = true;
            iota(&ctx, &out, 1)
        })
        .unwrap();
    assert!(recorded.is_none() && !called);
    assert_eq!(out.to_vec::<u32>().unwrap(), vec![0; 32]);
    // Nothing is left collecting: the eager launch after it works as ever.
    iota(&ctx, &out, 5).unwrap();
    let want: Vec<u32> = (5..37).collect();
    assert_eq!(out.to_vec::<u32>().unwrap(), want);
}

#[test]
fn a_recording_keeps_the_buffers_its_launches_bind_until_it_drops() {
    let (ctx, replays) = with_graphs();
    let a = ctx.zeros(DType::U32, &[32]).unwrap();
    let b = ctx.zeros(DType::U32, &[32]).unwrap();
    let unbound = ctx.zeros(DType::U32, &[32]).unwrap();
    let held = |t: &tessera_runtime::Tensor| Arc::strong_count(t.buffer());
    let before = (held(&a), held(&b), held(&unbound));
    let recorded = ctx
        .record(|| {
            iota(&ctx, &a, 2)?;
            iota(&ctx, &b, 3)?;
            iota(&ctx, &a.view(&[16])?, 4)
        })
        .unwrap()
        .expect("this backend records");
    // a (twice, once through a view) and b, each held once more; the third not at all.
    assert_eq!(recorded.buffers(), 2);
    assert_eq!(
        (held(&a), held(&b), held(&unbound)),
        (before.0 + 1, before.1 + 1, before.2)
    );
    recorded.replay().unwrap();
    recorded.replay().unwrap();
    assert_eq!(replays.load(Ordering::Relaxed), 2);
    // Launches after the recording are not collected.
    iota(&ctx, &unbound, 1).unwrap();
    assert_eq!(held(&unbound), before.2);
    drop(recorded);
    assert_eq!((held(&a), held(&b)), (before.0, before.1));
}

#[test]
fn a_closure_that_copies_fails_with_no_graph_and_the_context_records_again() {
    let (ctx, _) = with_graphs();
    let out = ctx.zeros(DType::U32, &[32]).unwrap();
    let e = ctx
        .record(|| {
            iota(&ctx, &out, 1)?;
            out.write(&[7u32; 32])
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("an upload while a graph is being recorded"),
        "{e}"
    );
    assert!(!ctx.recording_graph());
    let again = ctx.record(|| iota(&ctx, &out, 1)).unwrap().unwrap();
    assert_eq!(again.buffers(), 1);
}

#[test]
fn recordings_do_not_nest_and_replays_wait_for_the_recording() {
    let (ctx, replays) = with_graphs();
    let out = ctx.zeros(DType::U32, &[32]).unwrap();
    let first = ctx.record(|| iota(&ctx, &out, 1)).unwrap().unwrap();
    let nested = ctx.record(|| ctx.record(|| iota(&ctx, &out, 2)).map(|_| ()));
    let e = nested.unwrap_err().to_string();
    assert!(e.contains("another is in progress"), "{e}");
    let inside = ctx.record(|| first.replay());
    let e = inside.unwrap_err().to_string();
    assert!(
        e.contains("a replay while a graph is being recorded"),
        "{e}"
    );
    assert_eq!(replays.load(Ordering::Relaxed), 0);
    first.replay().unwrap();
    assert_eq!(replays.load(Ordering::Relaxed), 1);
}

/// `out[g] = x[g] · 3 + 1` (wrapping u32).
fn affine_kernel() -> tessera_ir::Kernel {
    use tessera_ir::{BinaryOp, Builder, Builtin, Literal, Scalar};
    let mut b = Builder::kernel("affine");
    let x = b.tensor_param("x", Scalar::U32, false);
    let out = b.tensor_param("out", Scalar::U32, true);
    let g = b.builtin(Builtin::GlobalId);
    let v = b.load(x, g).expect("load");
    let three = b.lit(Literal::U32(3));
    let one = b.lit(Literal::U32(1));
    let m = b.binary(BinaryOp::Mul, v, three).expect("mul");
    let r = b.binary(BinaryOp::Add, m, one).expect("add");
    b.store(out, g, r).expect("store");
    b.finish_kernel().expect("kernel")
}

#[test]
fn a_cuda_replay_reads_what_its_buffers_hold_at_the_replay() {
    let ctx = match Context::cuda(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            // No GPU here: the real graphs are for the device machine.
            assert!(e.to_string().contains("not available"), "{e}");
            return;
        }
    };
    let n = 256usize;
    let k = affine_kernel();
    let (x, y, out) = (
        ctx.zeros(DType::U32, &[n]).unwrap(),
        ctx.zeros(DType::U32, &[n]).unwrap(),
        ctx.zeros(DType::U32, &[n]).unwrap(),
    );
    let step = |src: &tessera_runtime::Tensor, dst: &tessera_runtime::Tensor| {
        ctx.launch_ir(&k)
            .arg("x", src)
            .arg("out", dst)
            .grid([2, 1, 1])
            .group_size(128)
            .run()
    };
    // Compiled outside the recording, as an engine's first, eager step does.
    step(&x, &y).unwrap();
    let recorded = ctx
        .record(|| {
            step(&x, &y)?;
            step(&y, &out)
        })
        .unwrap()
        .expect("CUDA records graphs");
    assert_eq!(recorded.buffers(), 3);
    // Recording ran nothing.
    assert_eq!(out.to_vec::<u32>().unwrap(), vec![0; n]);
    let mut rng = Rng::new(23);
    for _ in 0..3 {
        let input: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
        x.write(&input).unwrap();
        recorded.replay().unwrap();
        let want: Vec<u32> = input
            .iter()
            .map(|&v| {
                v.wrapping_mul(3)
                    .wrapping_add(1)
                    .wrapping_mul(3)
                    .wrapping_add(1)
            })
            .collect();
        assert_eq!(out.to_vec::<u32>().unwrap(), want);
    }
    // A copy inside a recording is the backend's error, and recording works after it.
    let e = ctx
        .record(|| {
            step(&x, &y)?;
            x.write(&vec![0u32; n])
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("while a graph is being recorded"), "{e}");
    assert!(!ctx.recording_graph());
    assert!(ctx.record(|| step(&x, &y)).unwrap().is_some());
}
