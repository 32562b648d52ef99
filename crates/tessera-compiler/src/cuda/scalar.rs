//! CUDA C expressions for the scalar ops — unary, binary, fma, select and casts — with
//! the IR's exact semantics: integers wrap (signed arithmetic goes through unsigned so C
//! has no undefined overflow), shift amounts are taken modulo the width, f16 / bf16 math
//! runs in f32 and is rounded back, float min / max ignore a NaN operand, and float → int
//! casts truncate, saturate and send NaN to 0.
//!
//! Operands are plain names or literals, so an expression may repeat them freely.

use super::dialect::Cuda;
use super::names::scalar_type;
use crate::c_family::ScalarOps;
use tessera_ir::{BinaryOp, Scalar, UnaryOp};

/// `e` (of float type `ty`) as an f32 expression.
pub fn to_f32(ty: Scalar, e: &str) -> String {
    match ty {
        Scalar::F16 => format!("ts_f16_to_f32({e})"),
        Scalar::BF16 => format!("ts_bf16_to_f32({e})"),
        _ => e.to_string(),
    }
}

/// The f32 expression `e` rounded to float type `ty`.
pub fn from_f32(ty: Scalar, e: &str) -> String {
    match ty {
        Scalar::F16 => format!("ts_f16_from_f32({e})"),
        Scalar::BF16 => format!("ts_bf16_from_f32({e})"),
        _ => e.to_string(),
    }
}

/// Bit width of an integer type.
fn bits(ty: Scalar) -> u32 {
    (ty.size_bytes() * 8) as u32
}

/// `op a` on a value of type `ty`.
pub fn unary(op: UnaryOp, ty: Scalar, a: &str) -> Option<String> {
    if ty.is_float() {
        let x = to_f32(ty, a);
        let f = match op {
            UnaryOp::Neg => format!("(-{x})"),
            UnaryOp::Abs => format!("fabsf({x})"),
            UnaryOp::Exp => format!("expf({x})"),
            UnaryOp::Exp2 => format!("exp2f({x})"),
            UnaryOp::Log => format!("logf({x})"),
            UnaryOp::Log2 => format!("log2f({x})"),
            UnaryOp::Sqrt => format!("sqrtf({x})"),
            UnaryOp::Rsqrt => format!("rsqrtf({x})"),
            UnaryOp::Recip => format!("(1.0f / {x})"),
            UnaryOp::Sin => format!("sinf({x})"),
            UnaryOp::Cos => format!("cosf({x})"),
            UnaryOp::Tanh => format!("tanhf({x})"),
            UnaryOp::Floor => format!("floorf({x})"),
            UnaryOp::Ceil => format!("ceilf({x})"),
            UnaryOp::IsNan => return Some(format!("ts_isnan({x})")),
            UnaryOp::IsInf => return Some(format!("ts_isinf({x})")),
            UnaryOp::Not => return None,
        };
        return Some(from_f32(ty, &f));
    }
    let t = scalar_type(ty);
    Some(match (op, ty) {
        (UnaryOp::Not, Scalar::Bool) => format!("(!{a})"),
        (_, Scalar::Bool) => return None,
        (UnaryOp::Not, _) => format!("(({t})~{a})"),
        (UnaryOp::Neg, Scalar::U32) => format!("(0u - {a})"),
        (UnaryOp::Neg, Scalar::I32) => format!("((int)(0u - (unsigned int){a}))"),
        (UnaryOp::Neg, _) => format!("(({t})(-(int){a}))"),
        (UnaryOp::Abs, Scalar::I32) => {
            format!("({a} < 0 ? (int)(0u - (unsigned int){a}) : {a})")
        }
        (UnaryOp::Abs, Scalar::I8) => format!("(({t})({a} < 0 ? -(int){a} : (int){a}))"),
        (UnaryOp::Abs, _) => a.to_string(),
        _ => return None,
    })
}

