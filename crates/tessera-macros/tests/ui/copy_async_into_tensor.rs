use tessera_macros::kernel;

#[kernel]
fn k(x: Tensor<f32>, y: Tensor<f32>, mut out: Tensor<f32>) {
    copy_async(y[0], x[0], 4);
    commit_copies();
    wait_copies(0);
    store(out[0], load(y[0]));
}

fn main() {}
