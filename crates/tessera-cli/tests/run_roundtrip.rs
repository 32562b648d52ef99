//! `tessera run` round-trips a decode SDPA and an RMSNorm through .npy files and matches
//! the f64 references; a bad input is refused with a clear error and writes nothing.

use npyz::WriterBuilder;
use std::path::{Path, PathBuf};
use tessera_std::attention::reference as attn;
use tessera_std::norm::reference as norm;

mod common;

use common::{assert_refused, run_op, stderr, tessera, values};

fn dir(name: &str) -> PathBuf {
    common::dir("run", name)
}

/// RMSNorm's inputs, from `x.npy` and `w.npy`.
const XW: [(&str, &str); 2] = [("x", "x.npy"), ("w", "w.npy")];

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
    let qkv = [("q", "q.npy"), ("k", "k.npy"), ("v", "v.npy")];
    let r = run_op("sdpa_decode", (&d, &qkv), &[], &out, &["--backend", "cpu"]);
    assert!(r.status.success(), "{}", stderr(&r));
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
    let r = run_op("rms_norm", (&d, &XW), &["eps=1e-5"], &out, &[]);
    assert!(r.status.success(), "{}", stderr(&r));
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
    let r = run_op("rms_norm", (&d, &XW), &[], &out, &[]);
    assert_refused(&r, "not a valid .npy file", &out);
    // A weight of the wrong length: the op's own check, before anything runs.
    write(&d.join("x.npy"), &[2, 64], &values(128, 2));
    write(&d.join("w.npy"), &[32], &values(32, 3));
    let r = run_op("rms_norm", (&d, &XW), &[], &out, &[]);
    assert_refused(&r, "`w` must have shape [64]", &out);
    // A missing input is named.
    let r = tessera(&[
        "run",
        "rms_norm",
        "--output",
        &format!("out={}", common::p(&out)),
    ]);
    assert!(stderr(&r).contains("missing --input x=FILE"));
    assert!(!out.exists());
}
