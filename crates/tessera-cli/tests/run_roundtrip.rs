//! `tessera run` round-trips a decode SDPA and an RMSNorm through .npy files and matches
//! the f64 references; a bad input is refused with a clear error and writes nothing.

use npyz::WriterBuilder;
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera_std::attention::reference as attn;
use tessera_std::norm::reference as norm;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-run-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn write(path: &Path, shape: &[u64], data: &[f32]) {
    let f = std::fs::File::create(path).expect("create");
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(std::io::BufWriter::new(f))
        .begin_nd()
        .expect("npy header");
    w.extend(data.iter().copied()).expect("npy data");
    w.finish().expect("npy finish");
}

fn read(path: &Path) -> (Vec<u64>, Vec<f32>) {
    let f = std::fs::File::open(path).expect("output exists");
    let npy = npyz::NpyFile::new(std::io::BufReader::new(f)).expect("valid npy");
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<f32>().expect("f32 data"))
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u32)
                .wrapping_mul(2654435761)
                .wrapping_add(seed.wrapping_mul(40503));
            (h >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

fn tessera(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env("TESSERA_BACKEND", "cpu")
        .output()
        .expect("runs")
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn decode_sdpa_round_trips_through_npy() {
    let d = dir("sdpa");
    let (hq, hkv, n, hd) = (4usize, 2usize, 19usize, 64usize);
    let q = values(hq * hd, 1);
    let k = values(hkv * n * hd, 2);
    let v = values(hkv * n * hd, 3);
    write(&d.join("q.npy"), &[hq as u64, hd as u64], &q);
    write(&d.join("k.npy"), &[hkv as u64, n as u64, hd as u64], &k);
    write(&d.join("v.npy"), &[hkv as u64, n as u64, hd as u64], &v);
    let out = d.join("out.npy");
    let r = tessera(&[
        "run",
        "sdpa_decode",
        "--backend",
        "cpu",
        "--input",
        &format!("q={}", p(&d.join("q.npy"))),
        "--input",
        &format!("k={}", p(&d.join("k.npy"))),
        "--input",
        &format!("v={}", p(&d.join("v.npy"))),
        "--output",
        &format!("out={}", p(&out)),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let (shape, got) = read(&out);
    assert_eq!(shape, vec![hq as u64, hd as u64]);
    let f = |x: &[f32]| x.iter().map(|&a| a as f64).collect::<Vec<f64>>();
    let want = attn::decode(
        &f(&q),
        &f(&k),
        &f(&v),
        &[(0, n)],
        hq,
        hkv,
        n,
        hd,
        1.0 / (hd as f64).sqrt(),
        0,
        0,
        None,
    );
    for (g, w) in got.iter().zip(&want) {
        assert!((*g as f64 - w).abs() < 1e-5, "{g} vs {w}");
    }
}

#[test]
fn rms_norm_round_trips_through_npy() {
    let d = dir("rms");
    let (rows, n) = (3usize, 100usize);
    let x = values(rows * n, 7);
    let w = values(n, 8);
    write(&d.join("x.npy"), &[rows as u64, n as u64], &x);
    write(&d.join("w.npy"), &[n as u64], &w);
    let out = d.join("out.npy");
    let r = tessera(&[
        "run",
        "rms_norm",
        "--input",
        &format!("x={}", p(&d.join("x.npy"))),
        "--input",
        &format!("w={}", p(&d.join("w.npy"))),
        "--param",
        "eps=1e-5",
        "--output",
        &format!("out={}", p(&out)),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let (shape, got) = read(&out);
    assert_eq!(shape, vec![rows as u64, n as u64]);
    let f = |x: &[f32]| x.iter().map(|&a| a as f64).collect::<Vec<f64>>();
    let want = norm::rms_norm(&f(&x), &f(&w), n, 1e-5);
    for (g, w) in got.iter().zip(&want) {
        assert!((*g as f64 - w).abs() < 1e-4 + 1e-4 * w.abs(), "{g} vs {w}");
    }
}

#[test]
fn bad_inputs_are_refused_and_write_nothing() {
    let d = dir("bad");
    let out = d.join("out.npy");
    // Not an npy file.
    std::fs::write(d.join("x.npy"), b"not numpy").expect("write");
    write(&d.join("w.npy"), &[64], &values(64, 1));
    let r = tessera(&[
        "run",
        "rms_norm",
        "--input",
        &format!("x={}", p(&d.join("x.npy"))),
        "--input",
        &format!("w={}", p(&d.join("w.npy"))),
        "--output",
        &format!("out={}", p(&out)),
    ]);
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("not a valid .npy file"));
    assert!(!out.exists());
    // A weight of the wrong length: the op's own check, before anything runs.
    write(&d.join("x.npy"), &[2, 64], &values(128, 2));
    write(&d.join("w.npy"), &[32], &values(32, 3));
    let r = tessera(&[
        "run",
        "rms_norm",
        "--input",
        &format!("x={}", p(&d.join("x.npy"))),
        "--input",
        &format!("w={}", p(&d.join("w.npy"))),
        "--output",
        &format!("out={}", p(&out)),
    ]);
    assert!(!r.status.success());
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("`w` must have shape [64]"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(!out.exists());
    // A missing input is named.
    let r = tessera(&["run", "rms_norm", "--output", &format!("out={}", p(&out))]);
    assert!(String::from_utf8_lossy(&r.stderr).contains("missing --input x=FILE"));
    assert!(!out.exists());
}