/// `a op b` on two values of type `ty`.
pub fn binary(op: BinaryOp, ty: Scalar, a: &str, b: &str) -> Option<String> {
    if ty.is_float() {
        let (x, y) = (to_f32(ty, a), to_f32(ty, b));
        let f = match op {
            BinaryOp::Add => format!("({x} + {y})"),
            BinaryOp::Sub => format!("({x} - {y})"),
            BinaryOp::Mul => format!("({x} * {y})"),
            BinaryOp::Div => format!("({x} / {y})"),
            BinaryOp::Rem => format!("fmodf({x}, {y})"),
            BinaryOp::Min => format!("fminf({x}, {y})"),
            BinaryOp::Max => format!("fmaxf({x}, {y})"),
            BinaryOp::Pow => format!("powf({x}, {y})"),
            BinaryOp::Eq => return Some(format!("({x} == {y})")),
            BinaryOp::Ne => return Some(format!("({x} != {y})")),
            BinaryOp::Lt => return Some(format!("({x} < {y})")),
            BinaryOp::Le => return Some(format!("({x} <= {y})")),
            BinaryOp::Gt => return Some(format!("({x} > {y})")),
            BinaryOp::Ge => return Some(format!("({x} >= {y})")),
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::Shl | BinaryOp::Shr => {
                return None
            }
        };
        return Some(from_f32(ty, &f));
    }
    if ty == Scalar::Bool {
        return Some(match op {
            BinaryOp::And => format!("({a} && {b})"),
            BinaryOp::Or => format!("({a} || {b})"),
            BinaryOp::Xor | BinaryOp::Ne => format!("({a} != {b})"),
            BinaryOp::Eq => format!("({a} == {b})"),
            _ => return None,
        });
    }
    let cmp = |sym: &str| Some(format!("({a} {sym} {b})"));
    match op {
        BinaryOp::Eq => return cmp("=="),
        BinaryOp::Ne => return cmp("!="),
        BinaryOp::Lt => return cmp("<"),
        BinaryOp::Le => return cmp("<="),
        BinaryOp::Gt => return cmp(">"),
        BinaryOp::Ge => return cmp(">="),
        BinaryOp::Min => return Some(format!("({a} < {b} ? {a} : {b})")),
        BinaryOp::Max => return Some(format!("({a} > {b} ? {a} : {b})")),
        BinaryOp::Pow => return None,
        _ => {}
    }
    let t = scalar_type(ty);
    let mask = bits(ty) - 1;
    Some(match ty {
        Scalar::U32 => match op {
            BinaryOp::Add => format!("({a} + {b})"),
            BinaryOp::Sub => format!("({a} - {b})"),
            BinaryOp::Mul => format!("({a} * {b})"),
            BinaryOp::Div => format!("({a} / {b})"),
            BinaryOp::Rem => format!("({a} % {b})"),
            BinaryOp::And => format!("({a} & {b})"),
            BinaryOp::Or => format!("({a} | {b})"),
            BinaryOp::Xor => format!("({a} ^ {b})"),
            BinaryOp::Shl => format!("({a} << ({b} & 31u))"),
            BinaryOp::Shr => format!("({a} >> ({b} & 31u))"),
            _ => return None,
        },
        Scalar::I32 => {
            let wrap = |sym: &str| format!("((int)((unsigned int){a} {sym} (unsigned int){b}))");
            match op {
                BinaryOp::Add => wrap("+"),
                BinaryOp::Sub => wrap("-"),
                BinaryOp::Mul => wrap("*"),
                BinaryOp::Div => format!("ts_div_i32({a}, {b})"),
                BinaryOp::Rem => format!("ts_rem_i32({a}, {b})"),
                BinaryOp::And => format!("({a} & {b})"),
                BinaryOp::Or => format!("({a} | {b})"),
                BinaryOp::Xor => format!("({a} ^ {b})"),
                BinaryOp::Shl => format!("((int)((unsigned int){a} << ({b} & 31)))"),
                BinaryOp::Shr => format!("({a} >> ({b} & 31))"),
                _ => return None,
            }
        }
        // 8-bit: compute in int (no overflow is possible there), then wrap by the cast.
        Scalar::I8 | Scalar::U8 => {
            let body = match op {
                BinaryOp::Add => format!("(int){a} + (int){b}"),
                BinaryOp::Sub => format!("(int){a} - (int){b}"),
                BinaryOp::Mul => format!("(int){a} * (int){b}"),
                BinaryOp::Div => format!("(int){a} / (int){b}"),
                BinaryOp::Rem => format!("(int){a} % (int){b}"),
                BinaryOp::And => format!("(int){a} & (int){b}"),
                BinaryOp::Or => format!("(int){a} | (int){b}"),
                BinaryOp::Xor => format!("(int){a} ^ (int){b}"),
                BinaryOp::Shl => format!("(unsigned int)(int){a} << ((int){b} & {mask})"),
                BinaryOp::Shr => format!("(int){a} >> ((int){b} & {mask})"),
                _ => return None,
            };
            format!("(({t})({body}))")
        }
        _ => return None,
    })
}

