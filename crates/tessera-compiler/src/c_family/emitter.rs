//! The walk over an optimised kernel: value naming, variable declarations, the dispatch of
//! every op, and the memory references the dialects write into.

use super::{Dialect, EmitError, Fragments, Idents, R};
use std::collections::HashMap;
use tessera_ir::{
    Block, Inst, Kernel, Literal, MemRef, Op, ParamKind, Scalar, TileA, Type, ValueId,
};

/// Which address space a memory reference lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Space {
    Device,
    Threadgroup,
    Thread,
}

/// A memory reference resolved to its identifier.
#[derive(Clone, Debug)]
pub(crate) struct Mem {
    pub name: String,
    pub elem: Scalar,
    pub space: Space,
    pub writable: bool,
}

/// How the generated code names a value: one expression per lane, and, where one variable
/// holds the whole vector, that variable.
#[derive(Clone, Debug)]
pub(crate) struct Val {
    pub lanes: Vec<String>,
    pub var: Option<String>,
}

impl Val {
    /// A scalar (or single-lane) value named by `expr`.
    pub fn scalar(expr: String) -> Val {
        Val {
            lanes: vec![expr],
            var: None,
        }
    }
}

/// The emitter's state: the kernel, the dialect's own state `d`, the body text so far and
/// the name of every value emitted.
pub(crate) struct Emitter<'k, D: Dialect> {
    pub k: &'k Kernel,
    pub d: D,
    pub names: Idents,
    /// The kernel body's text so far.
    pub out: String,
    pub depth: usize,
    vals: Vec<Option<Val>>,
    consts: HashMap<ValueId, Literal>,
    /// The op being emitted, for messages.
    current: String,
    /// The kernel multiplies tiles on warpgroups (its barriers fence for them).
    tile_products: bool,
}

impl<'k, D: Dialect> Emitter<'k, D> {
    pub fn new(k: &'k Kernel, d: D) -> Self {
        let tile_products = k.uses_warpgroups();
        let mut consts = HashMap::new();
        k.body.block.walk(&mut |i| {
            if let (Op::Const(l), Some(r)) = (&i.op, i.result()) {
                consts.insert(r, *l);
            }
        });
        Emitter {
            k,
            d,
            names: D::names(k),
            out: String::new(),
            depth: 1,
            vals: vec![None; k.body.values.len()],
            consts,
            current: String::new(),
            tile_products,
        }
    }

    // ── messages ─────────────────────────────────────────────────────────────

    pub fn malformed(&self, message: impl Into<String>) -> EmitError {
        EmitError::Malformed {
            target: D::TARGET,
            kernel: self.k.specialized_name(),
            op: self.current.clone(),
            message: message.into(),
        }
    }

    pub fn unsupported(&self, what: impl Into<String>) -> EmitError {
        EmitError::Unsupported {
            target: D::TARGET,
            kernel: self.k.specialized_name(),
            op: self.current.clone(),
            what: what.into(),
        }
    }

    fn not_lowered(&self, hint: &'static str) -> EmitError {
        EmitError::NotLowered {
            target: D::TARGET,
            kernel: self.k.specialized_name(),
            op: self.current.clone(),
            hint,
        }
    }

    // ── values ───────────────────────────────────────────────────────────────

    /// Writes one indented line of the body.
    pub fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.out.push_str(D::INDENT);
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    pub fn ty(&self, v: ValueId) -> R<Type> {
        self.k
            .body
            .values
            .get(v.index())
            .copied()
            .ok_or_else(|| self.malformed(format!("{v} is not a value of this kernel")))
    }

    pub fn scalar_ty(&self, v: ValueId) -> R<Scalar> {
        match self.ty(v)? {
            Type::Scalar(s) => Ok(s),
            t => Err(self.unsupported(format!(
                "a vector operand ({v}: {t}) where a scalar is needed"
            ))),
        }
    }

    /// How `v` is named.
    pub fn value(&self, v: ValueId) -> R<&Val> {
        self.vals
            .get(v.index())
            .and_then(Option::as_ref)
            .ok_or_else(|| self.malformed(format!("{v} is used before it is defined")))
    }

    /// The expression of the scalar `v`.
    pub fn val(&self, v: ValueId) -> R<String> {
        match self.value(v)?.lanes.as_slice() {
            [one] => Ok(one.clone()),
            _ => Err(self.malformed(format!("{v} is a vector; a scalar is needed here"))),
        }
    }

