//! Scalar semantics of every op on constants: the single definition that constant folding
//! uses and that the CPU backend must agree with (see the rules in [`crate::ops`]).

use crate::literal::Literal;
use crate::ops::{BinaryOp, UnaryOp};
use crate::types::Scalar;
use half::{bf16, f16};
use thiserror::Error;

/// Why an op on constants has no value.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EvalError {
    #[error("integer division by zero")]
    DivisionByZero,
    #[error("`{op}` is not defined on {ty}")]
    Unsupported { op: &'static str, ty: Scalar },
    #[error("operands of `{op}` have different types: {lhs} and {rhs}")]
    Mismatch {
        op: &'static str,
        lhs: Scalar,
        rhs: Scalar,
    },
}

fn float_of(v: Literal) -> f32 {
    match v {
        Literal::F16(x) => x.to_f32(),
        Literal::BF16(x) => x.to_f32(),
        Literal::F32(x) => x,
        other => other.as_f64() as f32,
    }
}

fn float_lit(ty: Scalar, x: f32) -> Literal {
    match ty {
        Scalar::F16 => Literal::F16(f16::from_f32(x)),
        Scalar::BF16 => Literal::BF16(bf16::from_f32(x)),
        _ => Literal::F32(x),
    }
}

/// Converts `v` to `to` (see the cast rules in [`crate::ops`]).
pub fn cast(v: Literal, to: Scalar) -> Literal {
    if v.ty() == to {
        return v;
    }
    if v.ty().is_float() {
        let x = float_of(v);
        return match to {
            Scalar::Bool => Literal::Bool(x != 0.0),
            Scalar::I8 => Literal::I8(x as i8),
            Scalar::U8 => Literal::U8(x as u8),
            Scalar::I32 => Literal::I32(x as i32),
            Scalar::U32 => Literal::U32(x as u32),
            Scalar::F16 => Literal::F16(f16::from_f32(x)),
            Scalar::BF16 => Literal::BF16(bf16::from_f32(x)),
            Scalar::F32 => Literal::F32(x),
        };
    }
    // Integers and bool: exact as i64, then wrap (ints) or round (floats).
    let i = v.as_i64().unwrap_or(0);
    match to {
        Scalar::F32 => Literal::F32(i as f32),
        Scalar::F16 => Literal::F16(f16::from_f32(i as f32)),
        Scalar::BF16 => Literal::BF16(bf16::from_f32(i as f32)),
        _ => Literal::from_i64(to, i),
    }
}

/// Whether `from` may be bitcast to `to`: both numeric (not bool) and of one width, or
/// why not.
pub fn bitcast_allowed(from: Scalar, to: Scalar) -> Result<(), String> {
    if !from.is_numeric() || !to.is_numeric() {
        return Err(format!(
            "a bitcast reinterprets numbers only, not {from} as {to}; compare with `!= 0` or `select` instead"
        ));
    }
    if from.size_bytes() != to.size_bytes() {
        return Err(format!(
            "a bitcast keeps the width: {from} is {} bits and {to} is {} bits; bitcast to a type of {} bits (then cast) instead",
            from.size_bytes() * 8,
            to.size_bytes() * 8,
            from.size_bytes() * 8
        ));
    }
    Ok(())
}

/// Reinterprets the bits of `v` as `to` (same width, numeric; see [`bitcast_allowed`]).
pub fn bitcast(v: Literal, to: Scalar) -> Result<Literal, EvalError> {
    bitcast_allowed(v.ty(), to).map_err(|_| EvalError::Unsupported {
        op: "bitcast",
        ty: v.ty(),
    })?;
    Ok(Literal::from_bits(to, v.to_bits()))
}

