//! Accumulator fragments loaded from f16 memory (`FragLoad`, widened), scaled in place
//! (`FragScale`) and stored rounded into f16/bf16 memory (`FragStore`), on the CPU and
//! under metal-emu, against a product computed on the host in f64 and rounded once.

use half::{bf16, f16};
use tessera_compiler::cuda::samples::fragment_rounding;
use tessera_runtime::{Context, DType, Tensor};

/// Deterministic values in [-2, 2), exactly representable in bf16.
fn tile(seed: u64) -> Vec<bf16> {
    let mut x = seed;
    (0..256)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            bf16::from_f64(((x >> 33) as f64 / (1u64 << 31) as f64) * 4.0 - 2.0)
        })
        .collect()
}

/// Runs the sample on `ctx`; returns (out_pair, out_gather, out_shared) as f64.
fn run(ctx: &Context, a: &[bf16], b: &[bf16], c: &[f16], s: f32) -> [Vec<f64>; 3] {
    let kernel = fragment_rounding().unwrap().kernel;
    let ta = ctx.tensor(a, &[256]).unwrap();
    let tb = ctx.tensor(b, &[256]).unwrap();
    let tc = ctx.tensor(c, &[256]).unwrap();
    let pair = ctx.zeros(DType::BF16, &[256]).unwrap();
    let gather = ctx.zeros(DType::F16, &[1 + 16 * 17]).unwrap();
    let shared = ctx.zeros(DType::F32, &[256]).unwrap();
    ctx.launch_ir(&kernel)
        .arg("a", &ta)
        .arg("b", &tb)
        .arg("c", &tc)
        .scalar("s", s)
        .arg("out_pair", &pair)
        .arg("out_gather", &gather)
        .arg("out_shared", &shared)
        .grid([1, 1, 1])
        .group_size(32)
        .run()
        .unwrap();
    let v = |t: &Tensor| t.to_f64_vec().unwrap();
    [v(&pair), v(&gather), v(&shared)]
}

fn check(ctx: &Context) {
    let (a, b) = (tile(1), tile(2));
    let c: Vec<f16> = tile(3).iter().map(|x| f16::from_f32(x.to_f32())).collect();
    let s = -0.75f32;
    let [pair, gather, shared] = run(ctx, &a, &b, &c, s);
    let mut checked = 0;
    for r in 0..16 {
        for col in 0..16 {
            let exact: f64 = ((0..16)
                .map(|k| a[r * 16 + k].to_f64() * b[k * 16 + col].to_f64())
                .sum::<f64>()
                + c[r * 16 + col].to_f64())
                * s as f64;
            // f32 accumulation may move the value across one rounding step of the target.
            let near = |got: f64, rounded: f64, ulp: f64| {
                let tol = ulp * rounded.abs().max(1e-3) + 1e-6;
                assert!(
                    (got - rounded).abs() <= tol,
                    "({r}, {col}): got {got}, want {rounded} (exact {exact}) on {}",
                    ctx.info().name
                );
            };
            near(
                pair[r * 16 + col],
                bf16::from_f64(exact).to_f64(),
                1.0 / 128.0,
            );
            near(
                gather[1 + r * 17 + col],
                f16::from_f64(exact).to_f64(),
                1.0 / 1024.0,
            );
            near(
                shared[r * 16 + col],
                f16::from_f64(exact).to_f64(),
                1.0 / 1024.0,
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 256);
    // Elements between the rows of the strided store stay untouched.
    for r in 0..16 {
        assert_eq!(gather[r * 17], 0.0, "gap before row {r} was written");
    }
    // The values are rounded, not just f32 truncated by the dtype's storage: the bf16
    // outputs hold only bf16 values.
    assert!(pair.iter().all(|&x| bf16::from_f64(x).to_f64() == x));
}

#[test]
fn scaled_accumulators_store_rounded_on_the_cpu() {
    check(&Context::cpu());
}

#[test]
fn scaled_accumulators_store_rounded_under_metal_emu() {
    check(&Context::by_name("metal-emu").expect("the metal-emu backend needs g++"));
}
