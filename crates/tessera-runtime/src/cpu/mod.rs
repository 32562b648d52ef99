//! The CPU backend: runs kernels by interpreting their IR one threadgroup at a time in
//! lock-step (per-lane registers, active-lane masks), threadgroups in parallel, and
//! checks everything a GPU would leave undefined (see [`crate::Violation`]).

mod async_copy;
mod collective;
mod frag;
mod frag_tiles;
mod group;
mod mask;
mod memops;
mod memory;
mod program;
mod run;
mod scalar;

pub use memory::CpuBuffer;

use crate::backend::{
    downcast_buffer, downcast_kernel, Backend, BackendKind, CompiledKernel, DeviceBuffer,
    DeviceInfo, KernelArg,
};
use crate::error::{Result, RuntimeError};
use crate::grid::check_grid;
use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_ir::Kernel;

/// The lock-step SIMT interpreter backend.
pub struct CpuBackend {
    info: DeviceInfo,
}

impl Default for CpuBackend {
    fn default() -> Self {
        CpuBackend::new()
    }
}

impl CpuBackend {
    pub fn new() -> CpuBackend {
        let threads = rayon::current_num_threads() as u32;
        CpuBackend {
            info: DeviceInfo {
                kind: BackendKind::Cpu,
                name: format!("cpu ({threads} threads, lock-step SIMT interpreter)"),
                max_threads_per_group: 1024,
                // The largest limit among the GPUs supported (an H100's or H200's 227 KiB):
                // ops pick their configurations by the device's limit, and the interpreter
                // checks the ones GPUs with that much run (the Metal emulator keeps Apple's
                // 32 KiB, so the small configurations stay checked there).
                max_shared_bytes: 227 * 1024,
                simd_width: 32,
                compute_units: threads,
                memory_bytes: 0,
            },
        }
    }
}

/// A kernel prepared for the interpreter.
pub struct CpuKernel {
    program: program::Program,
}

impl CompiledKernel for CpuKernel {
    fn kernel(&self) -> &Kernel {
        &self.program.kernel
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn check_range(buf: &dyn DeviceBuffer, offset: usize, len: usize, what: &str) -> Result<()> {
    let end = offset.checked_add(len);
    if end.is_none_or(|e| e > buf.size_bytes()) {
        return Err(RuntimeError::Backend {
            backend: BackendKind::Cpu,
            message: format!(
                "{what} of {len} bytes at offset {offset} does not fit a buffer of {} bytes",
                buf.size_bytes()
            ),
        });
    }
    Ok(())
}

impl Backend for CpuBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<Arc<dyn DeviceBuffer>> {
        Ok(Arc::new(CpuBuffer::new(bytes)?))
    }

    fn upload(&self, dst: &dyn DeviceBuffer, offset: usize, src: &[u8]) -> Result<()> {
        check_range(dst, offset, src.len(), "an upload")?;
        downcast_buffer::<CpuBuffer>(dst, BackendKind::Cpu)?.write_bytes(offset, src);
        Ok(())
    }

    fn download(&self, src: &dyn DeviceBuffer, offset: usize, dst: &mut [u8]) -> Result<()> {
        check_range(src, offset, dst.len(), "a download")?;
        downcast_buffer::<CpuBuffer>(src, BackendKind::Cpu)?.read_bytes(offset, dst);
        Ok(())
    }

    fn compile(&self, kernel: &Kernel) -> Result<Arc<dyn CompiledKernel>> {
        Ok(Arc::new(CpuKernel {
            program: program::Program::new(kernel.clone())?,
        }))
    }

    fn launch(
        &self,
        kernel: &dyn CompiledKernel,
        args: &[KernelArg<'_>],
        grid: [u32; 3],
        group_size: u32,
    ) -> Result<()> {
        let k = downcast_kernel::<CpuKernel>(kernel, BackendKind::Cpu)?;
        check_grid(&k.program.kernel.name, grid, group_size)?;
        run::run(&k.program, args, grid, group_size)
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// Launches run synchronously on the CPU, so wall-clock time is device time.
    fn time_launches(
        &self,
        f: &mut dyn FnMut() -> Result<()>,
        iters: u32,
    ) -> Result<Option<Duration>> {
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        Ok(Some(t.elapsed()))
    }
}
