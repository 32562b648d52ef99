//! `tessera run OP --input name=FILE … [--param k=v]… --output name=FILE [--backend B]`:
//! runs an op wrapper on user data (.npy or .safetensors) on any backend. Every input is
//! read and checked, and the op validates every invariant, before anything is launched;
//! outputs are written only after the op succeeded.

mod files;
mod table;

use crate::kernels::{context, parse_pair};
use files::HostArray;
use std::collections::BTreeMap;
use std::process::ExitCode;
use table::{Inputs, Params, RunOp};

#[derive(clap::Args)]
pub struct Args {
    /// The op: sdpa_decode, rms_norm, rope, … (`--list` shows them all).
    #[arg(default_value = "")]
    op: String,
    /// An input: `name=file.npy`, `name=file.safetensors` or `name=file.safetensors:tensor`.
    #[arg(long = "input", short = 'i')]
    inputs: Vec<String>,
    /// A parameter: `name=value`.
    #[arg(long = "param", short = 'p')]
    params: Vec<String>,
    /// An output: `name=file.npy` or `name=file.safetensors`.
    #[arg(long = "output", short = 'o')]
    outputs: Vec<String>,
    /// cpu, cuda, metal or metal-emu (default: the best present).
    #[arg(long)]
    backend: Option<String>,
    /// List the runnable ops with their inputs, parameters and outputs.
    #[arg(long)]
    list: bool,
}

fn describe(op: &RunOp) -> String {
    let mut s = format!("{}: inputs {}", op.name, op.inputs.join(", "));
    if !op.optional.is_empty() {
        s += &format!(" [optional: {}]", op.optional.join(", "));
    }
    for (n, d, what) in op.params {
        let d = if d.is_empty() { "required" } else { d };
        s += &format!("\n    --param {n}=… ({what}; {d})");
    }
    s
}

fn pairs(list: &[String], what: &str) -> Result<BTreeMap<String, String>, String> {
    let mut m = BTreeMap::new();
    for s in list {
        let (k, v) = parse_pair(s).map_err(|e| format!("--{what}: {e}"))?;
        if m.insert(k.clone(), v).is_some() {
            return Err(format!("--{what} {k} is given twice"));
        }
    }
    Ok(m)
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let all = table::ops();
    if args.list || args.op.is_empty() {
        for op in &all {
            println!("{}", describe(op));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let names: Vec<&str> = all.iter().map(|o| o.name).collect();
    let op = all.iter().find(|o| o.name == args.op).ok_or_else(|| {
        format!(
            "no runnable op `{}`; expected one of {}",
            args.op,
            names.join(", ")
        )
    })?;

    // Parameters: known names only, defaults filled in.
    let mut params: Params = pairs(&args.params, "param")?;
    for k in params.keys() {
        if !op.params.iter().any(|(n, _, _)| n == k) {
            return Err(format!(
                "`{}` takes no parameter `{k}`\n{}",
                op.name,
                describe(op)
            ));
        }
    }
    for (n, d, _) in op.params {
        if !d.is_empty() {
            params.entry(n.to_string()).or_insert_with(|| d.to_string());
        }
    }

    // Inputs: every required one, no unknown ones; read before any device work.
    let files = pairs(&args.inputs, "input")?;
    for k in files.keys() {
        if !op.inputs.contains(&k.as_str()) && !op.optional.contains(&k.as_str()) {
            return Err(format!(
                "`{}` takes no input `{k}`\n{}",
                op.name,
                describe(op)
            ));
        }
    }
    let mut host: BTreeMap<String, HostArray> = BTreeMap::new();
    for n in op.inputs {
        let f = files
            .get(*n)
            .ok_or_else(|| format!("missing --input {n}=FILE\n{}", describe(op)))?;
        host.insert(n.to_string(), files::load(f, n)?);
    }
    for n in op.optional {
        if let Some(f) = files.get(*n) {
            host.insert(n.to_string(), files::load(f, n)?);
        }
    }
    let outs = pairs(&args.outputs, "output")?;
    files::check_outputs(outs.values().map(String::as_str))?;

    let ctx = context(args.backend.as_deref())?;
    let mut inputs: Inputs = BTreeMap::new();
    for (n, a) in &host {
        let t = ctx
            .tensor_from_bytes(a.dtype, &a.bytes, &a.shape)
            .map_err(|e| format!("input `{n}`: {e}"))?;
        inputs.insert(n.clone(), t);
    }
    let shapes = (op.outputs)(&inputs);
    for k in outs.keys() {
        if !shapes.iter().any(|(n, _, _)| n == k) {
            let known: Vec<&str> = shapes.iter().map(|(n, _, _)| *n).collect();
            return Err(format!(
                "`{}` has no output `{k}`; its outputs: {}",
                op.name,
                known.join(", ")
            ));
        }
    }
    if outs.is_empty() {
        return Err(format!(
            "give at least one --output NAME=FILE; `{}` writes {}",
            op.name,
            shapes
                .iter()
                .map(|(n, _, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut out_tensors = Vec::new();
    for (_, dt, shape) in &shapes {
        out_tensors.push(ctx.zeros(*dt, shape).map_err(|e| e.to_string())?);
    }
    (op.call)(&ctx, &inputs, &params, &out_tensors)?;
    ctx.synchronize().map_err(|e| e.to_string())?;
    let mut written = Vec::new();
    for ((name, dt, shape), t) in shapes.iter().zip(&out_tensors) {
        if let Some(path) = outs.get(*name) {
            let a = HostArray {
                dtype: *dt,
                shape: shape.clone(),
                bytes: t.to_bytes().map_err(|e| e.to_string())?,
            };
            written.push((path.as_str(), *name, a));
        }
    }
    files::save_all(&written)?;
    for (path, name, a) in &written {
        println!("{name}: {}{:?} -> {path}", a.dtype, a.shape);
    }
    Ok(ExitCode::SUCCESS)
}
