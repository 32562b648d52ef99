//! `tessera run OP --input name=FILE … [--param k=v]… --output name=FILE [--backend B]`:
//! runs any registered op on user data (.npy or .safetensors) on any backend, driven by
//! the op's declaration. Parameters are parsed and checked against the declaration, every
//! input is read, and the op validates every invariant, before anything is launched;
//! outputs are written only after the op succeeded.

mod files;

use crate::kernels::{context, parse_pair};
use crate::list::schema;
use files::HostArray;
use std::collections::BTreeMap;
use std::process::ExitCode;
use tessera_runtime::Tensor;
use tessera_std::decl::{DtypeRule, ParamValues};
use tessera_std::{find_op, ops, OpDecl};

#[derive(clap::Args)]
pub struct Args {
    /// The op: sdpa_decode, rms_norm, rope, … (`--list` shows them all).
    #[arg(default_value = "")]
    op: String,
    /// An input: `name=file.npy`, `name=file.safetensors` or `name=file.safetensors:tensor`.
    #[arg(long = "input", short = 'i')]
    inputs: Vec<String>,
    /// A parameter: `name=value` (booleans: true, false, 1 or 0).
    #[arg(long = "param", short = 'p')]
    params: Vec<String>,
    /// An output: `name=file.npy` or `name=file.safetensors`.
    #[arg(long = "output", short = 'o')]
    outputs: Vec<String>,
    /// cpu, cuda, metal or metal-emu (default: the best present).
    #[arg(long)]
    backend: Option<String>,
    /// List every op with its inputs, parameters and outputs (with OP, that op only).
    #[arg(long)]
    list: bool,
    /// With --list: the machine-readable op schema (docs/op-schema.md).
    #[arg(long, requires = "list")]
    json: bool,
}

/// `name=value` pairs, each name once.
fn pairs(list: &[String], what: &str) -> Result<Vec<(String, String)>, String> {
    let mut seen = BTreeMap::new();
    let mut v = Vec::new();
    for s in list {
        let (k, val) = parse_pair(s).map_err(|e| format!("--{what}: {e}"))?;
        if seen.insert(k.clone(), ()).is_some() {
            return Err(format!("--{what} {k} is given twice"));
        }
        v.push((k, val));
    }
    Ok(v)
}

fn list(args: &Args) -> Result<ExitCode, String> {
    let chosen: Vec<&OpDecl> = ops()
        .into_iter()
        .filter(|o| args.op.is_empty() || o.name == args.op)
        .collect();
    if chosen.is_empty() {
        return Err(unknown(&args.op));
    }
    if args.json {
        println!("{}", schema::to_string(&chosen)?);
    } else {
        for op in chosen {
            println!("{}\n", op.usage());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn unknown(name: &str) -> String {
    let names: Vec<&str> = ops().iter().map(|o| o.name).collect();
    format!("no op `{name}`; expected one of {}", names.join(", "))
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    if args.list || args.op.is_empty() {
        return list(&args);
    }
    let op = find_op(&args.op).ok_or_else(|| unknown(&args.op))?;
    let with_usage = |e: String| format!("{e}\n\n{}", op.usage());

    // Everything the command line says is checked against the declaration first.
    let params = ParamValues::parse(op, &pairs(&args.params, "param")?).map_err(with_usage)?;
    let files = pairs(&args.inputs, "input")?;
    op.check_input_names(files.iter().map(|(k, _)| k.as_str()))
        .map_err(with_usage)?;
    let outs = pairs(&args.outputs, "output")?;
    let out_names: Vec<&str> = op.outputs.iter().map(|o| o.name).collect();
    if outs.is_empty() {
        return Err(with_usage(format!(
            "give at least one --output NAME=FILE; `{}` writes {}",
            op.name,
            out_names.join(", ")
        )));
    }
    if let Some((k, _)) = outs.iter().find(|(k, _)| !out_names.contains(&k.as_str())) {
        return Err(with_usage(format!(
            "`{}` has no output `{k}`; its outputs: {}",
            op.name,
            out_names.join(", ")
        )));
    }
    files::check_outputs(outs.iter().map(|(_, p)| p.as_str()))?;

    // Inputs are read before any device work.
    let mut host: BTreeMap<String, HostArray> = BTreeMap::new();
    for (name, file) in &files {
        let mut a = files::load(file, name)?;
        // An integer input of another width (positions from `np.arange` are i64) narrows
        // to the integer dtype the op declares, with a range check.
        if let Some(DtypeRule::OneOf(allowed)) = op.input(name).map(|t| t.dtype) {
            if a.dtype.is_int() && !allowed.contains(&a.dtype) {
                if let Some(want) = allowed.iter().find(|d| d.is_int()) {
                    a = files::to_dtype(a, *want).map_err(|e| format!("input `{name}`: {e}"))?;
                }
            }
        }
        host.insert(name.clone(), a);
    }
    let ctx = context(args.backend.as_deref())?;
    let mut inputs: BTreeMap<String, Tensor> = BTreeMap::new();
    for (n, a) in &host {
        let t = ctx
            .tensor_from_bytes(a.dtype, &a.bytes, &a.shape)
            .map_err(|e| format!("input `{n}`: {e}"))?;
        inputs.insert(n.clone(), t);
    }
    let specs = op
        .output_specs(&inputs, &params)
        .map_err(|e| with_usage(e.to_string()))?;
    let mut outputs: BTreeMap<String, Tensor> = BTreeMap::new();
    for s in &specs {
        let t = ctx
            .zeros(s.dtype, &s.shape)
            .map_err(|e| format!("output `{}`: {e}", s.name))?;
        outputs.insert(s.name.to_string(), t);
    }
    op.invoke(&ctx, &inputs, &outputs, &params)
        .map_err(|e| e.to_string())?;
    ctx.synchronize().map_err(|e| e.to_string())?;
    let mut written = Vec::new();
    for (name, path) in &outs {
        let (Some(spec), Some(t)) = (
            specs.iter().find(|s| s.name == name.as_str()),
            outputs.get(name),
        ) else {
            continue;
        };
        let a = HostArray {
            dtype: spec.dtype,
            shape: spec.shape.clone(),
            bytes: t.to_bytes().map_err(|e| e.to_string())?,
        };
        written.push((path.as_str(), name.as_str(), a));
    }
    files::save_all(&written)?;
    for (path, name, a) in &written {
        println!("{name}: {}{:?} -> {path}", a.dtype, a.shape);
    }
    Ok(ExitCode::SUCCESS)
}
