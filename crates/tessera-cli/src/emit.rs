//! `tessera emit KERNEL --dtype D [--const k=v]… --target ir|ir-opt|cuda|msl`.

use crate::kernels::{find_def, parse_dtype, parse_pair};
use std::process::ExitCode;
use tessera_compiler::{compile, optimize, Target};
use tessera_ir::Specialization;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum EmitTarget {
    /// The IR as the frontend built it.
    Ir,
    /// The IR after the CPU pipeline (what the CPU backend runs).
    IrOpt,
    /// CUDA C, as NVRTC compiles it.
    Cuda,
    /// Metal Shading Language.
    Msl,
}

#[derive(clap::Args)]
pub struct Args {
    /// The kernel's name (see `tessera list`).
    kernel: String,
    /// The dtype of every generic parameter, or `T=f16` for one of them.
    #[arg(long)]
    dtype: Vec<String>,
    /// A constexpr value: `--const n=4096`.
    #[arg(long = "const")]
    consts: Vec<String>,
    #[arg(long, value_enum, default_value = "ir")]
    target: EmitTarget,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let def = find_def(&args.kernel)?;
    let sig = &def.signature;
    let mut pairs = Vec::new();
    for d in &args.dtype {
        match d.split_once('=') {
            Some(_) => pairs.push(parse_pair(d)?),
            None => {
                parse_dtype(d)?;
                pairs.extend(sig.generics.iter().map(|g| (g.to_string(), d.clone())));
            }
        }
    }
    for c in &args.consts {
        pairs.push(parse_pair(c)?);
    }
    let spec = Specialization::from_named(sig, &pairs).map_err(|e| e.to_string())?;
    let kernel = def.build(&spec).map_err(|e| e.to_string())?;
    let text = match args.target {
        EmitTarget::Ir => kernel.to_string(),
        EmitTarget::IrOpt => optimize(kernel, Target::Cpu)
            .map_err(|e| e.to_string())?
            .to_string(),
        EmitTarget::Cuda => compile(kernel, Target::Cuda)
            .map_err(|e| e.to_string())?
            .source
            .text()
            .to_string(),
        EmitTarget::Msl => compile(kernel, Target::Metal)
            .map_err(|e| e.to_string())?
            .source
            .text()
            .to_string(),
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}
