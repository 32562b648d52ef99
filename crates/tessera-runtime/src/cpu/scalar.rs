//! Per-lane scalar semantics on 32-bit register patterns, bit-for-bit equal to
//! `tessera_ir::eval`: fast closures for the common (op, type) pairs, `eval` itself for
//! the rest. The dispatch macros pick a closure once per instruction so the lane loop is
//! monomorphised.

use half::{bf16, f16};
use tessera_ir::{eval, BinaryOp, Literal, Scalar, UnaryOp};

#[inline(always)]
pub(crate) fn f32d(x: u32) -> f32 {
    f32::from_bits(x)
}
#[inline(always)]
pub(crate) fn f32e(x: f32) -> u32 {
    x.to_bits()
}
#[inline(always)]
pub(crate) fn f16d(x: u32) -> f32 {
    f16::from_bits(x as u16).to_f32()
}
#[inline(always)]
pub(crate) fn f16e(x: f32) -> u32 {
    f16::from_f32(x).to_bits() as u32
}
#[inline(always)]
pub(crate) fn bf16d(x: u32) -> f32 {
    bf16::from_bits(x as u16).to_f32()
}
#[inline(always)]
pub(crate) fn bf16e(x: f32) -> u32 {
    bf16::from_f32(x).to_bits() as u32
}

/// `eval::binary` on register patterns (the caller has checked the op is defined and,
/// for integer division, that the divisor is not zero).
pub(crate) fn slow_binary(op: BinaryOp, ty: Scalar, x: u32, y: u32) -> u32 {
    eval::binary(op, Literal::from_bits(ty, x), Literal::from_bits(ty, y))
        .map(Literal::to_bits)
        .unwrap_or(0)
}

/// `eval::unary` on register patterns.
pub(crate) fn slow_unary(op: UnaryOp, ty: Scalar, x: u32) -> u32 {
    eval::unary(op, Literal::from_bits(ty, x))
        .map(Literal::to_bits)
        .unwrap_or(0)
}

/// `eval::cast` on register patterns.
pub(crate) fn slow_cast(from: Scalar, to: Scalar, x: u32) -> u32 {
    eval::cast(Literal::from_bits(from, x), to).to_bits()
}

/// True if the unary op is defined on `ty`.
pub(crate) fn unary_defined(op: UnaryOp, ty: Scalar) -> bool {
    match op {
        UnaryOp::Not => ty.is_int() || ty == Scalar::Bool,
        UnaryOp::Neg | UnaryOp::Abs => ty.is_numeric(),
        _ => ty.is_float(),
    }
}

