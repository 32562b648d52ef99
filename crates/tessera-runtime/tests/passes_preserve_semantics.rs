//! Property test: the compiler's passes leave the CPU interpreter's results unchanged.
//!
//! A seeded generator builds random well-formed kernels — arithmetic on u32 / i32 / f32 /
//! f16, selects, casts, fma, ifs, constant- and runtime-bounded loops with carried values,
//! stack arrays, threadgroup arrays with barriers, simdgroup sums and shuffles, group
//! reductions, calls to random DSL functions (which call others), loads from random
//! tensors and stores to outputs — and random inputs. Each kernel runs on the CPU backend
//! twice: with only the lowering every backend needs (inlining and group-reduction
//! lowering) and through the whole optimising pipeline. Outputs must be bit-identical, or
//! both runs must fail with the same kind of error. A second comparison runs the kernel
//! with its group reductions left to the interpreter whenever their result does not
//! depend on the order of combination (integer sums, min, max).
//!
//! `TESSERA_PROP_SEED` picks the first seed and `TESSERA_PROP_CASES` the number of cases;
//! a failure prints the seed and both kernels.

mod random_kernel;

use random_kernel::Rng;
use std::sync::Arc;
use tessera_compiler::{optimize_with, PassOptions};
use tessera_ir::half::f16;
use tessera_ir::{
    BinaryOp, Builder, Builtin, Function, Kernel, Literal, Mem, ReduceOp, Scalar, ShuffleKind,
    SimdOp, UnaryOp, Value,
};
use tessera_runtime::{Context, RuntimeError, Tensor};

const GROUP: u32 = 64;
const GROUPS: u32 = 2;
const THREADS: usize = (GROUP * GROUPS) as usize;
/// Elements per input tensor: four per thread plus slack.
const N_IN: usize = THREADS * 4 + 16;
/// Output slots per thread in each output tensor.
const SLOTS: u32 = 24;

/// An input value: mostly moderate, with NaN, infinity, a negative zero and a huge value
/// mixed in (the differential generator's [`Rng::f32`] draws a wider mix).
fn input_f32(rng: &mut Rng) -> f32 {
    match rng.below(40) {
        0 => f32::NAN,
        1 => f32::INFINITY,
        2 => -0.0,
        3 => 1e30,
        _ => (rng.below(20_000) as f32 - 10_000.0) / 1000.0,
    }
}

/// How far a value is known to agree across threads (a conservative copy of the
/// verifier's lattice: the generator only needs to never over-estimate).
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

const TYPES: [Scalar; 4] = [Scalar::U32, Scalar::I32, Scalar::F32, Scalar::F16];

struct Gen<'r> {
    rng: &'r mut Rng,
    b: Builder,
    pool: Vec<Var>,
    /// Uniformity of the enclosing conditions and loop bounds.
    ctrl: Level,
    depth: u32,
    budget: u32,
    inputs: Vec<Mem>,
    outputs: Vec<Mem>,
    /// The next free slot of each output, per type in [`TYPES`] (kernels only).
    slot: [u32; 4],
    functions: Vec<Arc<Function>>,
    arrays: u32,
    /// A float group sum was generated (its result depends on the combination order).
    float_group_sum: bool,
    is_function: bool,
}

fn id(v: Value) -> Value {
    v
}

