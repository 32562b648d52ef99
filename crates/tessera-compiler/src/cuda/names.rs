//! Spelling IR things in CUDA C: scalar and vector type names, literals and identifiers.

use tessera_ir::{Literal, Scalar};

/// The CUDA C type holding a scalar. f16 and bf16 are the prelude's own 16-bit structs.
pub fn scalar_type(s: Scalar) -> &'static str {
    match s {
        Scalar::Bool => "bool",
        Scalar::I8 => "signed char",
        Scalar::U8 => "unsigned char",
        Scalar::I32 => "int",
        Scalar::U32 => "unsigned int",
        Scalar::F16 => "ts_f16",
        Scalar::BF16 => "ts_bf16",
        Scalar::F32 => "float",
    }
}

/// The name of the vector struct for `width` lanes of `s`.
pub fn vector_type(s: Scalar, width: u8) -> String {
    format!("ts_{}x{width}", s.name())
}

/// Alignment of a vector struct: its size, capped at 16 bytes (the widest access).
pub fn vector_align(s: Scalar, width: u8) -> usize {
    let bytes = s.size_bytes() * width as usize;
    bytes.next_power_of_two().min(16)
}

/// A float constant as CUDA C text that parses back to the same bits.
pub fn f32_literal(x: f32) -> String {
    if x.is_finite() {
        // `{:?}` prints the shortest text that round-trips, always with a `.` or an exponent.
        format!("{x:?}f")
    } else {
        format!("__uint_as_float(0x{:08x}u)", x.to_bits())
    }
}

/// A constant as a CUDA C expression of its own type.
pub fn literal(l: Literal) -> String {
    match l {
        Literal::Bool(b) => if b { "true" } else { "false" }.to_string(),
        Literal::I8(v) => format!("((signed char){v})"),
        Literal::U8(v) => format!("((unsigned char){v}u)"),
        Literal::I32(i32::MIN) => "(-2147483647 - 1)".to_string(),
        Literal::I32(v) if v < 0 => format!("({v})"),
        Literal::I32(v) => format!("{v}"),
        Literal::U32(v) => format!("{v}u"),
        Literal::F16(v) => format!("ts_f16{{0x{:04x}}}", v.to_bits()),
        Literal::BF16(v) => format!("ts_bf16{{0x{:04x}}}", v.to_bits()),
        Literal::F32(v) => f32_literal(v),
    }
}

/// A C identifier made of `prefix` and the letters, digits and underscores of `name`.
pub fn ident(prefix: &str, name: &str) -> String {
    let mut s = String::with_capacity(prefix.len() + name.len());
    s.push_str(prefix);
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            s.push(c);
        } else {
            s.push('_');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::half::{bf16, f16};

    #[test]
    fn float_literals_round_trip_and_name_non_finite_bits() {
        assert_eq!(f32_literal(1.0), "1.0f");
        assert_eq!(f32_literal(0.1), "0.1f");
        assert_eq!(f32_literal(1e-7), "1e-7f");
        assert_eq!(f32_literal(f32::INFINITY), "__uint_as_float(0x7f800000u)");
        assert_eq!(
            f32_literal(f32::NEG_INFINITY),
            "__uint_as_float(0xff800000u)"
        );
        let text = f32_literal(0.1);
        let parsed: f32 = text.trim_end_matches('f').parse().unwrap();
        assert_eq!(parsed.to_bits(), 0.1f32.to_bits());
    }

    #[test]
    fn integer_and_half_literals_keep_their_type() {
        assert_eq!(literal(Literal::I32(i32::MIN)), "(-2147483647 - 1)");
        assert_eq!(literal(Literal::I32(-3)), "(-3)");
        assert_eq!(literal(Literal::U32(7)), "7u");
        assert_eq!(literal(Literal::I8(-1)), "((signed char)-1)");
        assert_eq!(literal(Literal::F16(f16::from_f32(1.0))), "ts_f16{0x3c00}");
        assert_eq!(
            literal(Literal::BF16(bf16::from_f32(1.0))),
            "ts_bf16{0x3f80}"
        );
    }

    #[test]
    fn identifiers_are_sanitised() {
        assert_eq!(ident("p0_", "x.y-z"), "p0_x_y_z");
        assert_eq!(vector_type(Scalar::BF16, 8), "ts_bf16x8");
        assert_eq!(vector_align(Scalar::F32, 8), 16);
        assert_eq!(vector_align(Scalar::U8, 2), 2);
    }
}
