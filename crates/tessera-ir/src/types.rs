//! Scalar and vector value types of the IR, and the element types tensors may hold.

use std::fmt;

/// A scalar type. Every scalar fits in 32 bits, which the CPU backend relies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scalar {
    Bool,
    I8,
    U8,
    I32,
    U32,
    F16,
    BF16,
    F32,
}

impl Scalar {
    /// Every scalar type, in a stable order.
    pub const ALL: [Scalar; 8] = [
        Scalar::Bool,
        Scalar::I8,
        Scalar::U8,
        Scalar::I32,
        Scalar::U32,
        Scalar::F16,
        Scalar::BF16,
        Scalar::F32,
    ];
    /// The floating-point types a generic kernel is usually instantiated over.
    pub const FLOATS: [Scalar; 3] = [Scalar::F32, Scalar::F16, Scalar::BF16];

    /// The DSL / CLI spelling: `f32`, `bf16`, `u32` …
    pub fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I8 => "i8",
            Scalar::U8 => "u8",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::F16 => "f16",
            Scalar::BF16 => "bf16",
            Scalar::F32 => "f32",
        }
    }

    /// Parses the DSL / CLI spelling.
    pub fn parse(s: &str) -> Option<Scalar> {
        Scalar::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Size in bytes when stored in a tensor or an array.
    pub fn size_bytes(self) -> usize {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 => 1,
            Scalar::F16 | Scalar::BF16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::BF16 | Scalar::F32)
    }

    pub fn is_int(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::U8 | Scalar::I32 | Scalar::U32)
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::I32)
    }

    /// Integers and floats: the types arithmetic is defined on.
    pub fn is_numeric(self) -> bool {
        self.is_int() || self.is_float()
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The type of an SSA value: a scalar, or a short vector produced by the vectorize pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Scalar(Scalar),
    /// `width` lanes of one scalar type (2, 4 or 8), loaded or stored as one access.
    Vector(Scalar, u8),
}

impl Type {
    /// The scalar type, or the element type of a vector.
    pub fn elem(self) -> Scalar {
        match self {
            Type::Scalar(s) | Type::Vector(s, _) => s,
        }
    }

    /// The scalar type if this is a scalar.
    pub fn scalar(self) -> Option<Scalar> {
        match self {
            Type::Scalar(s) => Some(s),
            Type::Vector(..) => None,
        }
    }

    /// Number of elements: 1 for a scalar.
    pub fn width(self) -> usize {
        match self {
            Type::Scalar(_) => 1,
            Type::Vector(_, w) => w as usize,
        }
    }
}

impl From<Scalar> for Type {
    fn from(s: Scalar) -> Type {
        Type::Scalar(s)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Scalar(s) => write!(f, "{s}"),
            Type::Vector(s, w) => write!(f, "{s}x{w}"),
        }
    }
}
