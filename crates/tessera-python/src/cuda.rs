//! Calls on a caller's CUDA memory and stream: PyTorch tensors bound in place (their data
//! pointers borrowed, nothing copied, nothing freed here) and the work issued on the
//! stream PyTorch names current, so it is ordered with the caller's own work, its caching
//! allocator's reuse and a `torch.cuda.graph` capture. One context per device compiles
//! each kernel once; a view of it per stream shares those kernels.
//!
//! What a call does besides its launches: the op's workspace, when it takes one, is made
//! through the stream's view (stream-ordered pool allocations, freed in stream order; the
//! decode attention scratch is kept for the stream's next call of the same shapes, see
//! [`crate::cache`]; a few workspaces also upload a small table, which synchronises the
//! stream — `docs/python.md` lists them). Outputs and inputs are the caller's.

use crate::call::{check_inputs, check_outputs, op_named, params_of, ParamText};
use crate::errors::{dtype, invalid, op_error};
use pyo3::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};
use tessera_runtime::{Context, Tensor};

/// One tensor of a call: `(name, data pointer, dtype, shape, strides in elements)`.
type DeviceIn = (String, u64, String, Vec<usize>, Vec<isize>);

/// The context of device `ordinal` on the stream `stream` (a `CUstream` as an integer),
/// made once per (device, stream) and kept: a view is a few words, and making it again
/// would be the only per-call cost besides the launches.
pub fn context_on(ordinal: usize, stream: usize) -> PyResult<Context> {
    static BASES: OnceLock<Mutex<HashMap<usize, Context>>> = OnceLock::new();
    static VIEWS: OnceLock<Mutex<HashMap<(usize, usize), Context>>> = OnceLock::new();
    let views = VIEWS.get_or_init(Default::default);
    if let Some(c) = views.lock().map_err(poisoned)?.get(&(ordinal, stream)) {
        return Ok(c.clone());
    }
    let base = {
        let mut bases = BASES
            .get_or_init(Default::default)
            .lock()
            .map_err(poisoned)?;
        match bases.get(&ordinal) {
            Some(c) => c.clone(),
            None => {
                let c = Context::cuda(ordinal).map_err(|e| invalid(e.to_string()))?;
                bases.insert(ordinal, c.clone());
                c
            }
        }
    };
    let raw = stream as tessera_runtime::cuda::cudarc::driver::sys::CUstream;
    // SAFETY: `stream` is PyTorch's current stream of device `ordinal` (its primary
    // context), live during this call. The view is kept and used again only when a call
    // names the same handle, i.e. while a stream with that handle is live.
    let view = unsafe { base.on_raw_cuda_stream(raw) }.map_err(|e| invalid(e.to_string()))?;
    views
        .lock()
        .map_err(poisoned)?
        .insert((ordinal, stream), view.clone());
    Ok(view)
}

fn poisoned<T>(_: T) -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err("a lock of the CUDA context cache is poisoned")
}

/// Refuses strides other than row-major contiguous (size-1 dimensions may have any).
fn check_contiguous(what: impl Fn() -> String, shape: &[usize], strides: &[isize]) -> PyResult<()> {
    let bad = || {
        invalid(format!(
            "{}: strides {strides:?} are not row-major contiguous for shape {shape:?}; pass \
             a contiguous tensor (.contiguous())",
            what()
        ))
    };
    if strides.len() != shape.len() {
        return Err(bad());
    }
    let mut expected: usize = 1;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 && usize::try_from(s).ok() != Some(expected) {
            return Err(bad());
        }
        expected = expected.saturating_mul(n);
    }
    Ok(())
}

/// Borrows every tensor of `items` on `ctx`.
fn borrow_all(ctx: &Context, items: &[DeviceIn], what: &str) -> PyResult<BTreeMap<String, Tensor>> {
    let mut out = BTreeMap::new();
    for (name, ptr, d, shape, strides) in items {
        let what = || format!("{what} `{name}`");
        check_contiguous(what, shape, strides)?;
        // SAFETY: the Python side passes the data pointer, dtype and shape of a contiguous
        // CUDA tensor it holds for the whole call; the work is issued on PyTorch's current
        // stream, in whose order its caching allocator reuses the memory, so the memory
        // outlives the work. The tensor made here is dropped before the call returns.
        let t = unsafe { ctx.borrow_device_memory(*ptr, dtype(d)?, shape) }
            .map_err(|e| invalid(format!("{}: {e}", what())))?;
        out.insert(name.clone(), t);
    }
    Ok(out)
}

/// Runs `op` on device `ordinal`'s stream `stream` over the caller's tensors: every output
/// must be given (the Python side allocates the missing ones from [`crate::call::output_specs`]
/// with PyTorch). Returns without synchronising.
#[pyfunction]
pub fn invoke_cuda(
    py: Python<'_>,
    op: &str,
    ordinal: usize,
    stream: usize,
    inputs: Vec<DeviceIn>,
    outputs: Vec<DeviceIn>,
    params: ParamText,
) -> PyResult<()> {
    let op = op_named(op)?;
    let parsed = params_of(op, params.clone())?;
    check_inputs(op, inputs.iter().map(|t| t.0.as_str()))?;
    check_outputs(op, outputs.iter().map(|t| t.0.as_str()))?;
    py.allow_threads(|| {
        let ctx = context_on(ordinal, stream)?;
        let ins = borrow_all(&ctx, &inputs, "input")?;
        let outs = borrow_all(&ctx, &outputs, "output")?;
        crate::cache::invoke(op, &ctx, (ordinal, stream), &ins, &outs, &parsed, &params)
            .map_err(op_error)
    })
}
