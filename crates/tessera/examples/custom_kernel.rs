//! Defines a kernel of its own — a SwiGLU gate, `out = silu(gate) · up`, with a reusable
//! DSL function — runs it on the best backend present, and checks it against the host.
//!
//! `cargo run --release -p tessera --example custom_kernel`

use tessera::prelude::*;

/// `x · sigmoid(x)`, computed in f32.
#[func]
fn swish(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// `out[i] = silu(gate[i]) · up[i]` for `n` elements of any float dtype.
#[kernel]
fn swiglu<T>(gate: Tensor<T>, up: Tensor<T>, mut out: Tensor<T>, n: u32) {
    let i = global_id();
    if i < n {
        let g = load(gate[i]).cast::<f32>();
        let u = load(up[i]).cast::<f32>();
        store(out[i], (swish(g) * u).cast::<T>());
    }
}

fn main() -> Result<(), RuntimeError> {
    let ctx = Context::new()?;
    println!("running on {} ({})", ctx.kind().name(), ctx.info().name);

    let n = 10_000usize;
    let gate: Vec<f16> = (0..n)
        .map(|i| f16::from_f32((i as f32 * 0.37).sin() * 4.0))
        .collect();
    let up: Vec<f16> = (0..n)
        .map(|i| f16::from_f32((i as f32 * 0.11).cos()))
        .collect();
    let gate_t = ctx.tensor(&gate, &[n])?;
    let up_t = ctx.tensor(&up, &[n])?;
    let out_t = ctx.zeros(DType::F16, &[n])?;

    // Every argument is a field of the kernel's `Args` (a misspelt, missing or mistyped one
    // does not build); the dtype T is inferred from the tensors; the launch is checked
    // (dtypes, aliasing, geometry, limits) before anything runs.
    let args = swiglu::Args {
        gate: &gate_t,
        up: &up_t,
        out: &out_t,
        n: n as u32,
    };
    swiglu::launch(&ctx, args)
        .grid([(n as u32).div_ceil(256), 1, 1])
        .group_size(256)
        .run()?;

    let out = out_t.to_vec::<f16>()?;
    let max_err = (0..n)
        .map(|i| {
            let (g, u) = (gate[i].to_f64(), up[i].to_f64());
            let want = g / (1.0 + (-g).exp()) * u;
            (out[i].to_f64() - want).abs()
        })
        .fold(0.0, f64::max);
    println!("swiglu over {n} f16 elements: max |error| vs host = {max_err:.2e}");

    // A wrong launch is an error, not a frozen GPU: a threadgroup beyond the device limit.
    let bad = swiglu::launch(&ctx, args)
        .grid([1, 1, 1])
        .group_size(4096)
        .run();
    println!(
        "oversized threadgroup: {}",
        bad.err().map(|e| e.to_string()).unwrap_or_default()
    );

    if max_err > 1e-2 {
        eprintln!("error: result differs from the host reference");
        std::process::exit(1);
    }
    Ok(())
}
