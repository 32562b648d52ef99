//! `tessera run` with the files a NumPy user has: a bf16 RMSNorm through `ml_dtypes`-style
//! `.npy` files stays bf16 end to end, RoPE takes `np.arange` (i64) positions, booleans
//! are `true/false/1/0`, and an unwritable output is refused before the op runs.

use std::path::{Path, PathBuf};
use tessera_std::norm::reference as norm;
use tessera_std::rope::reference as rope;
use tessera_std::rope::{RopeConfig, RopeLayout, RopeScaling};

mod common;

use common::{assert_refused, npy_bytes, run_op, stderr, values};

fn dir(name: &str) -> PathBuf {
    common::dir("conv", name)
}

/// An `.npy` as NumPy writes it (header padded to 64 bytes).
fn npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    std::fs::write(path, npy_bytes(descr, &shape, data)).expect("write npy");
}

/// The descr and data of an `.npy` file.
fn read_npy(path: &Path) -> (String, Vec<u8>) {
    let b = std::fs::read(path).expect("output exists");
    let len = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = String::from_utf8_lossy(&b[10..10 + len]).into_owned();
    let descr = header
        .split("'descr': '")
        .nth(1)
        .and_then(|s| s.split('\'').next())
        .unwrap_or("")
        .to_string();
    (descr, b[10 + len..].to_vec())
}

fn to_bf16(v: &[f32]) -> (Vec<u8>, Vec<f64>) {
    let b: Vec<half::bf16> = v.iter().map(|&x| half::bf16::from_f32(x)).collect();
    (
        b.iter().flat_map(|x| x.to_le_bytes()).collect(),
        b.iter().map(|x| x.to_f64()).collect(),
    )
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// RMSNorm's inputs, from `x.npy` and `w.npy`.
const XW: [(&str, &str); 2] = [("x", "x.npy"), ("w", "w.npy")];
/// RoPE's inputs, from `x.npy` and `pos.npy`.
const ROPE_INPUTS: [(&str, &str); 2] = [("x", "x.npy"), ("positions", "pos.npy")];

#[test]
fn bf16_rms_norm_stays_bf16_through_npy() {
    let d = dir("bf16");
    let (rows, n) = (3usize, 96usize);
    let (xb, xv) = to_bf16(&values(rows * n, 11));
    let (wb, wv) = to_bf16(&values(n, 12));
    npy(&d.join("x.npy"), "<V2", &[rows, n], &xb);
    npy(&d.join("w.npy"), "<V2", &[n], &wb);
    let out = d.join("out.npy");
    let r = run_op("rms_norm", (&d, &XW), &[], &out, &[]);
    assert!(r.status.success(), "{}", stderr(&r));
    let (descr, data) = read_npy(&out);
    assert_eq!(descr, "<V2", "bf16 out, as ml_dtypes.bfloat16");
    assert_eq!(data.len(), rows * n * 2);
    let want = norm::rms_norm(&xv, &wv, n, 1e-6);
    for (c, w) in data.chunks_exact(2).zip(&want) {
        let g = half::bf16::from_le_bytes([c[0], c[1]]).to_f64();
        assert!((g - w).abs() <= 1e-2 * (1.0 + w.abs()), "{g} vs {w}");
    }
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn rope_takes_i64_positions_from_arange() {
    let d = dir("rope");
    let (tokens, heads, hd) = (5usize, 2usize, 32usize);
    let x = values(tokens * heads * hd, 21);
    npy(
        &d.join("x.npy"),
        "<f4",
        &[tokens, heads, hd],
        &f32_bytes(&x),
    );
    let positions: Vec<i64> = (0..tokens as i64).map(|t| 3 * t + 1).collect();
    let pos_bytes: Vec<u8> = positions.iter().flat_map(|v| v.to_le_bytes()).collect();
    npy(&d.join("pos.npy"), "<i8", &[tokens], &pos_bytes);
    let out = d.join("out.npy");
    let r = run_op("rope", (&d, &ROPE_INPUTS), &[], &out, &[]);
    assert!(r.status.success(), "{}", stderr(&r));
    let (descr, data) = read_npy(&out);
    assert_eq!(descr, "<f4");
    let cfg = RopeConfig {
        layout: RopeLayout::NeoX,
        theta: 10000.0,
        rot_dim: hd,
        scaling: RopeScaling::None,
    };
    let xf: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let pos: Vec<u32> = positions.iter().map(|&v| v as u32).collect();
    let want = rope::rope(&xf, &pos, heads, hd, &cfg);
    for (c, w) in data.chunks_exact(4).zip(&want) {
        let g = f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64;
        assert!((g - w).abs() < 1e-4, "{g} vs {w}");
    }
    // A negative position is refused with the value and where it is.
    let bad: Vec<u8> = [0i64, -2, 4, 5, 6]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    npy(&d.join("pos.npy"), "<i8", &[tokens], &bad);
    std::fs::remove_file(&out).ok();
    let r = run_op("rope", (&d, &ROPE_INPUTS), &[], &out, &[]);
    assert!(!r.status.success());
    assert!(!out.exists());
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn booleans_take_words_and_digits() {
    let d = dir("bool");
    let (n, h, hd) = (6usize, 2usize, 64usize);
    for (name, seed) in [("q", 31), ("k", 32), ("v", 33)] {
        npy(
            &d.join(format!("{name}.npy")),
            "<f2",
            &[n, h, hd],
            &values(n * h * hd, seed)
                .iter()
                .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
                .collect::<Vec<u8>>(),
        );
    }
    let run = |causal: &str| {
        let out = d.join(format!("out-{causal}.npy"));
        let qkv = [("q", "q.npy"), ("k", "k.npy"), ("v", "v.npy")];
        let causal = format!("causal={causal}");
        let r = run_op("sdpa_prefill", (&d, &qkv), &[&causal], &out, &[]);
        (r, out)
    };
    let mut outputs = Vec::new();
    for causal in ["true", "1", "false", "0"] {
        let (r, out) = run(causal);
        assert!(r.status.success(), "causal={causal}: {}", stderr(&r));
        outputs.push(read_npy(&out).1);
    }
    assert_eq!(outputs[0], outputs[1], "causal=1 is causal=true");
    assert_eq!(outputs[2], outputs[3], "causal=0 is causal=false");
    assert_ne!(outputs[0], outputs[2], "causal changes the answer");
    let (r, out) = run("yes");
    assert_refused(&r, "expected true, false, 1 or 0", &out);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn an_unwritable_output_is_refused_before_the_op_runs() {
    let d = dir("out");
    npy(
        &d.join("x.npy"),
        "<f4",
        &[2, 64],
        &f32_bytes(&values(128, 1)),
    );
    npy(&d.join("w.npy"), "<f4", &[64], &f32_bytes(&values(64, 2)));
    let missing = d.join("no-such-folder").join("out.npy");
    // An unknown backend: the refusal must come before any device is opened.
    let backend = ["--backend", "no-such-backend"];
    let r = run_op("rms_norm", (&d, &XW), &[], &missing, &backend);
    assert!(!r.status.success());
    assert!(stderr(&r).contains("does not exist"), "{}", stderr(&r));
    std::fs::remove_dir_all(&d).ok();
}
