use tessera_macros::kernel;

#[kernel(threads = 64)]
fn bad(x: Tensor<f32>, mut out: Tensor<f32>) {
    store(out[0], load(x[0]));
}

fn main() {}
