use tessera_macros::kernel;

#[kernel]
fn k(mut out: Tensor<f32>) {
    for i in 0..=7u32 {
        store(out[i], 1.0);
    }
}

fn main() {}
