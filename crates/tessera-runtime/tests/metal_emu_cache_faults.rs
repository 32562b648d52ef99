//! The metal-emu program cache under concurrency and faults, end to end: processes (this
//! test binary run again as a worker) building the same and different kernels into one
//! `TESSERA_CACHE_DIR` at once all succeed with correct results and leave whole, sealed
//! entries; a truncated program, a corrupted one and another kernel's program copied over
//! one are built again, never run; a cache that cannot be written, from the start or part
//! way through a build, warns once and still runs every kernel. Needs g++.

mod common;

use common::iota_kernel;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use tessera_runtime::metal_emu::MetalEmuBackend;
use tessera_runtime::{Context, DType};

/// The kernels a worker runs, comma-separated `k`s of [`iota_kernel`].
const WORKER: &str = "TESSERA_EMU_CACHE_WORKER";

/// Runs the kernels named by [`WORKER`] and checks every output element; a child process
/// of the tests below, which read its exit status.
#[test]
#[ignore = "run by the tests below as a child process"]
fn worker() {
    let ks = std::env::var(WORKER).expect("a worker is given its kernels");
    let ctx = Context::with_backend(Arc::new(MetalEmuBackend::new().expect("metal-emu")));
    for k in ks.split(',').map(|k| k.parse::<u32>().expect("k")) {
        let out = ctx.zeros(DType::U32, &[64]).expect("out");
        ctx.launch_ir(&iota_kernel(k))
            .arg("out", &out)
            .grid([2, 1, 1])
            .group_size(32)
            .run()
            .unwrap_or_else(|e| panic!("k = {k}: {e}"));
        let want: Vec<u32> = (0..64).map(|i| i + k).collect();
        assert_eq!(out.to_vec::<u32>().expect("read"), want, "k = {k}");
    }
}

fn spawn(cache: &Path, ks: &[u32]) -> std::process::Child {
    let list: Vec<String> = ks.iter().map(u32::to_string).collect();
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "worker",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TESSERA_CACHE_DIR", cache)
        .env(WORKER, list.join(","))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn a worker")
}

fn succeeded(what: &str, out: Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

fn run_worker(cache: &Path, ks: &[u32]) -> String {
    succeeded(
        &format!("worker {ks:?}"),
        spawn(cache, ks).wait_with_output().expect("wait"),
    )
}

/// A fresh cache directory for one test.
fn fresh(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Every program directory in the cache (`metal-emu/xx/<key>/`).
fn entries(cache: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for shard in std::fs::read_dir(cache.join("metal-emu"))
        .expect("cache")
        .flatten()
    {
        if shard.file_name().len() == 2 {
            for e in std::fs::read_dir(shard.path()).expect("shard").flatten() {
                v.push(e.path());
            }
        }
    }
    v.sort();
    v
}

/// Files whose name marks them temporary, anywhere under `dir`.
fn leftovers(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            v.extend(leftovers(&p));
        } else if p.to_string_lossy().ends_with(".tmp") {
            v.push(p);
        }
    }
    v
}

