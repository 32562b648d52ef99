//! Typed launches and the compile cache's kernel identity: a kernel's generated
//! `launch(ctx, Args { … }, Consts { … })` binds every argument by position and still checks
//! dtypes and aliasing at run; two kernels of one name in different modules compile and run
//! apart.

use rand::{Rng, SeedableRng};
use tessera::prelude::*;

/// Two kernels named `transform`, in two modules, computing different things.
mod doubling {
    use tessera::prelude::*;

    /// `out[i] = 2·x[i] + 1`.
    #[kernel]
    pub fn transform(x: Tensor<f32>, mut out: Tensor<f32>, n: u32) {
        let i = global_id();
        if i < n {
            store(out[i], load(x[i]) * 2.0 + 1.0);
        }
    }
}

mod negating {
    use tessera::prelude::*;

    /// `out[i] = 5 − x[i]`.
    #[kernel]
    pub fn transform(x: Tensor<f32>, mut out: Tensor<f32>, n: u32) {
        let i = global_id();
        if i < n {
            store(out[i], 5.0 - load(x[i]));
        }
    }
}

/// `out[i] = x[i]·a + k` in f32, stored as `T`.
#[kernel]
fn scale_add<T>(x: Tensor<T>, mut out: Tensor<T>, a: f32, n: u32, #[constexpr] k: u32) {
    let i = global_id();
    if i < n {
        let v = load(x[i]).cast::<f32>() * a + k.cast::<f32>();
        store(out[i], v.cast::<T>());
    }
}

/// `out[i] = v` for a value of the tensor's own dtype.
#[kernel]
fn fill<T>(mut out: Tensor<T>, v: T, n: u32) {
    let i = global_id();
    if i < n {
        store(out[i], v);
    }
}

/// `out[i] = x[i]` rounded through `T`, a dtype no argument carries.
#[kernel]
fn round_through<T>(x: Tensor<f32>, mut out: Tensor<f32>, n: u32) {
    let i = global_id();
    if i < n {
        store(out[i], load(x[i]).cast::<T>().cast::<f32>());
    }
}

const N: usize = 300;

/// A CPU context, seeded random values and an f32 tensor of them.
fn cpu_input(seed: u64) -> (Context, Vec<f32>, Tensor) {
    let ctx = Context::cpu();
    let xs = random(seed);
    let x = ctx.tensor(&xs, &[N]).unwrap();
    (ctx, xs, x)
}

fn random(seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..N).map(|_| rng.random_range(-8.0f32..8.0)).collect()
}

fn run_transform(ctx: &Context, which: &str, x: &Tensor, out: &Tensor) -> Result<(), RuntimeError> {
    let n = N as u32;
    let grid = [n.div_ceil(64), 1, 1];
    match which {
        "doubling" => {
            let args = doubling::transform::Args { x, out, n };
            doubling::transform::launch(ctx, args)
                .grid(grid)
                .group_size(64)
                .run()
        }
        _ => {
            let args = negating::transform::Args { x, out, n };
            negating::transform::launch(ctx, args)
                .grid(grid)
                .group_size(64)
                .run()
        }
    }
}

