use tessera_macros::func;

#[func]
fn zero(mut acc: [MatrixAcc]) {
    for j in 0..acc.len() {
        matrix_fill(acc[j], 0.0);
    }
}

fn main() {}