#[test]
fn many_processes_build_into_one_cache_at_once() {
    let cache = fresh("emu-concurrent");
    // Eight processes at once: two kernels every one builds, and one of its own.
    let children: Vec<_> = (0..8).map(|i| spawn(&cache, &[1, 2, 100 + i])).collect();
    for (i, c) in children.into_iter().enumerate() {
        succeeded(&format!("worker {i}"), c.wait_with_output().expect("wait"));
    }
    let found = entries(&cache);
    assert_eq!(found.len(), 10, "one entry per distinct kernel: {found:?}");
    for e in &found {
        assert!(
            e.join("kernel").is_file() && e.join("kernel.seal").is_file(),
            "{e:?}"
        );
    }
    assert_eq!(leftovers(&cache), Vec::<PathBuf>::new());
    // Every program loads from the cache and runs right in a later process.
    run_worker(&cache, &[1, 2, 100, 107]);
    assert_eq!(entries(&cache).len(), 10);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn damaged_programs_are_built_again_never_run() {
    let cache = fresh("emu-damaged");
    // One kernel a process, so each new entry is known.
    let mut dirs = Vec::new();
    for k in [3, 4, 5] {
        let before = entries(&cache_or_empty(&cache));
        run_worker(&cache, &[k]);
        let new: Vec<_> = entries(&cache)
            .into_iter()
            .filter(|e| !before.contains(e))
            .collect();
        assert_eq!(new.len(), 1, "k = {k}: {new:?}");
        dirs.push(new[0].join("kernel"));
    }
    let whole: Vec<Vec<u8>> = dirs
        .iter()
        .map(|p| std::fs::read(p).expect("read"))
        .collect();
    // k = 3: cut in half. k = 4: k = 5's program, a valid one for another kernel. k = 5:
    // one byte flipped in the middle.
    std::fs::write(&dirs[0], &whole[0][..whole[0].len() / 2]).expect("truncate");
    std::fs::write(&dirs[1], &whole[2]).expect("swap");
    let mut flipped = whole[2].clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    std::fs::write(&dirs[2], &flipped).expect("flip");
    // The worker checks every output: a damaged program run would fail it.
    run_worker(&cache, &[3, 4, 5]);
    for (p, w) in dirs.iter().zip(&whole) {
        let now = std::fs::read(p).expect("rebuilt");
        assert_eq!(now.len(), w.len(), "{p:?} was not rebuilt whole");
    }
    let _ = std::fs::remove_dir_all(&cache);
}

fn cache_or_empty(cache: &Path) -> PathBuf {
    let _ = std::fs::create_dir_all(cache.join("metal-emu"));
    cache.to_path_buf()
}

/// Asserts a worker's stderr holds the unwritable cache's warning once, not once per kernel.
fn assert_warned_once(stderr: &str) {
    assert_eq!(
        stderr.matches("cannot be written").count(),
        1,
        "one warning, not one per kernel:\n{stderr}"
    );
}

#[test]
fn an_unwritable_cache_warns_once_and_runs_every_kernel() {
    let blocker = fresh("emu-blocker");
    std::fs::write(&blocker, b"a file where the cache directory should be").expect("blocker");
    let stderr = run_worker(&blocker.join("cache"), &[21, 22, 23]);
    assert_warned_once(&stderr);
    let _ = std::fs::remove_file(&blocker);
}

#[test]
fn a_cache_that_fails_part_way_warns_once_and_runs_every_kernel() {
    // The cache directory itself can be written, but every program's shard is a plain
    // file: each build fails after the probe passed, as on a disk that fills up.
    let cache = fresh("emu-partway");
    let emu = cache.join("metal-emu");
    std::fs::create_dir_all(&emu).expect("cache");
    for shard in 0..256 {
        std::fs::write(emu.join(format!("{shard:02x}")), b"not a directory").expect("shard");
    }
    let stderr = run_worker(&cache, &[41, 42, 43]);
    assert_warned_once(&stderr);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_read_only_cache_still_runs_every_kernel() {
    use std::os::unix::fs::PermissionsExt;
    let cache = fresh("emu-readonly");
    run_worker(&cache, &[31]);
    let emu = cache.join("metal-emu");
    let set = |mode| {
        for e in walk(&emu) {
            let _ = std::fs::set_permissions(&e, std::fs::Permissions::from_mode(mode));
        }
    };
    set(0o555);
    // A cached program runs from the read-only cache; a new one builds elsewhere. (Root
    // may write anyway; then it builds in place: either way, never more than one warning.)
    let stderr = run_worker(&cache, &[31, 32, 33]);
    set(0o755);
    assert!(stderr.matches("cannot be written").count() <= 1, "{stderr}");
    let _ = std::fs::remove_dir_all(&cache);
}

/// `dir` and every directory under it.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = vec![dir.to_path_buf()];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            v.extend(walk(&e.path()));
        }
    }
    v
}