#[test]
fn kernels_of_one_name_in_two_modules_keep_their_own_code() {
    let (ctx, xs, x) = cpu_input(1);
    // Alternate, so that a cache keyed by the bare name would hand the second kernel the
    // first one's code (and back).
    for which in ["doubling", "negating", "doubling", "negating"] {
        let out = ctx.full_nan(DType::F32, &[N]).unwrap();
        run_transform(&ctx, which, &x, &out).unwrap();
        let got = out.to_vec::<f32>().unwrap();
        for (i, (&x, &g)) in xs.iter().zip(&got).enumerate() {
            let want = if which == "doubling" {
                2.0 * x as f64 + 1.0
            } else {
                5.0 - x as f64
            };
            assert!(
                (g as f64 - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{which}[{i}]: got {g}, want {want}"
            );
        }
    }
    assert_eq!(
        ctx.cached_kernels(),
        2,
        "one compiled kernel per definition"
    );
    assert_ne!(
        doubling::transform::DEF.signature.path,
        negating::transform::DEF.signature.path
    );
}

/// `out = x · a + k` over `n` elements through the typed launcher, in groups of 128.
fn scale_add_on(ctx: &Context, (x, out): (&Tensor, &Tensor), a: f32, n: u32, k: u32) {
    let args = scale_add::Args { x, out, a, n };
    scale_add::launch(ctx, args, scale_add::Consts { k })
        .grid([n.div_ceil(128), 1, 1])
        .group_size(128)
        .run()
        .unwrap();
}

#[test]
fn typed_launch_computes_what_the_host_does_per_dtype_and_constexpr() {
    let ctx = Context::cpu();
    let xs = random(2);
    let n = N as u32;
    for k in [0u32, 7] {
        let a = 0.75f32;
        // f32
        let x = ctx.tensor(&xs, &[N]).unwrap();
        let out = ctx.full_nan(DType::F32, &[N]).unwrap();
        scale_add_on(&ctx, (&x, &out), a, n, k);
        let got = out.to_vec::<f32>().unwrap();
        for (&x, &g) in xs.iter().zip(&got) {
            let want = x as f64 * a as f64 + k as f64;
            assert!((g as f64 - want).abs() <= 1e-5 * want.abs().max(1.0));
        }
        // f16: T is inferred from the tensors.
        let xh: Vec<f16> = xs.iter().map(|&v| f16::from_f32(v)).collect();
        let x = ctx.tensor(&xh, &[N]).unwrap();
        let out = ctx.full_nan(DType::F16, &[N]).unwrap();
        scale_add_on(&ctx, (&x, &out), a, n, k);
        let got = out.to_vec::<f16>().unwrap();
        for (&x, &g) in xh.iter().zip(&got) {
            let want = x.to_f64() * a as f64 + k as f64;
            assert!((g.to_f64() - want).abs() <= 1e-3 * want.abs().max(1.0));
        }
    }
    // Two dtypes × two constexpr values.
    assert_eq!(ctx.cached_kernels(), 4);
}

#[test]
fn typed_launch_still_checks_dtypes_and_aliasing_at_run() {
    let (ctx, xs, x) = cpu_input(3);
    let n = N as u32;
    let out16 = ctx.full_nan(DType::F16, &[N]).unwrap();
    let before = out16.to_vec::<f16>().unwrap();
    let err = scale_add::launch(
        &ctx,
        scale_add::Args {
            x: &x,
            out: &out16,
            a: 1.0,
            n,
        },
        scale_add::Consts { k: 1 },
    )
    .grid([n.div_ceil(64), 1, 1])
    .group_size(64)
    .run()
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("generic `T`") && err.contains("`out`"),
        "{err}"
    );
    let after = out16.to_vec::<f16>().unwrap();
    assert!(before
        .iter()
        .zip(&after)
        .all(|(a, b)| a.to_bits() == b.to_bits()));

    let err = scale_add::launch(
        &ctx,
        scale_add::Args {
            x: &x,
            out: &x,
            a: 1.0,
            n,
        },
        scale_add::Consts { k: 1 },
    )
    .grid([1, 1, 1])
    .group_size(64)
    .run()
    .unwrap_err()
    .to_string();
    assert!(err.contains("shares its buffer"), "{err}");
    assert_eq!(
        x.to_vec::<f32>().unwrap(),
        xs,
        "a rejected launch writes nothing"
    );

    let out = ctx.zeros(DType::F32, &[N]).unwrap();
    let err = scale_add::launch(
        &ctx,
        scale_add::Args {
            x: &x,
            out: &out,
            a: 1.0,
            n,
        },
        scale_add::Consts { k: 1 },
    )
    .group_size(64)
    .run()
    .unwrap_err()
    .to_string();
    assert!(err.contains("no grid given"), "{err}");
}

#[test]
fn a_generic_scalar_is_a_literal_checked_against_the_tensors() {
    let ctx = Context::cpu();
    let n = N as u32;
    let out = ctx.full_nan(DType::BF16, &[N]).unwrap();
    let v = bf16::from_f32(-2.375);
    fill::launch(
        &ctx,
        fill::Args {
            out: &out,
            v: Literal::from(v),
            n,
        },
    )
    .grid([n.div_ceil(64), 1, 1])
    .group_size(64)
    .run()
    .unwrap();
    assert!(out.to_vec::<bf16>().unwrap().iter().all(|&g| g == v));

    let err = fill::launch(
        &ctx,
        fill::Args {
            out: &out,
            v: Literal::from(1.5f32),
            n,
        },
    )
    .grid([n.div_ceil(64), 1, 1])
    .group_size(64)
    .run()
    .unwrap_err()
    .to_string();
    assert!(err.contains("generic `T`") && err.contains("`v`"), "{err}");
}

#[test]
fn a_generic_no_argument_carries_is_a_consts_field() {
    let (ctx, xs, x) = cpu_input(4);
    let n = N as u32;
    for (dtype, round) in [
        (
            DType::F16,
            (|v: f32| f16::from_f32(v).to_f32()) as fn(f32) -> f32,
        ),
        (DType::BF16, |v: f32| bf16::from_f32(v).to_f32()),
    ] {
        let out = ctx.full_nan(DType::F32, &[N]).unwrap();
        let args = round_through::Args {
            x: &x,
            out: &out,
            n,
        };
        round_through::launch(&ctx, args, round_through::Consts { T: dtype })
            .grid([n.div_ceil(64), 1, 1])
            .group_size(64)
            .run()
            .unwrap();
        let got = out.to_vec::<f32>().unwrap();
        for (&x, &g) in xs.iter().zip(&got) {
            assert_eq!(g, round(x), "{x} through {dtype}");
        }
    }
}
