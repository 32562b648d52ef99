//! Runs a launch: binds the arguments to device views and runs every threadgroup, in
//! parallel across the rayon pool, stopping early after the first error.

use super::group::{DevView, Group, LaunchState};
use super::memory::CpuBuffer;
use super::program::Program;
use crate::backend::{downcast_buffer, BackendKind, KernelArg};
use crate::error::{Result, RuntimeError};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tessera_ir::ParamKind;

fn arg_error(prog: &Program, message: String) -> RuntimeError {
    RuntimeError::Backend {
        backend: BackendKind::Cpu,
        message: format!("kernel `{}`: {message}", prog.name),
    }
}

/// Runs `prog` over `grid` threadgroups of `group_size` threads.
pub(crate) fn run(
    prog: &Program,
    args: &[KernelArg<'_>],
    grid: [u32; 3],
    group_size: u32,
) -> Result<()> {
    let params = &prog.kernel.params;
    if args.len() != params.len() {
        return Err(arg_error(
            prog,
            format!("expected {} arguments, got {}", params.len(), args.len()),
        ));
    }
    let mut tensors = Vec::with_capacity(args.len());
    let mut scalars = Vec::with_capacity(args.len());
    for (p, a) in params.iter().zip(args) {
        match (p.kind, a) {
            (ParamKind::Tensor { elem, .. }, KernelArg::Buffer(b)) => {
                let buf = downcast_buffer::<CpuBuffer>(*b, BackendKind::Cpu)?;
                tensors.push(Some(match elem.size_bytes() {
                    1 => DevView::B8(buf.u8s()),
                    2 => DevView::B16(buf.u16s()),
                    _ => DevView::B32(buf.u32s()),
                }));
                scalars.push(0);
            }
            (ParamKind::Scalar(ty), KernelArg::Scalar(l)) if l.ty() == ty => {
                tensors.push(None);
                scalars.push(l.to_bits());
            }
            (kind, _) => {
                return Err(arg_error(
                    prog,
                    format!("argument for `{}` does not match its kind {kind:?}", p.name),
                ))
            }
        }
    }
    if group_size == 0 || grid.contains(&0) {
        return Err(arg_error(
            prog,
            format!("empty launch: grid {grid:?}, group size {group_size}"),
        ));
    }
    let state = LaunchState {
        prog,
        tensors,
        scalars,
        grid,
        group_size,
    };
    let total = grid[0] as u64 * grid[1] as u64 * grid[2] as u64;
    // The error of the lowest-numbered failing threadgroup, for reproducible reports:
    // after a failure, groups numbered above it are skipped and those below still run
    // (one of them may fail first).
    let lowest_failed = AtomicU64::new(u64::MAX);
    let first: Mutex<Option<(u64, RuntimeError)>> = Mutex::new(None);
    let run_one = |g: &mut Group<'_>, idx: u64| {
        if idx > lowest_failed.load(Ordering::Relaxed) {
            return;
        }
        let x = (idx % grid[0] as u64) as u32;
        let y = ((idx / grid[0] as u64) % grid[1] as u64) as u32;
        let z = (idx / (grid[0] as u64 * grid[1] as u64)) as u32;
        if let Err(e) = g.run([x, y, z]) {
            lowest_failed.fetch_min(idx, Ordering::Relaxed);
            let mut slot = first.lock().unwrap_or_else(|p| p.into_inner());
            if slot.as_ref().is_none_or(|(i, _)| idx < *i) {
                *slot = Some((idx, e));
            }
        }
    };
    if total == 1 {
        run_one(&mut Group::new(&state), 0);
    } else {
        (0..total)
            .into_par_iter()
            .for_each_init(|| Group::new(&state), run_one);
    }
    match first.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}
