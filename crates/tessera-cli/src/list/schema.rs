//! The machine-readable op schema of `tessera list --json` and `tessera run --list --json`
//! (documented in docs/op-schema.md): every registered op's tensors, parameters,
//! invariants, workspace, variants and kernels, read from its declaration.

use serde_json::{json, Value};
use tessera_std::decl::{DtypeRule, OpDecl, ParamDefault, ParamKind, ShapeFrom};

/// The schema's name and version; a change that breaks readers bumps the number.
pub const SCHEMA: &str = "tessera-ops/1";

fn dtype(d: DtypeRule) -> Value {
    match d {
        DtypeRule::OneOf(list) => {
            json!({ "one_of": list.iter().map(|t| t.name()).collect::<Vec<_>>() })
        }
        DtypeRule::Like(n) => json!({ "like": n }),
        DtypeRule::F32OrLike(n) => json!({ "f32_or_like": n }),
        DtypeRule::Derived(_, how) => json!({ "derived": how }),
    }
}

fn param_type(k: ParamKind) -> Value {
    match k {
        ParamKind::Bool => json!({ "type": "bool" }),
        ParamKind::UInt { min, max } => json!({ "type": "uint", "min": min, "max": max }),
        ParamKind::Float => json!({ "type": "float" }),
        ParamKind::Choice(values) => json!({ "type": "choice", "values": values }),
        ParamKind::UIntList => json!({ "type": "uint_list" }),
    }
}

/// One op as JSON.
pub fn op(o: &OpDecl) -> Value {
    let inputs: Vec<Value> = o
        .inputs
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "shape": t.shape,
                "dtype": dtype(t.dtype),
                "optional": t.optional,
                "doc": t.doc,
            })
        })
        .collect();
    let outputs: Vec<Value> = o
        .outputs
        .iter()
        .map(|t| {
            let from = match t.shape_from {
                ShapeFrom::Like(n) => json!({ "like": n }),
                ShapeFrom::Dims => json!("dims"),
                ShapeFrom::Derived(_) => json!("derived"),
            };
            json!({
                "name": t.name,
                "shape": t.shape,
                "dtype": dtype(t.dtype),
                "shape_from": from,
                "doc": t.doc,
            })
        })
        .collect();
    let params: Vec<Value> = o
        .params
        .iter()
        .map(|p| {
            let mut v = param_type(p.kind);
            let (default, auto) = match p.default {
                ParamDefault::Required => (Value::Null, Value::Null),
                ParamDefault::Value(d) => (json!(d), Value::Null),
                ParamDefault::Auto(what) => (Value::Null, json!(what)),
            };
            if let Value::Object(m) = &mut v {
                m.insert("name".into(), json!(p.name));
                m.insert(
                    "required".into(),
                    json!(p.default == ParamDefault::Required),
                );
                m.insert("default".into(), default);
                m.insert("auto".into(), auto);
                m.insert("doc".into(), json!(p.doc));
            }
            v
        })
        .collect();
    let mut kernels: Vec<&str> = (o.kernels)().iter().map(|u| u.def.name()).collect();
    kernels.sort_unstable();
    kernels.dedup();
    json!({
        "name": o.name,
        "family": o.family,
        "summary": o.summary,
        "inputs": inputs,
        "outputs": outputs,
        "params": params,
        "invariants": o.invariants,
        "workspace": o.workspace.map(|w| json!({ "bytes": w.bytes })),
        "accuracy": accuracy(&o.accuracy),
        "variants": o.variants.iter().map(|v| json!({ "name": v.name, "when": v.when })).collect::<Vec<_>>(),
        "kernels": kernels,
    })
}

/// `{"f32": {"atol", "rtol"}, "f16": …, "bf16": …, "keyed_by"}`.
fn accuracy(a: &tessera_std::decl::Accuracy) -> serde_json::Value {
    let t = |t: tessera_std::decl::Tolerance| json!({ "atol": t.atol, "rtol": t.rtol });
    json!({ "f32": t(a.f32), "f16": t(a.f16), "bf16": t(a.bf16), "keyed_by": a.keyed_by })
}

/// The whole schema for `ops`.
pub fn document(ops: &[&OpDecl]) -> Value {
    json!({
        "schema": SCHEMA,
        "ops": ops.iter().map(|o| op(o)).collect::<Vec<_>>(),
    })
}

/// The schema as pretty-printed JSON.
pub fn to_string(ops: &[&OpDecl]) -> Result<String, String> {
    serde_json::to_string_pretty(&document(ops)).map_err(|e| e.to_string())
}
