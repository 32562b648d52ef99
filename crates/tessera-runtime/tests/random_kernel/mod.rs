//! A seeded generator of random, valid and *safe* kernels for differential testing across
//! backends, built on the IR builder (no proc-macro).
//!
//! Every kernel it builds passes the verifier and runs without a sanitizer error on any
//! input: indices are masked into bounds, integer divisors are forced odd (never zero),
//! threadgroup memory is written by every thread before a barrier and read after it,
//! collectives sit only under conditions uniform enough for them. What it covers:
//! arithmetic on u32 / i32 / f32 and on f16 / bf16 values made by casts, casts between
//! all of them, bitcasts between those of one width, comparisons and `select`, `fma`,
//! `if` / `else` with yielded values, `for` loops with constant, uniform-runtime and per-thread bounds and carried values, stack
//! arrays, threadgroup exchanges with barriers, simdgroup shuffles, reductions and scans,
//! threadgroup reductions, and 16×16 matrix fragments (fill, load, multiply-accumulate,
//! scale, store).
//!
//! Values fall in two classes. *Exact* values are defined to the bit by the IR's semantics
//! (integer ops, float add / sub / mul / fma / min / max / abs / neg / floor / ceil,
//! casts, select, shuffles, and reductions whose operands are small integers so that the
//! order of combination cannot matter); only they feed further ops, and they are stored
//! to outputs compared bit for bit. *Approximate* values (float division, square roots
//! and the transcendental functions) are stored to a separate f32 output as soon as they
//! are computed, each slot with the ULP bound of its op ([`ulp_bound`]), and never feed
//! anything else, so one ULP of difference cannot snowball into a different branch.
#![allow(dead_code)]

use tessera_ir::half::{bf16, f16};
use tessera_ir::{
    BinaryOp, Builder, Builtin, FragRole, Kernel, Literal, Mem, ReduceOp, Scalar, ShuffleKind,
    SimdOp, UnaryOp, Value,
};

/// Threads per threadgroup and threadgroups per launch.
pub const GROUP: u32 = 64;
pub const GROUPS: u32 = 2;
pub const THREADS: usize = (GROUP * GROUPS) as usize;
/// Elements per input tensor (a power of two: indices are masked with `N_IN - 1`).
pub const N_IN: usize = 512;
/// Output slots per thread in each exact output, and in the approximate output.
pub const SLOTS: u32 = 24;
pub const APPROX_SLOTS: u32 = 8;
/// Simdgroups per launch, and f32 elements each may store through a fragment.
pub const SIMDGROUPS: usize = THREADS / 32;
pub const FRAG_ELEMS: usize = 256;

/// The element types of the inputs and exact outputs, in parameter order.
pub const TYPES: [Scalar; 5] = [
    Scalar::U32,
    Scalar::I32,
    Scalar::F32,
    Scalar::F16,
    Scalar::BF16,
];

/// SplitMix64: small, seedable.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u32) -> u32 {
        (self.next() % n.max(1) as u64) as u32
    }
    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u32) as usize]
    }
    /// Mostly moderate values, with NaN, infinities, signed zeros, huge, tiny and
    /// subnormal values mixed in.
    pub fn f32(&mut self) -> f32 {
        match self.below(60) {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => -0.0,
            4 => 0.0,
            5 => 1e30,
            6 => -3e9,
            7 => 1e-40,
            8 => 70000.0,
            9 => (self.next() >> 32) as u32 as f32,
            _ => (self.below(20_000) as f32 - 10_000.0) / 997.0,
        }
    }
}

/// The ULP bound an approximate op is checked against, in f32 ULPs. These are the
/// bounds the backends promise: CUDA's documented maximum errors for the single-precision
/// functions (without fast math) and the Metal Shading Language's precise-math bounds,
/// whichever is larger, so a conforming GPU passes; the CPU and metal-emu, which both use
/// the host's libm, normally agree exactly.
pub fn ulp_bound(op: ApproxOp) -> u32 {
    match op {
        ApproxOp::Div => 3,                  // CUDA 0 (IEEE division), Metal 2.5
        ApproxOp::Sqrt => 3,                 // CUDA 0, Metal ≤ 3
        ApproxOp::Rsqrt => 2,                // CUDA 2, Metal 2
        ApproxOp::Recip => 3,                // CUDA 0 (1/x), Metal 2.5 (division)
        ApproxOp::Exp | ApproxOp::Exp2 => 4, // CUDA 2, Metal 4
        ApproxOp::Log | ApproxOp::Log2 => 4, // CUDA 1, Metal 4
        ApproxOp::Sin | ApproxOp::Cos => 4,  // CUDA 2, Metal 4 (in range)
        ApproxOp::Tanh => 4,                 // CUDA 2, Metal 4
    }
}

