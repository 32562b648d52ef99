//! What the `tessera run` tests share: a temporary folder per test, the CLI run on the CPU
//! backend with named input files, deterministic input values, and `.npy` files written
//! byte for byte as NumPy lays them out.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh temporary folder for one test, unique to this process.
pub fn dir(prefix: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-{prefix}-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// A path as a command-line argument.
pub fn p(path: &Path) -> String {
    path.display().to_string()
}

/// The CLI with `args`, on the CPU backend unless the arguments name another.
pub fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env("TESSERA_BACKEND", "cpu")
        .output()
        .expect("runs")
}

/// `tessera run OP` with each input `name` read from `FILE` in `d`, each `name=value`
/// parameter, the output `out` written to `out`, then `extra` arguments.
pub fn run_op(
    op: &str,
    (d, inputs): (&Path, &[(&str, &str)]),
    params: &[&str],
    out: &Path,
    extra: &[&str],
) -> Output {
    let mut args = vec!["run".to_string(), op.to_string()];
    for (name, file) in inputs {
        args.push("--input".into());
        args.push(format!("{name}={}", p(&d.join(file))));
    }
    for param in params {
        args.push("--param".into());
        args.push(param.to_string());
    }
    args.push("--output".into());
    args.push(format!("out={}", p(out)));
    args.extend(extra.iter().map(|a| a.to_string()));
    tessera(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// What a run wrote to stderr.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The run failed, saying `message`, and wrote no `out`.
pub fn assert_refused(r: &Output, message: &str, out: &Path) {
    assert!(!r.status.success());
    assert!(stderr(r).contains(message), "{}", stderr(r));
    assert!(!out.exists());
}

/// Deterministic values in [-1, 1).
pub fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u32)
                .wrapping_mul(2654435761)
                .wrapping_add(seed.wrapping_mul(40503));
            (h >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

/// An `.npy` file laid out as NumPy 2 writes it: magic, version 1.0, the header length,
/// the header dict padded with spaces to a multiple of 64 bytes and ended by a newline,
/// then the data.
pub fn npy_bytes(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((header.len() as u16).to_le_bytes());
    b.extend(header.as_bytes());
    b.extend(data);
    b
}
