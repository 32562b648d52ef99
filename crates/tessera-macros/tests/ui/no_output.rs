use tessera_macros::kernel;

#[kernel]
fn k(x: Tensor<f32>, y: Tensor<f32>) {
    let v = load(x[0]) + load(y[0]);
}

fn main() {}
