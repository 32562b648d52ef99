use tessera_macros::func;

#[func]
fn sum(xs: [f32; 2]) -> f32 {
    1.0
}

fn main() {}
