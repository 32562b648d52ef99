//! MSL expressions for the IR's scalar ops, with the meaning `tessera_ir::ops` gives them:
//! integers wrap (signed ones computed as unsigned), shift amounts are taken modulo the bit
//! width, f16 / bf16 math happens in f32 and is rounded once, float min / max ignore NaN,
//! float → int casts truncate and saturate with NaN → 0.

use super::dialect::Msl;
use super::helpers::Helper;
use super::types::{as_f32, from_f32, scalar};
use crate::c_family::ScalarOps;
use tessera_ir::{BinaryOp, Scalar, UnaryOp};

impl Msl {
    /// A call of helper `h`, which the translation unit then defines.
    fn call(&mut self, h: Helper, name: &str, args: &str) -> String {
        self.helpers.insert(h);
        format!("{name}({args})")
    }
}

impl ScalarOps for Msl {
    /// `op a` on a value of type `t`.
    fn unary(&mut self, op: UnaryOp, t: Scalar, a: &str) -> Result<String, String> {
        let bad = || Err(format!("`{}` is not defined on {t}", op.name()));
        if t.is_float() {
            let x = as_f32(t, a);
            let e = match op {
                UnaryOp::Neg => format!("-{x}"),
                UnaryOp::Abs => format!("fabs({x})"),
                UnaryOp::Exp => format!("exp({x})"),
                UnaryOp::Exp2 => format!("exp2({x})"),
                UnaryOp::Log => format!("log({x})"),
                UnaryOp::Log2 => format!("log2({x})"),
                UnaryOp::Sqrt => format!("sqrt({x})"),
                UnaryOp::Rsqrt => format!("rsqrt({x})"),
                UnaryOp::Recip => format!("1.0f / {x}"),
                UnaryOp::Sin => format!("sin({x})"),
                UnaryOp::Cos => format!("cos({x})"),
                UnaryOp::Tanh => format!("tanh({x})"),
                UnaryOp::Floor => format!("floor({x})"),
                UnaryOp::Ceil => format!("ceil({x})"),
                UnaryOp::IsNan => return Ok(format!("isnan({x})")),
                UnaryOp::IsInf => return Ok(format!("isinf({x})")),
                UnaryOp::Not => return bad(),
            };
            return Ok(from_f32(t, &e));
        }
        let ty = scalar(t);
        Ok(match (op, t) {
            (UnaryOp::Not, Scalar::Bool) => format!("!{a}"),
            (_, Scalar::Bool) => return bad(),
            (UnaryOp::Neg, Scalar::I32) => format!("int(0u - uint({a}))"),
            (UnaryOp::Neg, Scalar::U32) => format!("(0u - {a})"),
            (UnaryOp::Neg, _) => format!("{ty}(-int({a}))"),
            (UnaryOp::Not, Scalar::I32 | Scalar::U32) => format!("~{a}"),
            (UnaryOp::Not, _) => format!("{ty}(~{a})"),
            (UnaryOp::Abs, Scalar::I32) => format!("int({a} < 0 ? 0u - uint({a}) : uint({a}))"),
            (UnaryOp::Abs, Scalar::I8) => format!("char({a} < 0 ? -int({a}) : int({a}))"),
            (UnaryOp::Abs, _) => a.to_string(),
            _ => return bad(),
        })
    }

