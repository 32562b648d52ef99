use tessera_macros::kernel;

#[allow(non_camel_case_types)]
struct helper;

#[kernel]
fn k(x: Tensor<f32>, mut out: Tensor<f32>) {
    let v = helper(load(x[0]));
    store(out[0], v);
}

fn main() {}
