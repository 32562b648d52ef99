//! The `tessera` command line: list the standard library, emit a kernel's IR or source,
//! check every registered case on a backend, compile every kernel for a target, benchmark,
//! and describe the devices present. Output cut off by its reader (`tessera list | head
//! -1`) ends the command quietly, as it ends any Unix tool.

mod bench;
mod check;
mod compile;
mod device;
mod emit;
mod generate;
mod kernels;
mod list;
mod run;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "Tessera: LLM-inference kernels written once, run on CPU, CUDA and Metal"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every registered op and kernel, with dtypes and parameters.
    List(list::Args),
    /// A kernel's IR or generated source for one specialisation.
    Emit(emit::Args),
    /// Runs every registered correctness and rejection case on a backend.
    Check(check::Args),
    /// Compiles every registered kernel for a target (CUDA through NVRTC, MSL through g++).
    Compile(compile::Args),
    /// Times the registered benchmark shapes on a backend.
    Bench(bench::Args),
    /// Runs an op on .npy / .safetensors inputs and writes its outputs.
    Run(run::Args),
    /// The backends present, their devices and limits.
    Device,
    /// Runs a Hugging Face Qwen3 model on token ids: prefill, decode, throughput.
    Generate(generate::Args),
}

/// Makes a write to a closed stdout or stderr (the reader of a pipe went away) end the
/// process with status 0 and no message, instead of the panic that `println!` raises on
/// `EPIPE`. Every subcommand's output goes through `println!`/`eprintln!`, so this one
/// hook covers them all; any other panic keeps the default report.
fn exit_quietly_on_broken_pipe() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if is_broken_pipe(message) {
            std::process::exit(0);
        }
        default_hook(info);
    }));
}

/// `println!`'s panic message on `EPIPE`: `failed printing to stdout: Broken pipe (os
/// error 32)`.
fn is_broken_pipe(panic_message: &str) -> bool {
    panic_message.starts_with("failed printing to std")
        && panic_message.to_ascii_lowercase().contains("broken pipe")
}

fn main() -> ExitCode {
    exit_quietly_on_broken_pipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List(a) => list::run(a),
        Command::Emit(a) => emit::run(a),
        Command::Check(a) => check::run(a),
        Command::Compile(a) => compile::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Run(a) => run::run(a),
        Command::Device => device::run(),
        Command::Generate(a) => generate::run(a),
    };
    match result {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}
