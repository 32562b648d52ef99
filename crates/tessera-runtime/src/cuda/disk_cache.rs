//! The on-disk PTX cache: one file per (source, options, architecture, NVRTC version,
//! driver version), named by a 128-bit hash of all of them. Writes go to a temporary file
//! that is renamed into place, so a reader never sees half a file.
//!
//! Location: `TESSERA_CACHE_DIR`, else `$XDG_CACHE_HOME/tessera/cuda`, else
//! `~/.cache/tessera/cuda`. A cache that cannot be written is skipped (with one warning),
//! never an error; an entry is checked against the length and hash of its PTX before use.

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

/// The first line of an entry: its key, and the length and hash of the PTX after it.
fn header(key: &str, ptx: &str) -> String {
    let hash = fnv1a(0xcbf2_9ce4_8422_2325, &[ptx.as_bytes()]);
    format!("// tessera-ptx-cache {key} {} {hash:016x}", ptx.len())
}

/// The cached PTX for `key`, if present and whole: an entry whose header names another
/// key, or whose PTX is not the length and hash its header records (a truncated or
/// corrupted file), is ignored and the kernel compiled again.
pub fn load(dir: &Path, entry: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path(dir, entry, key)).ok()?;
    let (first, ptx) = text.split_once('\n')?;
    (first == header(key, ptx)).then(|| ptx.to_string())
}