/// The float ops whose results are not defined to the bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApproxOp {
    Div,
    Sqrt,
    Rsqrt,
    Recip,
    Exp,
    Exp2,
    Log,
    Log2,
    Sin,
    Cos,
    Tanh,
}

const APPROX_OPS: [ApproxOp; 11] = [
    ApproxOp::Div,
    ApproxOp::Sqrt,
    ApproxOp::Rsqrt,
    ApproxOp::Recip,
    ApproxOp::Exp,
    ApproxOp::Exp2,
    ApproxOp::Log,
    ApproxOp::Log2,
    ApproxOp::Sin,
    ApproxOp::Cos,
    ApproxOp::Tanh,
];

/// How far a value is known to agree across threads (never over-estimated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Varying,
    Simd,
    Group,
}

#[derive(Clone, Copy, Debug)]
struct Var {
    v: Value,
    ty: Scalar,
    level: Level,
}

/// A generated kernel and what its outputs mean.
pub struct Case {
    pub kernel: Kernel,
    /// The op of each used slot of the approximate output.
    pub approx: Vec<ApproxOp>,
    /// The kernel stores matrix fragments to `frag_out`.
    pub uses_fragments: bool,
}

struct Gen<'r> {
    rng: &'r mut Rng,
    b: Builder,
    pool: Vec<Var>,
    /// Uniformity of the enclosing conditions and loop bounds.
    ctrl: Level,
    depth: u32,
    budget: u32,
    inputs: Vec<Mem>,
    frag_in: Mem,
    outputs: Vec<Mem>,
    approx_out: Mem,
    frag_out: Mem,
    slot: [u32; 5],
    approx: Vec<ApproxOp>,
    arrays: u32,
    frags: u32,
}

fn lit(ty: Scalar, rng: &mut Rng) -> Literal {
    match ty {
        Scalar::U32 => Literal::U32(rng.pick(&[0, 1, 2, 3, 7, 31, 32, 33, 255, 65535, u32::MAX])),
        Scalar::I32 => Literal::I32(rng.pick(&[0, 1, -1, 2, -7, 100, i32::MAX, i32::MIN])),
        Scalar::F32 => {
            Literal::F32(rng.pick(&[0.0, 1.0, -1.0, 0.5, -0.0, 3.25, 1e20, f32::INFINITY]))
        }
        Scalar::F16 => Literal::F16(f16::from_f32(rng.pick(&[0.0, 1.0, -2.0, 0.25, 65504.0]))),
        Scalar::BF16 => Literal::BF16(bf16::from_f32(rng.pick(&[0.0, 1.0, -2.0, 0.125, 3e38]))),
        Scalar::Bool => Literal::Bool(rng.chance(50)),
        other => Literal::zero(other),
    }
}

