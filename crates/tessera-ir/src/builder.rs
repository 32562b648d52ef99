//! Builds kernel and function IR one statement at a time: the API the `#[kernel]` and
//! `#[func]` macros generate calls to. It types every op (adapting untyped literals to
//! their context), folds constants as it goes, and turns `let mut` variables into SSA
//! through structured `if` / `for` regions whose carried values the caller names.

use crate::error::IrError;
use crate::eval;
use crate::kernel::{
    ArgKind, ArrayDecl, Block, Body, FragArg, FragDecl, FragRole, Function, Inst, Kernel, Loc,
    MemArg, Occupancy, Param, ParamKind, ValueId, MAX_GROUP_SIZE,
};
use crate::literal::Literal;
use crate::ops::{
    AtomicOp, BinaryOp, Builtin, MemRef, Op, ReduceOp, RowMap, RowReduce, RowsOp, ShuffleKind,
    SimdOp, TileA, UnaryOp,
};
use crate::types::{Scalar, Type};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

/// A DSL value while building: an SSA value, or a literal whose type comes from its use
/// (`4` next to a u32 is a u32; alone it defaults to u32, `1.5` to f32).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Id(ValueId),
    Int(i64),
    Float(f64),
}

/// A memory object a kernel can load from and store to: a tensor parameter, a
/// threadgroup array or a per-thread stack array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mem {
    pub mem: MemRef,
    pub elem: Scalar,
    pub writable: bool,
}

/// An array of matrix fragments of one role, `name[0]`, `name[1]`, … (see
/// [`Builder::frag_array`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragArray {
    pub name: String,
    pub frags: Vec<Frag>,
}

/// Operand A of [`Builder::frag_mma_tiles`]: a swizzled tile of a threadgroup array from an
/// index, or an array of four A operands in registers.
pub enum TileOperand<'a> {
    Tile(Mem, Value),
    Frags(&'a FragArray),
}

/// A matrix fragment declared in the kernel (see [`FragDecl`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frag {
    pub index: u32,
    pub role: FragRole,
    pub elem: Scalar,
}

enum FrameKind {
    Root,
    Then {
        cond: ValueId,
    },
    Else {
        cond: ValueId,
        then_block: Block,
        then_yields: Vec<Value>,
    },
    For {
        start: ValueId,
        end: ValueId,
        step: ValueId,
        inits: Vec<ValueId>,
    },
}

struct Frame {
    kind: FrameKind,
    block: Block,
    loc: Option<Loc>,
}

/// Builds one kernel or one DSL function.
pub struct Builder {
    name: String,
    params: Vec<Param>,
    specialization: Vec<(String, String)>,
    body: Body,
    frames: Vec<Frame>,
    consts: HashMap<ValueId, Literal>,
    loc: Option<Loc>,
    occupancy: Option<Occupancy>,
    /// A DSL function's memory arguments, and the order of all its arguments.
    mems: Vec<MemArg>,
    /// A DSL function's fragment arguments.
    frag_args: Vec<FragArg>,
    order: Vec<ArgKind>,
}

/// An argument of a DSL function call: a value, memory the function loads from or
/// stores to, or the caller's matrix fragments (one, or an array) the function works on.
#[derive(Clone, Debug)]
pub enum CallArg {
    Value(Value),
    Memory(Mem),
    Frag(Frag),
    Frags(FragArray),
}

impl From<&Value> for CallArg {
    fn from(v: &Value) -> Self {
        CallArg::Value(*v)
    }
}

impl From<&Mem> for CallArg {
    fn from(m: &Mem) -> Self {
        CallArg::Memory(*m)
    }
}

impl From<&Frag> for CallArg {
    fn from(f: &Frag) -> Self {
        CallArg::Frag(*f)
    }
}

impl From<&FragArray> for CallArg {
    fn from(a: &FragArray) -> Self {
        CallArg::Frags(a.clone())
    }
}

/// What a call passes for one argument, for instantiating a generic function: the dtype
/// of a value, memory or fragment (`None` for an untyped literal) and the length of a
/// fragment array.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArgInfo {
    pub elem: Option<Scalar>,
    pub len: Option<u32>,
}

impl From<Value> for CallArg {
    fn from(v: Value) -> Self {
        CallArg::Value(v)
    }
}

impl From<Mem> for CallArg {
    fn from(m: Mem) -> Self {
        CallArg::Memory(m)
    }
}

