use tessera_macros::kernel;

#[kernel]
fn k(mut out: Tensor<f32>) {
    let mut i = 0u32;
    while i < 4 {
        i += 1;
    }
    store(out[0], i.cast::<f32>());
}

fn main() {}