impl Gen<'_> {
    fn push(&mut self, v: Value, ty: Scalar, level: Level) -> Var {
        let var = Var { v, ty, level };
        self.pool.push(var);
        var
    }

    fn constant(&mut self, ty: Scalar) -> Var {
        let l = lit(ty, self.rng);
        Var {
            v: self.b.lit(l),
            ty,
            level: Level::Group,
        }
    }

    fn any_of(&mut self, ty: Scalar) -> Var {
        let vs: Vec<Var> = self.pool.iter().copied().filter(|v| v.ty == ty).collect();
        if vs.is_empty() || self.rng.chance(8) {
            return self.constant(ty);
        }
        // Prefer recent values so chains of ops form.
        let n = vs.len() as u32;
        let k = if self.rng.chance(60) {
            n - 1 - self.rng.below(n.min(4))
        } else {
            self.rng.below(n)
        };
        vs[k as usize]
    }

    fn cond(&mut self) -> Var {
        let ty = self.rng.pick(&TYPES);
        let a = self.any_of(ty);
        let c = self.any_of(ty);
        let op = self.rng.pick(&[
            BinaryOp::Lt,
            BinaryOp::Le,
            BinaryOp::Eq,
            BinaryOp::Ne,
            BinaryOp::Gt,
            BinaryOp::Ge,
        ]);
        let v = self.b.binary(op, a.v, c.v).expect("comparison");
        let mut r = Var {
            v,
            ty: Scalar::Bool,
            level: a.level.min(c.level),
        };
        if self.rng.chance(20) {
            let other = self.cond();
            let op = self.rng.pick(&[BinaryOp::And, BinaryOp::Or, BinaryOp::Xor]);
            r.v = self.b.binary(op, r.v, other.v).expect("logic");
            r.level = r.level.min(other.level);
        }
        if self.rng.chance(10) {
            r.v = self.b.unary(UnaryOp::Not, r.v).expect("not");
        }
        r
    }

    fn cond_at(&mut self, at_least: Level) -> Var {
        for _ in 0..8 {
            let c = self.cond();
            if c.level >= at_least {
                return c;
            }
        }
        let g = self.b.builtin(Builtin::GroupIdX);
        let k = self.b.lit(Literal::U32(self.rng.below(2)));
        let v = self.b.binary(BinaryOp::Eq, g, k).expect("eq");
        Var {
            v,
            ty: Scalar::Bool,
            level: Level::Group,
        }
    }

    fn arith(&mut self) {
        let ty = self.rng.pick(&TYPES);
        let a = self.any_of(ty);
        let c = self.any_of(ty);
        let level = a.level.min(c.level);
        let float = ty.is_float();
        let r = match self.rng.below(12) {
            0..=4 => {
                let ops: &[BinaryOp] = if float {
                    &[
                        BinaryOp::Add,
                        BinaryOp::Sub,
                        BinaryOp::Mul,
                        BinaryOp::Min,
                        BinaryOp::Max,
                    ]
                } else {
                    &[
                        BinaryOp::Add,
                        BinaryOp::Sub,
                        BinaryOp::Mul,
                        BinaryOp::Min,
                        BinaryOp::Max,
                        BinaryOp::And,
                        BinaryOp::Or,
                        BinaryOp::Xor,
                        BinaryOp::Shl,
                        BinaryOp::Shr,
                    ]
                };
                let op = self.rng.pick(ops);
                self.b.binary(op, a.v, c.v).expect("binary")
            }
            5 if !float => {
                // An odd divisor is never zero (i32::MIN / -1 wraps, by the IR's rule).
                let d = self.b.binary(BinaryOp::Or, c.v, Value::Int(1)).expect("or");
                let op = self.rng.pick(&[BinaryOp::Div, BinaryOp::Rem]);
                self.b.binary(op, a.v, d).expect("div")
            }
            5 => {
                let e = self.any_of(ty);
                let r = self.b.fma(a.v, c.v, e.v).expect("fma");
                self.push(r, ty, level.min(e.level));
                return;
            }
            6 if float => {
                let op =
                    self.rng
                        .pick(&[UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Floor, UnaryOp::Ceil]);
                self.b.unary(op, a.v).expect("unary")
            }
            6 => {
                let op = self.rng.pick(&[UnaryOp::Neg, UnaryOp::Not, UnaryOp::Abs]);
                self.b.unary(op, a.v).expect("unary")
            }
            7 => {
                let cnd = self.cond();
                let r = self.b.select(cnd.v, a.v, c.v).expect("select");
                self.push(r, ty, level.min(cnd.level));
                return;
            }
            8 if float => {
                // is_nan / is_inf feed a select, so the bool has a use.
                let op = self.rng.pick(&[UnaryOp::IsNan, UnaryOp::IsInf]);
                let p = self.b.unary(op, a.v).expect("is_nan");
                let r = self.b.select(p, c.v, a.v).expect("select");
                self.push(r, ty, level);
                return;
            }
            9 => {
                self.approximate();
                return;
            }
            10 => {
                self.bitcast(a);
                return;
            }
            _ => {
                let to = self.rng.pick(&TYPES);
                let r = self.b.cast(a.v, to).expect("cast");
                self.push(r, to, a.level);
                return;
            }
        };
        self.push(r, ty, level);
    }

    /// `a`'s bits read as another type of its width. A float's NaN becomes zero first: the
    /// backends may give a computed NaN different payloads, which a bitcast would expose.
    fn bitcast(&mut self, a: Var) {
        let partners: Vec<Scalar> = TYPES
            .into_iter()
            .filter(|t| *t != a.ty && t.size_bytes() == a.ty.size_bytes())
            .collect();
        let to = self.rng.pick(&partners);
        let mut v = a.v;
        if a.ty.is_float() {
            let nan = self.b.unary(UnaryOp::IsNan, v).expect("is_nan");
            v = self.b.select(nan, Value::Float(0.0), v).expect("select");
        }
        let r = self.b.bitcast(v, to).expect("bitcast");
        self.push(r, to, a.level);
    }

    /// An approximate op on an f32 value, stored at once to its own slot.
    fn approximate(&mut self) {
        let slot = self.approx.len() as u32;
        if slot >= APPROX_SLOTS {
            return;
        }
        let op = self.rng.pick(&APPROX_OPS);
        let a = self.any_of(Scalar::F32);
        let r = match op {
            ApproxOp::Div => {
                let c = self.any_of(Scalar::F32);
                self.b.binary(BinaryOp::Div, a.v, c.v)
            }
            ApproxOp::Sqrt => self.b.unary(UnaryOp::Sqrt, a.v),
            ApproxOp::Rsqrt => self.b.unary(UnaryOp::Rsqrt, a.v),
            ApproxOp::Recip => self.b.unary(UnaryOp::Recip, a.v),
            ApproxOp::Exp => self.b.unary(UnaryOp::Exp, a.v),
            ApproxOp::Exp2 => self.b.unary(UnaryOp::Exp2, a.v),
            ApproxOp::Log => self.b.unary(UnaryOp::Log, a.v),
            ApproxOp::Log2 => self.b.unary(UnaryOp::Log2, a.v),
            ApproxOp::Sin => self.b.unary(UnaryOp::Sin, a.v),
            ApproxOp::Cos => self.b.unary(UnaryOp::Cos, a.v),
            ApproxOp::Tanh => self.b.unary(UnaryOp::Tanh, a.v),
        }
        .expect("approximate op");
        self.approx.push(op);
        let i = self.thread_slot(APPROX_SLOTS, slot);
        let out = self.approx_out;
        self.b.store(out, i, r).expect("store");
    }

    /// `global_id * slots + slot`.
    fn thread_slot(&mut self, slots: u32, slot: u32) -> Value {
        let g = self.b.builtin(Builtin::GlobalId);
        let base = self
            .b
            .binary(BinaryOp::Mul, g, Value::Int(slots as i64))
            .expect("mul");
        self.b
            .binary(BinaryOp::Add, base, Value::Int(slot as i64))
            .expect("add")
    }

    fn masked_index(&mut self) -> Value {
        if self.rng.chance(40) {
            let g = self.b.builtin(Builtin::GlobalId);
            let k = self.rng.below(4) as i64;
            let i = self.b.binary(BinaryOp::Mul, g, Value::Int(4)).expect("mul");
            return self.b.binary(BinaryOp::Add, i, Value::Int(k)).expect("add");
        }
        let x = self.any_of(Scalar::U32);
        self.b
            .binary(BinaryOp::And, x.v, Value::Int(N_IN as i64 - 1))
            .expect("and")
    }

    fn load(&mut self) {
        let k = self.rng.below(self.inputs.len() as u32) as usize;
        let m = self.inputs[k];
        let i = self.masked_index();
        let v = self.b.load(m, i).expect("load");
        self.push(v, m.elem, Level::Varying);
    }

    fn store_out(&mut self) {
        let ty = self.rng.pick(&TYPES);
        let v = self.any_of(ty);
        self.store_var(v);
    }

    fn store_var(&mut self, v: Var) {
        let Some(t) = TYPES.iter().position(|&t| t == v.ty) else {
            return;
        };
        if self.slot[t] >= SLOTS {
            return;
        }
        let i = self.thread_slot(SLOTS, self.slot[t]);
        self.slot[t] += 1;
        let m = self.outputs[t];
        self.b.store(m, i, v.v).expect("store");
    }

    fn if_stmt(&mut self) {
        let cnd = if self.rng.chance(50) {
            self.cond_at(Level::Group)
        } else {
            self.cond()
        };
        let yields: Vec<Scalar> = (0..self.rng.below(3))
            .map(|_| self.rng.pick(&TYPES))
            .collect();
        let saved = (self.pool.len(), self.ctrl);
        self.ctrl = self.ctrl.min(cnd.level);
        self.b.begin_if(cnd.v).expect("if");
        self.depth += 1;
        let n = 1 + self.rng.below(4);
        self.stmts(n);
        let tv: Vec<Value> = yields.iter().map(|&t| self.any_of(t).v).collect();
        self.pool.truncate(saved.0);
        self.b.begin_else(&tv).expect("else");
        let n = self.rng.below(3);
        self.stmts(n);
        let ev: Vec<Value> = yields.iter().map(|&t| self.any_of(t).v).collect();
        self.pool.truncate(saved.0);
        let rs = self.b.end_if(&ev).expect("end if");
        self.depth -= 1;
        self.ctrl = saved.1;
        for (r, &t) in rs.into_iter().zip(&yields) {
            self.push(r, t, Level::Varying);
        }
    }

    fn for_stmt(&mut self) {
        let signed = self.rng.chance(25);
        let (end, bound_level) = match self.rng.below(4) {
            0 | 1 => (Value::Int(self.rng.below(6) as i64), Level::Group),
            2 => {
                let n = self
                    .pool
                    .iter()
                    .find(|v| v.ty == Scalar::U32 && v.level == Level::Group)
                    .copied();
                match n {
                    Some(n) => {
                        let e = self
                            .b
                            .binary(BinaryOp::Rem, n.v, Value::Int(5))
                            .expect("rem");
                        (e, Level::Group)
                    }
                    None => (Value::Int(3), Level::Group),
                }
            }
            _ => {
                let t = self.b.builtin(Builtin::ThreadId);
                let e = self.b.binary(BinaryOp::And, t, Value::Int(3)).expect("and");
                (e, Level::Varying)
            }
        };
        let (start, end) = if signed {
            let e = match end {
                Value::Int(i) => self.b.lit(Literal::I32(i as i32)),
                v => self.b.cast(v, Scalar::I32).expect("cast"),
            };
            (self.b.lit(Literal::I32(-1)), e)
        } else {
            (Value::Int(0), end)
        };
        let step = Value::Int(1 + self.rng.below(2) as i64);
        let carried: Vec<Var> = (0..self.rng.below(3))
            .map(|_| {
                let t = self.rng.pick(&TYPES);
                self.any_of(t)
            })
            .collect();
        let inits: Vec<Value> = carried.iter().map(|c| c.v).collect();
        let (iv, inner) = self.b.begin_for(start, end, step, &inits).expect("for");
        let saved = (self.pool.len(), self.ctrl);
        self.ctrl = self.ctrl.min(bound_level);
        self.depth += 1;
        let iv_ty = if signed { Scalar::I32 } else { Scalar::U32 };
        self.push(iv, iv_ty, Level::Varying);
        for (v, c) in inner.iter().zip(&carried) {
            self.push(*v, c.ty, Level::Varying);
        }
        let n = 1 + self.rng.below(4);
        self.stmts(n);
        let next: Vec<Value> = carried.iter().map(|c| self.any_of(c.ty).v).collect();
        self.pool.truncate(saved.0);
        let rs = self.b.end_for(&next).expect("end for");
        self.depth -= 1;
        self.ctrl = saved.1;
        for (r, c) in rs.into_iter().zip(&carried) {
            self.push(r, c.ty, Level::Varying);
        }
    }

    /// A stack array of four, fully written, then read and written at masked indices.
    fn stack_array(&mut self) {
        let ty = self.rng.pick(&TYPES);
        self.arrays += 1;
        let name = format!("stack{}", self.arrays);
        let arr = self.b.local_array(&name, ty, Value::Int(4)).expect("local");
        for k in 0..4 {
            let x = self.any_of(ty);
            self.b.store(arr, Value::Int(k), x.v).expect("store");
        }
        for _ in 0..1 + self.rng.below(4) {
            let x = self.any_of(Scalar::U32);
            let i = self
                .b
                .binary(BinaryOp::And, x.v, Value::Int(3))
                .expect("and");
            if self.rng.chance(40) {
                let y = self.any_of(ty);
                self.b.store(arr, i, y.v).expect("store");
            } else {
                let v = self.b.load(arr, i).expect("load");
                self.push(v, ty, Level::Varying);
            }
        }
    }

    /// Every thread writes its slot, barrier, each reads another's, barrier.
    fn shared_exchange(&mut self) {
        if self.ctrl < Level::Group {
            return;
        }
        let ty = self.rng.pick(&TYPES);
        self.arrays += 1;
        let name = format!("tg{}", self.arrays);
        let arr = self
            .b
            .shared_array(&name, ty, Value::Int(GROUP as i64))
            .expect("shared");
        let t = self.b.builtin(Builtin::ThreadId);
        let x = self.any_of(ty);
        self.b.store(arr, t, x.v).expect("store");
        self.b.barrier();
        let y = self.any_of(Scalar::U32);
        let j = self.b.binary(BinaryOp::Add, t, y.v).expect("add");
        let j = self
            .b
            .binary(BinaryOp::And, j, Value::Int(GROUP as i64 - 1))
            .expect("and");
        let v = self.b.load(arr, j).expect("load");
        self.push(v, ty, Level::Varying);
        self.b.barrier();
    }

    /// A value whose sums are exact in any order: a small integer (below `2^bits`) in
    /// type `ty`.
    fn summable(&mut self, ty: Scalar, bits: u32) -> Value {
        let x = self.any_of(Scalar::U32);
        let m = self
            .b
            .binary(BinaryOp::And, x.v, Value::Int((1i64 << bits) - 1))
            .expect("and");
        if ty == Scalar::U32 {
            m
        } else {
            self.b.cast(m, ty).expect("cast")
        }
    }

    fn simd(&mut self) {
        if self.ctrl < Level::Simd {
            return;
        }
        let ty = self.rng.pick(&TYPES);
        match self.rng.below(4) {
            0 => {
                let op = self.rng.pick(&SimdOp::ARITHMETIC);
                let x = match op {
                    // f16 / bf16 integers are exact up to 2048 / 256: 32 lanes of 3 bits.
                    SimdOp::Sum | SimdOp::PrefixSum | SimdOp::PrefixExclusiveSum
                        if ty.is_float() =>
                    {
                        self.summable(ty, 3)
                    }
                    // Products of 32 values of 0..=1 (times ±1) stay exact.
                    SimdOp::Prod if ty.is_float() => {
                        let v = self.summable(ty, 1);
                        let c = self.cond();
                        let neg = self.b.unary(UnaryOp::Neg, v).expect("neg");
                        self.b.select(c.v, v, neg).expect("select")
                    }
                    _ => self.any_of(ty).v,
                };
                let level = if matches!(op, SimdOp::PrefixSum | SimdOp::PrefixExclusiveSum) {
                    Level::Varying
                } else {
                    Level::Simd
                };
                let v = self.b.simd(op, x).expect("simd");
                self.push(v, ty, level);
            }
            1 if !ty.is_float() => {
                let op = self.rng.pick(&[SimdOp::And, SimdOp::Or, SimdOp::Xor]);
                let x = self.any_of(ty);
                let v = self.b.simd(op, x.v).expect("simd");
                self.push(v, ty, Level::Simd);
            }
            1 => {
                let c = self.cond();
                let op = self.rng.pick(&[SimdOp::All, SimdOp::Any]);
                let p = self.b.simd(op, c.v).expect("simd");
                let a = self.any_of(ty);
                let d = self.any_of(ty);
                let v = self.b.select(p, a.v, d.v).expect("select");
                self.push(v, ty, Level::Varying);
            }
            2 => {
                let x = self.any_of(ty);
                let m = Value::Int(1 << self.rng.below(5));
                let v = self.b.shuffle(ShuffleKind::Xor, x.v, m).expect("shuffle");
                self.push(v, ty, Level::Varying);
            }
            _ => {
                let x = self.any_of(ty);
                let kind = self
                    .rng
                    .pick(&[ShuffleKind::Index, ShuffleKind::Down, ShuffleKind::Up]);
                let arg = if self.rng.chance(50) {
                    Value::Int(self.rng.below(32) as i64)
                } else {
                    let y = self.any_of(Scalar::U32);
                    self.b
                        .binary(BinaryOp::And, y.v, Value::Int(31))
                        .expect("and")
                };
                let v = self.b.shuffle(kind, x.v, arg).expect("shuffle");
                self.push(v, ty, Level::Varying);
            }
        }
    }

    fn group_reduce(&mut self) {
        if self.ctrl < Level::Group {
            return;
        }
        let ty = self.rng.pick(&TYPES);
        let op = self
            .rng
            .pick(&[ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min]);
        let x = if op == ReduceOp::Sum && ty.is_float() {
            // 64 threads of 2 bits: at most 192, exact even in bf16's 8 bits.
            self.summable(ty, 1)
        } else {
            self.any_of(ty).v
        };
        let v = self.b.group_reduce(op, x).expect("group reduce");
        self.push(v, ty, Level::Group);
    }

    /// Each simdgroup multiplies two 16×16 tiles of small integers (exact in any order of
    /// summation) and stores the result to its own region of `frag_out`.
    fn fragments(&mut self) {
        if self.ctrl < Level::Group || self.frags > 0 {
            return;
        }
        self.frags += 1;
        let elem = Scalar::F16;
        let fa = self.b.frag("fa", FragRole::A, elem).expect("frag");
        let fb = self.b.frag("fb", FragRole::B, elem).expect("frag");
        let acc = self
            .b
            .frag("acc", FragRole::Acc, Scalar::F32)
            .expect("frag");
        let a_base = Value::Int(self.rng.below(8) as i64 * 16);
        let b_base = Value::Int(self.rng.below(8) as i64 * 16);
        // Through threadgroup memory half of the time.
        let (src_a, src_b) = if self.rng.chance(50) {
            let tile = self
                .b
                .shared_array("tile", elem, Value::Int(FRAG_ELEMS as i64 * 2))
                .expect("shared");
            let t = self.b.builtin(Builtin::ThreadId);
            for k in 0..(FRAG_ELEMS as i64 * 2 / GROUP as i64) {
                let off = self
                    .b
                    .binary(BinaryOp::Add, t, Value::Int(k * GROUP as i64))
                    .expect("add");
                let v = self.b.load(self.frag_in, off).expect("load");
                self.b.store(tile, off, v).expect("store");
            }
            self.b.barrier();
            (tile, tile)
        } else {
            (self.frag_in, self.frag_in)
        };
        let fill = self.rng.pick(&[0.0, 1.0, -2.0]);
        self.b.frag_fill(acc, Value::Float(fill)).expect("fill");
        let ta = self.rng.chance(30);
        let tb = self.rng.chance(30);
        self.b
            .frag_load(fa, src_a, a_base, Value::Int(16), ta)
            .expect("load a");
        self.b
            .frag_load(fb, src_b, b_base, Value::Int(16), tb)
            .expect("load b");
        for _ in 0..1 + self.rng.below(2) {
            self.b.frag_mma(acc, fa, fb, acc).expect("mma");
        }
        if self.rng.chance(40) {
            let s = self.rng.pick(&[0.5, -1.0, 2.0]);
            self.b.frag_scale(acc, Value::Float(s)).expect("scale");
        }
        let g = self.b.builtin(Builtin::GroupIdX);
        let sg = self.b.builtin(Builtin::SimdGroups);
        let sid = self.b.builtin(Builtin::SimdId);
        let i = self.b.binary(BinaryOp::Mul, g, sg).expect("mul");
        let i = self.b.binary(BinaryOp::Add, i, sid).expect("add");
        let i = self
            .b
            .binary(BinaryOp::Mul, i, Value::Int(FRAG_ELEMS as i64))
            .expect("mul");
        let out = self.frag_out;
        self.b
            .frag_store(acc, out, i, Value::Int(16))
            .expect("frag store");
    }

    fn stmt(&mut self) {
        if self.budget == 0 {
            return;
        }
        self.budget -= 1;
        let nested = self.depth < 3;
        match self.rng.below(100) {
            0..=34 => self.arith(),
            35..=44 => self.load(),
            45..=51 if nested => self.if_stmt(),
            52..=58 if nested => self.for_stmt(),
            59..=62 => self.stack_array(),
            63..=67 => self.shared_exchange(),
            68..=75 => self.simd(),
            76..=80 => self.group_reduce(),
            81..=82 => self.fragments(),
            83..=94 => self.store_out(),
            _ => self.arith(),
        }
    }

    fn stmts(&mut self, n: u32) {
        for _ in 0..n {
            self.stmt();
        }
    }
}

