//! Builds a kernel's emulator program with the host compiler, once per distinct source:
//! programs are cached on disk under a digest of everything that goes into them.

use super::harness;
use super::toolchain::{
    backend_error, cache_dir, compiler_id, cxx, digest, include_dir, temp_sibling, writable_dir,
    FLAGS, RUNTIME, SHIM,
};
use crate::error::Result;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use tessera_compiler::msl::MslSource;

/// Optimisation for emulator programs: fast enough to run, quick to build.
const OPT: &str = "-O1";

/// The path of the built program for `source`, building it if no cached copy exists.
pub(crate) fn build(source: &MslSource, nparams: usize, local_bytes: usize) -> Result<PathBuf> {
    static MEMO: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let id = compiler_id()?;
    let program = harness::program(source, nparams, local_bytes);
    let flags = FLAGS.join(" ");
    let key = digest(&[
        program.as_bytes(),
        SHIM.as_bytes(),
        RUNTIME.as_bytes(),
        flags.as_bytes(),
        OPT.as_bytes(),
        id.as_bytes(),
        std::env::consts::ARCH.as_bytes(),
    ]);
    if let Some(p) = MEMO
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .get(&key)
    {
        return Ok(p.clone());
    }
    // A program already in the cache is used even where the cache is read-only; a new one
    // is built where it can be written.
    let cached = cache_dir().join(&key[..2]).join(&key).join("kernel");
    let dir = writable_dir().join(&key[..2]).join(&key);
    let exe = if cached.is_file() {
        cached
    } else {
        dir.join("kernel")
    };
    if !exe.is_file() {
        let include = include_dir()?;
        std::fs::create_dir_all(&dir)
            .map_err(|e| backend_error(format!("cannot create `{}`: {e}", dir.display())))?;
        let cpp = dir.join("kernel.cpp");
        super::toolchain::write_atomic(&cpp, program.as_bytes())?;
        let tmp = temp_sibling(&exe);
        let out = Command::new(cxx())
            .args(FLAGS)
            .args([OPT, "-pthread", "-I"])
            .arg(&include)
            .arg(&cpp)
            .arg("-o")
            .arg(&tmp)
            .output()
            .map_err(|e| backend_error(format!("cannot run `{}`: {e}", cxx())))?;
        if !out.status.success() {
            let _ = std::fs::remove_file(&tmp);
            return Err(backend_error(format!(
                "the MSL of `{}` does not compile under the emulator ({}):\n{}",
                source.kernel_name,
                cpp.display(),
                String::from_utf8_lossy(&out.stderr).trim_end()
            )));
        }
        std::fs::rename(&tmp, &exe)
            .map_err(|e| backend_error(format!("cannot write `{}`: {e}", exe.display())))?;
    }
    MEMO.lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, exe.clone());
    Ok(exe)
}