/// Evaluates a unary op.
pub fn unary(op: UnaryOp, v: Literal) -> Result<Literal, EvalError> {
    let ty = v.ty();
    let unsupported = || EvalError::Unsupported { op: op.name(), ty };
    if ty.is_float() {
        let x = float_of(v);
        let r = match op {
            UnaryOp::Neg => -x,
            UnaryOp::Abs => x.abs(),
            UnaryOp::Exp => x.exp(),
            UnaryOp::Exp2 => x.exp2(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Log2 => x.log2(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => 1.0 / x.sqrt(),
            UnaryOp::Recip => 1.0 / x,
            UnaryOp::Sin => x.sin(),
            UnaryOp::Cos => x.cos(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Floor => x.floor(),
            UnaryOp::Ceil => x.ceil(),
            UnaryOp::IsNan => return Ok(Literal::Bool(x.is_nan())),
            UnaryOp::IsInf => return Ok(Literal::Bool(x.is_infinite())),
            UnaryOp::Not => return Err(unsupported()),
        };
        return Ok(float_lit(ty, r));
    }
    match (op, v) {
        (UnaryOp::Not, Literal::Bool(b)) => Ok(Literal::Bool(!b)),
        (_, Literal::Bool(_)) => Err(unsupported()),
        (UnaryOp::Neg, _) => Ok(Literal::from_i64(
            ty,
            v.as_i64().unwrap_or(0).wrapping_neg(),
        )),
        (UnaryOp::Not, _) => Ok(Literal::from_i64(ty, !v.as_i64().unwrap_or(0))),
        (UnaryOp::Abs, Literal::I8(x)) => Ok(Literal::I8(x.wrapping_abs())),
        (UnaryOp::Abs, Literal::I32(x)) => Ok(Literal::I32(x.wrapping_abs())),
        (UnaryOp::Abs, _) => Ok(v),
        _ => Err(unsupported()),
    }
}

/// Evaluates a binary op on two constants of the same type.
pub fn binary(op: BinaryOp, a: Literal, b: Literal) -> Result<Literal, EvalError> {
    let ty = a.ty();
    if ty != b.ty() {
        return Err(EvalError::Mismatch {
            op: op.name(),
            lhs: ty,
            rhs: b.ty(),
        });
    }
    let unsupported = || EvalError::Unsupported { op: op.name(), ty };
    if ty.is_float() {
        let (x, y) = (float_of(a), float_of(b));
        let r = match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Rem => x % y,
            BinaryOp::Min => x.min(y),
            BinaryOp::Max => x.max(y),
            BinaryOp::Pow => x.powf(y),
            BinaryOp::Eq => return Ok(Literal::Bool(x == y)),
            BinaryOp::Ne => return Ok(Literal::Bool(x != y)),
            BinaryOp::Lt => return Ok(Literal::Bool(x < y)),
            BinaryOp::Le => return Ok(Literal::Bool(x <= y)),
            BinaryOp::Gt => return Ok(Literal::Bool(x > y)),
            BinaryOp::Ge => return Ok(Literal::Bool(x >= y)),
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::Shl | BinaryOp::Shr => {
                return Err(unsupported())
            }
        };
        return Ok(float_lit(ty, r));
    }
    if ty == Scalar::Bool {
        let (x, y) = (a.to_bits() != 0, b.to_bits() != 0);
        return match op {
            BinaryOp::And => Ok(Literal::Bool(x & y)),
            BinaryOp::Or => Ok(Literal::Bool(x | y)),
            BinaryOp::Xor | BinaryOp::Ne => Ok(Literal::Bool(x ^ y)),
            BinaryOp::Eq => Ok(Literal::Bool(x == y)),
            _ => Err(unsupported()),
        };
    }
    int_binary(op, ty, a, b)
}

fn int_binary(op: BinaryOp, ty: Scalar, a: Literal, b: Literal) -> Result<Literal, EvalError> {
    let bits = (ty.size_bytes() * 8) as u32;
    let signed = ty.is_signed_int();
    // Both operands as exact i64 values of their type.
    let (x, y) = (a.as_i64().unwrap_or(0), b.as_i64().unwrap_or(0));
    let wrap = |v: i64| Literal::from_i64(ty, v);
    let cmp = |r: bool| Ok(Literal::Bool(r));
    match op {
        BinaryOp::Add => Ok(wrap(x.wrapping_add(y))),
        BinaryOp::Sub => Ok(wrap(x.wrapping_sub(y))),
        BinaryOp::Mul => Ok(wrap(x.wrapping_mul(y))),
        BinaryOp::Div | BinaryOp::Rem if y == 0 => Err(EvalError::DivisionByZero),
        // i64 holds every i8/i32/u8/u32 quotient; the wrap handles MIN / -1.
        BinaryOp::Div => Ok(wrap(x / y)),
        BinaryOp::Rem => Ok(wrap(x % y)),
        BinaryOp::Min => Ok(wrap(x.min(y))),
        BinaryOp::Max => Ok(wrap(x.max(y))),
        BinaryOp::And => Ok(wrap(x & y)),
        BinaryOp::Or => Ok(wrap(x | y)),
        BinaryOp::Xor => Ok(wrap(x ^ y)),
        BinaryOp::Shl => Ok(wrap(x << (y.rem_euclid(bits as i64)))),
        BinaryOp::Shr => {
            let s = y.rem_euclid(bits as i64);
            if signed {
                Ok(wrap(x >> s))
            } else {
                let mask = if bits == 64 { -1 } else { (1i64 << bits) - 1 };
                Ok(wrap((x & mask) >> s))
            }
        }
        BinaryOp::Eq => cmp(x == y),
        BinaryOp::Ne => cmp(x != y),
        BinaryOp::Lt => cmp(x < y),
        BinaryOp::Le => cmp(x <= y),
        BinaryOp::Gt => cmp(x > y),
        BinaryOp::Ge => cmp(x >= y),
        BinaryOp::Pow => Err(EvalError::Unsupported { op: op.name(), ty }),
    }
}

/// `a * b + c` with one rounding (in f32 for every float type, then rounded to it).
pub fn fma(a: Literal, b: Literal, c: Literal) -> Result<Literal, EvalError> {
    let ty = a.ty();
    if !ty.is_float() {
        return Err(EvalError::Unsupported { op: "fma", ty });
    }
    if b.ty() != ty || c.ty() != ty {
        return Err(EvalError::Mismatch {
            op: "fma",
            lhs: ty,
            rhs: if b.ty() != ty { b.ty() } else { c.ty() },
        });
    }
    Ok(float_lit(ty, float_of(a).mul_add(float_of(b), float_of(c))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_arithmetic_wraps() {
        let r = binary(BinaryOp::Add, Literal::U32(u32::MAX), Literal::U32(2)).unwrap();
        assert_eq!(r, Literal::U32(1));
        let r = binary(BinaryOp::Sub, Literal::U32(0), Literal::U32(1)).unwrap();
        assert_eq!(r, Literal::U32(u32::MAX));
        let r = binary(BinaryOp::Div, Literal::I32(i32::MIN), Literal::I32(-1)).unwrap();
        assert_eq!(r, Literal::I32(i32::MIN));
    }

    #[test]
    fn division_by_zero_is_an_error() {
        assert_eq!(
            binary(BinaryOp::Rem, Literal::U32(3), Literal::U32(0)),
            Err(EvalError::DivisionByZero)
        );
    }

    #[test]
    fn shifts_take_amount_modulo_width() {
        assert_eq!(
            binary(BinaryOp::Shl, Literal::U32(1), Literal::U32(33)).unwrap(),
            Literal::U32(2)
        );
        assert_eq!(
            binary(BinaryOp::Shr, Literal::I32(-8), Literal::I32(1)).unwrap(),
            Literal::I32(-4)
        );
        assert_eq!(
            binary(BinaryOp::Shr, Literal::U32(0x8000_0000), Literal::U32(31)).unwrap(),
            Literal::U32(1)
        );
    }

    #[test]
    fn half_precision_rounds_after_f32_math() {
        let a = Literal::F16(f16::from_f32(1.0));
        let b = Literal::F16(f16::from_f32(0.0004));
        // 1.0004 is not representable in f16; the nearest is 1.0.
        assert_eq!(binary(BinaryOp::Add, a, b).unwrap(), a);
    }

    #[test]
    fn casts_saturate_and_map_nan_to_zero() {
        assert_eq!(cast(Literal::F32(-3.7), Scalar::U32), Literal::U32(0));
        assert_eq!(
            cast(Literal::F32(1e20), Scalar::I32),
            Literal::I32(i32::MAX)
        );
        assert_eq!(cast(Literal::F32(f32::NAN), Scalar::I32), Literal::I32(0));
        assert_eq!(cast(Literal::F32(-3.7), Scalar::I32), Literal::I32(-3));
        assert_eq!(cast(Literal::I32(-1), Scalar::U32), Literal::U32(u32::MAX));
        assert_eq!(cast(Literal::U32(7), Scalar::Bool), Literal::Bool(true));
    }

    #[test]
    fn bitcasts_keep_every_bit_pattern() {
        assert_eq!(
            bitcast(Literal::U32(0x3f80_0000), Scalar::F32),
            Ok(Literal::F32(1.0))
        );
        assert_eq!(
            bitcast(Literal::F32(-0.0), Scalar::U32),
            Ok(Literal::U32(0x8000_0000))
        );
        assert_eq!(
            bitcast(Literal::I32(-1), Scalar::U32),
            Ok(Literal::U32(u32::MAX))
        );
        assert_eq!(bitcast(Literal::U8(0xff), Scalar::I8), Ok(Literal::I8(-1)));
        // The pattern of f16 1.0 (0x3c00) read as bf16 is 2^-7.
        assert_eq!(
            bitcast(Literal::F16(f16::from_bits(0x3c00)), Scalar::BF16),
            Ok(Literal::BF16(bf16::from_bits(0x3c00)))
        );
        // A NaN's payload and sign survive.
        let nan = bitcast(Literal::U32(0xffc0_1234), Scalar::F32).unwrap();
        assert_eq!(bitcast(nan, Scalar::U32), Ok(Literal::U32(0xffc0_1234)));
    }

    #[test]
    fn bitcasts_refuse_another_width_or_bool() {
        let why = bitcast_allowed(Scalar::U32, Scalar::F16).unwrap_err();
        assert!(why.contains("32 bits") && why.contains("16 bits"), "{why}");
        assert!(bitcast_allowed(Scalar::Bool, Scalar::U8).is_err());
        assert!(matches!(
            bitcast(Literal::U8(1), Scalar::F16),
            Err(EvalError::Unsupported { op: "bitcast", .. })
        ));
    }

    #[test]
    fn float_min_max_ignore_nan() {
        let r = binary(BinaryOp::Max, Literal::F32(f32::NAN), Literal::F32(2.0)).unwrap();
        assert_eq!(r, Literal::F32(2.0));
    }

    #[test]
    fn mismatched_types_are_rejected() {
        assert!(matches!(
            binary(BinaryOp::Add, Literal::U32(1), Literal::F32(1.0)),
            Err(EvalError::Mismatch { .. })
        ));
    }
}
