use tessera_macros::func;

#[func]
fn f(x: Tensor<f32>) -> f32 {
    1.0
}

fn main() {}
