//! Constant values of every scalar type, with bit-exact equality so passes can hash them.

use crate::types::Scalar;
use half::{bf16, f16};
use std::fmt;
use std::hash::{Hash, Hasher};

/// A constant of one scalar type.
#[derive(Clone, Copy, Debug)]
pub enum Literal {
    Bool(bool),
    I8(i8),
    U8(u8),
    I32(i32),
    U32(u32),
    F16(f16),
    BF16(bf16),
    F32(f32),
}

impl Literal {
    pub fn ty(self) -> Scalar {
        match self {
            Literal::Bool(_) => Scalar::Bool,
            Literal::I8(_) => Scalar::I8,
            Literal::U8(_) => Scalar::U8,
            Literal::I32(_) => Scalar::I32,
            Literal::U32(_) => Scalar::U32,
            Literal::F16(_) => Scalar::F16,
            Literal::BF16(_) => Scalar::BF16,
            Literal::F32(_) => Scalar::F32,
        }
    }

    /// The value's bit pattern, zero-extended to 32 bits (the CPU backend's register format).
    pub fn to_bits(self) -> u32 {
        match self {
            Literal::Bool(b) => b as u32,
            Literal::I8(v) => v as u8 as u32,
            Literal::U8(v) => v as u32,
            Literal::I32(v) => v as u32,
            Literal::U32(v) => v,
            Literal::F16(v) => v.to_bits() as u32,
            Literal::BF16(v) => v.to_bits() as u32,
            Literal::F32(v) => v.to_bits(),
        }
    }

    /// Rebuilds a literal from its 32-bit register pattern.
    pub fn from_bits(ty: Scalar, bits: u32) -> Literal {
        match ty {
            Scalar::Bool => Literal::Bool(bits & 1 != 0),
            Scalar::I8 => Literal::I8(bits as u8 as i8),
            Scalar::U8 => Literal::U8(bits as u8),
            Scalar::I32 => Literal::I32(bits as i32),
            Scalar::U32 => Literal::U32(bits),
            Scalar::F16 => Literal::F16(f16::from_bits(bits as u16)),
            Scalar::BF16 => Literal::BF16(bf16::from_bits(bits as u16)),
            Scalar::F32 => Literal::F32(f32::from_bits(bits)),
        }
    }

    /// The value as f64 (exact for every type here; bools are 0 or 1).
    pub fn as_f64(self) -> f64 {
        match self {
            Literal::Bool(b) => b as u8 as f64,
            Literal::I8(v) => v as f64,
            Literal::U8(v) => v as f64,
            Literal::I32(v) => v as f64,
            Literal::U32(v) => v as f64,
            Literal::F16(v) => v.to_f64(),
            Literal::BF16(v) => v.to_f64(),
            Literal::F32(v) => v as f64,
        }
    }

    /// The value as i64 if it is an integer or bool.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Literal::Bool(b) => Some(b as i64),
            Literal::I8(v) => Some(v as i64),
            Literal::U8(v) => Some(v as i64),
            Literal::I32(v) => Some(v as i64),
            Literal::U32(v) => Some(v as i64),
            _ => None,
        }
    }

    /// Converts an f64 to a literal of type `ty` the way a cast does
    /// (floats round to nearest even, integers truncate toward zero and saturate).
    pub fn from_f64(ty: Scalar, v: f64) -> Literal {
        match ty {
            Scalar::Bool => Literal::Bool(v != 0.0),
            Scalar::I8 => Literal::I8(v as i8),
            Scalar::U8 => Literal::U8(v as u8),
            Scalar::I32 => Literal::I32(v as i32),
            Scalar::U32 => Literal::U32(v as u32),
            Scalar::F16 => Literal::F16(f16_from_f64(v)),
            Scalar::BF16 => Literal::BF16(bf16_from_f64(v)),
            Scalar::F32 => Literal::F32(v as f32),
        }
    }

    /// Converts an integer to a literal of type `ty`, wrapping like a C cast.
    pub fn from_i64(ty: Scalar, v: i64) -> Literal {
        match ty {
            Scalar::Bool => Literal::Bool(v != 0),
            Scalar::I8 => Literal::I8(v as i8),
            Scalar::U8 => Literal::U8(v as u8),
            Scalar::I32 => Literal::I32(v as i32),
            Scalar::U32 => Literal::U32(v as u32),
            Scalar::F16 => Literal::F16(f16_from_f64(v as f64)),
            Scalar::BF16 => Literal::BF16(bf16_from_f64(v as f64)),
            Scalar::F32 => Literal::F32(v as f32),
        }
    }

    /// The zero of a type (false for bool).
    pub fn zero(ty: Scalar) -> Literal {
        Literal::from_i64(ty, 0)
    }
}