/// Stores PTX under `key` atomically (temporary file, then rename). A cache that cannot be
/// written only costs time: it is skipped, with one warning per process.
pub fn store(dir: &Path, entry: &str, key: &str, ptx: &str) {
    let final_path = path(dir, entry, key);
    let tmp = dir.join(format!(
        ".{entry}-{key}.{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    ));
    let text = format!("{}\n{ptx}", header(key, ptx));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, text))
        .and_then(|()| std::fs::rename(&tmp, &final_path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!(
                "warning: the PTX cache `{}` cannot be written ({e}); kernels compile on every \
                 run (set TESSERA_CACHE_DIR to a writable directory to keep them)",
                dir.display()
            )
        });
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

    #[test]
    fn truncated_or_altered_entries_are_ignored() {
        let dir = std::env::temp_dir().join(format!("tessera-ptx-trunc-{}", std::process::id()));
        let k = key(&[b"src2"]);
        let ptx = ".version 9.0\n.target sm_90\n.entry k() { ret; }\n";
        store(&dir, "k", &k, ptx);
        let file = path(&dir, "k", &k);
        let whole = std::fs::read(&file).unwrap();
        assert_eq!(load(&dir, "k", &k).as_deref(), Some(ptx));
        // Cut anywhere past the header line: never loaded.
        let header_len = whole.iter().position(|&b| b == b'\n').unwrap() + 1;
        for cut in header_len..whole.len() {
            std::fs::write(&file, &whole[..cut]).unwrap();
            assert_eq!(load(&dir, "k", &k), None, "cut at {cut}");
        }
        // Same length, one byte changed.
        let mut altered = whole.clone();
        let last = altered.len() - 3;
        altered[last] ^= 1;
        std::fs::write(&file, &altered).unwrap();
        assert_eq!(load(&dir, "k", &k), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unwritable_cache_is_skipped() {
        let blocker =
            std::env::temp_dir().join(format!("tessera-ptx-blocker-{}", std::process::id()));
        std::fs::write(&blocker, b"a file").unwrap();
        let dir = blocker.join("cache");
        let k = key(&[b"src3"]);
        store(&dir, "k", &k, ".version 9.0\n");
        assert_eq!(load(&dir, "k", &k), None);
        let _ = std::fs::remove_file(&blocker);
    }

    /// The PTX a worker stores under kernel `j`: long enough (≈ 200 KB) that writes of it
    /// take time and a torn one would show, different for every `j`.
    fn worker_ptx(j: usize) -> String {
        let mut s = format!(".version 8.0\n.target sm_90\n// kernel {j}\n");
        for i in 0..8000 {
            s += &format!("    add.u32 %r{i}, %r{j}, {};\n", i * 31 + j);
        }
        s
    }

    /// A child process of the test below: for rounds of kernels shared by every worker
    /// and kernels of its own, loads each and checks it is exactly its PTX, or compiles
    /// (here: makes) and stores it.
    #[test]
    #[ignore = "run by many_processes_share_one_cache_dir as a child process"]
    fn cache_worker() {
        let dir = PathBuf::from(std::env::var("TESSERA_PTX_WORKER_DIR").expect("dir"));
        let me: usize = std::env::var("TESSERA_PTX_WORKER")
            .expect("id")
            .parse()
            .expect("id");
        let mut hits = 0;
        for round in 0..4 {
            for j in [0, 1, 2, 3, 100 + me] {
                let k = key(&[format!("kernel {j}").as_bytes()]);
                let want = worker_ptx(j);
                match load(&dir, "k", &k) {
                    Some(got) => {
                        assert!(got == want, "round {round}: kernel {j} loaded other PTX");
                        hits += 1;
                    }
                    None => store(&dir, "k", &k, &want),
                }
            }
        }
        assert!(hits > 0, "nothing stored was ever loaded");
    }

    #[test]
    fn many_processes_share_one_cache_dir() {
        let dir = std::env::temp_dir().join(format!("tessera-ptx-procs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let children: Vec<_> = (0..8)
            .map(|i| {
                std::process::Command::new(std::env::current_exe().expect("test binary"))
                    .args([
                        "--exact",
                        "cuda::disk_cache::tests::cache_worker",
                        "--ignored",
                    ])
                    .env("TESSERA_PTX_WORKER_DIR", &dir)
                    .env("TESSERA_PTX_WORKER", i.to_string())
                    .output()
            })
            .collect::<Vec<_>>();
        for (i, c) in children.into_iter().enumerate() {
            let out = c.expect("spawn");
            assert!(
                out.status.success(),
                "worker {i}:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let names: Vec<String> = std::fs::read_dir(&dir)
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names.len(),
            12,
            "4 shared + 8 own entries, no leftovers: {names:?}"
        );
        for j in (0..4).chain(100..108) {
            let k = key(&[format!("kernel {j}").as_bytes()]);
            assert_eq!(load(&dir, "k", &k), Some(worker_ptx(j)), "kernel {j}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A child process: stores into a directory under a plain file, several times.
    #[test]
    #[ignore = "run by an_unwritable_cache_warns_once as a child process"]
    fn unwritable_worker() {
        let dir = PathBuf::from(std::env::var("TESSERA_PTX_WORKER_DIR").expect("dir"));
        for j in 0..5 {
            let k = key(&[format!("unwritable {j}").as_bytes()]);
            store(&dir, "k", &k, ".version 8.0\n");
            assert_eq!(load(&dir, "k", &k), None);
        }
    }

    #[test]
    fn an_unwritable_cache_warns_once() {
        let blocker = std::env::temp_dir().join(format!("tessera-ptx-warn-{}", std::process::id()));
        std::fs::write(&blocker, b"a file").unwrap();
        let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "cuda::disk_cache::tests::unwritable_worker",
                "--ignored",
                "--nocapture",
            ])
            .env("TESSERA_PTX_WORKER_DIR", blocker.join("cache"))
            .output()
            .expect("spawn");
        let _ = std::fs::remove_file(&blocker);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(stderr.matches("cannot be written").count(), 1, "{stderr}");
    }

    #[test]
    fn a_read_only_cache_never_gives_wrong_ptx() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("tessera-ptx-ro-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (k1, k2) = (key(&[b"ro 1"]), key(&[b"ro 2"]));
        store(&dir, "k", &k1, "first\n");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        // Unwritable (unless the user is root): skipped; either way never another's PTX.
        store(&dir, "k", &k2, "second\n");
        assert_eq!(load(&dir, "k", &k1).as_deref(), Some("first\n"));
        assert!(matches!(
            load(&dir, "k", &k2).as_deref(),
            None | Some("second\n")
        ));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
