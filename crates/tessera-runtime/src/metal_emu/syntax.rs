//! The MSL compile check: generated MSL compiled as C++17 against the Metal model header
//! with `g++ -fsyntax-only`. Many sources are checked per compiler call (each in its own
//! namespace), and batches run in parallel, so checking every registered kernel is quick.

use super::toolchain::{backend_error, compiler_id, cxx, include_dir, FLAGS};
use crate::error::Result;
use std::collections::BTreeSet;
use std::process::Command;
use tessera_compiler::msl::MslSource;

/// Sources per compiler call.
const BATCH: usize = 24;

/// Checks one source; the error carries the compiler's diagnostics.
pub fn syntax_check(source: &MslSource) -> Result<()> {
    match syntax_check_all(std::slice::from_ref(source))?.pop() {
        Some(Ok(())) | None => Ok(()),
        Some(Err(diagnostics)) => Err(backend_error(format!(
            "the MSL of `{}` does not compile:\n{diagnostics}",
            source.kernel_name
        ))),
    }
}

/// Checks many sources; one entry per source: `Ok`, or the compiler's diagnostics for it.
/// The outer error means the check itself could not run (no compiler, no cache directory).
pub fn syntax_check_all(sources: &[MslSource]) -> Result<Vec<std::result::Result<(), String>>> {
    compiler_id()?;
    let include = include_dir()?;
    let batches: Vec<&[MslSource]> = sources.chunks(BATCH).collect();
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(batches.len().max(1));
    let mut results: Vec<Option<std::result::Result<(), String>>> = vec![None; sources.len()];
    let next = std::sync::atomic::AtomicUsize::new(0);
    let outcome = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let b = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(batch) = batches.get(b) else { break };
                let r = check_batch(batch, &include);
                outcome
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((b, r));
            });
        }
    });
    for (b, r) in outcome.into_inner().unwrap_or_else(|p| p.into_inner()) {
        for (k, one) in r?.into_iter().enumerate() {
            results[b * BATCH + k] = Some(one);
        }
    }
    Ok(results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("not checked".to_string())))
        .collect())
}

/// The translation unit checking `sources`, each in namespace `tsr_k{i}` with its lines
/// attributed to the file `{i}/{entry}.metal`.
fn translation_unit(sources: &[MslSource]) -> String {
    let mut tu = String::from("#include <metal_stdlib>\n");
    for (i, s) in sources.iter().enumerate() {
        tu.push_str(&format!(
            "namespace tsr_k{i} {{\n#line 1 \"{i}/{}.metal\"\n{}\n}}\n",
            s.entry, s.code
        ));
    }
    tu
}

fn run_gxx(tu: &str, include: &std::path::Path) -> Result<(bool, String)> {
    let dir = include.parent().unwrap_or(include).join("check");
    std::fs::create_dir_all(&dir)
        .map_err(|e| backend_error(format!("cannot create `{}`: {e}", dir.display())))?;
    let file = super::toolchain::temp_sibling(&dir.join("check.cpp"));
    let file = file.with_extension("cpp");
    std::fs::write(&file, tu)
        .map_err(|e| backend_error(format!("cannot write `{}`: {e}", file.display())))?;
    let out = Command::new(cxx())
        .args(FLAGS)
        .arg("-fsyntax-only")
        .arg("-I")
        .arg(include)
        .arg(&file)
        .output();
    let _ = std::fs::remove_file(&file);
    let out = out.map_err(|e| backend_error(format!("cannot run `{}`: {e}", cxx())))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

fn check_batch(
    sources: &[MslSource],
    include: &std::path::Path,
) -> Result<Vec<std::result::Result<(), String>>> {
    let (ok, diagnostics) = run_gxx(&translation_unit(sources), include)?;
    if ok {
        return Ok(vec![Ok(()); sources.len()]);
    }
    // Which sources the errors point into; those are checked alone for clean messages.
    let mut failing = BTreeSet::new();
    for line in diagnostics.lines() {
        if let Some((i, _)) = line.split_once('/') {
            if let Ok(i) = i.trim().parse::<usize>() {
                if i < sources.len() && line.contains(": error") {
                    failing.insert(i);
                }
            }
        }
    }
    if failing.is_empty() {
        failing = (0..sources.len()).collect();
    }
    let mut out = vec![Ok(()); sources.len()];
    for i in failing {
        let one = std::slice::from_ref(&sources[i]);
        let (ok, diag) = if sources.len() == 1 {
            (ok, diagnostics.clone())
        } else {
            run_gxx(&translation_unit(one), include)?
        };
        if !ok {
            let clean: Vec<&str> = diag
                .lines()
                .map(|l| l.strip_prefix("0/").unwrap_or(l))
                .collect();
            out[i] = Err(clean.join("\n").trim_end().to_string());
        }
    }
    Ok(out)
}
