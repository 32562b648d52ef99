use tessera_macros::kernel;

#[kernel]
fn k(mut out: Tensor<f32>) {
    let v = match thread_id() {
        0 => 1.0f32,
        _ => 2.0,
    };
    store(out[thread_id()], v);
}

fn main() {}