    /// The value of the integer constant `v`, if it is one.
    pub fn const_int(&self, v: ValueId) -> Option<i64> {
        self.consts.get(&v).and_then(|l| l.as_i64())
    }

    /// The value of the u32 constant `v`, if it is one.
    pub fn const_u32(&self, v: ValueId) -> Option<u32> {
        match self.consts.get(&v) {
            Some(Literal::U32(c)) => Some(*c),
            _ => None,
        }
    }

    /// Names `v` without emitting code.
    pub fn bind(&mut self, v: ValueId, val: Val) -> R<()> {
        if v.index() >= self.vals.len() {
            return Err(self.malformed(format!("{v} is not a value of this kernel")));
        }
        self.vals[v.index()] = Some(val);
        Ok(())
    }

    /// `const` variables holding `lanes` as the value `v`.
    pub fn define(&mut self, v: ValueId, lanes: Vec<String>) -> R<()> {
        let init = Val { lanes, var: None };
        self.declare(v, Some(&init), true)
    }

    /// Declares the variable(s) of `v` — `const` and initialised for a value, mutable for
    /// `if` / `for` state — as one whole-vector variable where the dialect has vector
    /// types, else one variable per lane (`v12`, or `v12_0`, `v12_1`…).
    pub fn declare(&mut self, v: ValueId, init: Option<&Val>, constant: bool) -> R<()> {
        let t = self.ty(v)?;
        let width = t.width();
        if let Some(i) = init {
            if i.lanes.len() != width {
                return Err(self.malformed(format!(
                    "{v} has type {t} but {} lanes were given",
                    i.lanes.len()
                )));
            }
        }
        let q = if constant { "const " } else { "" };
        let base = format!("v{}", v.0);
        let whole = match t {
            Type::Vector(s, w) => self.d.vector_type(s, w),
            Type::Scalar(_) => None,
        };
        let val = if let Some(vt) = whole {
            match init {
                Some(i) => {
                    let e = match &i.var {
                        Some(var) => var.clone(),
                        None => format!("{{{{{}}}}}", i.lanes.join(", ")),
                    };
                    self.line(&format!("{q}{vt} {base} = {e};"));
                }
                None => self.line(&format!("{vt} {base};")),
            }
            Val {
                lanes: (0..width).map(|k| D::lane_of(&base, k)).collect(),
                var: Some(base),
            }
        } else {
            let ty = D::scalar_type(t.elem());
            let mut lanes = Vec::with_capacity(width);
            for k in 0..width {
                let n = if width == 1 {
                    base.clone()
                } else {
                    format!("{base}_{k}")
                };
                match init {
                    Some(i) => self.line(&format!("{q}{ty} {n} = {};", i.lanes[k])),
                    None => self.line(&format!("{ty} {n};")),
                }
                lanes.push(n);
            }
            Val { lanes, var: None }
        };
        self.bind(v, val)
    }

    /// `target = source`, whole where both are one variable, else lane by lane.
    pub fn assign(&mut self, target: ValueId, source: ValueId) -> R<()> {
        let (t, s) = (self.value(target)?.clone(), self.value(source)?.clone());
        if let (Some(a), Some(b)) = (&t.var, &s.var) {
            self.line(&format!("{a} = {b};"));
            return Ok(());
        }
        if t.lanes.len() != s.lanes.len() {
            return Err(self.malformed(format!("{source} does not match the type of {target}")));
        }
        for (a, b) in t.lanes.iter().zip(&s.lanes) {
            self.line(&format!("{a} = {b};"));
        }
        Ok(())
    }

    /// The memory a reference names.
    pub fn mem(&self, m: MemRef) -> R<Mem> {
        let n = &self.names;
        let found = match m {
            MemRef::Param(i) => match self.k.params.get(i as usize).map(|p| p.kind) {
                Some(ParamKind::Tensor { elem, writable }) => Some(Mem {
                    name: n.params[i as usize].clone(),
                    elem,
                    space: Space::Device,
                    writable,
                }),
                _ => None,
            },
            MemRef::Shared(i) => self.k.body.shared.get(i as usize).map(|a| Mem {
                name: n.shared[i as usize].clone(),
                elem: a.elem,
                space: Space::Threadgroup,
                writable: true,
            }),
            MemRef::Local(i) => self.k.body.locals.get(i as usize).map(|a| Mem {
                name: n.locals[i as usize].clone(),
                elem: a.elem,
                space: Space::Thread,
                writable: true,
            }),
            MemRef::Arg(_) => None,
        };
        found.ok_or_else(|| self.malformed(format!("{m} is not a memory of this kernel")))
    }

