//! The f32 erf of the GELU kernels against libm's f64 erf over a dense sweep of f32 inputs
//! (both pieces, the switch between them, where erf rounds to ±1, zeros, subnormals and
//! non-finite values), and the exact GELU built from it against the f64 GELU.

use tessera_macros::kernel;
use tessera_runtime::Context;
use tessera_std::elementwise::activation::{erf, gelu_erf_f32};

#[kernel]
fn erf_probe_kernel(x: Tensor<f32>, mut out: Tensor<f32>, mut gelu: Tensor<f32>, n: u32) {
    let i = global_id();
    if i < n {
        let v = load(x[i]);
        store(out[i], erf(v));
        store(gelu[i], gelu_erf_f32(v));
    }
}

/// The distance between `v` rounded to f32 and the next f32 away from zero.
fn ulp(v: f64) -> f64 {
    let f = (v as f32).abs();
    if f == f32::MAX || f.is_infinite() {
        return f64::INFINITY;
    }
    (f32::from_bits(f.to_bits() + 1) - f) as f64
}

fn inputs() -> Vec<f32> {
    let mut v: Vec<f32> = (0..=400_000)
        .map(|i| -5.0 + 10.0 * i as f32 / 400_000.0)
        .collect();
    for edge in [0.921875f32, 3.9375, 0.707_106_77 * 0.921875 * 2.0] {
        for k in -3i32..=3 {
            let b = (edge.to_bits() as i32 + k) as u32;
            v.push(f32::from_bits(b));
            v.push(-f32::from_bits(b));
        }
    }
    v.extend([
        0.0,
        -0.0,
        1e-30,
        -1e-30,
        f32::from_bits(1),
        1e-3,
        20.0,
        -20.0,
        1e30,
        -1e30,
        f32::MAX,
    ]);
    v
}

fn run(x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let ctx = Context::cpu();
    let n = x.len();
    let xt = ctx.tensor(x, &[n]).expect("upload");
    let out = ctx.zeros(tessera_runtime::DType::F32, &[n]).expect("out");
    let gelu = ctx.zeros(tessera_runtime::DType::F32, &[n]).expect("gelu");
    erf_probe_kernel::launch(
        &ctx,
        erf_probe_kernel::Args {
            x: &xt,
            out: &out,
            gelu: &gelu,
            n: n as u32,
        },
    )
    .grid([(n as u32).div_ceil(256), 1, 1])
    .group_size(256)
    .run()
    .expect("launch");
    (out.to_vec().expect("read"), gelu.to_vec().expect("read"))
}

#[test]
fn erf_is_within_two_ulp_of_the_f64_erf() {
    let x = inputs();
    let (got, _) = run(&x);
    let mut worst = (0.0f64, 0.0f32);
    for (&xi, &g) in x.iter().zip(&got) {
        let want = libm::erf(xi as f64);
        let e = (g as f64 - want).abs() / ulp(want);
        if e > worst.0 {
            worst = (e, xi);
        }
    }
    assert!(
        worst.0 <= 2.0,
        "erf is {:.2} ulp off at x = {:e}",
        worst.0,
        worst.1
    );
}

#[test]
fn gelu_erf_follows_the_f64_gelu_on_both_sides() {
    let x: Vec<f32> = (0..=200_000)
        .map(|i| -12.0 + 24.0 * i as f32 / 200_000.0)
        .collect();
    let (_, got) = run(&x);
    for (&xi, &g) in x.iter().zip(&got) {
        let xd = xi as f64;
        let want = 0.5 * xd * libm::erfc(-xd / std::f64::consts::SQRT_2);
        let err = (g as f64 - want).abs();
        // Below x = −3.9375·√2 the erfc tail is 0, so gelu is −0 where |gelu| < 7.2e-8.
        assert!(
            err <= 4.0 * ulp(want) + 7.2e-8,
            "gelu({xi}) = {g}, expected {want} (error {err:e})"
        );
    }
}

#[test]
fn erf_keeps_nan_and_saturates_at_infinity() {
    let x = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
    let (got, gelu) = run(&x);
    assert!(got[0].is_nan() && gelu[0].is_nan());
    assert_eq!((got[1], got[2]), (1.0, -1.0));
    assert_eq!(gelu[1], f32::INFINITY);
    assert!(!gelu[2].is_finite(), "gelu(-inf) = {}", gelu[2]);
}
