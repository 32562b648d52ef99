use tessera_macros::kernel;

#[kernel]
fn k(x: Tensor<f32>, mut out: Tensor<f32>) {
    for i in 0..8u32 {
        if load(x[i]) < 0.0 {
            break;
        }
        store(out[i], 1.0);
    }
}

fn main() {}
