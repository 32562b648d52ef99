use tessera_macros::kernel;

#[kernel]
fn k(x: Tensor<f32>, mut out: Tensor<f32>) {
    let t = threadgroup_array::<f32>(64);
    copy_async(t[0], x[0]);
    commit_copies();
    wait_copies(0);
    store(out[0], load(t[0]));
}

fn main() {}