    /// The memory a store writes, which must be writable.
    fn mem_mut(&self, m: MemRef) -> R<Mem> {
        let mem = self.mem(m)?;
        if !mem.writable {
            return Err(self.malformed(format!("a store into the read-only tensor `{}`", mem.name)));
        }
        Ok(mem)
    }

    /// Fragment `f`'s index, checked.
    fn frag(&self, f: u32) -> R<usize> {
        let i = f as usize;
        if i < self.k.body.frags.len() {
            Ok(i)
        } else {
            Err(self.malformed(format!("matrix fragment {f} is not declared")))
        }
    }

    fn result(&self, inst: &Inst) -> R<ValueId> {
        inst.result().ok_or_else(|| {
            self.malformed(format!(
                "an op with one result has {} results",
                inst.results.len()
            ))
        })
    }
}

impl<D: Fragments> Emitter<'_, D> {
    /// Emits the whole kernel.
    pub fn run(mut self) -> R<D::Output> {
        D::prologue(&mut self)?;
        let top = &self.k.body.block;
        if !top.yields.is_empty() || !top.args.is_empty() {
            self.current = "kernel body".into();
            return Err(self.malformed("a kernel's top block has no arguments or yields"));
        }
        self.block(top)?;
        D::finish(self)
    }

    pub fn block(&mut self, b: &Block) -> R<()> {
        for inst in &b.insts {
            self.current = op_name(&inst.op);
            self.inst(inst)?;
        }
        Ok(())
    }

    /// An elementwise op over `operands` (a scalar operand applies to every lane).
    fn elementwise(
        &mut self,
        r: ValueId,
        operands: &[ValueId],
        f: impl Fn(&mut D, &[&str]) -> Result<String, String>,
    ) -> R<()> {
        let width = self.ty(r)?.width();
        let vals = operands
            .iter()
            .map(|&v| self.value(v).cloned())
            .collect::<R<Vec<_>>>()?;
        let width = vals.iter().map(|v| v.lanes.len()).fold(width, usize::max);
        let mut lanes = Vec::with_capacity(width);
        for k in 0..width {
            let ops: Vec<&str> = vals
                .iter()
                .map(|v| v.lanes.get(k).unwrap_or(&v.lanes[0]).as_str())
                .collect();
            let e = f(&mut self.d, &ops).map_err(|m| self.unsupported(m))?;
            lanes.push(e);
        }
        self.define(r, lanes)
    }

    /// Defines `r` as `lanes`: by expression where the dialect inlines views, else as a
    /// `const` variable.
    fn view(&mut self, r: ValueId, lanes: Vec<String>) -> R<()> {
        if D::INLINE_VIEWS {
            if lanes.len() != self.ty(r)?.width() {
                return Err(self.malformed("the lanes do not match the result type"));
            }
            self.bind(r, Val { lanes, var: None })
        } else {
            self.define(r, lanes)
        }
    }

    fn inst(&mut self, inst: &Inst) -> R<()> {
        match &inst.op {
            Op::Const(l) => {
                let r = self.result(inst)?;
                self.bind(r, Val::scalar(D::literal(*l)))?;
            }
            Op::Builtin(b) => {
                let r = self.result(inst)?;
                let e = D::builtin(self, *b);
                self.view(r, vec![e])?;
            }
            Op::Param(i) => {
                let r = self.result(inst)?;
                match self.k.params.get(*i as usize).map(|p| p.kind) {
                    Some(ParamKind::Scalar(_)) => {
                        let n = self.names.params[*i as usize].clone();
                        self.bind(r, Val::scalar(n))?;
                    }
                    _ => {
                        return Err(self.malformed(format!("parameter {i} is not a runtime scalar")))
                    }
                }
            }
            Op::Unary(op, a) => {
                let r = self.result(inst)?;
                let t = self.ty(*a)?.elem();
                self.elementwise(r, &[*a], |d, o| d.unary(*op, t, o[0]))?;
            }
            Op::Binary(op, a, b) => {
                let r = self.result(inst)?;
                let t = self.ty(*a)?.elem();
                if self.ty(*b)?.elem() != t {
                    return Err(self.malformed("operands have different types"));
                }
                let b_const = self.const_int(*b);
                self.elementwise(r, &[*a, *b], |d, o| d.binary(*op, t, o[0], o[1], b_const))?;
            }
            Op::Fma(a, b, c) => {
                let r = self.result(inst)?;
                let t = self.ty(*a)?.elem();
                self.elementwise(r, &[*a, *b, *c], |d, o| d.fma(t, o[0], o[1], o[2]))?;
            }
            Op::Select(c, a, b) => {
                let r = self.result(inst)?;
                self.elementwise(r, &[*c, *a, *b], |_, o| Ok(D::select(o[0], o[1], o[2])))?;
            }
            Op::Cast(a, to) => {
                let r = self.result(inst)?;
                let from = self.ty(*a)?.elem();
                self.elementwise(r, &[*a], |d, o| Ok(d.cast(from, *to, o[0])))?;
            }
            Op::Bitcast(a, to) => {
                let r = self.result(inst)?;
                let from = self.ty(*a)?.elem();
                self.elementwise(r, &[*a], |d, o| Ok(d.bitcast(from, *to, o[0])))?;
            }
            Op::Load { mem, index } => {
                let r = self.result(inst)?;
                let m = self.mem(*mem)?;
                let i = self.val(*index)?;
                self.define(r, vec![format!("{}[{i}]", m.name)])?;
            }
            Op::Store { mem, index, value } => {
                let m = self.mem_mut(*mem)?;
                let (i, v) = (self.val(*index)?, self.val(*value)?);
                self.line(&format!("{}[{i}] = {v};", m.name));
            }
            Op::VecLoad { mem, index, width } => {
                let r = self.result(inst)?;
                let m = self.mem(*mem)?;
                let t = self.ty(r)?;
                if t.width() != *width as usize || t.elem() != m.elem {
                    return Err(self.malformed(format!(
                        "a load of {width} {} elements cannot give a {t}",
                        m.elem
                    )));
                }
                let i = self.val(*index)?;
                D::vec_load(self, r, &m, &i)?;
            }
            Op::VecStore { mem, index, value } => {
                let m = self.mem_mut(*mem)?;
                let t = self.ty(*value)?;
                if t.scalar().is_some() || t.elem() != m.elem {
                    return Err(self.malformed(format!(
                        "a {t} cannot be stored as a vector into `{}` ({} elements)",
                        m.name, m.elem
                    )));
                }
                let i = self.val(*index)?;
                D::vec_store(self, &m, &i, *value)?;
            }
            Op::Extract(v, k) => {
                let r = self.result(inst)?;
                let t = self.ty(*v)?;
                let lane = match self.value(*v)?.lanes.get(*k as usize) {
                    Some(l) if t.scalar().is_none() => l.clone(),
                    _ => return Err(self.malformed(format!("`extract` of lane {k} from {t}"))),
                };
                self.view(r, vec![lane])?;
            }
            Op::Pack(vs) => {
                let r = self.result(inst)?;
                let mut lanes = Vec::new();
                for v in vs {
                    lanes.extend(self.value(*v)?.lanes.iter().cloned());
                }
                self.view(r, lanes)?;
            }
            Op::Atomic {
                op,
                mem,
                index,
                value,
            } => {
                let r = self.result(inst)?;
                let m = self.mem(*mem)?;
                if m.space == Space::Thread || !m.writable {
                    return Err(self.malformed(format!(
                        "`{}` on `{}`, which is not writable device or threadgroup memory",
                        op.name(),
                        m.name
                    )));
                }
                let (i, v) = (self.val(*index)?, self.val(*value)?);
                let e = D::atomic(self, *op, &m, &i, &v)?;
                self.define(r, vec![e])?;
            }
            Op::Barrier => {
                if self.tile_products {
                    D::frag_tiles_before_barrier(self);
                }
                self.line(D::BARRIER)
            }
            Op::CopyAsync {
                dst,
                dst_index,
                src,
                src_index,
                width,
                valid,
            } => {
                let (d, sm) = (self.mem_mut(*dst)?, self.mem(*src)?);
                if d.space != Space::Threadgroup || sm.space != Space::Device || d.elem != sm.elem {
                    return Err(self.malformed(format!(
                        "an asynchronous copy from `{}` ({}) into `{}` ({}): it copies device \
                         memory into a threadgroup array of the same type",
                        sm.name, sm.elem, d.name, d.elem
                    )));
                }
                let (di, si) = (self.val(*dst_index)?, self.val(*src_index)?);
                let valid = valid.map(|v| self.val(v)).transpose()?;
                let copy = super::AsyncCopy {
                    dst: &d,
                    dst_index: &di,
                    src: &sm,
                    src_index: &si,
                    width: *width,
                    valid: valid.as_deref(),
                };
                D::copy_async(self, &copy);
            }
            Op::CommitCopies => D::commit_copies(self),
            Op::WaitCopies(n) => D::wait_copies(self, *n),
            Op::SimdBarrier => self.line(D::SIMD_BARRIER),
            Op::Simd(op, a) => {
                let r = self.result(inst)?;
                let t = self.scalar_ty(*a)?;
                let x = self.val(*a)?;
                let e = D::simd(self, *op, t, &x)?;
                self.define(r, vec![e])?;
            }
            Op::Shuffle { kind, value, arg } => {
                let r = self.result(inst)?;
                let t = self.scalar_ty(*value)?;
                if self.scalar_ty(*arg)? != Scalar::U32 {
                    return Err(self.malformed("the lane argument must be u32"));
                }
                let (x, a) = (self.val(*value)?, self.val(*arg)?);
                let c = self.const_u32(*arg);
                let e = D::shuffle(self, *kind, t, &x, &a, c)?;
                self.define(r, vec![e])?;
            }
            Op::GroupReduce(..) => {
                return Err(self.not_lowered(
                    "threadgroup reductions are lowered to simdgroup ops, threadgroup memory \
                     and barriers by the compiler",
                ))
            }
            Op::Call { .. } => {
                return Err(self.not_lowered("DSL function calls are inlined by the compiler"))
            }
            Op::FragFill { frag, value } => {
                let (f, v) = (self.frag(*frag)?, self.val(*value)?);
                D::frag_fill(self, f, &v);
            }
            Op::FragScale { frag, value } => {
                let f = self.frag(*frag)?;
                if self.k.body.frags[f].role != tessera_ir::FragRole::Acc {
                    return Err(self.malformed("only accumulator fragments are scaled"));
                }
                let v = self.val(*value)?;
                D::frag_scale(self, f, &v);
            }
            Op::FragLoad {
                frag,
                mem,
                index,
                stride,
                transpose,
            } => {
                let (f, m) = (self.frag(*frag)?, self.mem(*mem)?);
                let (i, s) = (self.val(*index)?, self.val(*stride)?);
                D::frag_load(self, f, &m, &i, &s, *transpose);
            }
            Op::FragStore {
                frag,
                mem,
                index,
                stride,
            } => {
                let f = self.frag(*frag)?;
                if self.k.body.frags[f].role != tessera_ir::FragRole::Acc {
                    return Err(self.malformed("only accumulator fragments are stored"));
                }
                let m = self.mem_mut(*mem)?;
                let (i, s) = (self.val(*index)?, self.val(*stride)?);
                D::frag_store(self, f, &m, &i, &s);
            }
            Op::FragMma { d, a, b, c } => {
                let (d, a, b, c) = (
                    self.frag(*d)?,
                    self.frag(*a)?,
                    self.frag(*b)?,
                    self.frag(*c)?,
                );
                D::frag_mma(self, d, a, b, c);
            }
            Op::FragRowReduce { op, rows, frag } => {
                let (r, f) = (self.frag(*rows)?, self.frag(*frag)?);
                D::frag_row_reduce(self, *op, r, f);
            }
            Op::FragRowMap { op, frag, rows } => {
                let (f, r) = (self.frag(*frag)?, self.frag(*rows)?);
                D::frag_row_map(self, *op, f, r);
            }
            Op::FragMask {
                frag,
                diag,
                cap,
                value,
            } => {
                let f = self.frag(*frag)?;
                let (d, c, v) = (self.val(*diag)?, self.val(*cap)?, self.val(*value)?);
                D::frag_mask(self, f, &d, &c, &v);
            }
            Op::FragRows { op, d, a, b } => {
                let (d, a, b) = (self.frag(*d)?, self.frag(*a)?, self.frag(*b)?);
                D::frag_rows(self, *op, d, a, b);
            }
            Op::FragRowsRaise { d, a, b, margin } => {
                let (d, a, b) = (self.frag(*d)?, self.frag(*a)?, self.frag(*b)?);
                let m = self.val(*margin)?;
                D::frag_rows_raise(self, d, a, b, &m);
            }
            Op::FragAdd { d, a, b } => {
                let (d, a, b) = (self.frag(*d)?, self.frag(*a)?, self.frag(*b)?);
                D::frag_add(self, d, a, b);
            }
            Op::FragConvert { dst, src } => {
                let (d, s) = (self.frag(*dst)?, self.frag(*src)?);
                D::frag_convert(self, d, s);
            }
            Op::FragMmaTiles {
                accs,
                a,
                b,
                b_index,
                asynchronous,
                b_kn,
            } => {
                let accs = accs.iter().map(|f| self.frag(*f)).collect::<R<Vec<_>>>()?;
                let mb = self.mem(*b)?;
                let (ma, ai) = match a {
                    TileA::Tile { mem, index } => (Some(self.mem(*mem)?), self.val(*index)?),
                    TileA::Frags(_) => (None, String::new()),
                };
                for m in ma.iter().chain([&mb]) {
                    if m.space != Space::Threadgroup || m.elem != mb.elem {
                        return Err(self.malformed(format!(
                            "`matrix_mma_tiles` on `{}` ({}): its tiles are threadgroup arrays \
                             of one 16-bit type",
                            m.name, m.elem
                        )));
                    }
                }
                let mut regs = [0usize; 4];
                if let TileA::Frags(fa) = a {
                    for (r, f) in regs.iter_mut().zip(fa) {
                        *r = self.frag(*f)?;
                    }
                }
                let src = match &ma {
                    Some(ma) => super::TileSource::Tile(ma, &ai),
                    None => super::TileSource::Frags(regs),
                };
                let bi = self.val(*b_index)?;
                let form = super::TileForm {
                    asynchronous: *asynchronous,
                    b_kn: *b_kn,
                };
                D::frag_mma_tiles(self, &accs, src, (&mb, &bi), form);
            }
            Op::FragMmaWait { accs, pending } => {
                let accs = accs.iter().map(|f| self.frag(*f)).collect::<R<Vec<_>>>()?;
                D::frag_mma_wait(self, &accs, *pending);
            }
            Op::If {
                cond,
                then_block,
                else_block,
            } => self.emit_if(inst, *cond, then_block, else_block)?,
            Op::For {
                bounds,
                inits,
                body,
            } => self.emit_for(inst, *bounds, inits, body)?,
        }
        Ok(())
    }
}