/// `a * b + c` with one rounding (in f32, then rounded to `ty`).
pub fn fma(ty: Scalar, a: &str, b: &str, c: &str) -> Option<String> {
    if !ty.is_float() {
        return None;
    }
    let e = format!(
        "fmaf({}, {}, {})",
        to_f32(ty, a),
        to_f32(ty, b),
        to_f32(ty, c)
    );
    Some(from_f32(ty, &e))
}

/// Converts `a` of type `from` to `to`.
pub fn cast(from: Scalar, to: Scalar, a: &str) -> String {
    if from == to {
        return a.to_string();
    }
    let t = scalar_type(to);
    if from.is_float() {
        let x = to_f32(from, a);
        return match to {
            Scalar::Bool => format!("({x} != 0.0f)"),
            // cvt.rzi saturates and sends NaN to 0, exactly the IR's rule.
            Scalar::I32 => format!("__float2int_rz({x})"),
            Scalar::U32 => format!("__float2uint_rz({x})"),
            Scalar::I8 => format!("((signed char)ts_clamp_i32(__float2int_rz({x}), -128, 127))"),
            Scalar::U8 => format!("((unsigned char)min(__float2uint_rz({x}), 255u))"),
            Scalar::F32 | Scalar::F16 | Scalar::BF16 => from_f32(to, &x),
        };
    }
    // From an integer or bool.
    match to {
        Scalar::Bool => format!("({a} != 0)"),
        Scalar::F32 => format!("((float){a})"),
        // As the IR does: to f32 first, then to the narrow float.
        Scalar::F16 | Scalar::BF16 => from_f32(to, &format!("((float){a})")),
        _ => format!("(({t}){a})"),
    }
}

/// The bits of `a` (of type `from`) read as `to`, of the same width (the verifier has
/// checked it): the float ↔ int intrinsics, a struct of the same bits between the two
/// halves, a C conversion (two's complement) between integers.
pub fn bitcast(from: Scalar, to: Scalar, a: &str) -> String {
    match (from, to) {
        _ if from == to => a.to_string(),
        (Scalar::F32, Scalar::U32) => format!("__float_as_uint({a})"),
        (Scalar::F32, _) => format!("__float_as_int({a})"),
        (Scalar::U32, Scalar::F32) => format!("__uint_as_float({a})"),
        (_, Scalar::F32) => format!("__int_as_float({a})"),
        (Scalar::F16 | Scalar::BF16, _) => format!("{}{{({a}).bits}}", scalar_type(to)),
        _ => format!("(({}){a})", scalar_type(to)),
    }
}

/// Why a scalar op has no CUDA expression.
fn undefined(op: &str, t: Scalar) -> String {
    format!("`{op}` on {t}")
}