impl Gen<'_> {
    fn vars(&self, ty: Scalar) -> Vec<Var> {
        self.pool.iter().copied().filter(|v| v.ty == ty).collect()
    }

    fn any_of(&mut self, ty: Scalar) -> Var {
        let vs = self.vars(ty);
        if vs.is_empty() || self.rng.chance(10) {
            return self.constant(ty);
        }
        self.rng.pick(&vs)
    }

    fn push(&mut self, v: Value, ty: Scalar, level: Level) -> Var {
        let var = Var { v, ty, level };
        self.pool.push(var);
        var
    }

    fn constant(&mut self, ty: Scalar) -> Var {
        let l = match ty {
            Scalar::U32 => Literal::U32(self.rng.pick(&[0, 1, 2, 3, 4, 7, 31, 255, u32::MAX])),
            Scalar::I32 => Literal::I32(self.rng.pick(&[0, 1, -1, 2, -7, 100, i32::MIN])),
            Scalar::F32 => Literal::F32(self.rng.pick(&[0.0, 1.0, -1.0, 0.5, 2.0, -0.0, 3.25])),
            Scalar::F16 => Literal::F16(f16::from_f32(self.rng.pick(&[0.0, 1.0, -2.0, 0.25]))),
            Scalar::Bool => Literal::Bool(self.rng.chance(50)),
            other => Literal::zero(other),
        };
        let v = self.b.lit(l);
        Var {
            v,
            ty,
            level: Level::Group,
        }
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
        ]);
        let v = self.b.binary(op, a.v, c.v).expect("comparison");
        self.push(v, Scalar::Bool, a.level.min(c.level))
    }

    /// A condition at least as uniform as `at_least`, if the pool has one.
    fn cond_at(&mut self, at_least: Level) -> Var {
        for _ in 0..8 {
            let c = self.cond();
            if c.level >= at_least {
                return c;
            }
        }
        // Compare a group-uniform builtin with a constant.
        let g = self.b.builtin(Builtin::GroupIdX);
        let k = self.b.lit(Literal::U32(self.rng.below(3)));
        let v = self.b.binary(BinaryOp::Ne, g, k).expect("ne");
        self.push(v, Scalar::Bool, Level::Group)
    }

    fn arith(&mut self) {
        let ty = self.rng.pick(&TYPES);
        let a = self.any_of(ty);
        let c = self.any_of(ty);
        let level = a.level.min(c.level);
        let float = ty.is_float();
        let r = match self.rng.below(10) {
            0..=4 => {
                let ops: &[BinaryOp] = if float {
                    &[
                        BinaryOp::Add,
                        BinaryOp::Sub,
                        BinaryOp::Mul,
                        BinaryOp::Div,
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
                // Division by a value forced odd (never zero), or rarely by anything.
                let d = if self.rng.chance(97) {
                    self.b.binary(BinaryOp::Or, c.v, Value::Int(1)).expect("or")
                } else {
                    c.v
                };
                let op = self.rng.pick(&[BinaryOp::Div, BinaryOp::Rem]);
                // The builder refuses a constant division by zero outright.
                match self.b.binary(op, a.v, d) {
                    Ok(r) => r,
                    Err(_) => return,
                }
            }
            5 => {
                let e = self.any_of(ty);
                let r = self.b.fma(a.v, c.v, e.v).expect("fma");
                self.push(r, ty, level.min(e.level));
                return;
            }
            6 if float => {
                let op = self.rng.pick(&[
                    UnaryOp::Neg,
                    UnaryOp::Abs,
                    UnaryOp::Exp,
                    UnaryOp::Sqrt,
                    UnaryOp::Rsqrt,
                    UnaryOp::Floor,
                    UnaryOp::Tanh,
                    UnaryOp::Log2,
                ]);
                self.b.unary(op, a.v).expect("unary")
            }
            6 => {
                let op = self.rng.pick(&[UnaryOp::Neg, UnaryOp::Not, UnaryOp::Abs]);
                self.b.unary(op, a.v).expect("unary")
            }
            7 => {
                let cnd = self.cond();
                let r = self.b.select(cnd.v, a.v, c.v).expect("select");
                return self.push_at(r, ty, level.min(cnd.level));
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

    fn push_at(&mut self, v: Value, ty: Scalar, level: Level) {
        self.push(v, ty, level);
    }

    fn load(&mut self) {
        let Some(&m) = self
            .inputs
            .get(self.rng.below(self.inputs.len() as u32) as usize)
        else {
            return;
        };
        let g = self.b.builtin(Builtin::GlobalId);
        let g = self.push(g, Scalar::U32, Level::Varying);
        if self.rng.chance(60) {
            // The vectorisable pattern: four consecutive elements per thread.
            let base = self
                .b
                .binary(BinaryOp::Mul, g.v, Value::Int(4))
                .expect("mul");
            let n = 2 + self.rng.below(3) as i64;
            for k in 0..n {
                let i = self
                    .b
                    .binary(BinaryOp::Add, base, Value::Int(k))
                    .expect("add");
                let v = self.b.load(m, i).expect("load");
                self.push(v, m.elem, Level::Varying);
            }
        } else {
            let x = self.any_of(Scalar::U32);
            let extra = if self.rng.chance(3) { 1 } else { 0 }; // rarely out of bounds
            let i = self
                .b
                .binary(BinaryOp::Rem, x.v, Value::Int(N_IN as i64 + extra))
                .expect("rem");
            let v = self.b.load(m, i).expect("load");
            self.push(v, m.elem, Level::Varying);
        }
    }

    fn store_out(&mut self) {
        let ty = self.rng.pick(&TYPES);
        let v = self.any_of(ty);
        self.store_var(v);
    }

    /// Stores `v` into the next free slot of the output of its type, if one is left.
    fn store_var(&mut self, v: Var) {
        let Some(t) = TYPES.iter().position(|&t| t == v.ty) else {
            return;
        };
        if self.is_function || self.slot[t] >= SLOTS {
            return;
        }
        let Some(&m) = self.outputs.get(t) else {
            return;
        };
        let g = self.b.builtin(Builtin::GlobalId);
        let base = self
            .b
            .binary(BinaryOp::Mul, g, Value::Int(SLOTS as i64))
            .expect("mul");
        let i = self
            .b
            .binary(BinaryOp::Add, base, Value::Int(self.slot[t] as i64))
            .expect("add");
        self.slot[t] += 1;
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
        let (end, bound_level) = match self.rng.below(4) {
            0 | 1 => (self.b.lit(Literal::U32(self.rng.below(6))), Level::Group),
            2 => {
                // Runtime scalar bound (uniform).
                let n = self
                    .pool
                    .iter()
                    .find(|v| {
                        matches!(v.v, Value::Id(_))
                            && v.ty == Scalar::U32
                            && v.level == Level::Group
                    })
                    .copied();
                match n {
                    Some(n) => {
                        let e = self
                            .b
                            .binary(BinaryOp::Rem, n.v, Value::Int(5))
                            .expect("rem");
                        (e, Level::Group)
                    }
                    None => (self.b.lit(Literal::U32(3)), Level::Group),
                }
            }
            _ => {
                // A thread-dependent bound.
                let t = self.b.builtin(Builtin::ThreadId);
                let e = self.b.binary(BinaryOp::Rem, t, Value::Int(4)).expect("rem");
                (e, Level::Varying)
            }
        };
        let step = Value::Int(1 + self.rng.below(2) as i64);
        let carried: Vec<Var> = (0..self.rng.below(3))
            .map(|_| {
                let t = self.rng.pick(&TYPES);
                self.any_of(t)
            })
            .collect();
        let inits: Vec<Value> = carried.iter().map(|c| c.v).collect();
        let (iv, inner) = self
            .b
            .begin_for(Value::Int(0), end, step, &inits)
            .expect("for");
        let saved = (self.pool.len(), self.ctrl);
        self.ctrl = self.ctrl.min(bound_level);
        self.depth += 1;
        self.push(iv, Scalar::U32, bound_level);
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

    /// A stack array, fully written first, then read and written at constant or
    /// loop-variable indices (including a small constant loop that fills it).
    fn stack_array(&mut self) {
        let ty = self.rng.pick(&TYPES);
        self.arrays += 1;
        let name = format!("stack{}", self.arrays);
        let arr = self.b.local_array(&name, ty, Value::Int(4)).expect("local");
        if self.rng.chance(50) {
            let (iv, _) = self
                .b
                .begin_for(Value::Int(0), Value::Int(4), Value::Int(1), &[])
                .expect("for");
            let x = self.any_of(ty);
            self.b.store(arr, iv, x.v).expect("store");
            self.b.end_for(&[]).expect("end for");
        } else {
            for k in 0..4 {
                let x = self.any_of(ty);
                self.b.store(arr, Value::Int(k), x.v).expect("store");
            }
        }
        for _ in 0..1 + self.rng.below(4) {
            if self.rng.chance(50) {
                let k = self.rng.below(4) as i64;
                let x = self.any_of(ty);
                self.b.store(arr, Value::Int(k), x.v).expect("store");
            } else if self.rng.chance(20) {
                let x = self.any_of(Scalar::U32);
                let i = self
                    .b
                    .binary(BinaryOp::And, x.v, Value::Int(3))
                    .expect("and");
                let v = self.b.load(arr, i).expect("load");
                self.push(v, ty, Level::Varying);
            } else {
                let v = self
                    .b
                    .load(arr, Value::Int(self.rng.below(4) as i64))
                    .expect("load");
                self.push(v, ty, Level::Varying);
            }
        }
    }

    /// Threadgroup exchange: every thread writes its slot, barrier, reads a neighbour's.
    fn shared_exchange(&mut self) {
        if self.ctrl < Level::Group || self.is_function {
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
        let k = self.rng.below(GROUP) as i64;
        let j = self.b.binary(BinaryOp::Add, t, Value::Int(k)).expect("add");
        let j = self
            .b
            .binary(BinaryOp::Rem, j, Value::Int(GROUP as i64))
            .expect("rem");
        let v = self.b.load(arr, j).expect("load");
        self.push(v, ty, Level::Varying);
        self.b.barrier();
    }

    fn simd(&mut self) {
        if self.ctrl < Level::Simd {
            return;
        }
        let ty = self.rng.pick(&TYPES);
        let x = self.any_of(ty);
        match self.rng.below(3) {
            0 => {
                let op = self
                    .rng
                    .pick(&[SimdOp::Sum, SimdOp::Max, SimdOp::Min, SimdOp::PrefixSum]);
                let level = if op == SimdOp::PrefixSum {
                    Level::Varying
                } else {
                    Level::Simd
                };
                let v = self.b.simd(op, x.v).expect("simd");
                self.push(v, ty, level);
            }
            1 => {
                let m = Value::Int(1 << self.rng.below(5));
                let v = self.b.shuffle(ShuffleKind::Xor, x.v, m).expect("shuffle");
                self.push(v, ty, Level::Varying);
            }
            _ => {
                let lane = Value::Int(self.rng.below(32) as i64);
                let kind = self
                    .rng
                    .pick(&[ShuffleKind::Index, ShuffleKind::Down, ShuffleKind::Up]);
                let v = self.b.shuffle(kind, x.v, lane).expect("shuffle");
                self.push(v, ty, Level::Varying);
            }
        }
    }

    fn group_reduce(&mut self) {
        if self.ctrl < Level::Group {
            return;
        }
        let ty = self.rng.pick(&TYPES);
        let x = self.any_of(ty);
        let op = self
            .rng
            .pick(&[ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min]);
        if op == ReduceOp::Sum && ty.is_float() {
            self.float_group_sum = true;
        }
        let v = self.b.group_reduce(op, x.v).expect("group reduce");
        self.push(v, ty, Level::Group);
    }

    fn call(&mut self) {
        if self.functions.is_empty() {
            return;
        }
        let f = self.rng.pick(
            &self
                .functions
                .iter()
                .cloned()
                .enumerate()
                .map(|(i, _)| i)
                .collect::<Vec<_>>(),
        );
        let f = self.functions[f].clone();
        let args: Vec<Value> = f
            .param_types()
            .iter()
            .map(|t| self.any_of(t.scalar().unwrap_or(Scalar::U32)).v)
            .collect();
        let rs = self
            .b
            .call(
                f.clone(),
                &args.iter().map(|&a| a.into()).collect::<Vec<_>>(),
            )
            .expect("call");
        for (r, t) in rs.into_iter().zip(f.return_types()) {
            self.push(r, t.scalar().unwrap_or(Scalar::U32), Level::Varying);
        }
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
            59..=63 => self.stack_array(),
            64..=67 => self.shared_exchange(),
            68..=73 => self.simd(),
            74..=77 => self.group_reduce(),
            78..=84 => self.call(),
            85..=94 => self.store_out(),
            _ => self.arith(),
        }
    }

    fn stmts(&mut self, n: u32) {
        for _ in 0..n {
            self.stmt();
        }
    }
}

/// A random DSL function of one or two arguments, possibly calling earlier ones.
fn gen_function(rng: &mut Rng, name: &str, earlier: &[Arc<Function>]) -> Arc<Function> {
    let mut b = Builder::function(name);
    let arg_types: Vec<Scalar> = (0..1 + rng.below(2)).map(|_| rng.pick(&TYPES)).collect();
    let ret = rng.pick(&TYPES);
    let mut g = Gen {
        rng,
        b: Builder::function("scratch"),
        pool: Vec::new(),
        ctrl: Level::Varying,
        depth: 1,
        budget: 10,
        inputs: Vec::new(),
        outputs: Vec::new(),
        slot: [SLOTS; 4],
        functions: earlier.to_vec(),
        arrays: 0,
        float_group_sum: false,
        is_function: true,
    };
    for &t in &arg_types {
        let v = b.func_arg(t);
        g.pool.push(Var {
            v,
            ty: t,
            level: Level::Varying,
        });
    }
    g.b = b;
    let n = 2 + g.rng.below(6);
    g.stmts(n);
    let r = g.any_of(ret);
    let b = std::mem::replace(&mut g.b, Builder::function("done"));
    Arc::new(b.finish_function(&[id(r.v)], &[ret]).expect("function"))
}

struct Case {
    kernel: Kernel,
    float_group_sum: bool,
}

fn gen_kernel(rng: &mut Rng, seed: u64) -> Case {
    let mut functions: Vec<Arc<Function>> = Vec::new();
    for i in 0..rng.below(3) {
        let f = gen_function(rng, &format!("f{i}"), &functions);
        functions.push(f);
    }
    let mut b = Builder::kernel(&format!("random_{seed}"));
    let inputs: Vec<Mem> = TYPES
        .iter()
        .enumerate()
        .map(|(i, &t)| b.tensor_param(&format!("in{i}"), t, false))
        .collect();
    let outputs: Vec<Mem> = TYPES
        .iter()
        .enumerate()
        .map(|(i, &t)| b.tensor_param(&format!("out{i}"), t, true))
        .collect();
    let n = b.scalar_param("n", Scalar::U32);
    let s = b.scalar_param("s", Scalar::F32);
    let budget = 15 + rng.below(40);
    let mut g = Gen {
        rng,
        b,
        pool: Vec::new(),
        ctrl: Level::Group,
        depth: 0,
        budget,
        inputs,
        outputs,
        slot: [0; 4],
        functions,
        arrays: 0,
        float_group_sum: false,
        is_function: false,
    };
    g.push(n, Scalar::U32, Level::Group);
    g.push(s, Scalar::F32, Level::Group);
    let t = g.b.builtin(Builtin::ThreadId);
    g.push(t, Scalar::U32, Level::Varying);
    let gid = g.b.builtin(Builtin::GroupIdX);
    g.push(gid, Scalar::U32, Level::Group);
    g.stmts(budget);
    // Everything still in scope goes to an output, latest first, so a wrong value
    // anywhere is likely to show.
    let vars: Vec<Var> = g.pool.iter().rev().copied().collect();
    for v in vars {
        g.store_var(v);
    }
    let float_group_sum = g.float_group_sum;
    let kernel = g.b.finish_kernel().expect("kernel");
    Case {
        kernel,
        float_group_sum,
    }
}

struct Inputs {
    tensors: Vec<(String, Tensor)>,
    n: u32,
    s: f32,
}

fn inputs(ctx: &Context, rng: &mut Rng) -> Inputs {
    let mut tensors = Vec::new();
    let u: Vec<u32> = (0..N_IN)
        .map(|_| {
            if rng.chance(80) {
                rng.below(64)
            } else {
                rng.next() as u32
            }
        })
        .collect();
    let i: Vec<i32> = (0..N_IN).map(|_| rng.below(200) as i32 - 100).collect();
    let f: Vec<f32> = (0..N_IN).map(|_| input_f32(rng)).collect();
    let h: Vec<f16> = (0..N_IN).map(|_| f16::from_f32(input_f32(rng))).collect();
    tensors.push(("in0".to_string(), ctx.tensor(&u, &[N_IN]).expect("tensor")));
    tensors.push(("in1".to_string(), ctx.tensor(&i, &[N_IN]).expect("tensor")));
    tensors.push(("in2".to_string(), ctx.tensor(&f, &[N_IN]).expect("tensor")));
    tensors.push(("in3".to_string(), ctx.tensor(&h, &[N_IN]).expect("tensor")));
    Inputs {
        tensors,
        n: rng.below(20),
        s: input_f32(rng),
    }
}

/// Runs `kernel` as given; returns the outputs' bytes or the error.
fn run(ctx: &Context, kernel: &Kernel, inp: &Inputs) -> Result<Vec<Vec<u8>>, RuntimeError> {
    let n_out = THREADS * SLOTS as usize;
    let outs: Vec<Tensor> = TYPES
        .iter()
        .map(|&t| ctx.zeros(t, &[n_out]).expect("zeros"))
        .collect();
    let mut l = ctx.launch_ir(kernel).no_optimize();
    for (name, t) in &inp.tensors {
        l = l.arg(name, t);
    }
    for (i, t) in outs.iter().enumerate() {
        l = l.arg(&format!("out{i}"), t);
    }
    l.scalar("n", inp.n)
        .scalar("s", inp.s)
        .grid([GROUPS, 1, 1])
        .group_size(GROUP)
        .run()?;
    Ok(outs
        .iter()
        .map(|t| t.to_bytes().expect("read back"))
        .collect())
}

fn same_outcome(
    a: &Result<Vec<Vec<u8>>, RuntimeError>,
    b: &Result<Vec<Vec<u8>>, RuntimeError>,
) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x == y,
        (Err(x), Err(y)) => match (x.sanitizer(), y.sanitizer()) {
            (Some(x), Some(y)) => {
                std::mem::discriminant(&x.violation) == std::mem::discriminant(&y.violation)
            }
            _ => std::mem::discriminant(x) == std::mem::discriminant(y),
        },
        _ => false,
    }
}

fn describe(r: &Result<Vec<Vec<u8>>, RuntimeError>) -> String {
    match r {
        Ok(o) => format!(
            "ok ({} output bytes)",
            o.iter().map(Vec::len).sum::<usize>()
        ),
        Err(e) => format!("error: {e}"),
    }
}

/// The first differing output, for the failure message.
fn first_difference(a: &[Vec<u8>], b: &[Vec<u8>]) -> String {
    for (t, (x, y)) in a.iter().zip(b).enumerate() {
        if let Some(i) = x.iter().zip(y).position(|(p, q)| p != q) {
            return format!("out{t} ({}) differs at byte {i}", TYPES[t]);
        }
    }
    "no byte differs".into()
}

/// How often the optimised kernel differs from the baseline in the ways the passes aim for.
#[derive(Debug, Default)]
struct Stats {
    /// Kernels with a vector load or store.
    vectorized: u64,
    /// Kernels with fewer loops.
    unrolled: u64,
    /// Kernels with fewer stack arrays.
    promoted: u64,
    /// Kernels with fewer instructions.
    shrunk: u64,
}

impl Stats {
    fn note(&mut self, base: &Kernel, opt: &Kernel) {
        let loops = |k: &Kernel| {
            let mut n = 0;
            k.body
                .block
                .walk(&mut |i| n += matches!(i.op, tessera_ir::Op::For { .. }) as u64);
            n
        };
        let text = opt.to_string();
        self.vectorized += (text.contains("vload") || text.contains("vstore")) as u64;
        self.unrolled += (loops(opt) < loops(base)) as u64;
        self.promoted += (opt.body.locals.len() < base.body.locals.len()) as u64;
        self.shrunk += (opt.body.block.count() < base.body.block.count()) as u64;
    }
}

#[test]
fn optimised_kernels_compute_the_same_bits_as_unoptimised_ones() {
    let first: u64 = std::env::var("TESSERA_PROP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7E55_E7A0);
    let cases: u64 = std::env::var("TESSERA_PROP_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    println!(
        "passes_preserve_semantics: seeds {first}..{}",
        first + cases
    );
    let ctx = Context::cpu();
    let base_opts = PassOptions::none();
    let full = PassOptions {
        verify_each: true,
        ..PassOptions::default()
    };
    let native = PassOptions {
        lower_group_reduce: false,
        ..PassOptions::none()
    };
    let (mut ok, mut errors, mut native_checked) = (0, 0, 0);
    let mut stats = Stats::default();
    for seed in first..first + cases {
        let mut rng = Rng(seed);
        let case = gen_kernel(&mut rng, seed);
        let inp = inputs(&ctx, &mut rng);
        let base = optimize_with(case.kernel.clone(), &base_opts)
            .unwrap_or_else(|e| panic!("seed {seed}: lowering failed: {e}\n{}", case.kernel));
        let opt = optimize_with(case.kernel.clone(), &full)
            .unwrap_or_else(|e| panic!("seed {seed}: the pipeline failed: {e}\n{}", case.kernel));
        stats.note(&base, &opt);
        let a = run(&ctx, &base, &inp);
        let b = run(&ctx, &opt, &inp);
        let detail = match (&a, &b) {
            (Ok(x), Ok(y)) => first_difference(x, y),
            _ => String::new(),
        };
        assert!(
            same_outcome(&a, &b),
            "seed {seed}: unoptimised {} vs optimised {} {detail}\n--- unoptimised ---\n{base}\n--- optimised ---\n{opt}",
            describe(&a),
            describe(&b),
        );
        if a.is_ok() {
            ok += 1;
        } else {
            errors += 1;
        }
        if !case.float_group_sum {
            let n = optimize_with(case.kernel.clone(), &native)
                .unwrap_or_else(|e| panic!("seed {seed}: inlining failed: {e}"));
            let c = run(&ctx, &n, &inp);
            assert!(
                same_outcome(&c, &a),
                "seed {seed}: interpreted group reductions {} vs lowered {} {}\n{n}\n{base}",
                describe(&c),
                describe(&a),
                match (&c, &a) {
                    (Ok(x), Ok(y)) => first_difference(x, y),
                    _ => String::new(),
                },
            );
            native_checked += 1;
        }
    }
    println!("{ok} cases agreed on outputs, {errors} on an error; {native_checked} also against interpreted group reductions");
    println!("{stats:?}");
    assert!(
        ok >= cases / 2,
        "too few cases ran to completion: {ok} of {cases}"
    );
    if cases >= 100 {
        // The generator must give every pass something to do.
        assert!(
            stats.vectorized > 0 && stats.unrolled > 0 && stats.promoted > 0,
            "{stats:?}"
        );
        assert!(stats.shrunk > cases / 2, "{stats:?}");
    }
}
