use tessera_macros::kernel;

#[kernel]
fn k(x: Tensor<f32>, mut out: Tensor<f32>) {
    let v = gelu(load(x[0]));
    store(out[0], v);
}

fn main() {}
