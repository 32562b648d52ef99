use tessera_macros::kernel;

#[kernel]
fn k<T>(x: Tensor<T>, mut out: Tensor<f32>) {
    let v = load(x[0]).cast();
    store(out[0], v);
}

fn main() {}
