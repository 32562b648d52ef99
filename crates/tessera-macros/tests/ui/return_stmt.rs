use tessera_macros::kernel;

#[kernel]
fn k(mut out: Tensor<f32>) {
    if thread_id() > 4 {
        return;
    }
    store(out[thread_id()], 1.0);
}

fn main() {}
