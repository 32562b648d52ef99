//! `tessera device`: which backends are present, with their devices and limits, and why
//! the absent ones are absent.

use std::process::ExitCode;
use tessera_runtime::{BackendKind, Context};

pub fn run() -> Result<ExitCode, String> {
    for kind in BackendKind::ALL {
        match Context::by_kind(kind, 0) {
            Ok(ctx) => {
                let i = ctx.info();
                println!("{:<10} present: {}", kind.name(), i.name);
                println!(
                    "{:<10}   max threads/group {}, threadgroup memory {} KiB, simd width {}, compute units {}{}",
                    "",
                    i.max_threads_per_group,
                    i.max_shared_bytes / 1024,
                    i.simd_width,
                    i.compute_units,
                    if i.memory_bytes > 0 {
                        format!(", memory {:.1} GiB", i.memory_bytes as f64 / (1u64 << 30) as f64)
                    } else {
                        String::new()
                    }
                );
            }
            Err(e) => println!("{:<10} absent: {e}", kind.name()),
        }
    }
    match Context::new() {
        Ok(ctx) => println!("default: {}", ctx.kind().name()),
        Err(e) => println!("default: none ({e})"),
    }
    Ok(ExitCode::SUCCESS)
}