thread_local! {
    static FUNCTION_DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// The deepest nesting of DSL function builds before recursion is assumed.
pub const MAX_FUNCTION_DEPTH: u32 = 64;

/// Held while a DSL function's IR is being built; refuses runaway (recursive) nesting.
pub struct FunctionDepthGuard(());

impl FunctionDepthGuard {
    pub fn enter(name: &str) -> Result<Self, IrError> {
        let depth = FUNCTION_DEPTH.with(|d| d.get());
        if depth >= MAX_FUNCTION_DEPTH {
            return Err(IrError::Build {
                kernel: name.to_string(),
                loc: None,
                message: format!(
                    "DSL functions nest deeper than {MAX_FUNCTION_DEPTH} calls; \
                     `{name}` is probably recursive, which the DSL does not allow"
                ),
            });
        }
        FUNCTION_DEPTH.with(|d| d.set(depth + 1));
        Ok(FunctionDepthGuard(()))
    }
}

impl Drop for FunctionDepthGuard {
    fn drop(&mut self) {
        FUNCTION_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

type R<T> = Result<T, IrError>;

impl Builder {
    /// Starts a kernel.
    pub fn kernel(name: &str) -> Builder {
        Builder {
            name: name.to_string(),
            params: Vec::new(),
            specialization: Vec::new(),
            body: Body::default(),
            frames: vec![Frame {
                kind: FrameKind::Root,
                block: Block::default(),
                loc: None,
            }],
            consts: HashMap::new(),
            loc: None,
            occupancy: None,
            mems: Vec::new(),
            frag_args: Vec::new(),
            order: Vec::new(),
        }
    }

    /// Starts a DSL function.
    pub fn function(name: &str) -> Builder {
        Builder::kernel(name)
    }

    /// Sets the source location recorded on the instructions that follow.
    pub fn set_loc(&mut self, line: u32, col: u32) {
        self.loc = Some(Loc { line, col });
    }

    /// An error at the current location.
    pub fn error(&self, message: impl Into<String>) -> IrError {
        IrError::Build {
            kernel: self.name.clone(),
            loc: self.loc,
            message: message.into(),
        }
    }

    // ── signature ────────────────────────────────────────────────────────────

    /// Records the dtype a generic parameter was bound to.
    pub fn generic(&mut self, name: &str, ty: Scalar) {
        self.specialization
            .push((name.to_string(), ty.name().to_string()));
    }

    /// Starts a kernel whose first two parameters are the tensors `x` (read) and `out`
    /// (written), both of `elem`: the shape most small kernels take.
    pub fn kernel_x_out(name: &str, elem: Scalar) -> (Builder, Mem, Mem) {
        let mut b = Builder::kernel(name);
        let x = b.tensor_param("x", elem, false);
        let out = b.tensor_param("out", elem, true);
        (b, x, out)
    }

    /// Declares a tensor parameter.
    pub fn tensor_param(&mut self, name: &str, elem: Scalar, writable: bool) -> Mem {
        let index = self.params.len() as u32;
        self.params.push(Param {
            name: name.to_string(),
            kind: ParamKind::Tensor { elem, writable },
        });
        Mem {
            mem: MemRef::Param(index),
            elem,
            writable,
        }
    }

    /// Declares a runtime scalar parameter and returns its value.
    pub fn scalar_param(&mut self, name: &str, ty: Scalar) -> Value {
        let index = self.params.len() as u32;
        self.params.push(Param {
            name: name.to_string(),
            kind: ParamKind::Scalar(ty),
        });
        Value::Id(self.push1(Op::Param(index), Type::Scalar(ty)))
    }

    /// Declares a constexpr: its value becomes a constant in the body.
    pub fn constexpr(&mut self, name: &str, value: Literal) -> Value {
        self.specialization
            .push((name.to_string(), value.to_string()));
        self.lit(value)
    }

    /// For an error that constants alone produced: the specialisation's values, which are
    /// what made it (a kernel's divisors come from its constexprs).
    fn specialization_hint(&self) -> String {
        if self.specialization.is_empty() {
            return String::new();
        }
        let values: Vec<String> = self
            .specialization
            .iter()
            .map(|(name, value)| format!("{name} = {value}"))
            .collect();
        format!(
            "; the divisor comes from the specialisation ({}), which this kernel does not \
             support: use the values its op wrapper allows",
            values.join(", ")
        )
    }

    /// Declares a DSL function argument.
    pub fn func_arg(&mut self, ty: Scalar) -> Value {
        let v = self.body.new_value(Type::Scalar(ty));
        self.frames[0].block.args.push(v);
        self.order.push(ArgKind::Value);
        Value::Id(v)
    }

    /// Declares a DSL function's memory argument: device, threadgroup or stack memory of
    /// `elem`, stored to only if `writable`.
    pub fn func_mem_arg(&mut self, name: &str, elem: Scalar, writable: bool) -> Mem {
        let index = self.mems.len() as u32;
        self.mems.push(MemArg {
            name: name.to_string(),
            elem,
            writable,
        });
        self.order.push(ArgKind::Memory);
        Mem {
            mem: MemRef::Arg(index),
            elem,
            writable,
        }
    }

    /// Declares a DSL function's fragment argument: one fragment of `role` and `elem`
    /// (`len` `None`) or an array of `len`. The function's body uses it like its own
    /// fragments; a call puts the caller's in its place.
    pub fn func_frag_arg(
        &mut self,
        name: &str,
        role: FragRole,
        elem: Scalar,
        len: Option<u32>,
    ) -> R<FragArray> {
        let first = self.body.frags.len() as u32;
        let frags = match len {
            None => vec![self.frag(name, role, elem)?],
            Some(n) => (0..n)
                .map(|i| self.frag(&format!("{name}[{i}]"), role, elem))
                .collect::<R<Vec<_>>>()?,
        };
        self.frag_args.push(FragArg {
            name: name.to_string(),
            role,
            elem,
            len,
            first,
        });
        self.order.push(ArgKind::Fragments);
        Ok(FragArray {
            name: name.to_string(),
            frags,
        })
    }

    // ── values ───────────────────────────────────────────────────────────────

    /// A typed constant.
    pub fn lit(&mut self, l: Literal) -> Value {
        Value::Id(self.constant(l))
    }

    /// The type of a value, `None` for an untyped literal.
    pub fn type_of(&self, v: Value) -> Option<Type> {
        match v {
            Value::Id(id) => Some(self.body.ty(id)),
            _ => None,
        }
    }

    /// The constant a value is known to hold, if any.
    pub fn known_const(&self, v: Value) -> Option<Literal> {
        match v {
            Value::Id(id) => self.consts.get(&id).copied(),
            Value::Int(i) => Some(Literal::from_i64(default_int(i), i)),
            Value::Float(f) => Some(Literal::F32(f as f32)),
        }
    }

    /// Turns a value into an SSA value, giving an untyped literal its default type.
    pub fn materialize(&mut self, v: Value) -> R<ValueId> {
        match v {
            Value::Id(id) => Ok(id),
            Value::Int(i) => {
                let ty = default_int(i);
                let l = self.int_literal(i, ty)?;
                Ok(self.constant(l))
            }
            Value::Float(f) => Ok(self.constant(Literal::F32(f as f32))),
        }
    }

    /// Turns a value into an SSA value of type `ty`, adapting an untyped literal.
    pub fn coerce(&mut self, v: Value, ty: Scalar, what: &str) -> R<ValueId> {
        match v {
            Value::Id(id) => {
                let have = self.body.ty(id);
                if have != Type::Scalar(ty) {
                    return Err(self.error(format!(
                        "{what} must be {ty}, got {have}; convert with `.cast::<{ty}>()`"
                    )));
                }
                Ok(id)
            }
            Value::Int(i) => {
                let l = self.int_literal(i, ty)?;
                Ok(self.constant(l))
            }
            Value::Float(f) => {
                if !ty.is_float() {
                    return Err(
                        self.error(format!("{what} must be {ty}, got the float literal {f}"))
                    );
                }
                Ok(self.constant(Literal::from_f64(ty, f)))
            }
        }
    }

    fn int_literal(&self, i: i64, ty: Scalar) -> R<Literal> {
        let fits = match ty {
            Scalar::U32 => (0..=u32::MAX as i64).contains(&i),
            Scalar::I32 => (i32::MIN as i64..=i32::MAX as i64).contains(&i),
            Scalar::U8 => (0..=255).contains(&i),
            Scalar::I8 => (-128..=127).contains(&i),
            Scalar::Bool => false,
            Scalar::F16 | Scalar::BF16 | Scalar::F32 => true,
        };
        if !fits {
            return Err(self.error(format!("the literal {i} does not fit in {ty}")));
        }
        Ok(Literal::from_i64(ty, i))
    }

    fn constant(&mut self, l: Literal) -> ValueId {
        let id = self.push1(Op::Const(l), Type::Scalar(l.ty()));
        self.consts.insert(id, l);
        id
    }

    /// Brings two operands to one scalar type (untyped literals adapt to the other side).
    fn unify(&mut self, a: Value, b: Value, what: &str) -> R<(ValueId, ValueId)> {
        match (self.type_of(a), self.type_of(b)) {
            (Some(ta), Some(tb)) => {
                if ta != tb {
                    return Err(self.error(format!(
                        "{what}: operands have different types, {ta} and {tb}; \
                         convert one with `.cast::<{ta}>()` or `.cast::<{tb}>()`"
                    )));
                }
                Ok((self.materialize(a)?, self.materialize(b)?))
            }
            (Some(ta), None) => {
                let ty = self.scalar_of(ta, what)?;
                Ok((self.materialize(a)?, self.coerce(b, ty, what)?))
            }
            (None, Some(tb)) => {
                let ty = self.scalar_of(tb, what)?;
                Ok((self.coerce(a, ty, what)?, self.materialize(b)?))
            }
            (None, None) => {
                let ty = match (a, b) {
                    (Value::Float(_), _) | (_, Value::Float(_)) => Scalar::F32,
                    (Value::Int(x), Value::Int(y)) if x < 0 || y < 0 => Scalar::I32,
                    _ => Scalar::U32,
                };
                Ok((self.coerce(a, ty, what)?, self.coerce(b, ty, what)?))
            }
        }
    }

    fn scalar_of(&self, t: Type, what: &str) -> R<Scalar> {
        t.scalar()
            .ok_or_else(|| self.error(format!("{what}: vector values are not allowed here")))
    }

    fn scalar_type(&mut self, v: Value, what: &str) -> R<(ValueId, Scalar)> {
        let id = self.materialize(v)?;
        let t = self.body.ty(id);
        Ok((id, self.scalar_of(t, what)?))
    }

    // ── instructions ─────────────────────────────────────────────────────────

    fn push(&mut self, op: Op, results: Vec<ValueId>) {
        let loc = self.loc;
        let frame = self
            .frames
            .last_mut()
            .expect("the root frame is never popped");
        frame.block.insts.push(Inst { op, results, loc });
    }

    fn push1(&mut self, op: Op, ty: Type) -> ValueId {
        let v = self.body.new_value(ty);
        self.push(op, vec![v]);
        v
    }

    /// An execution-model builtin (u32).
    pub fn builtin(&mut self, b: Builtin) -> Value {
        Value::Id(self.push1(Op::Builtin(b), Type::Scalar(Scalar::U32)))
    }

    /// `a op b`.
    pub fn binary(&mut self, op: BinaryOp, a: Value, b: Value) -> R<Value> {
        if let (Value::Int(x), Value::Int(y)) = (a, b) {
            let folded = match op {
                BinaryOp::Add => x.checked_add(y),
                BinaryOp::Sub => x.checked_sub(y),
                BinaryOp::Mul => x.checked_mul(y),
                _ => None,
            };
            if let Some(r) = folded {
                return Ok(Value::Int(r));
            }
        }
        let what = format!("`{}`", op.name());
        let (x, y) = self.unify(a, b, &what)?;
        let ty = self.scalar_of(self.body.ty(x), &what)?;
        if !crate::verify::binary_defined(op, ty) {
            return Err(self.error(format!("{what} is not defined on {ty}")));
        }
        let out = if op.is_comparison() { Scalar::Bool } else { ty };
        if let (Some(&ca), Some(&cb)) = (self.consts.get(&x), self.consts.get(&y)) {
            match eval::binary(op, ca, cb) {
                Ok(l) => return Ok(self.lit(l)),
                Err(eval::EvalError::DivisionByZero) => {
                    return Err(self.error(format!(
                        "{what} divides the constant {ca} by zero{}",
                        self.specialization_hint()
                    )))
                }
                Err(_) => {}
            }
        }
        Ok(Value::Id(
            self.push1(Op::Binary(op, x, y), Type::Scalar(out)),
        ))
    }

    /// `op a`.
    pub fn unary(&mut self, op: UnaryOp, a: Value) -> R<Value> {
        match (op, a) {
            (UnaryOp::Neg, Value::Int(i)) => return Ok(Value::Int(-i)),
            (UnaryOp::Neg, Value::Float(f)) => return Ok(Value::Float(-f)),
            _ => {}
        }
        let what = format!("`{}`", op.name());
        let a = match a {
            Value::Int(i) if op.float_only() => Value::Float(i as f64),
            other => other,
        };
        let (x, ty) = self.scalar_type(a, &what)?;
        if !crate::verify::unary_defined(op, ty) {
            let hint = if op.float_only() {
                "; convert with `.cast::<f32>()` first".to_string()
            } else {
                String::new()
            };
            return Err(self.error(format!("{what} is not defined on {ty}{hint}")));
        }
        let out = match op {
            UnaryOp::IsNan | UnaryOp::IsInf => Scalar::Bool,
            _ => ty,
        };
        if let Some(&c) = self.consts.get(&x) {
            if let Ok(l) = eval::unary(op, c) {
                return Ok(self.lit(l));
            }
        }
        Ok(Value::Id(self.push1(Op::Unary(op, x), Type::Scalar(out))))
    }

    /// `a * b + c` with one rounding.
    pub fn fma(&mut self, a: Value, b: Value, c: Value) -> R<Value> {
        let (x, y) = self.unify(a, b, "`fma`")?;
        let ty = self.scalar_of(self.body.ty(x), "`fma`")?;
        if !ty.is_float() {
            return Err(self.error(format!("`fma` is not defined on {ty}")));
        }
        let z = self.coerce(c, ty, "the addend of `fma`")?;
        Ok(Value::Id(self.push1(Op::Fma(x, y, z), Type::Scalar(ty))))
    }

    /// `cond ? a : b`.
    pub fn select(&mut self, cond: Value, a: Value, b: Value) -> R<Value> {
        let c = self.coerce(cond, Scalar::Bool, "the condition of `select`")?;
        let (x, y) = self.unify(a, b, "`select`")?;
        if let Some(&Literal::Bool(k)) = self.consts.get(&c) {
            return Ok(Value::Id(if k { x } else { y }));
        }
        let ty = self.body.ty(x);
        Ok(Value::Id(self.push1(Op::Select(c, x, y), ty)))
    }

    /// Converts to `ty`.
    pub fn cast(&mut self, a: Value, ty: Scalar) -> R<Value> {
        let x = match a {
            Value::Id(id) => id,
            Value::Int(i) => {
                let l = eval::cast(Literal::from_i64(default_int(i), i), ty);
                return Ok(self.lit(l));
            }
            Value::Float(f) => {
                let l = eval::cast(Literal::F32(f as f32), ty);
                return Ok(self.lit(l));
            }
        };
        let have = self.scalar_of(self.body.ty(x), "cast")?;
        if have == ty {
            return Ok(Value::Id(x));
        }
        if let Some(&c) = self.consts.get(&x) {
            return Ok(self.lit(eval::cast(c, ty)));
        }
        Ok(Value::Id(self.push1(Op::Cast(x, ty), Type::Scalar(ty))))
    }

    /// Reinterprets the bits of `a` as `ty`, a numeric type of the same width.
    pub fn bitcast(&mut self, a: Value, ty: Scalar) -> R<Value> {
        let x = self.materialize(a)?;
        let have = self.scalar_of(self.body.ty(x), "bitcast")?;
        if let Err(why) = eval::bitcast_allowed(have, ty) {
            return Err(self.error(format!("`bitcast` of {have} to {ty}: {why}")));
        }
        if have == ty {
            return Ok(Value::Id(x));
        }
        if let Some(&c) = self.consts.get(&x) {
            if let Ok(l) = eval::bitcast(c, ty) {
                return Ok(self.lit(l));
            }
        }
        Ok(Value::Id(self.push1(Op::Bitcast(x, ty), Type::Scalar(ty))))
    }

    // ── sugar lowered to primitive ops ───────────────────────────────────────

    /// `1 / (1 + exp(-x))`.
    pub fn sigmoid(&mut self, x: Value) -> R<Value> {
        let n = self.unary(UnaryOp::Neg, x)?;
        let e = self.unary(UnaryOp::Exp, n)?;
        let d = self.binary(BinaryOp::Add, Value::Float(1.0), e)?;
        self.binary(BinaryOp::Div, Value::Float(1.0), d)
    }

    /// `x * sigmoid(x)`.
    pub fn silu(&mut self, x: Value) -> R<Value> {
        let s = self.sigmoid(x)?;
        self.binary(BinaryOp::Mul, x, s)
    }

    /// `log(1 + exp(x))`, returning `x` itself above 20 where the two agree in f32.
    pub fn softplus(&mut self, x: Value) -> R<Value> {
        let e = self.unary(UnaryOp::Exp, x)?;
        let s = self.binary(BinaryOp::Add, Value::Float(1.0), e)?;
        let l = self.unary(UnaryOp::Log, s)?;
        let big = self.binary(BinaryOp::Gt, x, Value::Float(20.0))?;
        self.select(big, x, l)
    }

    // ── memory ───────────────────────────────────────────────────────────────

    fn mem_name(&self, m: MemRef) -> String {
        match m {
            MemRef::Param(i) => self.params[i as usize].name.clone(),
            MemRef::Shared(i) => self.body.shared[i as usize].name.clone(),
            MemRef::Local(i) => self.body.locals[i as usize].name.clone(),
            MemRef::Arg(i) => self.mems[i as usize].name.clone(),
        }
    }

    fn array_len(&self, len: Value, what: &str) -> R<u32> {
        match self.known_const(len) {
            Some(l) => match l.as_i64() {
                Some(n) if n > 0 && n <= u32::MAX as i64 => Ok(n as u32),
                _ => Err(self.error(format!("{what} length must be a positive integer, got {l}"))),
            },
            None => Err(self.error(format!(
                "{what} length must be known when the kernel is built: use a literal or a \
                 #[constexpr] parameter, not a runtime value"
            ))),
        }
    }

    fn declare_array(&mut self, shared: bool, name: &str, elem: Scalar, len: Value) -> R<Mem> {
        let what = if shared {
            format!("threadgroup array `{name}`")
        } else {
            format!("stack array `{name}`")
        };
        let len = self.array_len(len, &what)?;
        let list = if shared {
            &mut self.body.shared
        } else {
            &mut self.body.locals
        };
        if list.iter().any(|a| a.name == name) {
            return Err(self.error(format!("{what} is declared twice")));
        }
        let index = list.len() as u32;
        list.push(ArrayDecl {
            name: name.to_string(),
            elem,
            len,
        });
        let mem = if shared {
            MemRef::Shared(index)
        } else {
            MemRef::Local(index)
        };
        Ok(Mem {
            mem,
            elem,
            writable: true,
        })
    }

    /// Declares a threadgroup array of `len` elements (a constant).
    pub fn shared_array(&mut self, name: &str, elem: Scalar, len: Value) -> R<Mem> {
        self.declare_array(true, name, elem, len)
    }

    /// Declares a per-thread stack array of `len` elements (a constant).
    pub fn local_array(&mut self, name: &str, elem: Scalar, len: Value) -> R<Mem> {
        self.declare_array(false, name, elem, len)
    }

    fn index(&mut self, m: Mem, index: Value) -> R<ValueId> {
        let what = format!("the index into `{}`", self.mem_name(m.mem));
        self.coerce(index, Scalar::U32, &what)
    }

    /// `mem[index]`.
    pub fn load(&mut self, m: Mem, index: Value) -> R<Value> {
        let i = self.index(m, index)?;
        Ok(Value::Id(self.push1(
            Op::Load {
                mem: m.mem,
                index: i,
            },
            Type::Scalar(m.elem),
        )))
    }

    /// `mem[index] = value`.
    pub fn store(&mut self, m: Mem, index: Value, value: Value) -> R<()> {
        let name = self.mem_name(m.mem);
        if !m.writable {
            return Err(self.error(format!(
                "`{name}` is read-only; declare the parameter `mut {name}: Tensor<…>` to write it"
            )));
        }
        let i = self.index(m, index)?;
        let what = format!("the value stored into `{name}` ({})", m.elem);
        let v = self.coerce(value, m.elem, &what)?;
        self.push(
            Op::Store {
                mem: m.mem,
                index: i,
                value: v,
            },
            vec![],
        );
        Ok(())
    }

    /// Starts an asynchronous copy of `width` elements (a literal or constexpr) from device
    /// memory `src[src_index..]` to threadgroup memory `dst[dst_index..]`; with `valid`,
    /// the zero-fill form (`valid` false: zeros land, the source is not read). See
    /// [`Op::CopyAsync`].
    pub fn copy_async(
        &mut self,
        dst: Mem,
        dst_index: Value,
        src: Mem,
        src_index: Value,
        width: Value,
        valid: Option<Value>,
    ) -> R<()> {
        let (dname, sname) = (self.mem_name(dst.mem), self.mem_name(src.mem));
        if !matches!(dst.mem, MemRef::Shared(_) | MemRef::Arg(_)) {
            return Err(self.error(format!(
                "`copy_async` copies into threadgroup memory, and `{dname}` is not a threadgroup \
                 array: declare it `let {dname} = threadgroup_array::<{}>(len);`, or use `load`/`store`",
                dst.elem
            )));
        }
        if !matches!(src.mem, MemRef::Param(_) | MemRef::Arg(_)) {
            return Err(self.error(format!(
                "`copy_async` copies from device memory, and `{sname}` is a threadgroup or stack \
                 array: pass a tensor parameter, or copy with `load`/`store`"
            )));
        }
        if !dst.writable {
            return Err(self.error(format!("`{dname}` is read-only; declare it `mut`")));
        }
        if dst.elem != src.elem {
            return Err(self.error(format!(
                "`copy_async` copies bits without converting: `{sname}` holds {} but `{dname}` \
                 holds {}; declare the threadgroup array of {}",
                src.elem, dst.elem, src.elem
            )));
        }
        let width =
            match self.known_const(width).and_then(|l| l.as_i64()) {
                Some(w) if w > 0 && w <= 16 => w as u8,
                Some(w) => {
                    return Err(self.error(format!(
                        "`copy_async` of {w} elements: a copy moves 4, 8 or 16 bytes per thread"
                    )))
                }
                None => return Err(self.error(
                    "the element count of `copy_async` must be known when the kernel is built: \
                     use a literal or a #[constexpr] parameter",
                )),
            };
        check_copy_width(src.elem, width).map_err(|m| self.error(m))?;
        let di = self.coerce(dst_index, Scalar::U32, &format!("the index into `{dname}`"))?;
        let si = self.coerce(src_index, Scalar::U32, &format!("the index into `{sname}`"))?;
        let valid = match valid {
            Some(v) => Some(self.coerce(
                v,
                Scalar::Bool,
                "the in-bounds flag of `copy_async_or_zero`",
            )?),
            None => None,
        };
        self.push(
            Op::CopyAsync {
                dst: dst.mem,
                dst_index: di,
                src: src.mem,
                src_index: si,
                width,
                valid,
            },
            vec![],
        );
        Ok(())
    }

    /// Commits the asynchronous copies this thread issued since its last commit as a group.
    pub fn commit_copies(&mut self) {
        self.push(Op::CommitCopies, vec![]);
    }

    /// Waits until at most `pending` (a literal or constexpr) of this thread's committed
    /// groups of copies are in flight.
    pub fn wait_copies(&mut self, pending: Value) -> R<()> {
        match self.known_const(pending).and_then(|l| l.as_i64()) {
            Some(n) if (0..=u32::MAX as i64).contains(&n) => {
                self.push(Op::WaitCopies(n as u32), vec![]);
                Ok(())
            }
            Some(n) => Err(self.error(format!(
                "`wait_copies({n})`: the number of groups left in flight is 0 or more"
            ))),
            None => Err(self.error(
                "the count of `wait_copies` must be known when the kernel is built (the GPU \
                 instruction takes an immediate): use a literal or a #[constexpr] parameter",
            )),
        }
    }

    /// Atomic read-modify-write; returns the old value.
    pub fn atomic(&mut self, op: AtomicOp, m: Mem, index: Value, value: Value) -> R<Value> {
        let name = self.mem_name(m.mem);
        if matches!(m.mem, MemRef::Local(_)) {
            return Err(self.error(format!(
                "`{}` on the stack array `{name}`: atomics need device or threadgroup memory",
                op.name()
            )));
        }
        if !m.writable {
            return Err(self.error(format!("`{name}` is read-only; declare it `mut`")));
        }
        let ok = match op {
            AtomicOp::Add => matches!(m.elem, Scalar::F32 | Scalar::U32 | Scalar::I32),
            AtomicOp::Max | AtomicOp::Min | AtomicOp::And | AtomicOp::Or => {
                matches!(m.elem, Scalar::U32 | Scalar::I32)
            }
            AtomicOp::Exchange => m.elem.size_bytes() == 4,
        };
        if !ok {
            return Err(self.error(format!(
                "`{}` is not available on {} elements (`{name}`)",
                op.name(),
                m.elem
            )));
        }
        let i = self.index(m, index)?;
        let v = self.coerce(value, m.elem, &format!("the operand of `{}`", op.name()))?;
        Ok(Value::Id(self.push1(
            Op::Atomic {
                op,
                mem: m.mem,
                index: i,
                value: v,
            },
            Type::Scalar(m.elem),
        )))
    }

    // ── matrix fragments ─────────────────────────────────────────────────────

    /// Declares a 16×16 matrix fragment: an `A` or `B` operand of f16 / bf16, or an f32
    /// accumulator; or an f32 row vector (role [`FragRole::Rows`]), one value per row.
    pub fn frag(&mut self, name: &str, role: FragRole, elem: Scalar) -> R<Frag> {
        if !role.holds(elem) {
            return Err(self.error(format!(
                "matrix fragment `{name}`: {} operands hold f16 or bf16, accumulators and row \
                 vectors f32, not {elem}",
                role.name()
            )));
        }
        if self.body.frags.iter().any(|f| f.name == name) {
            return Err(self.error(format!("matrix fragment `{name}` is declared twice")));
        }
        let index = self.body.frags.len() as u32;
        self.body.frags.push(FragDecl {
            name: name.to_string(),
            role,
            elem,
        });
        Ok(Frag { index, role, elem })
    }

    fn frag_name(&self, f: Frag) -> String {
        self.body
            .frags
            .get(f.index as usize)
            .map(|d| d.name.clone())
            .unwrap_or_default()
    }

    /// `value` as the f32 operand of a fragment op (`what` names it in errors).
    fn frag_f32(&mut self, value: Value, what: &str) -> R<ValueId> {
        Ok(match value {
            Value::Id(_) => self.coerce(value, Scalar::F32, what)?,
            Value::Int(i) => self.constant(Literal::F32(i as f32)),
            Value::Float(x) => self.constant(Literal::F32(x as f32)),
        })
    }

    /// Sets every element of `f` to `value`.
    pub fn frag_fill(&mut self, f: Frag, value: Value) -> R<()> {
        let v = self.frag_f32(value, &format!("the fill value of `{}`", self.frag_name(f)))?;
        self.push(
            Op::FragFill {
                frag: f.index,
                value: v,
            },
            vec![],
        );
        Ok(())
    }

    /// Multiplies every element of accumulator `f` by `value`.
    pub fn frag_scale(&mut self, f: Frag, value: Value) -> R<()> {
        if f.role != FragRole::Acc {
            return Err(self.error(format!(
                "`{}` is an operand fragment; only accumulators are scaled",
                self.frag_name(f)
            )));
        }
        let v = self.frag_f32(value, &format!("the scale of `{}`", self.frag_name(f)))?;
        self.push(
            Op::FragScale {
                frag: f.index,
                value: v,
            },
            vec![],
        );
        Ok(())
    }

    fn frag_mem(&mut self, f: Frag, m: Mem, index: Value, stride: Value) -> R<(ValueId, ValueId)> {
        let (fname, mname) = (self.frag_name(f), self.mem_name(m.mem));
        if f.role == FragRole::Rows {
            return Err(self.error(format!(
                "`{fname}` is a row vector; it never moves to memory (the row ops read and \
                 write it)"
            )));
        }
        if matches!(m.mem, MemRef::Local(_)) {
            return Err(self.error(format!(
                "fragment `{fname}`: `{mname}` is a stack array; fragments move to and from \
                 device or threadgroup memory"
            )));
        }
        if m.elem != f.role.memory_elem(f.elem, m.elem) {
            return Err(self.error(format!(
                "fragment `{fname}` holds {} but `{mname}` holds {}; stage the data through a \
                 threadgroup array of {}",
                f.elem, m.elem, f.elem
            )));
        }
        let i = self.coerce(index, Scalar::U32, &format!("the index into `{mname}`"))?;
        let st = self.coerce(stride, Scalar::U32, &format!("the row stride of `{mname}`"))?;
        Ok((i, st))
    }

    /// Loads `f` from `m`: element `(r, c)` at `index + r·stride + c` (`+ c·stride + r`
    /// when `transpose`); an accumulator also from f16/bf16 memory, widened.
    pub fn frag_load(
        &mut self,
        f: Frag,
        m: Mem,
        index: Value,
        stride: Value,
        transpose: bool,
    ) -> R<()> {
        let (index, stride) = self.frag_mem(f, m, index, stride)?;
        self.push(
            Op::FragLoad {
                frag: f.index,
                mem: m.mem,
                index,
                stride,
                transpose,
            },
            vec![],
        );
        Ok(())
    }

    /// Stores accumulator `f` to `m`: element `(r, c)` at `index + r·stride + c`, as f32
    /// or rounded to the f16/bf16 of `m`.
    pub fn frag_store(&mut self, f: Frag, m: Mem, index: Value, stride: Value) -> R<()> {
        if f.role != FragRole::Acc {
            return Err(self.error(format!(
                "`{}` is an operand fragment; only accumulators are stored",
                self.frag_name(f)
            )));
        }
        if !m.writable {
            let name = self.mem_name(m.mem);
            return Err(self.error(format!(
                "`{name}` is read-only; declare the parameter `mut {name}: Tensor<…>` to write it"
            )));
        }
        let (index, stride) = self.frag_mem(f, m, index, stride)?;
        self.push(
            Op::FragStore {
                frag: f.index,
                mem: m.mem,
                index,
                stride,
            },
            vec![],
        );
        Ok(())
    }

    /// `d = a·b + c`.
    pub fn frag_mma(&mut self, d: Frag, a: Frag, b: Frag, c: Frag) -> R<()> {
        for (f, role, what) in [
            (d, FragRole::Acc, "the result"),
            (a, FragRole::A, "the left operand"),
            (b, FragRole::B, "the right operand"),
            (c, FragRole::Acc, "the addend"),
        ] {
            if f.role != role {
                return Err(self.error(format!(
                    "`matrix_mma(d, a, b, c)`: {what} must be a `{}` fragment, `{}` is `{}`",
                    role.name(),
                    self.frag_name(f),
                    f.role.name()
                )));
            }
        }
        if a.elem != b.elem {
            return Err(self.error(format!(
                "`matrix_mma`: `{}` holds {} but `{}` holds {}",
                self.frag_name(a),
                a.elem,
                self.frag_name(b),
                b.elem
            )));
        }
        self.push(
            Op::FragMma {
                d: d.index,
                a: a.index,
                b: b.index,
                c: c.index,
            },
            vec![],
        );
        Ok(())
    }

    /// Fails unless `f` has role `want` (`what` names it in `verb`'s error).
    fn frag_role(&self, f: Frag, want: FragRole, verb: &str, what: &str) -> R<()> {
        if f.role == want {
            return Ok(());
        }
        let have = match f.role {
            FragRole::Rows => "a row vector (`matrix_rows()`)".to_string(),
            r => format!("a `{}` fragment", r.name()),
        };
        let need = match want {
            FragRole::Rows => "a row vector (`matrix_rows()`)".to_string(),
            FragRole::Acc => "an accumulator (`matrix_acc()`)".to_string(),
            r => format!("a `{}` fragment", r.name()),
        };
        Err(self.error(format!(
            "`{verb}`: {what} must be {need}, `{}` is {have}",
            self.frag_name(f)
        )))
    }

    /// Folds each row of accumulator `f` into row vector `rows` (max or sum).
    pub fn frag_row_reduce(&mut self, op: RowReduce, rows: Frag, f: Frag) -> R<()> {
        self.frag_role(rows, FragRole::Rows, op.name(), "the first argument")?;
        self.frag_role(f, FragRole::Acc, op.name(), "the second argument")?;
        self.push(
            Op::FragRowReduce {
                op,
                rows: rows.index,
                frag: f.index,
            },
            vec![],
        );
        Ok(())
    }

    /// Maps each element of accumulator `f` with its row's value of `rows`.
    pub fn frag_row_map(&mut self, op: RowMap, f: Frag, rows: Frag) -> R<()> {
        self.frag_role(f, FragRole::Acc, op.name(), "the first argument")?;
        self.frag_role(rows, FragRole::Rows, op.name(), "the second argument")?;
        self.push(
            Op::FragRowMap {
                op,
                frag: f.index,
                rows: rows.index,
            },
            vec![],
        );
        Ok(())
    }

    /// Sets the elements `(r, c)` of accumulator `f` with `c − r ≥ diag` or `c ≥ cap` to
    /// `value`.
    pub fn frag_mask(&mut self, f: Frag, diag: Value, cap: Value, value: Value) -> R<()> {
        self.frag_role(f, FragRole::Acc, "matrix_mask", "the first argument")?;
        let diag = self.coerce(diag, Scalar::I32, "the diagonal of `matrix_mask`")?;
        let cap = self.coerce(cap, Scalar::I32, "the column limit of `matrix_mask`")?;
        let value = self.frag_f32(value, "the fill value of `matrix_mask`")?;
        self.push(
            Op::FragMask {
                frag: f.index,
                diag,
                cap,
                value,
            },
            vec![],
        );
        Ok(())
    }

    /// `d = a ∘ b` row by row.
    pub fn frag_rows(&mut self, op: RowsOp, d: Frag, a: Frag, b: Frag) -> R<()> {
        for f in [d, a, b] {
            self.frag_role(f, FragRole::Rows, op.name(), "every argument")?;
        }
        self.push(
            Op::FragRows {
                op,
                d: d.index,
                a: a.index,
                b: b.index,
            },
            vec![],
        );
        Ok(())
    }

    /// `d = b > a + margin ? b : a` row by row.
    pub fn frag_rows_raise(&mut self, d: Frag, a: Frag, b: Frag, margin: Value) -> R<()> {
        for f in [d, a, b] {
            self.frag_role(
                f,
                FragRole::Rows,
                "matrix_rows_max",
                "every fragment argument",
            )?;
        }
        let margin = self.frag_f32(margin, "the margin of `matrix_rows_max`")?;
        self.push(
            Op::FragRowsRaise {
                d: d.index,
                a: a.index,
                b: b.index,
                margin,
            },
            vec![],
        );
        Ok(())
    }

    /// `d = a + b` on accumulators.
    pub fn frag_add(&mut self, d: Frag, a: Frag, b: Frag) -> R<()> {
        for f in [d, a, b] {
            self.frag_role(f, FragRole::Acc, "matrix_add", "every argument")?;
        }
        self.push(
            Op::FragAdd {
                d: d.index,
                a: a.index,
                b: b.index,
            },
            vec![],
        );
        Ok(())
    }

    /// The threadgroup's tile product ([`Op::FragMmaTiles`]): simdgroup `s` adds
    /// `A[16s.., :]·B[16j.., :]ᵀ` into `accs[j]`, both tiles 64 wide in threadgroup memory
    /// in the 128-byte-swizzled layout; with `asynchronous` it only starts (see
    /// [`Builder::frag_mma_wait`]).
    pub fn frag_mma_tiles(
        &mut self,
        accs: &FragArray,
        a: TileOperand<'_>,
        (b, b_index): (Mem, Value),
        (asynchronous, b_kn): (bool, bool),
    ) -> R<()> {
        let n = accs.frags.len();
        if b_kn && !n.is_multiple_of(4) {
            return Err(self.error(format!(
                "`matrix_mma_tiles_kn` takes accumulators four at a time (a tile B of whole \
                 64-column blocks); `{}` has {n}",
                accs.name
            )));
        }
        if n == 0 || n > 16 {
            return Err(self.error(format!(
                "`matrix_mma_tiles` takes an array of 1 to 16 accumulators (16 to 256 output \
                 columns); `{}` has {n}",
                accs.name
            )));
        }
        for &f in &accs.frags {
            self.frag_role(
                f,
                FragRole::Acc,
                "matrix_mma_tiles",
                "the accumulator array",
            )?;
        }
        let tiles: Vec<(Mem, &str)> = match &a {
            TileOperand::Tile(m, _) => vec![(*m, "a"), (b, "b")],
            TileOperand::Frags(fa) => {
                if fa.frags.len() != 4 {
                    return Err(self.error(format!(
                        "`matrix_mma_tiles` takes A in registers as an array of four A \
                         operands (the 64 columns of K, 16 each); `{}` has {}",
                        fa.name,
                        fa.frags.len()
                    )));
                }
                for f in &fa.frags {
                    self.frag_role(*f, FragRole::A, "matrix_mma_tiles", "operand A")?;
                    if f.elem != b.elem {
                        return Err(self.error(format!(
                            "`matrix_mma_tiles`: operand A `{}` holds {} but tile `b` {}",
                            fa.name, f.elem, b.elem
                        )));
                    }
                }
                vec![(b, "b")]
            }
        };
        let first = tiles[0].0;
        for (m, what) in tiles {
            let mname = self.mem_name(m.mem);
            if !matches!(m.mem, MemRef::Shared(_) | MemRef::Arg(_)) {
                return Err(self.error(format!(
                    "`matrix_mma_tiles`: tile `{what}` (`{mname}`) must be a threadgroup array"
                )));
            }
            if !matches!(m.elem, Scalar::F16 | Scalar::BF16) || m.elem != first.elem {
                return Err(self.error(format!(
                    "`matrix_mma_tiles`: the tiles hold f16 or bf16 of one type; `{mname}` \
                     holds {}",
                    m.elem
                )));
            }
        }
        let a = match a {
            TileOperand::Tile(m, index) => TileA::Tile {
                mem: m.mem,
                index: self.coerce(index, Scalar::U32, "the index of tile `a`")?,
            },
            TileOperand::Frags(fa) => TileA::Frags([0, 1, 2, 3].map(|i| fa.frags[i].index)),
        };
        let bi = self.coerce(b_index, Scalar::U32, "the index of tile `b`")?;
        self.push(
            Op::FragMmaTiles {
                accs: accs.frags.iter().map(|f| f.index).collect(),
                a,
                b: b.mem,
                b_index: bi,
                asynchronous,
                b_kn,
            },
            vec![],
        );
        Ok(())
    }

    /// Waits until at most `pending` (known when the kernel is built) of the threadgroup's
    /// asynchronous tile products into `accs` are in flight ([`Op::FragMmaWait`]).
    pub fn frag_mma_wait(&mut self, accs: &FragArray, pending: Value) -> R<()> {
        for &f in &accs.frags {
            self.frag_role(f, FragRole::Acc, "matrix_mma_wait", "the accumulator array")?;
        }
        let pending = match self.known_const(pending).and_then(|l| l.as_i64()) {
            Some(n) if (0..=7).contains(&n) => n as u32,
            Some(n) => {
                return Err(self.error(format!(
                    "`matrix_mma_wait(…, {n})`: the products left in flight are 0 to 7"
                )))
            }
            None => {
                return Err(self.error(
                    "the count of `matrix_mma_wait` must be known when the kernel is built \
                     (the GPU instruction takes an immediate): use a literal or a #[constexpr] \
                     parameter",
                ))
            }
        };
        self.push(
            Op::FragMmaWait {
                accs: accs.frags.iter().map(|f| f.index).collect(),
                pending,
            },
            vec![],
        );
        Ok(())
    }

    /// Operand `dst` (role A) = accumulator `src`, rounded to `dst`'s type.
    pub fn frag_convert(&mut self, dst: Frag, src: Frag) -> R<()> {
        self.frag_role(dst, FragRole::A, "matrix_convert", "the result")?;
        self.frag_role(src, FragRole::Acc, "matrix_convert", "the source")?;
        self.push(
            Op::FragConvert {
                dst: dst.index,
                src: src.index,
            },
            vec![],
        );
        Ok(())
    }

    /// Declares `len` fragments `name[0]`, `name[1]`, … of one role, picked by
    /// [`Builder::frag_pick`]. `len` must be known when the kernel is built.
    pub fn frag_array(
        &mut self,
        name: &str,
        role: FragRole,
        elem: Scalar,
        len: Value,
    ) -> R<FragArray> {
        let n = self.array_len(len, &format!("fragment array `{name}`"))?;
        let frags = (0..n)
            .map(|i| self.frag(&format!("{name}[{i}]"), role, elem))
            .collect::<R<Vec<_>>>()?;
        Ok(FragArray {
            name: name.to_string(),
            frags,
        })
    }

    /// The length of fragment array `a`, a u32 constant (`acc.len()` in the DSL).
    pub fn frag_array_len(&mut self, a: &FragArray) -> Value {
        self.lit(Literal::U32(a.frags.len() as u32))
    }

    /// Runs `op` on the fragments that `picks` (arrays and indices) select. An index known
    /// when the kernel is built picks its fragment directly (one past the end is an error);
    /// any other index becomes a chain of `if index == i` over the array, which the
    /// compiler folds away once the loop that gives the index is unrolled. A runtime
    /// index past the end of its array selects no fragment and `op` does not run.
    pub fn frag_pick(
        &mut self,
        picks: &[(&FragArray, Value)],
        op: &mut dyn FnMut(&mut Self, &[Frag]) -> R<()>,
    ) -> R<()> {
        let mut chosen = Vec::with_capacity(picks.len());
        self.frag_pick_from(picks, &mut chosen, op)
    }

    fn frag_pick_from(
        &mut self,
        picks: &[(&FragArray, Value)],
        chosen: &mut Vec<Frag>,
        op: &mut dyn FnMut(&mut Self, &[Frag]) -> R<()>,
    ) -> R<()> {
        let Some(((arr, index), rest)) = picks.split_first() else {
            return op(self, chosen);
        };
        let len = arr.frags.len();
        // Picks later in the list with the same index (by identity) take the same branch.
        if let Some(c) = self.known_const(*index) {
            let i = c.as_i64().filter(|&i| (0..len as i64).contains(&i));
            let Some(i) = i else {
                return Err(self.error(format!(
                    "fragment array `{}` has {len} fragments; index {c} is past its end",
                    arr.name
                )));
            };
            chosen.push(arr.frags[i as usize]);
            self.frag_pick_from(rest, chosen, op)?;
            chosen.pop();
            return Ok(());
        }
        let idx = self.coerce(
            *index,
            Scalar::U32,
            &format!("the index into `{}`", arr.name),
        )?;
        for (i, &f) in arr.frags.iter().enumerate() {
            let cond = self.binary(BinaryOp::Eq, Value::Id(idx), Value::Int(i as i64))?;
            self.begin_if(cond)?;
            chosen.push(f);
            // Later picks by the same index value resolve to the same position.
            let same: Vec<(&FragArray, Value)> = rest
                .iter()
                .map(|&(a, v)| {
                    if v == *index {
                        (a, Value::Int(i as i64))
                    } else {
                        (a, v)
                    }
                })
                .collect();
            let r = self.frag_pick_from(&same, chosen, op);
            chosen.pop();
            r?;
            self.begin_else(&[])?;
            self.end_if(&[])?;
        }
        Ok(())
    }

    // ── collectives ──────────────────────────────────────────────────────────

    /// Threadgroup barrier.
    pub fn barrier(&mut self) {
        self.push(Op::Barrier, vec![]);
    }

    /// Simdgroup barrier.
    pub fn simd_barrier(&mut self) {
        self.push(Op::SimdBarrier, vec![]);
    }

    /// A simdgroup reduction or scan.
    pub fn simd(&mut self, op: SimdOp, v: Value) -> R<Value> {
        let what = format!("`{}`", op.name());
        let (x, ty) = self.scalar_type(v, &what)?;
        let ok = match op {
            SimdOp::Sum | SimdOp::Prod | SimdOp::Max | SimdOp::Min => ty.is_numeric(),
            SimdOp::PrefixSum | SimdOp::PrefixExclusiveSum => ty.is_numeric(),
            SimdOp::And | SimdOp::Or | SimdOp::Xor => ty.is_int() || ty == Scalar::Bool,
            SimdOp::All | SimdOp::Any => ty == Scalar::Bool,
        };
        if !ok {
            return Err(self.error(format!("{what} is not defined on {ty}")));
        }
        Ok(Value::Id(self.push1(Op::Simd(op, x), Type::Scalar(ty))))
    }

    /// A lane exchange within the simdgroup.
    pub fn shuffle(&mut self, kind: ShuffleKind, v: Value, arg: Value) -> R<Value> {
        let what = format!("`{}`", kind.name());
        let (x, ty) = self.scalar_type(v, &what)?;
        let a = self.coerce(arg, Scalar::U32, &format!("the lane argument of {what}"))?;
        Ok(Value::Id(self.push1(
            Op::Shuffle {
                kind,
                value: x,
                arg: a,
            },
            Type::Scalar(ty),
        )))
    }

    /// A threadgroup-wide reduction.
    pub fn group_reduce(&mut self, op: ReduceOp, v: Value) -> R<Value> {
        let what = format!("`{}`", op.name());
        let (x, ty) = self.scalar_type(v, &what)?;
        if !ty.is_numeric() {
            return Err(self.error(format!("{what} is not defined on {ty}")));
        }
        Ok(Value::Id(
            self.push1(Op::GroupReduce(op, x), Type::Scalar(ty)),
        ))
    }

    // ── control flow ─────────────────────────────────────────────────────────

    /// Opens the `then` block of an `if`.
    pub fn begin_if(&mut self, cond: Value) -> R<()> {
        let c = self.coerce(cond, Scalar::Bool, "the condition of `if`")?;
        self.frames.push(Frame {
            kind: FrameKind::Then { cond: c },
            block: Block::default(),
            loc: self.loc,
        });
        Ok(())
    }

    /// Closes the `then` block with the values it yields and opens the `else` block.
    pub fn begin_else(&mut self, then_yields: &[Value]) -> R<()> {
        let frame = self.pop_frame()?;
        let FrameKind::Then { cond } = frame.kind else {
            return Err(self.error("internal: `else` without a matching `if`"));
        };
        self.frames.push(Frame {
            kind: FrameKind::Else {
                cond,
                then_block: frame.block,
                then_yields: then_yields.to_vec(),
            },
            block: Block::default(),
            loc: frame.loc,
        });
        Ok(())
    }

    /// Closes the `else` block with the values it yields; returns the `if`'s results.
    pub fn end_if(&mut self, else_yields: &[Value]) -> R<Vec<Value>> {
        let frame = self.pop_frame()?;
        let FrameKind::Else {
            cond,
            mut then_block,
            then_yields,
        } = frame.kind
        else {
            return Err(self.error("internal: end of `if` without `else`"));
        };
        let mut else_block = frame.block;
        if then_yields.len() != else_yields.len() {
            return Err(self.error(format!(
                "the branches of `if` yield {} and {} values",
                then_yields.len(),
                else_yields.len()
            )));
        }
        let mut results = Vec::new();
        for (k, (&t, &e)) in then_yields.iter().zip(else_yields).enumerate() {
            let what = format!("value {k} of the `if` branches");
            let ty = match (self.type_of(t), self.type_of(e)) {
                (Some(a), Some(b)) if a != b => {
                    return Err(self.error(format!(
                        "the branches of `if` give different types for {what}: {a} and {b}"
                    )))
                }
                (Some(a), _) | (None, Some(a)) => self.scalar_of(a, &what)?,
                (None, None) => match (t, e) {
                    (Value::Float(_), _) | (_, Value::Float(_)) => Scalar::F32,
                    _ => Scalar::U32,
                },
            };
            let ty_then = self.coerce_into(&mut then_block, t, ty, &what)?;
            let ty_else = self.coerce_into(&mut else_block, e, ty, &what)?;
            then_block.yields.push(ty_then);
            else_block.yields.push(ty_else);
            results.push(self.body.new_value(Type::Scalar(ty)));
        }
        let saved = self.loc;
        self.loc = frame.loc;
        self.push(
            Op::If {
                cond,
                then_block,
                else_block,
            },
            results.clone(),
        );
        self.loc = saved;
        Ok(results.into_iter().map(Value::Id).collect())
    }

    /// Like `coerce`, but a literal's constant goes at the end of `block` (a closed branch).
    fn coerce_into(&mut self, block: &mut Block, v: Value, ty: Scalar, what: &str) -> R<ValueId> {
        match v {
            Value::Id(_) => self.coerce(v, ty, what),
            _ => {
                // Build the constant in the current frame, then move it into `block`.
                let id = self.coerce(v, ty, what)?;
                let frame = self.frames.last_mut().expect("root frame");
                if let Some(pos) = frame
                    .block
                    .insts
                    .iter()
                    .rposition(|i| i.results.first() == Some(&id))
                {
                    let inst = frame.block.insts.remove(pos);
                    block.insts.push(inst);
                }
                Ok(id)
            }
        }
    }

    /// Opens a `for` loop over `start..end` by `step`, carrying `carried` values (the
    /// current values of the outer variables the body assigns). Returns the induction
    /// variable and the carried values as seen inside the body.
    pub fn begin_for(
        &mut self,
        start: Value,
        end: Value,
        step: Value,
        carried: &[Value],
    ) -> R<(Value, Vec<Value>)> {
        let (s, e) = self.unify(start, end, "the bounds of `for`")?;
        let ty = self.scalar_of(self.body.ty(s), "the bounds of `for`")?;
        if !matches!(ty, Scalar::U32 | Scalar::I32) {
            return Err(self.error(format!("loop bounds must be u32 or i32, got {ty}")));
        }
        let st = self.coerce(step, ty, "the step of `for`")?;
        if let Some(c) = self.consts.get(&st) {
            if c.as_i64().is_some_and(|v| v <= 0) {
                return Err(self.error(format!("the step of `for` must be positive, got {c}")));
            }
        }
        let mut inits = Vec::new();
        for &c in carried {
            inits.push(self.materialize(c)?);
        }
        let mut block = Block::default();
        let iv = self.body.new_value(Type::Scalar(ty));
        block.args.push(iv);
        let mut inner = Vec::new();
        for &i in &inits {
            let t = self.body.ty(i);
            let a = self.body.new_value(t);
            block.args.push(a);
            inner.push(Value::Id(a));
        }
        self.frames.push(Frame {
            kind: FrameKind::For {
                start: s,
                end: e,
                step: st,
                inits,
            },
            block,
            loc: self.loc,
        });
        Ok((Value::Id(iv), inner))
    }

    /// Closes the innermost `for` loop with the carried values at the end of its body;
    /// returns the carried values after the loop.
    pub fn end_for(&mut self, next: &[Value]) -> R<Vec<Value>> {
        let (inits_len, types) = match self.frames.last() {
            Some(Frame {
                kind: FrameKind::For { inits, .. },
                ..
            }) => (
                inits.len(),
                inits.iter().map(|&i| self.body.ty(i)).collect::<Vec<_>>(),
            ),
            _ => return Err(self.error("internal: end of `for` without a loop")),
        };
        if next.len() != inits_len {
            return Err(self.error(format!(
                "internal: loop carries {inits_len} values but {} were yielded",
                next.len()
            )));
        }
        let mut yields = Vec::new();
        for (k, (&v, t)) in next.iter().zip(&types).enumerate() {
            let ty = self.scalar_of(*t, "a loop-carried value")?;
            yields.push(self.coerce(v, ty, &format!("loop-carried value {k}"))?);
        }
        let frame = self.pop_frame()?;
        let FrameKind::For {
            start,
            end,
            step,
            inits,
        } = frame.kind
        else {
            return Err(self.error("internal: end of `for` without a loop"));
        };
        let mut body = frame.block;
        body.yields = yields;
        let results: Vec<ValueId> = types.iter().map(|&t| self.body.new_value(t)).collect();
        let saved = self.loc;
        self.loc = frame.loc;
        self.push(
            Op::For {
                bounds: [start, end, step],
                inits,
                body,
            },
            results.clone(),
        );
        self.loc = saved;
        Ok(results.into_iter().map(Value::Id).collect())
    }

    fn pop_frame(&mut self) -> R<Frame> {
        if self.frames.len() <= 1 {
            return Err(self.error("internal: unbalanced control flow"));
        }
        Ok(self.frames.pop().expect("checked above"))
    }

    /// Calls a DSL function.
    pub fn call(&mut self, func: Arc<Function>, args: &[CallArg]) -> R<Vec<Value>> {
        let name = func.name.clone();
        if func.order.len() != args.len() {
            return Err(self.error(format!(
                "`{name}` takes {} argument(s), {} given",
                func.order.len(),
                args.len()
            )));
        }
        let params = func.param_types();
        let (mut ids, mut mems, mut frags) = (Vec::new(), Vec::new(), Vec::new());
        let mut n_frag_args = 0;
        for (k, (a, kind)) in args.iter().zip(&func.order).enumerate() {
            match (a, kind) {
                (a, ArgKind::Fragments) => {
                    let Some(want) = func.frags.get(n_frag_args) else {
                        return Err(self.error(format!(
                            "internal: `{name}` lists more fragment arguments than it declares"
                        )));
                    };
                    n_frag_args += 1;
                    frags.extend(self.frag_call_arg(&name, k, a, want)?);
                }
                (CallArg::Frag(f), kind) => {
                    return Err(self.error(format!(
                        "argument {k} of `{name}` is {}, not a matrix fragment; `{}` is one",
                        value_or_memory(*kind),
                        self.frag_name(*f)
                    )))
                }
                (CallArg::Frags(fa), kind) => {
                    return Err(self.error(format!(
                        "argument {k} of `{name}` is {}, not matrix fragments; `{}` is a \
                         fragment array",
                        value_or_memory(*kind),
                        fa.name
                    )))
                }
                (&CallArg::Value(v), ArgKind::Value) => {
                    let ty = self.scalar_of(params[ids.len()], "a function argument")?;
                    ids.push(self.coerce(v, ty, &format!("argument {k} of `{name}`"))?);
                }
                (&CallArg::Memory(m), ArgKind::Memory) => {
                    let want = &func.mems[mems.len()];
                    let mname = self.mem_name(m.mem);
                    if m.elem != want.elem {
                        return Err(self.error(format!(
                            "argument {k} of `{name}`: `{mname}` holds {} but `{}` is memory \
                             of {}",
                            m.elem, want.name, want.elem
                        )));
                    }
                    if want.writable && !m.writable {
                        return Err(self.error(format!(
                            "argument {k} of `{name}`: `{}` stores to its memory but `{mname}` \
                             is read-only",
                            want.name
                        )));
                    }
                    mems.push(m.mem);
                }
                (CallArg::Value(_), ArgKind::Memory) => {
                    return Err(self.error(format!(
                        "argument {k} of `{name}` is memory (a tensor or an array), not a value"
                    )))
                }
                (CallArg::Memory(m), ArgKind::Value) => {
                    return Err(self.error(format!(
                        "argument {k} of `{name}` is a value; `{}` is memory: pass a loaded \
                         element",
                        self.mem_name(m.mem)
                    )))
                }
            }
        }
        let results: Vec<ValueId> = func
            .return_types()
            .into_iter()
            .map(|t| self.body.new_value(t))
            .collect();
        self.push(
            Op::Call {
                func,
                args: ids,
                mems,
                frags,
            },
            results.clone(),
        );
        Ok(results.into_iter().map(Value::Id).collect())
    }

    /// Calls a DSL function used as a value: it must return exactly one value.
    pub fn call_one(&mut self, func: Arc<Function>, args: &[CallArg]) -> R<Value> {
        let name = func.name.clone();
        let results = self.call(func, args)?;
        match results.as_slice() {
            [v] => Ok(*v),
            _ => Err(self.error(format!(
                "`{name}` returns {} values but is used as one value; destructure it with \
                 `let (a, b) = {name}(…);`",
                results.len()
            ))),
        }
    }

    /// The caller's fragments for fragment argument `want` (argument `k` of `name`):
    /// one fragment, or an array of the same length, of the role and element type it
    /// declares.
    fn frag_call_arg(&self, name: &str, k: usize, a: &CallArg, want: &FragArg) -> R<Vec<u32>> {
        let (given, len, desc) = match a {
            CallArg::Frag(f) => (vec![*f], None, format!("`{}`", self.frag_name(*f))),
            CallArg::Frags(fa) => (
                fa.frags.clone(),
                Some(fa.frags.len() as u32),
                format!("`{}`", fa.name),
            ),
            CallArg::Value(_) => {
                return Err(self.error(format!(
                    "argument {k} of `{name}` is `{}: {}`, not a value: pass a fragment \
                     declared with `matrix_…()`",
                    want.name,
                    want.describe()
                )))
            }
            CallArg::Memory(m) => {
                return Err(self.error(format!(
                    "argument {k} of `{name}` is `{}: {}`, not memory; `{}` is memory",
                    want.name,
                    want.describe(),
                    self.mem_name(m.mem)
                )))
            }
        };
        let (role, elem) = match given.first() {
            Some(f) => (f.role, f.elem),
            None => (want.role, want.elem),
        };
        let have = crate::kernel::describe_frags(role, elem, len);
        if role != want.role || elem != want.elem || len != want.len {
            return Err(self.error(format!(
                "argument {k} of `{name}`: `{}` is `{}`, given {desc} of type `{have}`",
                want.name,
                want.describe()
            )));
        }
        Ok(given.iter().map(|f| f.index).collect())
    }

    /// The dtypes (and fragment array lengths) of call arguments, literals defaulted, so
    /// a generic function can be instantiated for them.
    pub fn arg_types(&self, args: &[CallArg]) -> Vec<ArgInfo> {
        args.iter()
            .map(|a| match a {
                CallArg::Value(v) => ArgInfo {
                    elem: self.type_of(*v).and_then(Type::scalar),
                    len: None,
                },
                CallArg::Memory(m) => ArgInfo {
                    elem: Some(m.elem),
                    len: None,
                },
                CallArg::Frag(f) => ArgInfo {
                    elem: Some(f.elem),
                    len: None,
                },
                CallArg::Frags(fa) => ArgInfo {
                    elem: fa.frags.first().map(|f| f.elem),
                    len: Some(fa.frags.len() as u32),
                },
            })
            .collect()
    }

    // ── finishing ────────────────────────────────────────────────────────────

    fn finish_body(&mut self) -> R<Block> {
        if self.frames.len() != 1 {
            return Err(self.error("internal: unclosed `if` or `for`"));
        }
        Ok(std::mem::take(&mut self.frames[0].block))
    }

    /// Declares the kernel's launch shape (see [`Occupancy`]): at most `group_size`
    /// threads per threadgroup, `groups_per_core` threadgroups resident per core.
    pub fn occupancy(&mut self, group_size: u32, groups_per_core: u32) -> R<()> {
        if group_size == 0 || group_size > MAX_GROUP_SIZE || groups_per_core == 0 {
            return Err(self.error(format!(
                "group_size must be in 1..={MAX_GROUP_SIZE} and groups_per_core at least 1, \
                 got {group_size} and {groups_per_core}"
            )));
        }
        self.occupancy = Some(Occupancy {
            group_size,
            groups_per_core,
        });
        Ok(())
    }

    /// Finishes a kernel.
    pub fn finish_kernel(mut self) -> R<Kernel> {
        let block = self.finish_body()?;
        let writes = self
            .params
            .iter()
            .any(|p| matches!(p.kind, ParamKind::Tensor { writable: true, .. }));
        if !writes {
            return Err(self.error("a kernel needs at least one `mut` tensor to write its output"));
        }
        self.body.block = block;
        Ok(Kernel {
            name: self.name,
            params: self.params,
            specialization: self.specialization,
            occupancy: self.occupancy,
            body: self.body,
        })
    }

    /// Finishes a DSL function returning `returns`, each converted to the declared type.
    pub fn finish_function(mut self, returns: &[Value], types: &[Scalar]) -> R<Function> {
        if returns.len() != types.len() {
            return Err(self.error(format!(
                "the function returns {} value(s) but declares {}",
                returns.len(),
                types.len()
            )));
        }
        let mut yields = Vec::new();
        for (k, (&r, &t)) in returns.iter().zip(types).enumerate() {
            yields.push(self.coerce(r, t, &format!("return value {k}"))?);
        }
        let mut block = self.finish_body()?;
        block.yields = yields;
        if !self.params.is_empty() {
            return Err(self.error("internal: a function cannot declare kernel parameters"));
        }
        self.body.block = block;
        Ok(Function {
            name: self.name,
            body: self.body,
            mems: self.mems,
            frags: self.frag_args,
            order: self.order,
        })
    }
}

/// How an error names a value or memory argument.
fn value_or_memory(kind: ArgKind) -> &'static str {
    match kind {
        ArgKind::Value => "a value",
        ArgKind::Memory => "memory",
        ArgKind::Fragments => "matrix fragments",
    }
}

/// Whether `width` elements of `elem` make one asynchronous copy (4, 8 or 16 bytes), else
/// what to write instead.
pub fn check_copy_width(elem: Scalar, width: u8) -> Result<(), String> {
    if elem == Scalar::Bool {
        return Err(
            "`copy_async` moves numbers; copy bool data as u8 (or with `load`/`store`)".into(),
        );
    }
    let bytes = elem.size_bytes() as u32 * width as u32;
    if matches!(bytes, 4 | 8 | 16) {
        return Ok(());
    }
    let fits: Vec<String> = [4u32, 8, 16]
        .iter()
        .filter(|&&b| b % elem.size_bytes() as u32 == 0)
        .map(|b| (b / elem.size_bytes() as u32).to_string())
        .collect();
    Err(format!(
        "`copy_async` of {width} {elem} elements moves {bytes} bytes; a copy moves 4, 8 or 16 \
         bytes per thread: copy {} elements of {elem} (16 bytes is the fastest)",
        fits.join(", ")
    ))
}

fn default_int(i: i64) -> Scalar {
    if i < 0 {
        Scalar::I32
    } else {
        Scalar::U32
    }
}
