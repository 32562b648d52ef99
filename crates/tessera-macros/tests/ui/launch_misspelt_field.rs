use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

#[kernel]
fn scale(x: Tensor<f32>, mut out: Tensor<f32>, a: f32, n: u32) {
    let i = global_id();
    if i < n {
        store(out[i], load(x[i]) * a);
    }
}

fn run(ctx: &Context, x: &Tensor, out: &Tensor) {
    let args = scale::Args { x, out, a: 2.0, nn: 8 };
    let _ = scale::launch(ctx, args).grid([1, 1, 1]).group_size(8).run();
}

fn main() {}