impl ScalarOps for Cuda {
    fn unary(&mut self, op: UnaryOp, t: Scalar, a: &str) -> Result<String, String> {
        unary(op, t, a).ok_or_else(|| undefined(op.name(), t))
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        t: Scalar,
        a: &str,
        b: &str,
        _: Option<i64>,
    ) -> Result<String, String> {
        binary(op, t, a, b).ok_or_else(|| undefined(op.name(), t))
    }

    fn fma(&mut self, t: Scalar, a: &str, b: &str, c: &str) -> Result<String, String> {
        fma(t, a, b, c).ok_or_else(|| undefined("fma", t))
    }

    fn select(c: &str, a: &str, b: &str) -> String {
        format!("({c} ? {a} : {b})")
    }

    fn cast(&mut self, from: Scalar, to: Scalar, a: &str) -> String {
        cast(from, to, a)
    }

    fn bitcast(&mut self, from: Scalar, to: Scalar, a: &str) -> String {
        bitcast(from, to, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitcasts_use_the_reinterpreting_intrinsics() {
        assert_eq!(bitcast(Scalar::U32, Scalar::F32, "a"), "__uint_as_float(a)");
        assert_eq!(bitcast(Scalar::I32, Scalar::F32, "a"), "__int_as_float(a)");
        assert_eq!(bitcast(Scalar::F32, Scalar::U32, "a"), "__float_as_uint(a)");
        assert_eq!(bitcast(Scalar::F32, Scalar::I32, "a"), "__float_as_int(a)");
        assert_eq!(bitcast(Scalar::F16, Scalar::BF16, "a"), "ts_bf16{(a).bits}");
        assert_eq!(bitcast(Scalar::U8, Scalar::I8, "a"), "((signed char)a)");
    }

    #[test]
    fn signed_arithmetic_goes_through_unsigned() {
        assert_eq!(
            binary(BinaryOp::Add, Scalar::I32, "a", "b").unwrap(),
            "((int)((unsigned int)a + (unsigned int)b))"
        );
        assert_eq!(
            binary(BinaryOp::Shl, Scalar::U32, "a", "b").unwrap(),
            "(a << (b & 31u))"
        );
        assert_eq!(
            binary(BinaryOp::Shr, Scalar::I8, "a", "b").unwrap(),
            "((signed char)((int)a >> ((int)b & 7)))"
        );
    }

    #[test]
    fn half_math_runs_in_f32() {
        assert_eq!(
            binary(BinaryOp::Mul, Scalar::BF16, "a", "b").unwrap(),
            "ts_bf16_from_f32((ts_bf16_to_f32(a) * ts_bf16_to_f32(b)))"
        );
        assert_eq!(
            binary(BinaryOp::Lt, Scalar::F16, "a", "b").unwrap(),
            "(ts_f16_to_f32(a) < ts_f16_to_f32(b))"
        );
        assert_eq!(
            binary(BinaryOp::Max, Scalar::F32, "a", "b").unwrap(),
            "fmaxf(a, b)"
        );
    }

    #[test]
    fn casts_saturate_and_round_like_the_ir() {
        assert_eq!(cast(Scalar::F32, Scalar::I32, "x"), "__float2int_rz(x)");
        assert_eq!(
            cast(Scalar::I32, Scalar::F16, "x"),
            "ts_f16_from_f32(((float)x))"
        );
        assert_eq!(
            cast(Scalar::BF16, Scalar::U8, "x"),
            "((unsigned char)min(__float2uint_rz(ts_bf16_to_f32(x)), 255u))"
        );
        assert_eq!(cast(Scalar::U32, Scalar::Bool, "x"), "(x != 0)");
    }

    #[test]
    fn ops_undefined_on_a_type_are_refused() {
        assert!(binary(BinaryOp::Shl, Scalar::F32, "a", "b").is_none());
        assert!(binary(BinaryOp::Pow, Scalar::U32, "a", "b").is_none());
        assert!(unary(UnaryOp::Not, Scalar::F32, "a").is_none());
        assert!(fma(Scalar::I32, "a", "b", "c").is_none());
    }
}
