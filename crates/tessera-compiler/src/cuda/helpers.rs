//! Helpers generated on demand for the types a kernel actually uses: aligned vector
//! structs, lane shuffles with the IR's out-of-range rules, and simdgroup reductions and
//! scans as warp-shuffle butterflies over all 32 lanes (`TS_FULL` mask).

use super::names::{scalar_type, vector_align, vector_type};
use super::scalar::{from_f32, to_f32};
use std::fmt::Write;
use tessera_ir::{Scalar, ShuffleKind, SimdOp};

/// One generated helper. The emitter collects them in a sorted set, so output is
/// deterministic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Helper {
    /// `struct ts_f16x8 { ts_f16 e[8]; }`, aligned.
    Vector(Scalar, u8),
    /// A lane exchange; `native` uses `__shfl_up/down_sync` directly (constant delta < 32).
    Shuffle {
        kind: ShuffleKindKey,
        ty: Scalar,
        native: bool,
    },
    /// A simdgroup reduction or scan.
    Simd(SimdOpKey, Scalar),
}

/// [`ShuffleKind`] with an order, for the sorted helper set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ShuffleKindKey(pub u8);

impl ShuffleKindKey {
    pub fn new(k: ShuffleKind) -> Self {
        ShuffleKindKey(ShuffleKind::ALL.iter().position(|&x| x == k).unwrap_or(0) as u8)
    }
    pub fn kind(self) -> ShuffleKind {
        ShuffleKind::ALL[self.0 as usize]
    }
}

/// [`SimdOp`] with an order, for the sorted helper set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SimdOpKey(pub u8);

impl SimdOpKey {
    pub fn new(op: SimdOp) -> Self {
        SimdOpKey(SimdOp::ALL.iter().position(|&x| x == op).unwrap_or(0) as u8)
    }
    pub fn op(self) -> SimdOp {
        SimdOp::ALL[self.0 as usize]
    }
}

/// The name the kernel body calls.
pub fn helper_name(h: Helper) -> String {
    match h {
        Helper::Vector(s, w) => vector_type(s, w),
        Helper::Shuffle { kind, ty, native } => {
            let k = match kind.kind() {
                ShuffleKind::Index => "idx",
                ShuffleKind::Xor => "xor",
                ShuffleKind::Up => "up",
                ShuffleKind::Down => "down",
            };
            let n = if native { "_native" } else { "" };
            format!("ts_shfl_{k}{n}_{}", ty.name())
        }
        Helper::Simd(op, ty) => format!("ts_{}_{}", op.op().name(), ty.name()),
    }
}

/// How a scalar travels through `__shfl_*_sync`: the 32-bit type it is widened to, and
/// the conversions there and back.
fn wire(ty: Scalar) -> (&'static str, String, String) {
    match ty {
        Scalar::F32 => ("float", "v".into(), "w".into()),
        Scalar::I32 => ("int", "v".into(), "w".into()),
        Scalar::U32 => ("unsigned int", "v".into(), "w".into()),
        Scalar::Bool => ("int", "(int)v".into(), "(w != 0)".into()),
        Scalar::I8 | Scalar::U8 => ("int", "(int)v".into(), format!("(({})w)", scalar_type(ty))),
        Scalar::F16 | Scalar::BF16 => (
            "unsigned int",
            "(unsigned int)v.bits".into(),
            format!("{}{{(unsigned short)w}}", scalar_type(ty)),
        ),
    }
}

/// Writes the definition of `h` to `out`.
pub fn define(h: Helper, out: &mut String) {
    let name = helper_name(h);
    match h {
        Helper::Vector(s, w) => {
            let _ = writeln!(
                out,
                "struct __attribute__((aligned({}))) {name} {{ {} e[{w}]; }};",
                vector_align(s, w),
                scalar_type(s)
            );
        }
        Helper::Shuffle { kind, ty, native } => {
            let t = scalar_type(ty);
            let (wt, to_w, from_w) = wire(ty);
            let call = match (kind.kind(), native) {
                (ShuffleKind::Index, _) => "__shfl_sync(TS_FULL, w, a)".to_string(),
                (ShuffleKind::Xor, _) => "__shfl_xor_sync(TS_FULL, w, a)".to_string(),
                (ShuffleKind::Up, true) => "__shfl_up_sync(TS_FULL, w, a)".to_string(),
                (ShuffleKind::Down, true) => "__shfl_down_sync(TS_FULL, w, a)".to_string(),
                // Exact for every delta: lanes whose source is out of range keep their value.
                (ShuffleKind::Up, false) => {
                    "__shfl_sync(TS_FULL, w, a <= lane ? lane - a : lane)".to_string()
                }
                (ShuffleKind::Down, false) => {
                    "__shfl_sync(TS_FULL, w, a < 32u - lane ? lane + a : lane)".to_string()
                }
            };
            let lane = if matches!(kind.kind(), ShuffleKind::Up | ShuffleKind::Down) && !native {
                "  const unsigned int lane = threadIdx.x & 31u;\n"
            } else {
                ""
            };
            let _ = write!(
                out,
                "static __device__ __forceinline__ {t} {name}({t} v, unsigned int a) {{\n\
                 {lane}  {wt} w = {to_w};\n  w = {call};\n  return {from_w};\n}}\n"
            );
        }
        Helper::Simd(op, ty) => define_simd(&name, op.op(), ty, out),
    }
}