/// Binds `$f` to a `Fn(u32, u32) -> u32` computing `op` on `ty` and evaluates `$body`.
/// Integer `Div`/`Rem` must be handled by the caller (division by zero is an error).
macro_rules! with_binary {
    ($op:expr, $ty:expr, $f:ident => $body:expr) => {{
        use tessera_ir::{BinaryOp as B, Scalar as S};
        use $crate::cpu::scalar::*;
        let op: B = $op;
        let ty: S = $ty;
        macro_rules! float_arms {
            ($d:ident, $e:ident) => {
                match op {
                    B::Add => {
                        let $f = |x: u32, y: u32| $e($d(x) + $d(y));
                        $body
                    }
                    B::Sub => {
                        let $f = |x: u32, y: u32| $e($d(x) - $d(y));
                        $body
                    }
                    B::Mul => {
                        let $f = |x: u32, y: u32| $e($d(x) * $d(y));
                        $body
                    }
                    B::Div => {
                        let $f = |x: u32, y: u32| $e($d(x) / $d(y));
                        $body
                    }
                    B::Min => {
                        let $f = |x: u32, y: u32| $e($d(x).min($d(y)));
                        $body
                    }
                    B::Max => {
                        let $f = |x: u32, y: u32| $e($d(x).max($d(y)));
                        $body
                    }
                    B::Lt => {
                        let $f = |x: u32, y: u32| ($d(x) < $d(y)) as u32;
                        $body
                    }
                    B::Le => {
                        let $f = |x: u32, y: u32| ($d(x) <= $d(y)) as u32;
                        $body
                    }
                    B::Gt => {
                        let $f = |x: u32, y: u32| ($d(x) > $d(y)) as u32;
                        $body
                    }
                    B::Ge => {
                        let $f = |x: u32, y: u32| ($d(x) >= $d(y)) as u32;
                        $body
                    }
                    B::Eq => {
                        let $f = |x: u32, y: u32| ($d(x) == $d(y)) as u32;
                        $body
                    }
                    B::Ne => {
                        let $f = |x: u32, y: u32| ($d(x) != $d(y)) as u32;
                        $body
                    }
                    _ => {
                        let $f = move |x: u32, y: u32| slow_binary(op, ty, x, y);
                        $body
                    }
                }
            };
        }
        match ty {
            S::F32 => float_arms!(f32d, f32e),
            S::F16 => float_arms!(f16d, f16e),
            S::BF16 => float_arms!(bf16d, bf16e),
            S::U32 | S::I32 => {
                let signed = ty == S::I32;
                match op {
                    B::Add => {
                        let $f = |x: u32, y: u32| x.wrapping_add(y);
                        $body
                    }
                    B::Sub => {
                        let $f = |x: u32, y: u32| x.wrapping_sub(y);
                        $body
                    }
                    B::Mul => {
                        let $f = |x: u32, y: u32| x.wrapping_mul(y);
                        $body
                    }
                    B::And => {
                        let $f = |x: u32, y: u32| x & y;
                        $body
                    }
                    B::Or => {
                        let $f = |x: u32, y: u32| x | y;
                        $body
                    }
                    B::Xor => {
                        let $f = |x: u32, y: u32| x ^ y;
                        $body
                    }
                    B::Shl => {
                        let $f = |x: u32, y: u32| x.wrapping_shl(y);
                        $body
                    }
                    B::Eq => {
                        let $f = |x: u32, y: u32| (x == y) as u32;
                        $body
                    }
                    B::Ne => {
                        let $f = |x: u32, y: u32| (x != y) as u32;
                        $body
                    }
                    B::Shr if signed => {
                        let $f = |x: u32, y: u32| (x as i32).wrapping_shr(y) as u32;
                        $body
                    }
                    B::Shr => {
                        let $f = |x: u32, y: u32| x.wrapping_shr(y);
                        $body
                    }
                    B::Min if signed => {
                        let $f = |x: u32, y: u32| (x as i32).min(y as i32) as u32;
                        $body
                    }
                    B::Max if signed => {
                        let $f = |x: u32, y: u32| (x as i32).max(y as i32) as u32;
                        $body
                    }
                    B::Lt if signed => {
                        let $f = |x: u32, y: u32| ((x as i32) < (y as i32)) as u32;
                        $body
                    }
                    B::Le if signed => {
                        let $f = |x: u32, y: u32| ((x as i32) <= (y as i32)) as u32;
                        $body
                    }
                    B::Gt if signed => {
                        let $f = |x: u32, y: u32| ((x as i32) > (y as i32)) as u32;
                        $body
                    }
                    B::Ge if signed => {
                        let $f = |x: u32, y: u32| ((x as i32) >= (y as i32)) as u32;
                        $body
                    }
                    B::Min => {
                        let $f = |x: u32, y: u32| x.min(y);
                        $body
                    }
                    B::Max => {
                        let $f = |x: u32, y: u32| x.max(y);
                        $body
                    }
                    B::Lt => {
                        let $f = |x: u32, y: u32| (x < y) as u32;
                        $body
                    }
                    B::Le => {
                        let $f = |x: u32, y: u32| (x <= y) as u32;
                        $body
                    }
                    B::Gt => {
                        let $f = |x: u32, y: u32| (x > y) as u32;
                        $body
                    }
                    B::Ge => {
                        let $f = |x: u32, y: u32| (x >= y) as u32;
                        $body
                    }
                    _ => {
                        let $f = move |x: u32, y: u32| slow_binary(op, ty, x, y);
                        $body
                    }
                }
            }
            S::Bool => match op {
                B::And => {
                    let $f = |x: u32, y: u32| x & y;
                    $body
                }
                B::Or => {
                    let $f = |x: u32, y: u32| x | y;
                    $body
                }
                B::Xor | B::Ne => {
                    let $f = |x: u32, y: u32| x ^ y;
                    $body
                }
                B::Eq => {
                    let $f = |x: u32, y: u32| (x == y) as u32;
                    $body
                }
                _ => {
                    let $f = move |x: u32, y: u32| slow_binary(op, ty, x, y);
                    $body
                }
            },
            _ => {
                let $f = move |x: u32, y: u32| slow_binary(op, ty, x, y);
                $body
            }
        }
    }};
}
pub(crate) use with_binary;

