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
            Scalar::F16 => Literal::F16(f16::from_f64(v)),
            Scalar::BF16 => Literal::BF16(bf16::from_f64(v)),
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
            Scalar::F16 => Literal::F16(f16::from_f64(v as f64)),
            Scalar::BF16 => Literal::BF16(bf16::from_f64(v as f64)),
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