fn define_simd(name: &str, op: SimdOp, ty: Scalar, out: &mut String) {
    let t = scalar_type(ty);
    let _ = writeln!(
        out,
        "static __device__ __forceinline__ {t} {name}({t} v) {{"
    );
    if ty == Scalar::Bool {
        let e = match op {
            SimdOp::And | SimdOp::All => "__all_sync(TS_FULL, v) != 0",
            SimdOp::Or | SimdOp::Any => "__any_sync(TS_FULL, v) != 0",
            _ => "(__popc(__ballot_sync(TS_FULL, v)) & 1) != 0",
        };
        let _ = writeln!(out, "  return {e};\n}}");
        return;
    }
    // Work type, conversions and the combining expression.
    let (wt, into, outof): (&str, String, String) = if ty.is_float() {
        ("float", to_f32(ty, "v"), from_f32(ty, "x"))
    } else {
        let signed_order = ty.is_signed_int() && matches!(op, SimdOp::Max | SimdOp::Min);
        if signed_order {
            ("int", "(int)v".into(), format!("(({t})x)"))
        } else {
            // Sums, products and bit ops wrap: compute modulo 2^32, then narrow.
            (
                "unsigned int",
                "(unsigned int)v".into(),
                format!("(({t})x)"),
            )
        }
    };
    let combine = |a: &str, b: &str| -> String {
        match (op, ty.is_float()) {
            (SimdOp::Sum | SimdOp::PrefixSum | SimdOp::PrefixExclusiveSum, _) => {
                format!("{a} + {b}")
            }
            (SimdOp::Prod, _) => format!("{a} * {b}"),
            (SimdOp::Max, true) => format!("fmaxf({a}, {b})"),
            (SimdOp::Min, true) => format!("fminf({a}, {b})"),
            (SimdOp::Max, false) => format!("({a} > {b} ? {a} : {b})"),
            (SimdOp::Min, false) => format!("({a} < {b} ? {a} : {b})"),
            (SimdOp::And, _) => format!("{a} & {b}"),
            (SimdOp::Or, _) => format!("{a} | {b}"),
            (SimdOp::Xor, _) => format!("{a} ^ {b}"),
            (SimdOp::All | SimdOp::Any, _) => format!("{a} & {b}"),
        }
    };
    let _ = writeln!(out, "  {wt} x = {into};");
    match op {
        SimdOp::PrefixSum | SimdOp::PrefixExclusiveSum => {
            let _ = writeln!(out, "  const unsigned int lane = threadIdx.x & 31u;");
            let _ = writeln!(
                out,
                "  #pragma unroll\n  for (unsigned int d = 1u; d < 32u; d <<= 1) {{"
            );
            let _ = writeln!(out, "    {wt} t = __shfl_up_sync(TS_FULL, x, d);");
            let _ = writeln!(out, "    if (lane >= d) x = {};", combine("x", "t"));
            let _ = writeln!(out, "  }}");
            if op == SimdOp::PrefixExclusiveSum {
                let _ = writeln!(out, "  {wt} p = __shfl_up_sync(TS_FULL, x, 1u);");
                let zero = if ty.is_float() { "0.0f" } else { "0u" };
                let _ = writeln!(out, "  x = lane == 0u ? {zero} : p;");
            }
        }
        _ => {
            let _ = writeln!(
                out,
                "  #pragma unroll\n  for (int m = 16; m > 0; m >>= 1) {{"
            );
            let _ = writeln!(out, "    {wt} t = __shfl_xor_sync(TS_FULL, x, m);");
            let _ = writeln!(out, "    x = {};", combine("x", "t"));
            let _ = writeln!(out, "  }}");
        }
    }
    let _ = writeln!(out, "  return {outof};\n}}");
}
