//! MSL spellings of IR types and constants. Constants are exact: finite floats print as
//! their shortest round-tripping decimal, NaNs and infinities as bit patterns.

use tessera_ir::{Literal, Scalar};

/// The MSL scalar type of an IR scalar.
pub fn scalar(s: Scalar) -> &'static str {
    match s {
        Scalar::Bool => "bool",
        Scalar::I8 => "char",
        Scalar::U8 => "uchar",
        Scalar::I32 => "int",
        Scalar::U32 => "uint",
        Scalar::F16 => "half",
        Scalar::BF16 => "bfloat",
        Scalar::F32 => "float",
    }
}

/// The MSL vector type of `width` (2, 3 or 4) elements of `s`, or the scalar type for 1.
pub fn vector(s: Scalar, width: usize) -> String {
    if width == 1 {
        scalar(s).to_string()
    } else {
        format!("{}{width}", scalar(s))
    }
}

/// `float(x)` for f16 / bf16 values (whose arithmetic happens in f32), `x` otherwise.
pub fn as_f32(s: Scalar, x: &str) -> String {
    match s {
        Scalar::F16 | Scalar::BF16 => format!("float({x})"),
        _ => x.to_string(),
    }
}

/// Rounds an f32 expression to `s` (f16 / bf16), or leaves it for f32.
pub fn from_f32(s: Scalar, x: &str) -> String {
    match s {
        Scalar::F16 | Scalar::BF16 => format!("{}({x})", scalar(s)),
        _ => x.to_string(),
    }
}

/// An f32 constant.
pub fn f32_lit(x: f32) -> String {
    if !x.is_finite() {
        return format!("as_type<float>(0x{:08x}u)", x.to_bits());
    }
    let s = format!("{x:?}");
    if x.is_sign_negative() {
        format!("({s}f)")
    } else {
        format!("{s}f")
    }
}

/// A constant of any scalar type.
pub fn literal(l: Literal) -> String {
    match l {
        Literal::Bool(b) => b.to_string(),
        Literal::I8(v) => format!("char({v})"),
        Literal::U8(v) => format!("uchar({v})"),
        Literal::I32(i32::MIN) => "int(0x80000000u)".to_string(),
        Literal::I32(v) if v < 0 => format!("({v})"),
        Literal::I32(v) => v.to_string(),
        Literal::U32(v) => format!("{v}u"),
        Literal::F32(x) => f32_lit(x),
        Literal::F16(x) => half_lit("half", x.to_f32(), x.to_bits()),
        Literal::BF16(x) => half_lit("bfloat", x.to_f32(), x.to_bits()),
    }
}

fn half_lit(ty: &str, x: f32, bits: u16) -> String {
    if x.is_finite() {
        format!("{ty}({})", f32_lit(x))
    } else {
        format!("as_type<{ty}>(ushort(0x{bits:04x}))")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::half::{bf16, f16};

    #[test]
    fn constants_are_exact() {
        assert_eq!(literal(Literal::F32(1.0)), "1.0f");
        assert_eq!(literal(Literal::F32(-0.5)), "(-0.5f)");
        assert_eq!(literal(Literal::F32(1e-7)), "1e-7f");
        assert_eq!(
            literal(Literal::F32(f32::NEG_INFINITY)),
            "as_type<float>(0xff800000u)"
        );
        assert_eq!(literal(Literal::I32(i32::MIN)), "int(0x80000000u)");
        assert_eq!(literal(Literal::I32(-3)), "(-3)");
        assert_eq!(literal(Literal::U32(7)), "7u");
        assert_eq!(literal(Literal::F16(f16::from_f32(1.5))), "half(1.5f)");
        assert_eq!(
            literal(Literal::BF16(bf16::INFINITY)),
            "as_type<bfloat>(ushort(0x7f80))"
        );
    }
}
