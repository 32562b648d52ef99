//! The `metal-emu` backend: compiles each kernel's generated MSL with the host C++
//! compiler against the Metal model and fiber runtime, and runs launches as a child
//! process fed the argument bytes on stdin, reading the tensors back from stdout.

use super::toolchain::{backend_error, compiler_id};
use super::{build, report};
use crate::backend::{
    downcast_buffer, downcast_kernel, Backend, BackendKind, CompiledKernel, DeviceBuffer,
    DeviceInfo, KernelArg,
};
use crate::error::Result;
use crate::grid::check_grid;
use std::any::Any;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_compiler::msl::{self, MslSource};
use tessera_ir::{Kernel, ParamKind};

/// Host memory standing in for a Metal buffer.
#[derive(Debug)]
pub struct EmuBuffer {
    bytes: Mutex<Vec<u8>>,
    len: usize,
}

impl DeviceBuffer for EmuBuffer {
    fn size_bytes(&self) -> usize {
        self.len
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl EmuBuffer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.bytes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A kernel's MSL and the emulator program built from it.
pub struct EmuKernel {
    kernel: Kernel,
    source: MslSource,
    exe: PathBuf,
}

impl EmuKernel {
    /// The generated MSL.
    pub fn source(&self) -> &MslSource {
        &self.source
    }
}

impl CompiledKernel for EmuKernel {
    fn kernel(&self) -> &Kernel {
        &self.kernel
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn sources(&self) -> Vec<(String, String)> {
        vec![("metal".to_string(), self.source.code.clone())]
    }
}

/// Runs generated MSL on the CPU: the Metal emitter's check off Apple hardware.
pub struct MetalEmuBackend {
    info: DeviceInfo,
}

impl MetalEmuBackend {
    /// Opens the emulator; fails if the host C++ compiler cannot be run.
    pub fn new() -> Result<MetalEmuBackend> {
        let compiler = compiler_id()?;
        let threads = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        Ok(MetalEmuBackend {
            info: DeviceInfo {
                kind: BackendKind::MetalEmu,
                name: format!("metal-emu (generated MSL as C++ fibers, {compiler})"),
                max_threads_per_group: 1024,
                // Apple GPUs' threadgroup memory.
                max_shared_bytes: 32 * 1024,
                simd_width: 32,
                compute_units: threads,
                memory_bytes: 0,
            },
        })
    }

    /// Compiles optimised IR, returning the concrete kernel type.
    pub fn compile_emu(&self, kernel: &Kernel) -> Result<EmuKernel> {
        let source = msl::emit(kernel).map_err(|e| backend_error(e.to_string()))?;
        let local_bytes = kernel.body.locals.iter().map(|a| a.size_bytes()).sum();
        let exe = build::build(&source, kernel.params.len(), local_bytes)?;
        Ok(EmuKernel {
            kernel: kernel.clone(),
            source,
            exe,
        })
    }

    /// Launches a compiled kernel with a patched MSL source: for tests that check the
    /// emulator catches a broken kernel.
    pub fn with_source(&self, kernel: &EmuKernel, code: String) -> Result<EmuKernel> {
        let source = MslSource {
            code,
            ..kernel.source.clone()
        };
        let local_bytes = kernel
            .kernel
            .body
            .locals
            .iter()
            .map(|a| a.size_bytes())
            .sum();
        let exe = build::build(&source, kernel.kernel.params.len(), local_bytes)?;
        Ok(EmuKernel {
            kernel: kernel.kernel.clone(),
            source,
            exe,
        })
    }
}

fn check_range(buf: &dyn DeviceBuffer, offset: usize, len: usize, what: &str) -> Result<()> {
    if offset.checked_add(len).is_none_or(|e| e > buf.size_bytes()) {
        return Err(backend_error(format!(
            "{what} of {len} bytes at offset {offset} does not fit a buffer of {} bytes",
            buf.size_bytes()
        )));
    }
    Ok(())
}

/// Longest a launch may run: `TESSERA_EMU_TIMEOUT_S` seconds (default 600).
fn timeout() -> Duration {
    let s = std::env::var("TESSERA_EMU_TIMEOUT_S")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(600);
    Duration::from_secs(s.max(1))
}

impl Backend for MetalEmuBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<Arc<dyn DeviceBuffer>> {
        // A refused reservation is an error, not an abort.
        let mut data = Vec::new();
        data.try_reserve_exact(bytes).map_err(|e| {
            backend_error(format!(
                "cannot allocate {bytes} bytes ({:.1} GiB): {e}",
                bytes as f64 / (1u64 << 30) as f64
            ))
        })?;
        data.resize(bytes, 0);
        Ok(Arc::new(EmuBuffer {
            bytes: Mutex::new(data),
            len: bytes,
        }))
    }

    fn upload(&self, dst: &dyn DeviceBuffer, offset: usize, src: &[u8]) -> Result<()> {
        check_range(dst, offset, src.len(), "an upload")?;
        let b = downcast_buffer::<EmuBuffer>(dst, BackendKind::MetalEmu)?;
        b.lock()[offset..offset + src.len()].copy_from_slice(src);
        Ok(())
    }

    fn download(&self, src: &dyn DeviceBuffer, offset: usize, dst: &mut [u8]) -> Result<()> {
        check_range(src, offset, dst.len(), "a download")?;
        let b = downcast_buffer::<EmuBuffer>(src, BackendKind::MetalEmu)?;
        dst.copy_from_slice(&b.lock()[offset..offset + dst.len()]);
        Ok(())
    }

    fn compile(&self, kernel: &Kernel) -> Result<Arc<dyn CompiledKernel>> {
        Ok(Arc::new(self.compile_emu(kernel)?))
    }

    fn launch(
        &self,
        kernel: &dyn CompiledKernel,
        args: &[KernelArg<'_>],
        grid: [u32; 3],
        group_size: u32,
    ) -> Result<()> {
        let k = downcast_kernel::<EmuKernel>(kernel, BackendKind::MetalEmu)?;
        check_grid(&k.kernel.name, grid, group_size)?;
        if args.len() != k.kernel.params.len() {
            return Err(backend_error(format!(
                "`{}` takes {} arguments, {} given",
                k.source.kernel_name,
                k.kernel.params.len(),
                args.len()
            )));
        }
        // The input: per parameter, a u64 byte count and the bytes.
        let mut input = Vec::new();
        let mut outputs: Vec<(&EmuBuffer, bool)> = Vec::new();
        for (arg, p) in args.iter().zip(&k.kernel.params) {
            match (arg, p.kind) {
                (KernelArg::Buffer(b), ParamKind::Tensor { writable, .. }) => {
                    let b = downcast_buffer::<EmuBuffer>(*b, BackendKind::MetalEmu)?;
                    let bytes = b.lock();
                    input.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                    input.extend_from_slice(&bytes);
                    outputs.push((b, writable));
                }
                (KernelArg::Scalar(l), ParamKind::Scalar(ty)) if l.ty() == ty => {
                    let n = ty.size_bytes();
                    input.extend_from_slice(&(n as u64).to_le_bytes());
                    input.extend_from_slice(&l.to_bits().to_le_bytes()[..n]);
                }
                _ => {
                    return Err(backend_error(format!(
                        "argument `{}` of `{}` does not match its parameter",
                        p.name, k.source.kernel_name
                    )))
                }
            }
        }
        let out = run_program(&k.exe, &input, grid, group_size)
            .map_err(|e| backend_error(format!("running `{}`: {e}", k.exe.display())))?;
        if !out.success {
            return Err(report::failure(&k.source, out.code, &out.stderr));
        }
        let expected: usize = outputs.iter().map(|(b, _)| b.len).sum();
        if out.stdout.len() != expected {
            return Err(backend_error(format!(
                "the emulated kernel `{}` returned {} bytes, expected {expected}: {}",
                k.source.kernel_name,
                out.stdout.len(),
                out.stderr.trim()
            )));
        }
        let mut at = 0;
        for (b, writable) in outputs {
            if writable {
                b.lock().copy_from_slice(&out.stdout[at..at + b.len]);
            }
            at += b.len;
        }
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// Launches are synchronous, so wall-clock time is the emulator's time (not a GPU's).
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

struct RunOutput {
    success: bool,
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
}

/// Runs the program with `input` on stdin, collecting stdout and stderr, killing it past
/// the time limit.
fn run_program(
    exe: &PathBuf,
    input: &[u8],
    grid: [u32; 3],
    group_size: u32,
) -> std::io::Result<RunOutput> {
    let mut child = Command::new(exe)
        .args(grid.iter().map(u32::to_string))
        .arg(group_size.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (mut stdin, mut stdout, mut stderr) =
        match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(a), Some(b), Some(c)) => (a, b, c),
            _ => return Err(std::io::Error::other("the child's pipes are missing")),
        };
    let deadline = Instant::now() + timeout();
    std::thread::scope(|s| {
        let writer = s.spawn(move || {
            // A child that fails early closes its stdin; its report says why.
            let _ = stdin.write_all(input);
        });
        let out = s.spawn(move || {
            let mut v = Vec::new();
            stdout.read_to_end(&mut v).map(|_| v)
        });
        let err = s.spawn(move || {
            let mut v = Vec::new();
            let _ = stderr.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        });
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break Some(st);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let _ = writer.join();
        let stdout = out
            .join()
            .map_err(|_| std::io::Error::other("stdout reader panicked"))??;
        let mut stderr = err.join().unwrap_or_default();
        let Some(status) = status else {
            stderr.push_str(&format!(
                "\nkilled after {}s (TESSERA_EMU_TIMEOUT_S)",
                timeout().as_secs()
            ));
            return Ok(RunOutput {
                success: false,
                code: None,
                stdout,
                stderr,
            });
        };
        Ok(RunOutput {
            success: status.success(),
            code: status.code(),
            stdout,
            stderr,
        })
    })
}
