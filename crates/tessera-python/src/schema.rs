//! Every declared op as Python data, read from its declaration: its tensors (named
//! dimensions, dtype rules, optional or not), parameters (kind, allowed values, default),
//! invariants, workspace and usage text. The Python package builds `tessera.ops.<name>`,
//! its docstrings and the `torch.library` schemas from these dictionaries alone.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tessera_std::decl::{
    default_text, dtype_text, kind_text, DtypeRule, OpDecl, OutputDecl, ParamDecl, ParamDefault,
    ParamKind, TensorDecl,
};

/// `{"one_of": [...]}`, `{"like": name}`, `{"f32_or_like": name}` or `{"derived": how}`.
fn dtype_rule<'py>(py: Python<'py>, d: DtypeRule) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    match d {
        DtypeRule::OneOf(list) => {
            let names: Vec<&str> = list.iter().map(|t| t.name()).collect();
            out.set_item("one_of", names)?
        }
        DtypeRule::Like(n) => out.set_item("like", n)?,
        DtypeRule::F32OrLike(n) => out.set_item("f32_or_like", n)?,
        DtypeRule::Derived(_, how) => out.set_item("derived", how)?,
    }
    out.set_item("text", dtype_text(d))?;
    Ok(out)
}

fn input<'py>(py: Python<'py>, t: &TensorDecl) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", t.name)?;
    d.set_item("shape", t.shape.to_vec())?;
    d.set_item("dtype", dtype_rule(py, t.dtype)?)?;
    d.set_item("optional", t.optional)?;
    d.set_item("doc", t.doc)?;
    Ok(d)
}

fn output<'py>(py: Python<'py>, t: &OutputDecl) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", t.name)?;
    d.set_item("shape", t.shape.to_vec())?;
    d.set_item("dtype", dtype_rule(py, t.dtype)?)?;
    d.set_item("doc", t.doc)?;
    Ok(d)
}

/// A parameter: `kind` (`bool`, `uint`, `float`, `choice`, `uint_list`) with `min`/`max`
/// or `values`; `required`; `default` (the declared text, parsed the way `tessera run`
/// parses it) or `auto` (what the op decides when it is not given).
fn param<'py>(py: Python<'py>, p: &ParamDecl) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", p.name)?;
    let kind = match p.kind {
        ParamKind::Bool => "bool",
        ParamKind::UInt { min, max } => {
            d.set_item("min", min)?;
            d.set_item("max", max)?;
            "uint"
        }
        ParamKind::Float => "float",
        ParamKind::Choice(values) => {
            d.set_item("values", values.to_vec())?;
            "choice"
        }
        ParamKind::UIntList => "uint_list",
    };
    d.set_item("kind", kind)?;
    d.set_item("kind_text", kind_text(p.kind))?;
    d.set_item("required", p.default == ParamDefault::Required)?;
    let (default, auto) = match p.default {
        ParamDefault::Required => (None, None),
        ParamDefault::Value(v) => (Some(v), None),
        ParamDefault::Auto(what) => (None, Some(what)),
    };
    d.set_item("default", default)?;
    d.set_item("auto", auto)?;
    d.set_item("default_text", default_text(p.default))?;
    d.set_item("doc", p.doc)?;
    Ok(d)
}

fn op<'py>(py: Python<'py>, o: &OpDecl) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", o.name)?;
    d.set_item("family", o.family)?;
    d.set_item("summary", o.summary)?;
    let inputs = PyList::empty(py);
    for t in o.inputs {
        inputs.append(input(py, t)?)?;
    }
    d.set_item("inputs", inputs)?;
    let outputs = PyList::empty(py);
    for t in o.outputs {
        outputs.append(output(py, t)?)?;
    }
    d.set_item("outputs", outputs)?;
    let params = PyList::empty(py);
    for p in o.params {
        params.append(param(py, p)?)?;
    }
    d.set_item("params", params)?;
    d.set_item("invariants", o.invariants.to_vec())?;
    d.set_item("workspace", o.workspace.map(|w| w.bytes))?;
    d.set_item("usage", o.usage())?;
    Ok(d)
}

/// Every registered op's declaration, sorted by family and name.
#[pyfunction]
pub fn ops(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for o in tessera_std::ops() {
        list.append(op(py, o)?)?;
    }
    Ok(list)
}