/// A short description of an op for messages.
fn op_name(op: &Op) -> String {
    match op {
        Op::Const(l) => format!("const {l}"),
        Op::Builtin(b) => b.name().into(),
        Op::Param(i) => format!("param {i}"),
        Op::Unary(o, _) => o.name().into(),
        Op::Binary(o, ..) => o.name().into(),
        Op::Fma(..) => "fma".into(),
        Op::Select(..) => "select".into(),
        Op::Cast(_, t) => format!("cast to {t}"),
        Op::Bitcast(_, t) => format!("bitcast to {t}"),
        Op::Load { mem, .. } => format!("load {mem}"),
        Op::Store { mem, .. } => format!("store {mem}"),
        Op::VecLoad { mem, width, .. } => format!("vector load x{width} {mem}"),
        Op::VecStore { mem, .. } => format!("vector store {mem}"),
        Op::Extract(_, k) => format!("extract {k}"),
        Op::Pack(_) => "pack".into(),
        Op::Atomic { op, mem, .. } => format!("{} {mem}", op.name()),
        Op::Barrier => "barrier".into(),
        Op::SimdBarrier => "simd_barrier".into(),
        Op::CopyAsync {
            dst, src, width, ..
        } => format!("copy_async x{width} {src} -> {dst}"),
        Op::CommitCopies => "commit_copies".into(),
        Op::WaitCopies(n) => format!("wait_copies {n}"),
        Op::Simd(o, _) => o.name().into(),
        Op::Shuffle { kind, .. } => kind.name().into(),
        Op::GroupReduce(o, _) => o.name().into(),
        Op::If { .. } => "if".into(),
        Op::For { .. } => "for".into(),
        Op::Call { func, .. } => format!("call {}", func.name),
        Op::FragFill { .. } => "frag_fill".into(),
        Op::FragScale { .. } => "frag_scale".into(),
        Op::FragLoad { .. } => "frag_load".into(),
        Op::FragStore { .. } => "frag_store".into(),
        Op::FragMma { .. } => "frag_mma".into(),
        op @ (Op::FragRowReduce { .. }
        | Op::FragRowMap { .. }
        | Op::FragMask { .. }
        | Op::FragRows { .. }
        | Op::FragRowsRaise { .. }
        | Op::FragAdd { .. }
        | Op::FragConvert { .. }
        | Op::FragMmaTiles { .. }
        | Op::FragMmaWait { .. }) => tessera_ir::verify::op_name(op).into(),
    }
}
