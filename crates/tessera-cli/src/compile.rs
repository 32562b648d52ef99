//! `tessera compile --target cuda|msl [--filter S]`: compiles every registered kernel ×
//! dtype × specialisation for a target without running it — CUDA C through NVRTC (no GPU
//! needed), MSL through the C++ model of Metal (`g++ -fsyntax-only`) — and prints
//! `N passed, N failed`. With `TESSERA_DUMP=dir` set, each specialisation's source is
//! written to `dir/<label>.cu` or `.metal`. With a real CUDA architecture (`--arch
//! sm_90a`) NVRTC also runs ptxas, and each kernel's line gives what ptxas says of it:
//! registers, spills, and its performance warnings (warpgroup products serialised, waits
//! injected) — the resource check of a kernel without a GPU.

use crate::kernels::all_uses;
use rayon::prelude::*;
use std::process::ExitCode;
use std::time::Instant;
use tessera_compiler::{compile, Source, Target};
use tessera_runtime::cuda::nvrtc::Nvrtc;
use tessera_std::KernelUse;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum CompileTarget {
    Cuda,
    Msl,
}

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_enum)]
    target: CompileTarget,
    /// Only kernels whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// CUDA architecture to compile for: virtual (`compute_90`, PTX only) or real
    /// (`sm_90a`: through ptxas too, with its resource report per kernel).
    #[arg(long, default_value = "compute_90")]
    arch: String,
}

/// Each specialisation's label and whether it compiled (with a note, or the compiler's
/// message if not).
type Results = Vec<(String, Result<String, String>)>;

fn label(u: &KernelUse) -> String {
    format!("{}[{}]", u.def.name(), u.spec.describe(&u.def.signature))
}

fn report(name: &str, result: &Result<String, String>) {
    match result {
        Ok(note) if note.is_empty() => println!("ok   {name}"),
        Ok(note) => println!("ok   {name}\n     {}", note.replace('\n', "\n     ")),
        Err(e) => println!("FAIL {name}\n     {}", e.replace('\n', "\n     ")),
    }
}

/// Builds a use's IR and compiles it for `target` (optimise, then emit).
fn lower(u: &KernelUse, target: Target) -> Result<Source, String> {
    let k = u.def.build(&u.spec).map_err(|e| e.to_string())?;
    compile(k, target)
        .map(|c| c.source)
        .map_err(|e| e.to_string())
}

/// The directory `TESSERA_DUMP` names, if set and non-empty.
fn dump_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("TESSERA_DUMP")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
}

/// Writes one specialisation's source to `dir/<label>.<ext>` with file-name-safe characters.
fn dump(dir: &std::path::Path, label: &str, ext: &str, text: &str) -> Result<(), String> {
    let stem: String = label
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' | '=' | ',' | '.' => c,
            _ => '_',
        })
        .collect();
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(dir.join(format!("{stem}.{ext}")), text))
        .map_err(|e| format!("TESSERA_DUMP: cannot write into `{}`: {e}", dir.display()))
}

fn compile_cuda(uses: &[KernelUse], arch: &str) -> Result<Results, String> {
    let nvrtc = Nvrtc::get().map_err(|e| {
        format!("{e}\nInstall NVRTC with `scripts/install-nvrtc.sh` and point TESSERA_NVRTC_PATH at the library it prints.")
    })?;
    let (major, minor) = nvrtc.version();
    println!("NVRTC {major}.{minor}, arch {arch}");
    // NVRTC compiles independent programs concurrently: one specialisation a core, the
    // results in registry order.
    Ok(uses
        .par_iter()
        .map(|u| {
            let r = lower(u, Target::Cuda).and_then(|src| {
                let Source::Cuda(src) = src else {
                    return Err("the CUDA target emitted no CUDA C".to_string());
                };
                if let Some(dir) = dump_dir() {
                    dump(&dir, &label(u), "cu", &src.source)?;
                }
                let mut options = src.options.clone();
                let machine = arch.starts_with("sm_");
                if machine {
                    options.push("-Xptxas=-v".into());
                }
                nvrtc
                    .compile(&src.source, &src.entry, arch, &options)
                    .map(|ptx| {
                        if machine {
                            ptxas_summary(&ptx.log)
                        } else {
                            String::new()
                        }
                    })
                    .map_err(|e| e.to_string())
            });
            (label(u), r)
        })
        .collect())
}

/// What ptxas said of a kernel: registers, spills, then its performance notes
/// ("Potential Performance Loss", injected waits), each without its boilerplate.
fn ptxas_summary(log: &str) -> String {
    let mut parts = Vec::new();
    for line in log.lines() {
        let l = line.trim();
        if let Some(i) = l.find("Used ") {
            parts.push(l[i..].to_string());
        } else if l.contains("spill stores") {
            if let Some(i) = l.find(|c: char| c.is_ascii_digit()) {
                parts.push(l[i..].to_string());
            }
        } else if l.contains("Performance Loss") || l.contains("injected") {
            let text = l.split(": ").skip(1).collect::<Vec<_>>().join(": ");
            parts.push(format!("ptxas: {text}"));
        }
    }
    parts.join("\n")
}

fn compile_msl(uses: &[KernelUse]) -> Result<Results, String> {
    let mut results = Vec::new();
    let mut sources = Vec::new();
    let mut names = Vec::new();
    for u in uses {
        match lower(u, Target::Metal) {
            Ok(Source::Msl(src)) => {
                if let Some(dir) = dump_dir() {
                    dump(&dir, &label(u), "metal", &src.code)?;
                }
                sources.push(src);
                names.push(label(u));
            }
            Ok(_) => results.push((label(u), Err("the Metal target emitted no MSL".into()))),
            Err(e) => results.push((label(u), Err(e))),
        }
    }
    let checked =
        tessera_runtime::metal_emu::syntax_check_all(&sources).map_err(|e| e.to_string())?;
    results.extend(
        names
            .into_iter()
            .zip(checked.into_iter().map(|r| r.map(|()| String::new()))),
    );
    Ok(results)
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let uses: Vec<KernelUse> = all_uses()
        .into_iter()
        .filter(|u| {
            args.filter
                .as_deref()
                .is_none_or(|f| u.def.name().contains(f))
        })
        .collect();
    if uses.is_empty() {
        return Err("no registered kernel matched the filter".into());
    }
    let start = Instant::now();
    let results = match args.target {
        CompileTarget::Cuda => compile_cuda(&uses, &args.arch)?,
        CompileTarget::Msl => compile_msl(&uses)?,
    };
    for (name, r) in &results {
        report(name, r);
    }
    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    println!(
        "compiled {} kernel specialisations in {:.1} s",
        results.len(),
        start.elapsed().as_secs_f64()
    );
    println!("{} passed, {failed} failed", results.len() - failed);
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