/// Binds `$f` to a `Fn(u32) -> u32` computing `op` on `ty` and evaluates `$body`.
macro_rules! with_unary {
    ($op:expr, $ty:expr, $f:ident => $body:expr) => {{
        use tessera_ir::{Scalar as S, UnaryOp as U};
        use $crate::cpu::scalar::*;
        let op: U = $op;
        let ty: S = $ty;
        macro_rules! float_arms {
            ($d:ident, $e:ident) => {
                match op {
                    U::Neg => {
                        let $f = |x: u32| $e(-$d(x));
                        $body
                    }
                    U::Abs => {
                        let $f = |x: u32| $e($d(x).abs());
                        $body
                    }
                    U::Exp => {
                        let $f = |x: u32| $e($d(x).exp());
                        $body
                    }
                    U::Exp2 => {
                        let $f = |x: u32| $e($d(x).exp2());
                        $body
                    }
                    U::Log => {
                        let $f = |x: u32| $e($d(x).ln());
                        $body
                    }
                    U::Log2 => {
                        let $f = |x: u32| $e($d(x).log2());
                        $body
                    }
                    U::Sqrt => {
                        let $f = |x: u32| $e($d(x).sqrt());
                        $body
                    }
                    U::Rsqrt => {
                        let $f = |x: u32| $e(1.0 / $d(x).sqrt());
                        $body
                    }
                    U::Recip => {
                        let $f = |x: u32| $e(1.0 / $d(x));
                        $body
                    }
                    U::Sin => {
                        let $f = |x: u32| $e($d(x).sin());
                        $body
                    }
                    U::Cos => {
                        let $f = |x: u32| $e($d(x).cos());
                        $body
                    }
                    U::Tanh => {
                        let $f = |x: u32| $e($d(x).tanh());
                        $body
                    }
                    U::Floor => {
                        let $f = |x: u32| $e($d(x).floor());
                        $body
                    }
                    U::Ceil => {
                        let $f = |x: u32| $e($d(x).ceil());
                        $body
                    }
                    U::IsNan => {
                        let $f = |x: u32| $d(x).is_nan() as u32;
                        $body
                    }
                    U::IsInf => {
                        let $f = |x: u32| $d(x).is_infinite() as u32;
                        $body
                    }
                    U::Not => {
                        let $f = move |x: u32| slow_unary(op, ty, x);
                        $body
                    }
                }
            };
        }
        match ty {
            S::F32 => float_arms!(f32d, f32e),
            S::F16 => float_arms!(f16d, f16e),
            S::BF16 => float_arms!(bf16d, bf16e),
            S::I32 | S::U32 => match op {
                U::Neg => {
                    let $f = |x: u32| x.wrapping_neg();
                    $body
                }
                U::Not => {
                    let $f = |x: u32| !x;
                    $body
                }
                U::Abs if ty == S::I32 => {
                    let $f = |x: u32| (x as i32).wrapping_abs() as u32;
                    $body
                }
                U::Abs => {
                    let $f = |x: u32| x;
                    $body
                }
                _ => {
                    let $f = move |x: u32| slow_unary(op, ty, x);
                    $body
                }
            },
            S::Bool if op == U::Not => {
                let $f = |x: u32| x ^ 1;
                $body
            }
            _ => {
                let $f = move |x: u32| slow_unary(op, ty, x);
                $body
            }
        }
    }};
}
pub(crate) use with_unary;

/// Binds `$f` to a `Fn(u32) -> u32` converting `from` to `to` and evaluates `$body`.
macro_rules! with_cast {
    ($from:expr, $to:expr, $f:ident => $body:expr) => {{
        use tessera_ir::Scalar as S;
        use $crate::cpu::scalar::*;
        let from: S = $from;
        let to: S = $to;
        match (from, to) {
            (S::F32, S::I32) => {
                let $f = |x: u32| f32d(x) as i32 as u32;
                $body
            }
            (S::F32, S::U32) => {
                let $f = |x: u32| f32d(x) as u32;
                $body
            }
            (S::I32, S::F32) => {
                let $f = |x: u32| f32e(x as i32 as f32);
                $body
            }
            (S::U32, S::F32) => {
                let $f = |x: u32| f32e(x as f32);
                $body
            }
            (S::F16, S::F32) => {
                let $f = |x: u32| f32e(f16d(x));
                $body
            }
            (S::BF16, S::F32) => {
                let $f = |x: u32| f32e(bf16d(x));
                $body
            }
            (S::F32, S::F16) => {
                let $f = |x: u32| f16e(f32d(x));
                $body
            }
            (S::F32, S::BF16) => {
                let $f = |x: u32| bf16e(f32d(x));
                $body
            }
            (S::U32, S::I32) | (S::I32, S::U32) => {
                let $f = |x: u32| x;
                $body
            }
            _ => {
                let $f = move |x: u32| slow_cast(from, to, x);
                $body
            }
        }
    }};
}
pub(crate) use with_cast;

/// Binds `$f` to a `Fn(u32, u32, u32) -> u32` computing `a * b + c` with one rounding.
macro_rules! with_fma {
    ($ty:expr, $f:ident => $body:expr) => {{
        use tessera_ir::Scalar as S;
        use $crate::cpu::scalar::*;
        match $ty {
            S::F16 => {
                let $f = |a: u32, b: u32, c: u32| f16e(f16d(a).mul_add(f16d(b), f16d(c)));
                $body
            }
            S::BF16 => {
                let $f = |a: u32, b: u32, c: u32| bf16e(bf16d(a).mul_add(bf16d(b), bf16d(c)));
                $body
            }
            _ => {
                let $f = |a: u32, b: u32, c: u32| f32e(f32d(a).mul_add(f32d(b), f32d(c)));
                $body
            }
        }
    }};
}
pub(crate) use with_fma;
