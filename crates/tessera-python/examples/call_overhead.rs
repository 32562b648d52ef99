//! The host cost of one op call on the native side, without a GPU: the declared op runs
//! on a backend that compiles nothing and launches nothing (a "null" device that still
//! checks and binds every argument the way the CUDA backend's callers do), over borrowed
//! memory, so what is timed is the argument binding, the op's checks and the runtime's
//! launch path — everything a call on CUDA does on the host besides the driver calls —
//! and, for a repeat of the same tensors, what the eager path does instead of binding
//! them again (it keeps the last call's, see `src/eager.rs`).
//!
//! ```text
//! cargo run --release -p tessera-python --example call_overhead [calls]
//! ```

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_runtime::backend::AddressRange;
use tessera_runtime::{
    Backend, BackendKind, CompiledKernel, Context, DType, DeviceBuffer, DeviceInfo, KernelArg,
    Result, Tensor,
};
use tessera_std::decl::ParamValues;

/// Memory that is only an address range.
#[derive(Debug)]
struct NullBuffer {
    start: u64,
    len: usize,
}

impl DeviceBuffer for NullBuffer {
    fn size_bytes(&self) -> usize {
        self.len
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn address_range(&self) -> Option<AddressRange> {
        Some(AddressRange {
            backend: BackendKind::Cuda,
            start: self.start,
            len: self.len as u64,
        })
    }
}

struct NullKernel(tessera_ir::Kernel);

impl CompiledKernel for NullKernel {
    fn kernel(&self) -> &tessera_ir::Kernel {
        &self.0
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A device that takes every launch and runs nothing.
struct NullBackend {
    info: DeviceInfo,
    next: AtomicU64,
    launches: AtomicU64,
}

impl Backend for NullBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn alloc(&self, bytes: usize) -> Result<Arc<dyn DeviceBuffer>> {
        let start = self.next.fetch_add(bytes as u64 + 256, Ordering::Relaxed);
        Ok(Arc::new(NullBuffer { start, len: bytes }))
    }
    unsafe fn borrow_memory(&self, address: u64, bytes: usize) -> Result<Arc<dyn DeviceBuffer>> {
        Ok(Arc::new(NullBuffer {
            start: address,
            len: bytes,
        }))
    }
    fn upload(&self, _: &dyn DeviceBuffer, _: usize, _: &[u8]) -> Result<()> {
        Ok(())
    }
    fn download(&self, _: &dyn DeviceBuffer, _: usize, _: &mut [u8]) -> Result<()> {
        Ok(())
    }
    fn compile(&self, kernel: &tessera_ir::Kernel) -> Result<Arc<dyn CompiledKernel>> {
        Ok(Arc::new(NullKernel(kernel.clone())))
    }
    fn launch(
        &self,
        _: &dyn CompiledKernel,
        args: &[KernelArg<'_>],
        _: [u32; 3],
        _: u32,
    ) -> Result<()> {
        std::hint::black_box(args);
        self.launches.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    fn time_launches(&self, _: &mut dyn FnMut() -> Result<()>, _: u32) -> Result<Option<Duration>> {
        Ok(None)
    }
}

fn per_call(calls: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..calls / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..calls {
        f();
    }
    t.elapsed().as_secs_f64() / f64::from(calls) * 1e9
}

fn main() {
    let calls: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let backend = Arc::new(NullBackend {
        info: DeviceInfo {
            kind: BackendKind::Cuda,
            name: "null device".into(),
            max_threads_per_group: 1024,
            max_shared_bytes: 227 * 1024,
            simd_width: 32,
            compute_units: 132,
            memory_bytes: 0,
        },
        next: AtomicU64::new(1 << 40),
        launches: AtomicU64::new(0),
    });
    let ctx = Context::with_backend(backend.clone());
    let op = tessera_std::ops()
        .into_iter()
        .find(|o| o.name == "rms_norm")
        .expect("rms_norm is declared");
    let params = ParamValues::parse(op, &[]).expect("default parameters");
    let borrow = |addr: u64, shape: &[usize]| {
        // SAFETY: the null device never touches memory.
        unsafe { ctx.borrow_device_memory(addr, DType::BF16, shape) }.expect("borrow")
    };
    let tensors = |x: &Tensor, w: &Tensor, out: &Tensor| {
        let ins: BTreeMap<String, Tensor> =
            [("x".to_string(), x.clone()), ("w".into(), w.clone())].into();
        let outs: BTreeMap<String, Tensor> = [("out".to_string(), out.clone())].into();
        (ins, outs)
    };
    let (x, w, out) = (
        borrow(0x1000_0000, &[1, 4096]),
        borrow(0x2000_0000, &[4096]),
        borrow(0x3000_0000, &[1, 4096]),
    );
    let (ins, outs) = tensors(&x, &w, &out);
    println!("rms_norm [1, 4096] bf16 on a null device, {calls} calls, ns per call:");
    let invoke = per_call(calls, || {
        op.invoke(&ctx, &ins, &outs, &params).expect("call");
    });
    println!("  op.invoke (checks + launch path)        {invoke:8.0}");
    let bind = per_call(calls, || {
        let t = (
            borrow(0x1000_0000, &[1, 4096]),
            borrow(0x2000_0000, &[4096]),
            borrow(0x3000_0000, &[1, 4096]),
        );
        std::hint::black_box(tensors(&t.0, &t.1, &t.2));
    });
    println!("  binding 3 tensors (borrow + name maps)  {bind:8.0}");
    // What the eager path does instead of binding on a repeat of the same tensors: it
    // compares each tensor's description with the last call's and keeps its tensors.
    let kept: Vec<(usize, DType, u64, Vec<usize>)> = vec![
        (0, DType::BF16, 0x1000_0000, vec![1, 4096]),
        (1, DType::BF16, 0x2000_0000, vec![4096]),
        (2, DType::BF16, 0x3000_0000, vec![1, 4096]),
    ];
    let repeat = per_call(calls, || {
        let now = [
            (0, DType::BF16, 0x1000_0000u64, [1usize, 4096].as_slice()),
            (1, DType::BF16, 0x2000_0000, [4096].as_slice()),
            (2, DType::BF16, 0x3000_0000, [1, 4096].as_slice()),
        ];
        let same = kept.len() == now.len()
            && kept
                .iter()
                .zip(std::hint::black_box(&now))
                .all(|(k, n)| k.0 == n.0 && k.1 == n.1 && k.2 == n.2 && k.3 == n.3);
        assert!(same);
    });
    println!("  a repeat: 3 descriptions compared       {repeat:8.0}");
    println!(
        "  per call: first call {:.0}, repeat of the same tensors {:.0}",
        bind + invoke,
        repeat + invoke
    );
    let launches = backend.launches.load(Ordering::Relaxed);
    assert!(launches >= u64::from(calls), "{launches} launches");
}
