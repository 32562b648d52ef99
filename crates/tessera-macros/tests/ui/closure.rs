use tessera_macros::kernel;

#[kernel]
fn k(mut out: Tensor<f32>) {
    let twice = |x| x * 2.0;
    store(out[0], twice(1.0));
}

fn main() {}
