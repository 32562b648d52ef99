//! Helpers shared by the runtime's tests: a small seeded PRNG and tolerance checks.
#![allow(dead_code)]

/// xorshift64*: deterministic per seed, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn u32_below(&mut self, n: u32) -> u32 {
        (self.next_u64() % n as u64) as u32
    }

    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn vec_f32(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

pub fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "lengths differ");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "element {i}: got {g}, want {w} (tolerance {tol})");
    }
}

/// `out[global_id()] = global_id() + k`: a different program for every `k`.
pub fn iota_kernel(k: u32) -> tessera_ir::Kernel {
    use tessera_ir::{BinaryOp, Builder, Builtin, Literal, Scalar};
    let mut b = Builder::kernel("iota");
    let out = b.tensor_param("out", Scalar::U32, true);
    let g = b.builtin(Builtin::GlobalId);
    let c = b.lit(Literal::U32(k));
    let v = b.binary(BinaryOp::Add, g, c).expect("add");
    b.store(out, g, v).expect("store");
    b.finish_kernel().expect("kernel")
}

/// Runs IR kernel `k` of tensors `x` and `out`, unoptimised, as one threadgroup of
/// `group` threads on `ctx`.
pub fn run_x_out(
    ctx: &tessera_runtime::Context,
    k: &tessera_ir::Kernel,
    x: &tessera_runtime::Tensor,
    out: &tessera_runtime::Tensor,
    group: u32,
) -> tessera_runtime::Result<()> {
    ctx.launch_ir(k)
        .no_optimize()
        .arg("x", x)
        .arg("out", out)
        .grid([1, 1, 1])
        .group_size(group)
        .run()
}
