//! The host C++ compiler the emulator and the syntax check drive, the on-disk cache of
//! built programs, and the shim headers written where the compiler can include them.

use crate::backend::BackendKind;
use crate::error::{Result, RuntimeError};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The Metal model header, included by generated MSL as `<metal_stdlib>`.
pub(crate) const SHIM: &str = include_str!("shim/metal_stdlib.h");
/// The fiber runtime the shim includes when emulating.
pub(crate) const RUNTIME: &str = include_str!("shim/tessera_emu_runtime.h");

/// Flags shared by every compile: C++17, wrapping signed arithmetic, no float contraction
/// (an `a * b + c` stays two roundings unless the MSL says `fma`), Metal's `[[…]]`
/// attributes ignored silently.
pub(crate) const FLAGS: &[&str] = &[
    "-std=c++17",
    "-fwrapv",
    "-fno-strict-aliasing",
    "-ffp-contract=off",
    "-Wno-attributes",
];

pub(crate) fn backend_error(message: impl Into<String>) -> RuntimeError {
    RuntimeError::Backend {
        backend: BackendKind::MetalEmu,
        message: message.into(),
    }
}

/// The compiler to run: `TESSERA_CXX`, else `g++`.
pub(crate) fn cxx() -> String {
    std::env::var("TESSERA_CXX")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "g++".to_string())
}

/// The compiler's identity (first line of `--version`), or why it cannot be run.
pub(crate) fn compiler_id() -> Result<String> {
    static ID: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    let id = ID.get_or_init(|| {
        let cxx = cxx();
        match Command::new(&cxx).arg("--version").output() {
            Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()),
            Ok(out) => Err(format!(
                "`{cxx} --version` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Err(format!(
                "cannot run the C++ compiler `{cxx}` ({e}); install g++ or set TESSERA_CXX"
            )),
        }
    });
    id.clone()
        .map_err(|reason| RuntimeError::BackendUnavailable {
            backend: BackendKind::MetalEmu,
            reason,
        })
}

/// Where built programs live: `$TESSERA_CACHE_DIR/metal-emu`, else
/// `$XDG_CACHE_HOME/tessera/metal-emu`, `$HOME/.cache/tessera/metal-emu`, or the temp dir.
pub(crate) fn cache_dir() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let root = var("TESSERA_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|p| p.join("tessera")))
        .or_else(|| var("HOME").map(|p| p.join(".cache").join("tessera")))
        .unwrap_or_else(|| std::env::temp_dir().join("tessera-cache"));
    root.join("metal-emu")
}

/// Where new programs are built: [`cache_dir`] when it can be written, else (with one
/// warning per process) [`fallback_dir`], so a read-only or full cache directory slows
/// the emulator down instead of stopping it.
pub(crate) fn writable_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = cache_dir();
        match probe_writable(&dir) {
            Ok(()) => dir,
            Err(e) => {
                warn_unwritable(&dir, &e.to_string());
                fallback_dir()
            }
        }
    })
    .clone()
}

/// The directory under the temp dir where programs are built when the cache cannot be.
pub(crate) fn fallback_dir() -> PathBuf {
    std::env::temp_dir()
        .join("tessera-cache-fallback")
        .join("metal-emu")
}

/// Says, once per process, that the cache `dir` cannot be written and why.
pub(crate) fn warn_unwritable(dir: &Path, why: &str) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        eprintln!(
            "warning: the metal-emu cache `{}` cannot be written ({why}); building in `{}` \
             for this run (set TESSERA_CACHE_DIR to a writable directory to keep programs)",
            dir.display(),
            fallback_dir().display()
        )
    });
}

/// Creates `dir` and a file in it, and removes the file again.
fn probe_writable(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = temp_sibling(&dir.join("probe"));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

/// A 128-bit FNV-1a digest as hex: stable across builds and platforms, for cache keys.
pub(crate) fn digest(parts: &[&[u8]]) -> String {
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    for part in parts {
        for &byte in part.iter().chain(&[0xffu8]) {
            a = (a ^ byte as u64).wrapping_mul(0x0000_0100_0000_01b3);
            b = (b ^ byte as u64)
                .wrapping_mul(0x0000_0100_0000_01b3)
                .rotate_left(5);
        }
    }
    format!("{a:016x}{b:016x}")
}

/// Writes `contents` to `path` unless it already holds them, atomically (temp file, rename).
pub(crate) fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    if std::fs::read(path).is_ok_and(|c| c == contents) {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| backend_error(format!("cannot create `{}`: {e}", dir.display())))?;
    let tmp = temp_sibling(path);
    std::fs::write(&tmp, contents)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| backend_error(format!("cannot write `{}`: {e}", path.display())))
}

/// A unique temporary name next to `path`.
pub(crate) fn temp_sibling(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// The directory holding `metal_stdlib` and the runtime header, written on first use.
pub(crate) fn include_dir() -> Result<PathBuf> {
    include_dir_in(&writable_dir())
}

/// The directory holding `metal_stdlib` and the runtime header under `base`.
pub(crate) fn include_dir_in(base: &Path) -> Result<PathBuf> {
    let dir = base.join(format!(
        "include-{}",
        &digest(&[SHIM.as_bytes(), RUNTIME.as_bytes()])[..16]
    ));
    write_atomic(&dir.join("metal_stdlib"), SHIM.as_bytes())?;
    write_atomic(&dir.join("tessera_emu_runtime.h"), RUNTIME.as_bytes())?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_stable_and_separates_parts() {
        assert_eq!(digest(&[b"ab"]), digest(&[b"ab"]));
        assert_ne!(digest(&[b"ab", b"c"]), digest(&[b"a", b"bc"]));
        assert_eq!(digest(&[b""]).len(), 32);
    }
}
