use tessera_macros::kernel;

#[kernel]
fn k(mut out: Tensor<f32>, #[constexpr] n: u64) {
    store(out[0], 1.0);
}

fn main() {}
