//! The on-disk PTX cache: one file per (source, options, architecture, NVRTC version,
//! driver version), named by a 128-bit hash of all of them. Writes go to a temporary file
//! that is renamed into place, so a reader never sees half a file.
//!
//! Location: `TESSERA_CACHE_DIR`, else `$XDG_CACHE_HOME/tessera/cuda`, else
//! `~/.cache/tessera/cuda`. A cache that cannot be written is skipped, never an error.

use std::path::{Path, PathBuf};

/// FNV-1a, 64-bit, from a given offset basis.
fn fnv1a(basis: u64, parts: &[&[u8]]) -> u64 {
    let mut h = basis;
    for p in parts {
        for &b in p.iter().chain((p.len() as u64).to_le_bytes().iter()) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// A 128-bit key (two FNV-1a hashes with different bases), as 32 hex digits.
pub fn key(parts: &[&[u8]]) -> String {
    let a = fnv1a(0xcbf2_9ce4_8422_2325, parts);
    let b = fnv1a(0x6c62_272e_07bb_0142, parts);
    format!("{a:016x}{b:016x}")
}

/// The cache directory, if one can be named.
pub fn dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("TESSERA_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("tessera/cuda"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/tessera/cuda"))
}

fn path(dir: &Path, entry: &str, key: &str) -> PathBuf {
    dir.join(format!("{entry}-{key}.ptx"))
}

/// The cached PTX for `key`, if present.
pub fn load(dir: &Path, entry: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path(dir, entry, key)).ok()?;
    // A file holds its key on the first line; anything else is not ours.
    let (first, ptx) = text.split_once('\n')?;
    (first == format!("// tessera-ptx-cache {key}")).then(|| ptx.to_string())
}

/// Stores PTX under `key` atomically (temporary file, then rename). Errors are ignored:
/// the cache only saves time.
pub fn store(dir: &Path, entry: &str, key: &str, ptx: &str) {
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let final_path = path(dir, entry, key);
    let tmp = dir.join(format!(
        ".{entry}-{key}.{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    ));
    let text = format!("// tessera-ptx-cache {key}\n{ptx}");
    if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, &final_path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_depend_on_every_part_and_its_boundaries() {
        let k = key(&[b"ab", b"c"]);
        assert_eq!(k.len(), 32);
        assert_eq!(k, key(&[b"ab", b"c"]));
        assert_ne!(k, key(&[b"a", b"bc"]));
        assert_ne!(k, key(&[b"ab", b"d"]));
    }

    #[test]
    fn stored_ptx_round_trips_and_foreign_files_are_ignored() {
        let dir = std::env::temp_dir().join(format!("tessera-ptx-test-{}", std::process::id()));
        let k = key(&[b"src"]);
        assert_eq!(load(&dir, "k", &k), None);
        store(&dir, "k", &k, ".version 9.0\n.target sm_90\n");
        assert_eq!(
            load(&dir, "k", &k).as_deref(),
            Some(".version 9.0\n.target sm_90\n")
        );
        std::fs::write(path(&dir, "k", &k), "garbage\n").unwrap();
        assert_eq!(load(&dir, "k", &k), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
