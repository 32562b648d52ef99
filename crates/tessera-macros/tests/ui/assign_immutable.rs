use tessera_macros::kernel;

#[kernel]
fn k(mut out: Tensor<f32>) {
    let acc = 0.0f32;
    for i in 0..4u32 {
        acc = acc + 1.0;
    }
    store(out[0], acc);
}

fn main() {}
