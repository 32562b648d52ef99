use tessera_macros::kernel;

#[kernel]
fn k(x: Tensor<f32>, mut out: Tensor<f32>) {
    let v = load(x[0]) * scale;
    store(out[0], v);
}

fn main() {}
