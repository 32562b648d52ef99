//! Turns the emulator program's failure report (one `TESSERA_EMU_ERROR key=value…` line on
//! stderr) into the runtime's errors: divergent barriers and collectives, division by zero
//! and bad shuffle lanes as sanitizer reports, the rest as backend errors.

use super::toolchain::backend_error;
use crate::error::{RuntimeError, SanitizerError, Violation};
use std::collections::HashMap;
use tessera_compiler::msl::MslSource;

/// The error for a run that exited with `status` and printed `stderr`.
pub(crate) fn failure(source: &MslSource, status: Option<i32>, stderr: &str) -> RuntimeError {
    let Some(line) = stderr.lines().find(|l| l.starts_with("TESSERA_EMU_ERROR")) else {
        let how = status.map_or("was killed by a signal".to_string(), |c| {
            format!("exited with status {c}")
        });
        return backend_error(format!(
            "the emulated kernel `{}` {how}: {}",
            source.kernel_name,
            stderr.trim()
        ));
    };
    let fields: HashMap<&str, &str> = line
        .split_whitespace()
        .filter_map(|f| f.split_once('='))
        .collect();
    let num = |k: &str| {
        fields
            .get(k)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let mut group = [0u32; 3];
    if let Some(g) = fields.get("group") {
        for (slot, v) in group.iter_mut().zip(g.split(',')) {
            *slot = v.parse().unwrap_or(0);
        }
    }
    let thread = num("thread") as u32;
    let msl_line = num("line");
    let text = source
        .code
        .lines()
        .nth((msl_line.max(1) - 1) as usize)
        .map(str::trim)
        .unwrap_or("");
    let op = format!("`{text}` (MSL line {msl_line})");
    let sanitizer = |op: String, violation: Violation| {
        RuntimeError::from(SanitizerError {
            kernel: source.kernel_name.clone(),
            op,
            loc: None,
            group,
            thread,
            violation,
        })
    };
    let kind = fields.get("kind").copied().unwrap_or("unknown");
    match kind {
        "divergent_barrier" => sanitizer(
            op,
            Violation::DivergentBarrier {
                active: num("active") as u32,
                group_size: num("total") as u32,
            },
        ),
        "divergent_simd" => sanitizer(
            op,
            Violation::DivergentSimd {
                simdgroup: num("simdgroup") as u32,
                active: num("active") as u32,
            },
        ),
        "division_by_zero" => sanitizer(op, Violation::DivisionByZero),
        // The runtime reports the offending source lane in the `line` field here.
        "shuffle_lane" => sanitizer(
            "a simdgroup shuffle".into(),
            Violation::ShuffleLane {
                lane: msl_line as u32,
            },
        ),
        "non_positive_step" => backend_error(format!(
            "kernel `{}`: a loop's step is zero or negative at run time in {op}, threadgroup \
             {group:?}, thread {thread}; it must be positive",
            source.kernel_name
        )),
        "invalid_access" => {
            let region = fields.get("region").copied().unwrap_or("unknown");
            let what = if let Some(t) = region.strip_prefix("past_the_end_of_") {
                format!("an access past the end of tensor `{t}` (an out-of-bounds index)")
            } else if region == "fiber_stack_overflow" {
                "a thread's stack overflowed (stack arrays too large?)".to_string()
            } else {
                "an invalid memory access (an out-of-bounds index, most likely)".to_string()
            };
            backend_error(format!(
                "kernel `{}`: {what}, threadgroup {group:?}, thread {thread}",
                source.kernel_name
            ))
        }
        _ => backend_error(format!(
            "the emulated kernel `{}` failed: {}",
            source.kernel_name,
            line.trim()
        )),
    }
}
