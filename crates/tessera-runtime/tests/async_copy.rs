//! The asynchronous-copy sample the CUDA smoke test runs (16-byte copies pipelined over
//! two stages with a zero-filled tail whose source lies past the tensor's end, 8- and
//! 4-byte copies beside them) gives the host's answer on the CPU, optimised or not, and
//! on the Metal emulator, where the copies are plain.

use tessera_compiler::cuda::samples::async_copy;
use tessera_runtime::{Context, DType};

fn contexts() -> Vec<Context> {
    let mut v = vec![Context::cpu()];
    if let Ok(c) = Context::by_name("metal-emu") {
        v.push(c);
    }
    v
}

#[test]
fn the_sample_matches_the_host() {
    let k = async_copy().unwrap().kernel;
    let n = 1000usize;
    // Multiples of 1/16 in ±4: exact in f16, sums exact in f32.
    let xs: Vec<f32> = (0..n)
        .map(|i| ((i * 53 % 127) as f32 - 63.0) / 16.0)
        .collect();
    let ys: Vec<f32> = (0..192)
        .map(|i| ((i * 29 % 61) as f32 - 30.0) / 8.0)
        .collect();
    let want: Vec<f32> = (0..64)
        .map(|t| {
            let m = 63 - t;
            let mut acc = 0f64;
            for j in 0..2 {
                for e in 0..8 {
                    let i = j * 512 + m * 8 + e;
                    if i < n {
                        acc += xs[i] as f64 * (j + 1) as f64;
                    }
                }
            }
            (acc + ys[2 * m] as f64 + ys[2 * m + 1] as f64 + ys[128 + m] as f64) as f32
        })
        .collect();
    for ctx in contexts() {
        for optimize in [true, false] {
            let hx: Vec<half::f16> = xs.iter().map(|&v| half::f16::from_f32(v)).collect();
            let x = ctx.tensor(&hx, &[n]).unwrap();
            let y = ctx.tensor(&ys, &[192]).unwrap();
            let out = ctx.zeros(DType::F32, &[64]).unwrap();
            let mut l = ctx
                .launch_ir(&k)
                .arg("x", &x)
                .arg("y", &y)
                .arg("out", &out)
                .scalar("n", n as u32)
                .grid([1, 1, 1])
                .group_size(64);
            if !optimize {
                l = l.no_optimize();
            }
            l.run()
                .unwrap_or_else(|e| panic!("{:?} optimize={optimize}: {e}", ctx.kind()));
            let got = out.to_vec::<f32>().unwrap();
            for (t, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "{:?} optimize={optimize} thread {t}: {g} vs {w}",
                    ctx.kind()
                );
            }
        }
    }
}