impl PartialEq for Literal {
    fn eq(&self, other: &Self) -> bool {
        self.ty() == other.ty() && self.to_bits() == other.to_bits()
    }
}

impl Eq for Literal {}

impl Hash for Literal {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.ty().hash(state);
        self.to_bits().hash(state);
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Bool(b) => write!(f, "{b}"),
            Literal::I8(v) => write!(f, "{v}i8"),
            Literal::U8(v) => write!(f, "{v}u8"),
            Literal::I32(v) => write!(f, "{v}i32"),
            Literal::U32(v) => write!(f, "{v}u32"),
            Literal::F16(v) => write!(f, "{:?}f16", v.to_f32()),
            Literal::BF16(v) => write!(f, "{:?}bf16", v.to_f32()),
            Literal::F32(v) => write!(f, "{v:?}f32"),
        }
    }
}

macro_rules! literal_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Literal {
            fn from(x: $t) -> Literal {
                Literal::$v(x)
            }
        }
    )*};
}

literal_from!(bool => Bool, i8 => I8, u8 => U8, i32 => I32, u32 => U32, f16 => F16, bf16 => BF16, f32 => F32);
/// `v` rounded to nearest-even f16 in one rounding. (`half`'s own `from_f64` drops the
/// low 32 bits of the f64 before rounding, or rounds through f32 twice, so a value just
/// above a halfway point can come out rounded down.)
pub fn f16_from_f64(v: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(v))
}

/// `v` rounded to nearest-even bf16 in one rounding (see [`f16_from_f64`]).
pub fn bf16_from_f64(v: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(v))
}

/// `v` in f32 rounded to odd: truncated toward zero, with the last bit set when anything
/// was dropped. Rounding that to nearest-even in a format with at least two fewer
/// significand bits (f16, bf16, subnormals included) equals rounding `v` directly.
fn f32_round_to_odd(v: f64) -> f32 {
    let t = v as f32;
    if v.is_nan() || f64::from(t) == v {
        return t;
    }
    if t.is_infinite() {
        // Past f32's range: truncation is the largest finite value, whose last bit is set.
        return f32::MAX.copysign(t);
    }
    let mut bits = t.to_bits();
    if f64::from(t).abs() > v.abs() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every finite value of a 16-bit format, ascending, with its bits (from `decode`).
    fn finite_values(decode: fn(u16) -> f64) -> Vec<(f64, u16)> {
        let mut v: Vec<(f64, u16)> = (0..=u16::MAX)
            .map(|b| (decode(b), b))
            .filter(|(x, b)| x.is_finite() && *b != 0x8000)
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    }

    /// Nearest by search over every finite value, ties to the even significand; past the
    /// largest value by at least half a step, infinity.
    fn nearest(values: &[(f64, u16)], v: f64) -> f64 {
        let i = values.partition_point(|(x, _)| *x < v);
        let max = values[values.len() - 1].0;
        let step = max - values[values.len() - 2].0;
        if v.abs() >= max + step / 2.0 {
            return f64::INFINITY.copysign(v);
        }
        let above = values[i.min(values.len() - 1)];
        let below = values[i.saturating_sub(1)];
        let (da, db) = (above.0 - v, v - below.0);
        let r = if da < db || (da == db && above.1 & 1 == 0) {
            above.0
        } else {
            below.0
        };
        // A zero keeps the sign of what rounded to it.
        if r == 0.0 {
            0.0f64.copysign(v)
        } else {
            r
        }
    }

    #[test]
    fn f64_to_16_bit_floats_round_once_to_nearest_even() {
        let bf = finite_values(|b| bf16::from_bits(b).to_f64());
        let hf = finite_values(|b| f16::from_bits(b).to_f64());
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for (values, convert) in [
            (&bf, (|v| bf16_from_f64(v).to_f64()) as fn(f64) -> f64),
            (&hf, |v| f16_from_f64(v).to_f64()),
        ] {
            for _ in 0..20_000 {
                // A halfway point between neighbours, nudged by a few f64 ulps either way
                // (the values a rounding that drops low bits gets wrong), or exactly on it.
                let i = (next() % (values.len() as u64 - 1)) as usize;
                let mid = (values[i].0 + values[i + 1].0) / 2.0;
                let nudge = (next() % 7) as i64 - 3;
                let v = f64::from_bits((mid.to_bits() as i64 + nudge) as u64);
                let want = nearest(values, v);
                assert_eq!(convert(v), want, "{v:e} (bits {:#x})", v.to_bits());
            }
            for v in [0.0, -0.0, 1e-300, -1e-300, 1e300, -1e300, 65519.99, 65520.0] {
                let want = nearest(values, v);
                assert_eq!(convert(v).to_bits(), want.to_bits(), "{v:e}");
            }
            assert!(convert(f64::NAN).is_nan());
        }
    }
}
