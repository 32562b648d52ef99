use tessera_macros::{func, kernel};

#[func]
fn swish(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

#[kernel]
fn k(x: Tensor<f32>, mut out: Tensor<f32>) {
    let v = swissh(load(x[0]));
    store(out[0], v);
}

fn main() {}
