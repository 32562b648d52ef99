//! `tessera list`: every registered op with its kernels, their dtypes and parameters; with
//! `--json` the machine-readable op schema, with `--markdown` the docs tables.

pub mod schema;

use crate::kernels::all_uses;
use std::collections::BTreeMap;
use std::process::ExitCode;
use tessera_ir::{ParamSig, TypeSig};
use tessera_std::{decl::markdown, ops, OpDecl};

#[derive(clap::Args)]
pub struct Args {
    /// Only ops or kernels whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Print the op schema as JSON (docs/op-schema.md describes it).
    #[arg(long, conflicts_with = "markdown")]
    json: bool,
    /// Print the ops' tables as Markdown, as docs/kernels.md holds them.
    #[arg(long)]
    markdown: bool,
}

fn type_name(t: TypeSig, generics: &[&str]) -> String {
    match t {
        TypeSig::Fixed(s) => s.name().to_string(),
        TypeSig::Generic(i) => generics.get(i).copied().unwrap_or("?").to_string(),
    }
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let wanted = |s: &str| args.filter.as_deref().is_none_or(|f| s.contains(f));
    if args.json || args.markdown {
        let chosen: Vec<&OpDecl> = ops().into_iter().filter(|o| wanted(o.name)).collect();
        if args.json {
            println!("{}", schema::to_string(&chosen)?);
        } else {
            println!("{}", markdown::tables(&chosen));
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!("ops:");
    for op in ops() {
        if !wanted(op.name) {
            continue;
        }
        let cases = op.all_cases();
        let kernels: Vec<&str> = {
            let mut k: Vec<&str> = (op.kernels)().iter().map(|u| u.def.name()).collect();
            k.dedup();
            k
        };
        println!(
            "  {:<20} [{}] {} — {} case(s), kernels: {}",
            op.name,
            op.family,
            op.summary,
            cases.len(),
            kernels.join(", ")
        );
    }
    println!("kernels:");
    let mut dtypes: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut defs = BTreeMap::new();
    for u in all_uses() {
        defs.insert(u.def.name(), u.def);
        let list = dtypes.entry(u.def.name()).or_default();
        for d in &u.spec.dtypes {
            if !list.contains(&d.name().to_string()) {
                list.push(d.name().to_string());
            }
        }
    }
    for (name, def) in defs {
        if !wanted(name) {
            continue;
        }
        let sig = &def.signature;
        let params: Vec<String> = sig
            .params
            .iter()
            .map(|p| match p {
                ParamSig::Tensor {
                    name,
                    elem,
                    writable,
                } => format!(
                    "{}{name}: Tensor<{}>",
                    if *writable { "mut " } else { "" },
                    type_name(*elem, sig.generics)
                ),
                ParamSig::Scalar { name, ty } => {
                    format!("{name}: {}", type_name(*ty, sig.generics))
                }
            })
            .chain(
                sig.constexprs
                    .iter()
                    .map(|c| format!("#[constexpr] {}: {}", c.name, c.ty)),
            )
            .collect();
        let generics = if sig.generics.is_empty() {
            String::new()
        } else {
            format!("<{}>", sig.generics.join(", "))
        };
        println!("  {name}{generics}({})", params.join(", "));
        if !sig.doc.is_empty() {
            println!("      {}", sig.doc);
        }
        if let Some(d) = dtypes.get(name).filter(|d| !d.is_empty()) {
            println!("      dtypes: {}", d.join(", "));
        }
    }
    Ok(ExitCode::SUCCESS)
}