/// The kernel for `seed`: deterministic, valid and safe.
pub fn gen_kernel(seed: u64) -> Case {
    let mut rng = Rng(seed);
    let mut b = Builder::kernel(&format!("fuzz_{seed}"));
    let inputs: Vec<Mem> = TYPES
        .iter()
        .enumerate()
        .map(|(i, &t)| b.tensor_param(&format!("in{i}"), t, false))
        .collect();
    let frag_in = b.tensor_param("frag_in", Scalar::F16, false);
    let outputs: Vec<Mem> = TYPES
        .iter()
        .enumerate()
        .map(|(i, &t)| b.tensor_param(&format!("out{i}"), t, true))
        .collect();
    let approx_out = b.tensor_param("approx_out", Scalar::F32, true);
    let frag_out = b.tensor_param("frag_out", Scalar::F32, true);
    let n = b.scalar_param("n", Scalar::U32);
    let s = b.scalar_param("s", Scalar::F32);
    let k = b.scalar_param("k", Scalar::I32);
    let budget = 15 + rng.below(40);
    let mut g = Gen {
        rng: &mut rng,
        b,
        pool: Vec::new(),
        ctrl: Level::Group,
        depth: 0,
        budget,
        inputs,
        frag_in,
        outputs,
        approx_out,
        frag_out,
        slot: [0; 5],
        approx: Vec::new(),
        arrays: 0,
        frags: 0,
    };
    g.push(n, Scalar::U32, Level::Group);
    g.push(s, Scalar::F32, Level::Group);
    g.push(k, Scalar::I32, Level::Group);
    for (b, level) in [
        (Builtin::ThreadId, Level::Varying),
        (Builtin::GlobalId, Level::Varying),
        (Builtin::SimdLane, Level::Varying),
        (Builtin::SimdId, Level::Simd),
        (Builtin::GroupIdX, Level::Group),
    ] {
        let v = g.b.builtin(b);
        g.push(v, Scalar::U32, level);
    }
    g.stmts(budget);
    // Everything still in scope goes to an output, latest first.
    let vars: Vec<Var> = g.pool.iter().rev().copied().collect();
    for v in vars {
        g.store_var(v);
    }
    let approx = g.approx.clone();
    let uses_fragments = g.frags > 0;
    let kernel = g.b.finish_kernel().expect("kernel");
    Case {
        kernel,
        approx,
        uses_fragments,
    }
}

