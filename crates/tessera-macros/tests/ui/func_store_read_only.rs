use tessera_macros::func;

#[func]
fn fill(x: Mem<f32>, i: u32) {
    store(x[i], 1.0);
}

fn main() {}