    /// `a op b`, both of type `t`; `b_const` is `b`'s value when it is a known integer.
    fn binary(
        &mut self,
        op: BinaryOp,
        t: Scalar,
        a: &str,
        b: &str,
        b_const: Option<i64>,
    ) -> Result<String, String> {
        let bad = || Err(format!("`{}` is not defined on {t}", op.name()));
        if let Some(c) = comparison(op) {
            return Ok(if t.is_float() {
                format!("{} {c} {}", as_f32(t, a), as_f32(t, b))
            } else {
                format!("{a} {c} {b}")
            });
        }
        if t.is_float() {
            let (x, y) = (as_f32(t, a), as_f32(t, b));
            let e = match op {
                BinaryOp::Add => format!("{x} + {y}"),
                BinaryOp::Sub => format!("{x} - {y}"),
                BinaryOp::Mul => format!("{x} * {y}"),
                BinaryOp::Div => format!("{x} / {y}"),
                BinaryOp::Rem => format!("fmod({x}, {y})"),
                BinaryOp::Min => format!("fmin({x}, {y})"),
                BinaryOp::Max => format!("fmax({x}, {y})"),
                BinaryOp::Pow => format!("pow({x}, {y})"),
                _ => return bad(),
            };
            return Ok(from_f32(t, &e));
        }
        if t == Scalar::Bool {
            return match op {
                BinaryOp::And => Ok(format!("{a} && {b}")),
                BinaryOp::Or => Ok(format!("{a} || {b}")),
                BinaryOp::Xor => Ok(format!("{a} != {b}")),
                _ => bad(),
            };
        }
        let ty = scalar(t);
        let arith = |sym: &str| match t {
            Scalar::I32 => format!("int(uint({a}) {sym} uint({b}))"),
            Scalar::U32 => format!("{a} {sym} {b}"),
            _ => format!("{ty}({a} {sym} {b})"),
        };
        Ok(match op {
            BinaryOp::Add => arith("+"),
            BinaryOp::Sub => arith("-"),
            BinaryOp::Mul => arith("*"),
            BinaryOp::And => arith("&"),
            BinaryOp::Or => arith("|"),
            BinaryOp::Xor => arith("^"),
            BinaryOp::Min => format!("({a} < {b} ? {a} : {b})"),
            BinaryOp::Max => format!("({a} > {b} ? {a} : {b})"),
            // A known divisor that is neither 0 nor -1 needs no guard.
            BinaryOp::Div | BinaryOp::Rem if b_const.is_some_and(|c| c != 0 && c != -1) => {
                let sym = if op == BinaryOp::Div { "/" } else { "%" };
                match t {
                    Scalar::I32 | Scalar::U32 => format!("{a} {sym} {b}"),
                    _ => format!("{ty}({a} {sym} {b})"),
                }
            }
            BinaryOp::Div | BinaryOp::Rem => {
                let div = op == BinaryOp::Div;
                match t {
                    Scalar::I32 | Scalar::I8 => {
                        let (h, f) = if div {
                            (Helper::DivI32, "tsr_div_i32")
                        } else {
                            (Helper::RemI32, "tsr_rem_i32")
                        };
                        let e = self.call(h, f, &format!("int({a}), int({b})"));
                        if t == Scalar::I32 {
                            e
                        } else {
                            format!("char({e})")
                        }
                    }
                    _ => {
                        let (h, f) = if div {
                            (Helper::DivU32, "tsr_div_u32")
                        } else {
                            (Helper::RemU32, "tsr_rem_u32")
                        };
                        let e = self.call(h, f, &format!("uint({a}), uint({b})"));
                        if t == Scalar::U32 {
                            e
                        } else {
                            format!("uchar({e})")
                        }
                    }
                }
            }
            BinaryOp::Shl => match t {
                Scalar::I32 => format!("int(uint({a}) << (uint({b}) & 31u))"),
                Scalar::U32 => format!("{a} << ({b} & 31u)"),
                _ => format!("{ty}(uint(int({a})) << (uint({b}) & 7u))"),
            },
            BinaryOp::Shr => match t {
                Scalar::I32 => format!("{a} >> ({b} & 31)"),
                Scalar::U32 => format!("{a} >> ({b} & 31u)"),
                Scalar::I8 => format!("char(int({a}) >> (int({b}) & 7))"),
                _ => format!("uchar(uint({a}) >> (uint({b}) & 7u))"),
            },
            BinaryOp::Pow => return bad(),
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge => unreachable!("comparisons are handled above"),
        })
    }

    /// `a * b + c` with one rounding.
    fn fma(&mut self, t: Scalar, a: &str, b: &str, c: &str) -> Result<String, String> {
        if !t.is_float() {
            return Err(format!("`fma` is not defined on {t}"));
        }
        let e = format!("fma({}, {}, {})", as_f32(t, a), as_f32(t, b), as_f32(t, c));
        Ok(from_f32(t, &e))
    }

    fn select(c: &str, a: &str, b: &str) -> String {
        format!("{c} ? {a} : {b}")
    }

    /// Reads the bits of `a` as `to` (same width, checked by the verifier).
    fn bitcast(&mut self, from: Scalar, to: Scalar, a: &str) -> String {
        if from == to {
            return a.to_string();
        }
        format!("as_type<{}>({a})", scalar(to))
    }

    /// Converts `a` from `from` to `to`.
    fn cast(&mut self, from: Scalar, to: Scalar, a: &str) -> String {
        if from == to {
            return a.to_string();
        }
        let ty = scalar(to);
        if from == Scalar::Bool {
            return if to.is_float() {
                from_f32(to, &format!("({a} ? 1.0f : 0.0f)"))
            } else {
                format!("{ty}({a})")
            };
        }
        if to == Scalar::Bool {
            return if from.is_float() {
                format!("({} != 0.0f)", as_f32(from, a))
            } else {
                format!("({a} != 0)")
            };
        }
        match (from.is_float(), to.is_float()) {
            (true, true) => from_f32(to, &as_f32(from, a)),
            (true, false) => {
                let x = as_f32(from, a);
                let (h, f) = match to {
                    Scalar::I32 => (Helper::F2I32, "tsr_f2i32"),
                    Scalar::U32 => (Helper::F2U32, "tsr_f2u32"),
                    Scalar::I8 => (Helper::F2I8, "tsr_f2i8"),
                    _ => (Helper::F2U8, "tsr_f2u8"),
                };
                self.call(h, f, &x)
            }
            (false, true) => from_f32(to, &format!("float({a})")),
            (false, false) => format!("{ty}({a})"),
        }
    }
}

fn comparison(op: BinaryOp) -> Option<&'static str> {
    Some(match op {
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::Ge => ">=",
        _ => return None,
    })
}
