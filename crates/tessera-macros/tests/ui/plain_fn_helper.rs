use tessera_macros::kernel;

fn helper(x: f32) -> f32 {
    x * 2.0
}

#[kernel]
fn k(x: Tensor<f32>, mut out: Tensor<f32>) {
    let v = helper(load(x[0]));
    store(out[0], v);
}

fn main() {}
