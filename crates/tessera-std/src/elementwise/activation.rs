//! The activations of the gated MLP ops, as DSL functions computed in f32: SiLU, GELU with
//! the exact erf form and the tanh approximation, and the erf they need.
//!
//! `erf` is two fits made for this library (least squares on Chebyshev nodes, weighted
//! for the error that matters, coefficients rounded to f32): `x + x·r(x²)` below 0.921875,
//! where the leading `x` is exact, and `1 − exp(p(|x|))` above, `p` fitting `ln erfc` up
//! to 3.9375, beyond which erf rounds to ±1 in f32. Within 2 ulp of the f64 erf (1.65 at
//! worst over a dense sweep, `tests/erf_accuracy.rs`). The GELU takes `1 + erf(x/√2)` from
//! the same pieces, so for negative x it is `erfc(|x|/√2)` itself instead of a cancellation;
//! below x = −3.9375·√2 ≈ −5.57, where |gelu| < 7.2e-8, it is −0.

use tessera_macros::func;

/// `erf(x) − x` for `|x| < 0.921875`: `x·(2/√π − 1 + t·…)`, `t = x²`.
#[func]
fn erf_small_excess(x: f32) -> f32 {
    let t = x * x;
    let mut r = 8.365_006e-5f32;
    r = r * t - 8.141_392e-4;
    r = r * t + 5.200_905_3e-3;
    r = r * t - 2.685_934_1e-2;
    r = r * t + 1.128_369_4e-1;
    r = r * t - 3.761_263_5e-1;
    r = r * t + 1.283_792_3e-1;
    x * r
}

/// `erfc(a)` for `0.921875 ≤ a`: `exp(p(a))`, 0 beyond 3.9375 (and at +∞); NaN stays NaN.
#[func]
fn erfc_tail(a: f32) -> f32 {
    let mut p = -2.611_282e-7f32;
    p = p * a - 1.785_333e-5;
    p = p * a + 4.172_802_7e-4;
    p = p * a - 4.120_259_5e-3;
    p = p * a + 2.502_773_9e-2;
    p = p * a - 1.081_766_1e-1;
    p = p * a - 6.334_182_6e-1;
    p = p * a - 1.129_487_4;
    p = p * a + 1.701_427_2e-4;
    select(a > 3.9375, 0.0, p.exp())
}

/// The error function in f32.
#[func]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let tail = 1.0 - erfc_tail(a);
    let big = select(x < 0.0, -tail, tail);
    select(a < 0.921875, x + erf_small_excess(x), big)
}

/// `x · sigmoid(x)`: finite for every finite x (−0 far below zero), NaN at −∞.
#[func]
pub fn silu_f32(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// `x/2 · (1 + erf(x/√2))`, the exact GELU.
#[func]
pub fn gelu_erf_f32(x: f32) -> f32 {
    let z = x * 0.707_106_77;
    let a = z.abs();
    let tail = erfc_tail(a);
    let one_plus_erf = select(
        a < 0.921875,
        1.0 + (z + erf_small_excess(z)),
        select(z < 0.0, tail, 2.0 - tail),
    );
    0.5 * x * one_plus_erf
}

/// `x/2 · (1 + tanh(√(2/π)·(x + 0.044715·x³)))`, the tanh approximation.
#[func]
pub fn gelu_tanh_f32(x: f32) -> f32 {
    let inner = 0.797_884_6 * (x + 0.044_715 * x * x * x);
    0.5 * x * (1.0 + inner.tanh())
}

/// Which activation a gated kernel applies to its gate: a constexpr code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    Silu,
    GeluErf,
    GeluTanh,
}

impl Activation {
    /// The constexpr the kernels branch on.
    pub fn code(self) -> u32 {
        match self {
            Activation::Silu => 0,
            Activation::GeluErf => 1,
            Activation::GeluTanh => 2,
        }
    }
}

/// The activation of code `act` (a constexpr, so only one branch is compiled).
#[func]
pub fn activate(g: f32, act: u32) -> f32 {
    if act == 0 {
        silu_f32(g)
    } else if act == 1 {
        gelu_erf_f32(g)
    } else {
        gelu_tanh_f32(g)
    }
}
