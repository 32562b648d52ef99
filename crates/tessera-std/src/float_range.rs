//! DSL functions about a float's range, shared by the kernels that guard their internal
//! precision: whether a value is finite, and whether a dtype reaches f32's exponents (so
//! its squares and products can overflow f32, and a kernel needs its overflow-free path).

use tessera_macros::func;

/// Whether `x` is neither NaN nor ±∞ (NaN fails the compare).
#[func]
pub fn finite(x: f32) -> bool {
    abs(x) <= 3.402_823_5e38
}

/// Whether the elements of `like` have f32's exponent range (f32, bf16: 1e-30 survives
/// the round trip) rather than f16's. A constant of the specialisation, so a branch on it
/// is compiled out where it is false.
#[func]
pub fn f32_range<T>(like: Mem<T>) -> bool {
    (1.0e-30f32).cast::<T>().cast::<f32>() > 0.0f32
}
