//! Builds a kernel's emulator program with the host compiler, once per distinct source:
//! programs are cached on disk under a digest of everything that goes into them. Each
//! program has a seal beside it (its key, length and digest); a program whose seal is
//! missing or does not match (truncated, corrupted, or another program copied over it) is
//! never run but built again, so a damaged cache costs time, never a wrong kernel.

use super::harness;
use super::toolchain::{
    backend_error, cache_dir, compiler_id, cxx, digest, fallback_dir, include_dir_in, temp_sibling,
    warn_unwritable, writable_dir, write_atomic, FLAGS, RUNTIME, SHIM,
};
use crate::error::{Result, RuntimeError};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
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
    // is built where it can be written, and where writing fails part way (a full disk, a
    // read-only part of the cache) in the fallback directory, with the one warning.
    let cached = cache_dir().join(&key[..2]).join(&key).join("kernel");
    let exe = if is_sealed(&cached, &key) {
        cached
    } else {
        let dir = writable_dir();
        match build_in(&dir, &key, &program, &source.kernel_name) {
            Ok(exe) => exe,
            Err(Failure::Io(why)) if dir != fallback_dir() => {
                warn_unwritable(&dir, &why);
                build_in(&fallback_dir(), &key, &program, &source.kernel_name)
                    .map_err(Failure::into_error)?
            }
            Err(f) => return Err(f.into_error()),
        }
    };
    MEMO.lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, exe.clone());
    Ok(exe)
}

/// Why a build failed: the files could not be written, or the program does not compile.
enum Failure {
    Io(String),
    Compile(RuntimeError),
}

impl Failure {
    fn into_error(self) -> RuntimeError {
        match self {
            Failure::Io(why) => backend_error(why),
            Failure::Compile(e) => e,
        }
    }
}

/// The sealed program for `key` under `base`, built there unless it already is.
fn build_in(
    base: &Path,
    key: &str,
    program: &str,
    name: &str,
) -> std::result::Result<PathBuf, Failure> {
    let io = |e: RuntimeError| Failure::Io(e.to_string());
    let dir = base.join(&key[..2]).join(key);
    let exe = dir.join("kernel");
    if is_sealed(&exe, key) {
        return Ok(exe);
    }
    let include = include_dir_in(base).map_err(io)?;
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::Io(format!("cannot create `{}`: {e}", dir.display())))?;
    let cpp = dir.join("kernel.cpp");
    write_atomic(&cpp, program.as_bytes()).map_err(io)?;
    let tmp = temp_sibling(&exe);
    let out = Command::new(cxx())
        .args(FLAGS)
        .args([OPT, "-pthread", "-I"])
        .arg(&include)
        .arg(&cpp)
        .arg("-o")
        .arg(&tmp)
        .output()
        .map_err(|e| Failure::Compile(backend_error(format!("cannot run `{}`: {e}", cxx()))))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(Failure::Compile(backend_error(format!(
            "the MSL of `{name}` does not compile under the emulator ({}):\n{}",
            cpp.display(),
            String::from_utf8_lossy(&out.stderr).trim_end()
        ))));
    }
    // The seal goes first: a reader that sees the new program sees its seal, and one that
    // sees a seal of another build's program only builds again.
    let sealed = seal(&tmp, key)
        .and_then(|s| write_atomic(&seal_path(&exe), s.as_bytes()))
        .and_then(|()| {
            std::fs::rename(&tmp, &exe)
                .map_err(|e| backend_error(format!("cannot write `{}`: {e}", exe.display())))
        });
    if let Err(e) = sealed {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(exe)
}

/// The seal beside a program: `kernel.seal`.
fn seal_path(exe: &Path) -> PathBuf {
    exe.with_file_name("kernel.seal")
}

/// The seal of the program file `exe` built for `key`: the key, its length and digest.
fn seal(exe: &Path, key: &str) -> Result<String> {
    let bytes = std::fs::read(exe)
        .map_err(|e| backend_error(format!("cannot read `{}`: {e}", exe.display())))?;
    Ok(format!(
        "tessera-emu-program {key} {} {}",
        bytes.len(),
        digest(&[&bytes])
    ))
}

/// True when `exe` is a whole program built for `key`: its seal is there and matches.
fn is_sealed(exe: &Path, key: &str) -> bool {
    match (std::fs::read_to_string(seal_path(exe)), seal(exe, key)) {
        (Ok(want), Ok(got)) => want == got,
        _ => false,
    }
}
