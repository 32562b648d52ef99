use tessera_macros::kernel;

#[kernel]
fn k(mut out: Tensor<f32>) {
    println!("hello");
    store(out[0], 1.0);
}

fn main() {}