/// Host data for one launch of a generated kernel.
pub struct HostInputs {
    pub u32s: Vec<u32>,
    pub i32s: Vec<i32>,
    pub f32s: Vec<f32>,
    pub f16s: Vec<f16>,
    pub bf16s: Vec<bf16>,
    /// Small integers: fragment products summed in any order are exact.
    pub frag: Vec<f16>,
    pub n: u32,
    pub s: f32,
    pub k: i32,
}

pub fn host_inputs(rng: &mut Rng) -> HostInputs {
    let u32s = (0..N_IN)
        .map(|_| {
            if rng.chance(70) {
                rng.below(64)
            } else {
                rng.next() as u32
            }
        })
        .collect();
    let i32s = (0..N_IN)
        .map(|_| {
            if rng.chance(70) {
                rng.below(200) as i32 - 100
            } else {
                rng.next() as i32
            }
        })
        .collect();
    let f32s = (0..N_IN).map(|_| rng.f32()).collect();
    let f16s = (0..N_IN).map(|_| f16::from_f32(rng.f32())).collect();
    let bf16s = (0..N_IN).map(|_| bf16::from_f32(rng.f32())).collect();
    let frag = (0..N_IN)
        .map(|_| f16::from_f32(rng.below(9) as f32 - 4.0))
        .collect();
    HostInputs {
        u32s,
        i32s,
        f32s,
        f16s,
        bf16s,
        frag,
        n: rng.below(20),
        s: rng.f32(),
        k: rng.below(40) as i32 - 20,
    }
}
