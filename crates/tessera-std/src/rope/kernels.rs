//! The RoPE kernels: plain rotation, and per-head RMSNorm followed by rotation (Qwen3's
//! q/k norm). One threadgroup per token and group of heads, one thread per element of a
//! head; an element rotates with its partner `e ^ 1` (interleaved) or `e ± rot_dim/2`
//! (NeoX).

use crate::float_range::f32_range;
use crate::norm::rms_inv::tiny_square;
use tessera_macros::{func, kernel};

/// The partner of element `e`, the pair index, and the sign of the partner's term.
#[func]
pub fn rope_pair(e: u32, rot_dim: u32, neox: u32) -> (u32, u32, f32) {
    let half = rot_dim / 2;
    let first = select(neox != 0, e < half, e % 2 == 0);
    let partner = if neox != 0 {
        select(e < half, e + half, e - half)
    } else {
        e ^ 1
    };
    let pair = select(neox != 0, e % half, e / 2);
    (partner, pair, select(first, -1.0f32, 1.0f32))
}

/// `(cos, sin)` of `pos · f` for a frequency stored as `hi + lo` (two f32 at `2·pair`):
/// the product's rounding error comes back exactly through an fma, and the rounded
/// angle's cos/sin are rotated by it, so a position anywhere below 2²² keeps f32 accuracy.
#[func]
pub fn rope_angle(pos: f32, inv_freq: Mem<f32>, pair: u32) -> (f32, f32) {
    let hi = load(inv_freq[2 * pair]);
    let lo = load(inv_freq[2 * pair + 1]);
    let angle = pos * hi;
    let err = fma(pos, hi, -angle) + pos * lo;
    let c = cos(angle);
    let s = sin(angle);
    // |err| ≤ half an ulp of the angle (≤ 0.25 rad below position 2²²): a short series
    // gives its cos and sin to f32 accuracy.
    let e2 = err * err;
    let ce = 1.0 - e2 * (0.5 - e2 / 24.0);
    let se = err * (1.0 - e2 * (1.0 / 6.0 - e2 / 120.0));
    (c * ce - s * se, s * ce + c * se)
}

/// `out = x·cos(pos·f_i) ∓ x_partner·sin(pos·f_i)` (times `mscale`) on the first
/// `rot_dim` elements of each head, the rest copied. x and out `[tokens, heads, D]`. A
/// threadgroup takes `heads_per_group` heads of one token: the angle depends on the
/// position and the pair only, so each thread forms its cos/sin once for all of them.
#[kernel]
pub fn rope_kernel<T>(
    x: Tensor<T>,
    positions: Tensor<u32>,
    inv_freq: Tensor<f32>,
    mut out: Tensor<T>,
    n_heads: u32,
    mscale: f32,
    #[constexpr] head_dim: u32,
    #[constexpr] rot_dim: u32,
    #[constexpr] neox: u32,
    #[constexpr] heads_per_group: u32,
) {
    let token = group_id_x();
    let first_head = group_id_y() * heads_per_group;
    let pos = load(positions[token]).cast::<f32>();
    for e in range(thread_id(), head_dim, group_size()) {
        let rotated = e < rot_dim;
        let (partner, pair, sign) = rope_pair(select(rotated, e, 0), rot_dim, neox);
        let (c, s) = rope_angle(pos, inv_freq, pair);
        for i in range(0, heads_per_group, 1) {
            let head = first_head + i;
            if head < n_heads {
                let base = (token * n_heads + head) * head_dim;
                let v = load(x[base + e]).cast::<f32>();
                if rotated {
                    let p = load(x[base + partner]).cast::<f32>();
                    store(out[base + e], ((v * c + sign * p * s) * mscale).cast::<T>());
                } else {
                    store(out[base + e], v.cast::<T>());
                }
            }
        }
    }
}

/// Per-head RMSNorm with weight `w [D]`, then RoPE: one thread per element (`group_size
/// = head_dim`), `heads_per_group` heads of one token per threadgroup, each normalised
/// head staged in threadgroup memory for the partner reads; the cos/sin of a thread's
/// pair are formed once for all of them. A head past `n_heads` is computed on the last
/// one and not stored, so every thread meets every barrier.
#[kernel]
pub fn norm_rope_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    positions: Tensor<u32>,
    inv_freq: Tensor<f32>,
    mut out: Tensor<T>,
    n_heads: u32,
    eps: f32,
    mscale: f32,
    #[constexpr] head_dim: u32,
    #[constexpr] rot_dim: u32,
    #[constexpr] neox: u32,
    #[constexpr] heads_per_group: u32,
) {
    let token = group_id_x();
    let first_head = group_id_y() * heads_per_group;
    let e = thread_id();
    let rotated = e < rot_dim;
    let (partner, pair, sign) = rope_pair(select(rotated, e, 0), rot_dim, neox);
    let pos = load(positions[token]).cast::<f32>();
    let (c, s) = rope_angle(pos, inv_freq, pair);
    let weight = load(w[e]).cast::<f32>();
    let staged = threadgroup_array::<f32>(head_dim);
    let nf = head_dim.cast::<f32>();
    // A sum of squares of f16 values cannot overflow f32; one of f32 or bf16 values can
    // (see norm::rms_inv), and is then redone from squares scaled by 2⁻⁸⁰. `wide` is a
    // constant of the specialisation, so the f16 kernel has no such branch.
    let wide = f32_range(x);
    for i in range(0, heads_per_group, 1) {
        let head = min(first_head + i, n_heads - 1);
        let base = (token * n_heads + head) * head_dim;
        let v = load(x[base + e]).cast::<f32>();
        let total = group_sum(v * v);
        let mut inv = rsqrt(total / nf + eps);
        if wide && total > 3.402_823_5e38 {
            inv = rsqrt(group_sum(tiny_square(v)) / nf) * 8.271_806e-25;
        }
        let y = v * inv * weight;
        store(staged[e], y);
        barrier();
        let r = select(
            rotated,
            (y * c + sign * load(staged[partner]) * s) * mscale,
            y,
        );
        if first_head + i < n_heads {
            store(out[base + e], r.cast::<T>());
        }
        barrier();
    }
}
