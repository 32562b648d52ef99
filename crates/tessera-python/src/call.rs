//! Calls of a declared op from Python, the way `tessera run` makes them: parameters parsed
//! from `name=value` text by the declaration ([`ParamValues::parse`], so names, defaults,
//! allowed values and errors are `tessera run`'s), output shapes and dtypes derived by the
//! declaration ([`OpDecl::output_specs`]), the call made through [`OpDecl::invoke`]
//! (workspace first). On the CPU the host bytes are copied in and the outputs copied out;
//! the call itself runs with the GIL released.

use crate::errors::{dtype, invalid, op_error, runtime_error};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::OnceLock;
use tessera_runtime::{Context, Tensor};
use tessera_std::decl::{OutputSpec, ParamValues};
use tessera_std::{ops, OpDecl};

/// `(name, value)` parameter text, as `tessera run --param name=value` takes it.
pub type ParamText = Vec<(String, String)>;

/// The declared op `name`, or an error listing every op.
pub fn op_named(name: &str) -> PyResult<&'static OpDecl> {
    crate::cache::find(name).ok_or_else(|| {
        let names: Vec<&str> = ops().iter().map(|o| o.name).collect();
        invalid(format!(
            "no op `{name}`; expected one of {}",
            names.join(", ")
        ))
    })
}

/// The parameters checked against the declaration, defaults filled in (parsed once per
/// distinct text).
pub fn params_of(op: &'static OpDecl, given: ParamText) -> PyResult<Arc<ParamValues>> {
    crate::cache::params(op, given, |g| ParamValues::parse(op, g)).map_err(invalid)
}

/// Refuses unknown input names and reports a missing required one.
pub fn check_inputs<'a>(
    op: &'static OpDecl,
    names: impl IntoIterator<Item = &'a str>,
) -> PyResult<()> {
    op.check_input_names(names).map_err(invalid)
}

/// Refuses output names the op does not have.
pub fn check_outputs<'a>(
    op: &'static OpDecl,
    names: impl IntoIterator<Item = &'a str>,
) -> PyResult<()> {
    for n in names {
        if !op.outputs.iter().any(|o| o.name == n) {
            let known: Vec<&str> = op.outputs.iter().map(|o| o.name).collect();
            return Err(invalid(format!(
                "`{}` has no output `{n}`; its outputs: {}",
                op.name,
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// The one CPU context every call shares, so kernels compile once per process.
fn cpu() -> &'static Context {
    static CPU: OnceLock<Context> = OnceLock::new();
    CPU.get_or_init(Context::cpu)
}

/// Every output's `(name, dtype, shape)` for inputs of these dtypes and shapes: no data,
/// no device (what a `torch.library` fake implementation needs).
#[pyfunction]
pub fn output_specs(
    op: &str,
    inputs: Vec<(String, String, Vec<usize>)>,
    params: ParamText,
) -> PyResult<Vec<(String, String, Vec<usize>)>> {
    let op = op_named(op)?;
    let params = params_of(op, params)?;
    check_inputs(op, inputs.iter().map(|(n, _, _)| n.as_str()))?;
    let mut shapes = BTreeMap::new();
    for (name, d, shape) in &inputs {
        let t = cpu()
            .placeholder(dtype(d)?, shape)
            .map_err(|e| runtime_error(&format!("input `{name}`"), e))?;
        shapes.insert(name.clone(), t);
    }
    let specs = op.output_specs(&shapes, &params).map_err(op_error)?;
    Ok(specs.into_iter().map(spec_tuple).collect())
}

fn spec_tuple(s: OutputSpec) -> (String, String, Vec<usize>) {
    (s.name.to_string(), s.dtype.name().to_string(), s.shape)
}

/// One host tensor: `(name, dtype, shape, little-endian row-major bytes)`.
type HostIn = (String, String, Vec<usize>, PyBackedBytes);
/// One output returned to Python: `(name, dtype, shape, bytes)`.
type HostOut<'py> = (String, String, Vec<usize>, Bound<'py, PyBytes>);

fn host_tensors(items: &[HostIn], what: &str) -> PyResult<BTreeMap<String, Tensor>> {
    let mut out = BTreeMap::new();
    for (name, d, shape, bytes) in items {
        let t = cpu()
            .tensor_from_bytes(dtype(d)?, bytes, shape)
            .map_err(|e| runtime_error(&format!("{what} `{name}`"), e))?;
        out.insert(name.clone(), t);
    }
    Ok(out)
}

/// Runs `op` on the CPU backend. `outputs` are the outputs the caller holds, with their
/// current contents (an op that updates part of an output, a cache append, keeps the rest);
/// every other output is made zero-filled from the declaration's specs. Returns every
/// output as `(name, dtype, shape, bytes)`.
#[pyfunction]
pub fn invoke_cpu<'py>(
    py: Python<'py>,
    op: &str,
    inputs: Vec<HostIn>,
    outputs: Vec<HostIn>,
    params: ParamText,
) -> PyResult<Vec<HostOut<'py>>> {
    let op = op_named(op)?;
    let params = params_of(op, params)?;
    check_inputs(op, inputs.iter().map(|t| t.0.as_str()))?;
    check_outputs(op, outputs.iter().map(|t| t.0.as_str()))?;
    let ins = host_tensors(&inputs, "input")?;
    let mut outs = host_tensors(&outputs, "output")?;
    for s in op.output_specs(&ins, &params).map_err(op_error)? {
        if !outs.contains_key(s.name) {
            let t = cpu()
                .zeros(s.dtype, &s.shape)
                .map_err(|e| runtime_error(&format!("output `{}`", s.name), e))?;
            outs.insert(s.name.to_string(), t);
        }
    }
    let ctx = cpu();
    py.allow_threads(|| op.invoke(ctx, &ins, &outs, &params))
        .map_err(op_error)?;
    let mut result = Vec::with_capacity(outs.len());
    for o in op.outputs {
        let Some(t) = outs.get(o.name) else { continue };
        let bytes = py
            .allow_threads(|| t.to_bytes())
            .map_err(|e| runtime_error(&format!("output `{}`", o.name), e))?;
        result.push((
            o.name.to_string(),
            t.dtype().name().to_string(),
            t.shape().to_vec(),
            PyBytes::new(py, &bytes),
        ));
    }
    Ok(result)
}
