//! Walks optimised IR and writes one MSL `kernel void` function: every SSA value becomes a
//! `const` local (vectors are kept as per-lane expressions), `if` / `for` results and
//! loop-carried values become variables assigned at the end of their blocks.

mod frag;

use super::error::MslError;
use super::helpers::Helper;
use super::names::Names;
use super::scalar::ScalarOps;
use super::source::{MslArg, MslBuiltin, MslSource};
use super::types::{as_f32, from_f32, literal, scalar, vector};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;
use tessera_ir::{
    AtomicOp, Block, Builtin, Inst, Kernel, Literal, MemRef, Op, ParamKind, Scalar, ShuffleKind,
    SimdOp, Type, ValueId,
};

type R<T> = Result<T, MslError>;

/// Which Metal address space a memory reference lives in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Space {
    Device,
    Threadgroup,
    Thread,
}

struct MemInfo {
    name: String,
    elem: Scalar,
    space: Space,
    writable: bool,
}

pub(crate) struct Emitter<'k> {
    k: &'k Kernel,
    body: String,
    depth: usize,
    /// Per value: one MSL expression per lane (one for a scalar).
    lanes: HashMap<ValueId, Vec<String>>,
    helpers: BTreeSet<Helper>,
    builtins: BTreeSet<MslBuiltin>,
    params: Vec<Option<MemInfo>>,
    param_names: Vec<String>,
    shared: Vec<MemInfo>,
    locals: Vec<MemInfo>,
    entry: String,
    /// The op being emitted, for error messages.
    current: String,
    /// Every constant of the kernel.
    consts: HashMap<ValueId, Literal>,
    /// Vector values held whole in one MSL vector variable (a load of at most 4 lanes).
    whole: HashMap<ValueId, String>,
    /// The body reads the global thread index.
    uses_global_id: bool,
    /// The MSL name of each matrix fragment.
    frag_names: Vec<String>,
}

/// The local holding `group_id_x * group_size + thread_id` (wrapping).
const GLOBAL_ID: &str = "tsr_gid";

impl<'k> Emitter<'k> {
    pub(crate) fn new(k: &'k Kernel) -> Emitter<'k> {
        let mut names = Names::default();
        let entry = names.fresh(&k.name);
        let mut params = Vec::new();
        let mut param_names = Vec::new();
        for p in &k.params {
            let name = names.fresh(&p.name);
            params.push(match p.kind {
                ParamKind::Tensor { elem, writable } => Some(MemInfo {
                    name: name.clone(),
                    elem,
                    space: Space::Device,
                    writable,
                }),
                ParamKind::Scalar(_) => None,
            });
            param_names.push(name);
        }
        let mut array = |a: &tessera_ir::ArrayDecl, space: Space, prefix: &str| MemInfo {
            name: names.fresh(&format!("{prefix}{}", a.name)),
            elem: a.elem,
            space,
            writable: true,
        };
        let shared = k
            .body
            .shared
            .iter()
            .map(|a| array(a, Space::Threadgroup, "tg_"))
            .collect();
        let locals = k
            .body
            .locals
            .iter()
            .map(|a| array(a, Space::Thread, "loc_"))
            .collect();
        let frag_names = k
            .body
            .frags
            .iter()
            .map(|f| names.fresh(&format!("frag_{}", f.name)))
            .collect();
        let mut consts = HashMap::new();
        k.body.block.walk(&mut |i| {
            if let (Op::Const(l), Some(r)) = (&i.op, i.result()) {
                consts.insert(r, *l);
            }
        });
        Emitter {
            k,
            consts,
            whole: HashMap::new(),
            uses_global_id: false,
            frag_names,
            body: String::new(),
            depth: 1,
            lanes: HashMap::new(),
            helpers: BTreeSet::new(),
            builtins: BTreeSet::new(),
            params,
            param_names,
            shared,
            locals,
            entry,
            current: String::new(),
        }
    }

    // ── errors and small utilities ──────────────────────────────────────────

    fn invalid(&self, message: impl Into<String>) -> MslError {
        MslError::Invalid {
            kernel: self.k.specialized_name(),
            op: self.current.clone(),
            message: message.into(),
        }
    }

    fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.body.push_str("    ");
        }
        self.body.push_str(text);
        self.body.push('\n');
    }

    fn ty(&self, v: ValueId) -> R<Type> {
        self.k
            .body
            .values
            .get(v.index())
            .copied()
            .ok_or_else(|| self.invalid(format!("{v} is not a value of this kernel")))
    }

    fn scalar_ty(&self, v: ValueId) -> R<Scalar> {
        match self.ty(v)? {
            Type::Scalar(s) => Ok(s),
            t => Err(self.invalid(format!("{v} is a {t}; a scalar is needed here"))),
        }
    }

    fn lanes_of(&self, v: ValueId) -> R<&[String]> {
        self.lanes
            .get(&v)
            .map(Vec::as_slice)
            .ok_or_else(|| self.invalid(format!("{v} is used before it is defined")))
    }

    fn val(&self, v: ValueId) -> R<String> {
        match self.lanes_of(v)? {
            [one] => Ok(one.clone()),
            _ => Err(self.invalid(format!("{v} is a vector; a scalar is needed here"))),
        }
    }

    fn single(inst: &Inst) -> Option<ValueId> {
        inst.result()
    }

    fn result(&self, inst: &Inst) -> R<ValueId> {
        Self::single(inst).ok_or_else(|| self.invalid("expected exactly one result"))
    }

    fn name(v: ValueId) -> String {
        format!("v{}", v.0)
    }

    fn mem(&self, m: MemRef) -> R<&MemInfo> {
        let found = match m {
            MemRef::Param(i) => self.params.get(i as usize).and_then(Option::as_ref),
            MemRef::Shared(i) => self.shared.get(i as usize),
            MemRef::Local(i) => self.locals.get(i as usize),
            MemRef::Arg(_) => None,
        };
        found.ok_or_else(|| self.invalid(format!("{m} is not a memory of this kernel")))
    }

    fn builtin(&mut self, b: MslBuiltin) -> &'static str {
        self.builtins.insert(b);
        b.var()
    }

    /// Declares `const T vN = expr;` per lane of a scalar or vector result.
    fn define(&mut self, v: ValueId, exprs: Vec<String>) -> R<()> {
        let t = self.ty(v)?;
        if exprs.len() != t.width() {
            return Err(self.invalid(format!(
                "{v} has type {t} but {} lanes were computed",
                exprs.len()
            )));
        }
        let ty = scalar(t.elem());
        let base = Self::name(v);
        let mut names = Vec::new();
        for (k, e) in exprs.into_iter().enumerate() {
            let n = if t.width() == 1 {
                base.clone()
            } else {
                format!("{base}_{k}")
            };
            self.line(&format!("const {ty} {n} = {e};"));
            names.push(n);
        }
        self.lanes.insert(v, names);
        Ok(())
    }

    /// Declares a mutable variable per lane of `v` (an `if` / `for` result), optionally
    /// initialised.
    fn declare_var(&mut self, v: ValueId, init: Option<&[String]>) -> R<()> {
        let t = self.ty(v)?;
        let ty = scalar(t.elem());
        let base = Self::name(v);
        let mut names = Vec::new();
        for k in 0..t.width() {
            let n = if t.width() == 1 {
                base.clone()
            } else {
                format!("{base}_{k}")
            };
            match init.and_then(|i| i.get(k)) {
                Some(e) => self.line(&format!("{ty} {n} = {e};")),
                None => self.line(&format!("{ty} {n};")),
            }
            names.push(n);
        }
        self.lanes.insert(v, names);
        Ok(())
    }

    /// `target = source` lane by lane.
    fn assign(&mut self, target: ValueId, source: ValueId) -> R<()> {
        let (t, s) = (
            self.lanes_of(target)?.to_vec(),
            self.lanes_of(source)?.to_vec(),
        );
        if t.len() != s.len() {
            return Err(self.invalid(format!("{source} does not match the type of {target}")));
        }
        for (a, b) in t.iter().zip(&s) {
            self.line(&format!("{a} = {b};"));
        }
        Ok(())
    }

    // ── the kernel ───────────────────────────────────────────────────────────

    pub(crate) fn emit(mut self) -> R<MslSource> {
        // Threadgroup and stack arrays are declared first, at the top of the body.
        for i in 0..self.shared.len() {
            let (a, len) = (&self.shared[i], self.k.body.shared[i].len);
            let text = format!(
                "TESSERA_THREADGROUP_ARRAY {} {}[{len}];",
                scalar(a.elem),
                a.name
            );
            self.line(&text);
        }
        for i in 0..self.locals.len() {
            let (a, len) = (&self.locals[i], self.k.body.locals[i].len);
            let text = format!("{} {}[{len}];", scalar(a.elem), a.name);
            self.line(&text);
        }
        self.frag_decls();
        if !self.k.body.block.yields.is_empty() || !self.k.body.block.args.is_empty() {
            self.current = "kernel body".into();
            return Err(self.invalid("a kernel's top block has no arguments or yields"));
        }
        self.block(&self.k.body.block)?;
        let mut body = std::mem::take(&mut self.body);
        if self.uses_global_id {
            body.insert_str(
                0,
                &format!("    const uint {GLOBAL_ID} = tsr_tgid.x * tsr_tpg.x + tsr_tid.x;\n"),
            );
        }
        Ok(self.assemble(body))
    }

    fn assemble(self, body: String) -> MslSource {
        let k = self.k;
        let mut args = Vec::new();
        let mut sig = Vec::new();
        for (i, p) in k.params.iter().enumerate() {
            let name = self.param_names[i].clone();
            match p.kind {
                ParamKind::Tensor { elem, writable } => {
                    let c = if writable { "" } else { "const " };
                    sig.push(format!(
                        "{c}device {}* {name} [[buffer({i})]]",
                        scalar(elem)
                    ));
                    args.push(MslArg::Tensor {
                        param: i,
                        buffer: i as u32,
                        elem,
                        writable,
                        name,
                    });
                }
                ParamKind::Scalar(ty) => {
                    sig.push(format!("constant {}& {name} [[buffer({i})]]", scalar(ty)));
                    args.push(MslArg::Scalar {
                        param: i,
                        buffer: i as u32,
                        ty,
                        name,
                    });
                }
            }
        }
        for &b in &self.builtins {
            let ty = if b.is_vector() { "uint3" } else { "uint" };
            sig.push(format!("{ty} {} [[{}]]", b.var(), b.attribute()));
            args.push(MslArg::Builtin(b));
        }
        let mut code = String::new();
        let _ = writeln!(
            code,
            "// {} — generated by Tessera from its IR.",
            k.specialized_name()
        );
        code.push_str(PRELUDE);
        for h in &self.helpers {
            code.push('\n');
            code.push_str(h.source());
        }
        code.push('\n');
        if let Some(o) = k.occupancy {
            let _ = write!(
                code,
                "[[max_total_threads_per_threadgroup({})]] ",
                o.group_size
            );
        }
        let _ = write!(code, "kernel void {}(", self.entry);
        for (i, s) in sig.iter().enumerate() {
            let sep = if i + 1 < sig.len() { "," } else { "" };
            let _ = write!(code, "\n    {s}{sep}");
        }
        code.push_str(")\n{\n");
        code.push_str(&body);
        code.push_str("}\n");
        MslSource {
            kernel_name: k.specialized_name(),
            entry: self.entry,
            code,
            args,
            threadgroup_bytes: k.body.shared_bytes(),
            uses_simdgroups: k.uses_simdgroups(),
        }
    }

    fn block(&mut self, b: &Block) -> R<()> {
        for inst in &b.insts {
            self.current = op_name(&inst.op);
            self.inst(inst)?;
        }
        Ok(())
    }

    fn inst(&mut self, inst: &Inst) -> R<()> {
        match &inst.op {
            Op::Const(l) => {
                let r = self.result(inst)?;
                self.lanes.insert(r, vec![literal(*l)]);
            }
            Op::Builtin(b) => {
                let r = self.result(inst)?;
                let e = self.builtin_expr(*b);
                self.lanes.insert(r, vec![e]);
            }
            Op::Param(i) => {
                let r = self.result(inst)?;
                let name = match self.k.params.get(*i as usize).map(|p| p.kind) {
                    Some(ParamKind::Scalar(_)) => self.param_names[*i as usize].clone(),
                    _ => return Err(self.invalid(format!("parameter {i} is not a runtime scalar"))),
                };
                self.lanes.insert(r, vec![name]);
            }
            Op::Unary(op, a) => {
                let r = self.result(inst)?;
                let t = self.ty(*a)?.elem();
                let mut out = Vec::new();
                for x in self.lanes_of(*a)?.to_vec() {
                    let mut ops = ScalarOps { helpers: &mut self.helpers };
                    out.push(ops.unary(*op, t, &x).map_err(|m| self.invalid(m))?);
                }
                self.define(r, out)?;
            }
            Op::Binary(op, a, b) => {
                let r = self.result(inst)?;
                let t = self.ty(*a)?.elem();
                let (xa, xb) = (self.lanes_of(*a)?.to_vec(), self.lanes_of(*b)?.to_vec());
                if xa.len() != xb.len() || self.ty(*b)?.elem() != t {
                    return Err(self.invalid("operands have different types"));
                }
                let b_const = self.const_int(*b);
                let mut out = Vec::new();
                for (x, y) in xa.iter().zip(&xb) {
                    let mut ops = ScalarOps { helpers: &mut self.helpers };
                    out.push(ops.binary(*op, t, x, y, b_const).map_err(|m| self.invalid(m))?);
                }
                self.define(r, out)?;
            }
            Op::Fma(a, b, c) => {
                let r = self.result(inst)?;
                let t = self.ty(*a)?.elem();
                let (xa, xb, xc) = (
                    self.lanes_of(*a)?.to_vec(),
                    self.lanes_of(*b)?.to_vec(),
                    self.lanes_of(*c)?.to_vec(),
                );
                if xa.len() != xb.len() || xa.len() != xc.len() {
                    return Err(self.invalid("operands have different widths"));
                }
                let mut out = Vec::new();
                for k in 0..xa.len() {
                    let mut ops = ScalarOps { helpers: &mut self.helpers };
                    out.push(ops.fma(t, &xa[k], &xb[k], &xc[k]).map_err(|m| self.invalid(m))?);
                }
                self.define(r, out)?;
            }
            Op::Select(c, a, b) => {
                let r = self.result(inst)?;
                let cond = self.val(*c)?;
                let (xa, xb) = (self.lanes_of(*a)?.to_vec(), self.lanes_of(*b)?.to_vec());
                if xa.len() != xb.len() {
                    return Err(self.invalid("operands have different widths"));
                }
                let out = xa
                    .iter()
                    .zip(&xb)
                    .map(|(x, y)| format!("{cond} ? {x} : {y}"))
                    .collect();
                self.define(r, out)?;
            }
            Op::Cast(a, to) => {
                let r = self.result(inst)?;
                let from = self.ty(*a)?.elem();
                let mut out = Vec::new();
                for x in self.lanes_of(*a)?.to_vec() {
                    let mut ops = ScalarOps { helpers: &mut self.helpers };
                    out.push(ops.cast(from, *to, &x));
                }
                self.define(r, out)?;
            }
            Op::Load { mem, index } => {
                let r = self.result(inst)?;
                let name = self.mem(*mem)?.name.clone();
                let i = self.val(*index)?;
                self.define(r, vec![format!("{name}[{i}]")])?;
            }
            Op::Store { mem, index, value } => {
                let m = self.mem(*mem)?;
                if !m.writable {
                    return Err(self.invalid(format!("`{}` is read-only", m.name)));
                }
                let name = m.name.clone();
                let (i, v) = (self.val(*index)?, self.val(*value)?);
                self.line(&format!("{name}[{i}] = {v};"));
            }
            Op::VecLoad { mem, index, width } => {
                let r = self.result(inst)?;
                self.vec_load(r, *mem, *index, *width as usize)?;
            }
            Op::VecStore { mem, index, value } => self.vec_store(*mem, *index, *value)?,
            Op::Extract(v, k) => {
                let r = self.result(inst)?;
                let lane = self
                    .lanes_of(*v)?
                    .get(*k as usize)
                    .cloned()
                    .ok_or_else(|| self.invalid(format!("lane {k} is out of range")))?;
                self.lanes.insert(r, vec![lane]);
            }
            Op::Pack(vs) => {
                let r = self.result(inst)?;
                let mut all = Vec::new();
                for v in vs {
                    all.extend(self.lanes_of(*v)?.iter().cloned());
                }
                if all.len() != self.ty(r)?.width() {
                    return Err(self.invalid("the packed lanes do not match the result type"));
                }
                self.lanes.insert(r, all);
            }
            Op::Atomic {
                op,
                mem,
                index,
                value,
            } => {
                let r = self.result(inst)?;
                let e = self.atomic(*op, *mem, *index, *value)?;
                self.define(r, vec![e])?;
            }
            Op::Barrier => {
                self.line("threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);")
            }
            Op::SimdBarrier => self.line("simdgroup_barrier(mem_flags::mem_threadgroup);"),
            Op::Simd(op, v) => {
                let r = self.result(inst)?;
                let e = self.simd(*op, *v)?;
                self.define(r, vec![e])?;
            }
            Op::Shuffle { kind, value, arg } => {
                let r = self.result(inst)?;
                let e = self.shuffle(*kind, *value, *arg)?;
                self.define(r, vec![e])?;
            }
            Op::GroupReduce(op, _) => {
                return Err(MslError::NotLowered {
                    kernel: self.k.specialized_name(),
                    op: op.name().to_string(),
                    hint: "threadgroup reductions are lowered to simdgroup ops, threadgroup memory \
                           and barriers by `tessera_compiler::optimize(kernel, Target::Metal)`; \
                           emit the optimised kernel"
                        .into(),
                })
            }
            Op::Call { func, .. } => {
                return Err(MslError::NotLowered {
                    kernel: self.k.specialized_name(),
                    op: format!("call {}", func.name),
                    hint: "DSL function calls are inlined by \
                           `tessera_compiler::optimize(kernel, Target::Metal)`; emit the optimised kernel"
                        .into(),
                })
            }
            Op::If {
                cond,
                then_block,
                else_block,
            } => self.emit_if(inst, *cond, then_block, else_block)?,
            Op::For {
                start,
                end,
                step,
                inits,
                body,
            } => self.emit_for(inst, *start, *end, *step, inits, body)?,
            Op::FragFill { frag, value } => self.frag_fill(*frag, *value)?,
            Op::FragScale { frag, value } => self.frag_scale(*frag, *value)?,
            Op::FragLoad {
                frag,
                mem,
                index,
                stride,
                transpose,
            } => self.frag_load(*frag, *mem, *index, *stride, *transpose)?,
            Op::FragStore {
                frag,
                mem,
                index,
                stride,
            } => self.frag_store(*frag, *mem, *index, *stride)?,
            Op::FragMma { d, a, b, c } => self.frag_mma(*d, *a, *b, *c)?,
        }
        Ok(())
    }

    fn builtin_expr(&mut self, b: Builtin) -> String {
        use MslBuiltin as M;
        match b {
            Builtin::ThreadId => format!("{}.x", self.builtin(M::ThreadPositionInThreadgroup)),
            Builtin::GroupSize => format!("{}.x", self.builtin(M::ThreadsPerThreadgroup)),
            Builtin::GroupIdX => format!("{}.x", self.builtin(M::ThreadgroupPositionInGrid)),
            Builtin::GroupIdY => format!("{}.y", self.builtin(M::ThreadgroupPositionInGrid)),
            Builtin::GroupIdZ => format!("{}.z", self.builtin(M::ThreadgroupPositionInGrid)),
            Builtin::NumGroupsX => format!("{}.x", self.builtin(M::ThreadgroupsPerGrid)),
            Builtin::NumGroupsY => format!("{}.y", self.builtin(M::ThreadgroupsPerGrid)),
            Builtin::NumGroupsZ => format!("{}.z", self.builtin(M::ThreadgroupsPerGrid)),
            Builtin::GlobalId => {
                self.builtin(M::ThreadgroupPositionInGrid);
                self.builtin(M::ThreadsPerThreadgroup);
                self.builtin(M::ThreadPositionInThreadgroup);
                self.uses_global_id = true;
                GLOBAL_ID.to_string()
            }
            Builtin::SimdLane => self.builtin(M::ThreadIndexInSimdgroup).to_string(),
            Builtin::SimdId => self.builtin(M::SimdgroupIndexInThreadgroup).to_string(),
            Builtin::SimdGroups => self.builtin(M::SimdgroupsPerThreadgroup).to_string(),
        }
    }

    /// The chunks (offset, width) a vector access of `width` elements is split into: MSL
    /// vectors have at most 4 elements.
    fn chunks(width: usize) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut off = 0;
        while off < width {
            let w = match width - off {
                n if n >= 4 => 4,
                n if n >= 2 => 2,
                _ => 1,
            };
            out.push((off, w));
            off += w;
        }
        out
    }

    fn space_kw(space: Space) -> &'static str {
        match space {
            Space::Device => "device",
            Space::Threadgroup => "threadgroup",
            Space::Thread => "thread",
        }
    }

    fn vec_load(&mut self, r: ValueId, mem: MemRef, index: ValueId, width: usize) -> R<()> {
        let t = self.ty(r)?;
        let m = self.mem(mem)?;
        if t.width() != width || t.elem() != m.elem {
            return Err(self.invalid(format!(
                "a load of {width} {} elements cannot give a {t}",
                m.elem
            )));
        }
        let (name, elem, space, writable) = (m.name.clone(), m.elem, m.space, m.writable);
        let c = if writable { "" } else { "const " };
        let kw = Self::space_kw(space);
        let i = self.val(index)?;
        let base = Self::name(r);
        let mut lanes = Vec::new();
        let chunks = Self::chunks(width);
        for &(off, w) in &chunks {
            let at = if off == 0 {
                i.clone()
            } else {
                format!("{i} + {off}u")
            };
            let var = if chunks.len() == 1 {
                base.clone()
            } else {
                format!("{base}_{off}")
            };
            let vt = vector(elem, w);
            if w == 1 {
                self.line(&format!("const {vt} {var} = {name}[{at}];"));
                lanes.push(var);
            } else {
                self.line(&format!(
                    "const {vt} {var} = *(({c}{kw} {vt}*)({name} + {at}));"
                ));
                lanes.extend((0..w).map(|k| format!("{var}[{k}]")));
                if chunks.len() == 1 {
                    self.whole.insert(r, var.clone());
                }
            }
        }
        self.lanes.insert(r, lanes);
        Ok(())
    }

    fn vec_store(&mut self, mem: MemRef, index: ValueId, value: ValueId) -> R<()> {
        let t = self.ty(value)?;
        let m = self.mem(mem)?;
        if t.elem() != m.elem || !m.writable {
            return Err(self.invalid(format!(
                "a {t} cannot be stored into `{}` ({} elements{})",
                m.name,
                m.elem,
                if m.writable { "" } else { ", read-only" }
            )));
        }
        let (name, elem, space) = (m.name.clone(), m.elem, m.space);
        let kw = Self::space_kw(space);
        let i = self.val(index)?;
        let lanes = self.lanes_of(value)?.to_vec();
        if let Some(var) = self.whole.get(&value).cloned() {
            let vt = vector(elem, lanes.len());
            self.line(&format!("*(({kw} {vt}*)({name} + {i})) = {var};"));
            return Ok(());
        }
        for (off, w) in Self::chunks(lanes.len()) {
            let at = if off == 0 {
                i.clone()
            } else {
                format!("{i} + {off}u")
            };
            let parts = lanes[off..off + w].join(", ");
            if w == 1 {
                self.line(&format!("{name}[{at}] = {parts};"));
            } else {
                let vt = vector(elem, w);
                self.line(&format!("*(({kw} {vt}*)({name} + {at})) = {vt}({parts});"));
            }
        }
        Ok(())
    }

    fn atomic(&mut self, op: AtomicOp, mem: MemRef, index: ValueId, value: ValueId) -> R<String> {
        let m = self.mem(mem)?;
        if m.space == Space::Thread || !m.writable {
            return Err(self.invalid(format!(
                "atomics need writable device or threadgroup memory; `{}` is not",
                m.name
            )));
        }
        let (name, elem, space) = (m.name.clone(), m.elem, m.space);
        let kw = Self::space_kw(space);
        let (i, v) = (self.val(index)?, self.val(value)?);
        let ptr = |atype: &str| format!("({kw} {atype}*)({name} + {i})");
        let relaxed = "memory_order_relaxed";
        let int_atype = match elem {
            Scalar::U32 => Some("atomic_uint"),
            Scalar::I32 => Some("atomic_int"),
            _ => None,
        };
        let e = match (op, elem, int_atype) {
            (AtomicOp::Add, Scalar::F32, _) if space == Space::Threadgroup => {
                self.helpers.insert(Helper::AtomicAddF32Threadgroup);
                format!("tsr_atomic_add_f32({}, {v})", ptr("atomic_uint"))
            }
            (AtomicOp::Add, Scalar::F32, _) => {
                format!(
                    "atomic_fetch_add_explicit({}, {v}, {relaxed})",
                    ptr("atomic_float")
                )
            }
            (AtomicOp::Exchange, Scalar::F32, _) => format!(
                "as_type<float>(atomic_exchange_explicit({}, as_type<uint>({v}), {relaxed}))",
                ptr("atomic_uint")
            ),
            (AtomicOp::Exchange, _, Some(at)) => {
                format!("atomic_exchange_explicit({}, {v}, {relaxed})", ptr(at))
            }
            (_, _, Some(at)) => {
                let f = match op {
                    AtomicOp::Add => "add",
                    AtomicOp::Max => "max",
                    AtomicOp::Min => "min",
                    AtomicOp::And => "and",
                    AtomicOp::Or => "or",
                    AtomicOp::Exchange => unreachable!("handled above"),
                };
                format!("atomic_fetch_{f}_explicit({}, {v}, {relaxed})", ptr(at))
            }
            _ => {
                return Err(self.invalid(format!(
                    "`{}` is not available on {elem} elements",
                    op.name()
                )))
            }
        };
        Ok(e)
    }

    fn simd(&mut self, op: SimdOp, v: ValueId) -> R<String> {
        let t = self.scalar_ty(v)?;
        let x = self.val(v)?;
        let f = match op {
            SimdOp::Sum => "simd_sum",
            SimdOp::Prod => "simd_product",
            SimdOp::Max => "simd_max",
            SimdOp::Min => "simd_min",
            SimdOp::And => "simd_and",
            SimdOp::Or => "simd_or",
            SimdOp::Xor => "simd_xor",
            SimdOp::PrefixSum => "simd_prefix_inclusive_sum",
            SimdOp::PrefixExclusiveSum => "simd_prefix_exclusive_sum",
            SimdOp::All => "simd_all",
            SimdOp::Any => "simd_any",
        };
        let bad = || self.invalid(format!("`{}` is not defined on {t}", op.name()));
        Ok(match (op, t) {
            (SimdOp::All | SimdOp::Any, Scalar::Bool) => format!("{f}({x})"),
            (SimdOp::All | SimdOp::Any, _) => return Err(bad()),
            (SimdOp::And | SimdOp::Or | SimdOp::Xor, Scalar::Bool) => {
                format!("{f}(uint({x})) != 0u")
            }
            (SimdOp::And | SimdOp::Or | SimdOp::Xor, _) if t.is_float() => return Err(bad()),
            (_, Scalar::Bool) => return Err(bad()),
            (_, Scalar::F16 | Scalar::BF16) => from_f32(t, &format!("{f}({})", as_f32(t, &x))),
            (_, Scalar::I8) => format!("char({f}(int({x})))"),
            (_, Scalar::U8) => format!("uchar({f}(uint({x})))"),
            _ => format!("{f}({x})"),
        })
    }

    fn shuffle(&mut self, kind: ShuffleKind, value: ValueId, arg: ValueId) -> R<String> {
        let t = self.scalar_ty(value)?;
        let x = self.val(value)?;
        let a = self.val(arg)?;
        if self.scalar_ty(arg)? != Scalar::U32 {
            return Err(self.invalid("the lane argument must be u32"));
        }
        // Carry every type through a type simd_shuffle takes on all Apple GPUs.
        let (into, back): (String, fn(&str) -> String) = match t {
            Scalar::F32 | Scalar::F16 | Scalar::I32 | Scalar::U32 => (x.clone(), |s| s.to_string()),
            Scalar::BF16 => (format!("uint(as_type<ushort>({x}))"), |s| {
                format!("as_type<bfloat>(ushort({s}))")
            }),
            Scalar::I8 => (format!("int({x})"), |s| format!("char({s})")),
            Scalar::U8 => (format!("uint({x})"), |s| format!("uchar({s})")),
            Scalar::Bool => (format!("uint({x})"), |s| format!("{s} != 0u")),
        };
        let constant = self.const_u32(arg);
        let call = match kind {
            ShuffleKind::Index => format!("simd_shuffle({into}, {a})"),
            ShuffleKind::Xor => format!("simd_shuffle_xor({into}, {a})"),
            // The IR keeps a lane's own value where the source lane is outside the
            // simdgroup, whatever the delta; Metal's intrinsics do for deltas below 32.
            ShuffleKind::Up if constant.is_some_and(|c| c < 32) => {
                format!("simd_shuffle_up({into}, {a})")
            }
            ShuffleKind::Down if constant.is_some_and(|c| c < 32) => {
                format!("simd_shuffle_down({into}, {a})")
            }
            ShuffleKind::Up => {
                let l = self.builtin(MslBuiltin::ThreadIndexInSimdgroup);
                format!("simd_shuffle({into}, {a} <= {l} ? {l} - {a} : {l})")
            }
            ShuffleKind::Down => {
                let l = self.builtin(MslBuiltin::ThreadIndexInSimdgroup);
                format!("simd_shuffle({into}, {a} < 32u - {l} ? {l} + {a} : {l})")
            }
        };
        Ok(back(&call))
    }

    /// The value of a u32 constant, if `v` is one.
    fn const_u32(&self, v: ValueId) -> Option<u32> {
        match self.consts.get(&v) {
            Some(Literal::U32(c)) => Some(*c),
            _ => None,
        }
    }

    /// The value of an integer constant, if `v` is one.
    fn const_int(&self, v: ValueId) -> Option<i64> {
        self.consts.get(&v).and_then(|l| l.as_i64())
    }

    fn emit_if(&mut self, inst: &Inst, cond: ValueId, then_b: &Block, else_b: &Block) -> R<()> {
        if then_b.yields.len() != inst.results.len() || else_b.yields.len() != inst.results.len() {
            return Err(self.invalid("the branches do not yield one value per result"));
        }
        let c = self.val(cond)?;
        for &r in &inst.results {
            self.declare_var(r, None)?;
        }
        self.line(&format!("if ({c}) {{"));
        self.branch(then_b, &inst.results)?;
        if !else_b.insts.is_empty() || !else_b.yields.is_empty() {
            self.line("} else {");
            self.branch(else_b, &inst.results)?;
        }
        self.line("}");
        Ok(())
    }

    fn branch(&mut self, b: &Block, results: &[ValueId]) -> R<()> {
        self.depth += 1;
        self.block(b)?;
        self.current = "yield".into();
        for (&r, &y) in results.iter().zip(&b.yields) {
            self.assign(r, y)?;
        }
        self.depth -= 1;
        Ok(())
    }

    fn emit_for(
        &mut self,
        inst: &Inst,
        start: ValueId,
        end: ValueId,
        step: ValueId,
        inits: &[ValueId],
        body: &Block,
    ) -> R<()> {
        let carried = inits.len();
        if body.args.len() != carried + 1
            || body.yields.len() != carried
            || inst.results.len() != carried
        {
            return Err(self.invalid(
                "a loop's body takes the induction variable and one argument per carried value, \
                 and yields one value per carried value",
            ));
        }
        let ivt = self.scalar_ty(body.args[0])?;
        if !matches!(ivt, Scalar::U32 | Scalar::I32) || self.scalar_ty(start)? != ivt {
            return Err(
                self.invalid("loop bounds must be u32 or i32 of the induction variable's type")
            );
        }
        let (s, e, st) = (self.val(start)?, self.val(end)?, self.val(step)?);
        // Carried state lives in the result variables.
        for (&r, &i) in inst.results.iter().zip(inits) {
            let init = self.lanes_of(i)?.to_vec();
            self.declare_var(r, Some(&init))?;
        }
        let ty = scalar(ivt);
        let iv = Self::name(body.args[0]);
        let step_const = self.const_int(step);
        let end_const = self.const_int(end);
        let max = if ivt == Scalar::U32 {
            u32::MAX as i64
        } else {
            i32::MAX as i64
        };
        // `iv += step` cannot wrap past `end` when both are known and end + step - 1 fits.
        let plain =
            matches!((step_const, end_const), (Some(st), Some(en)) if st > 0 && en + st - 1 <= max);
        let next = if plain {
            format!("{iv} += {st}")
        } else if ivt == Scalar::U32 {
            format!("{iv} = {e} - {iv} > {st} ? {iv} + {st} : {e}")
        } else {
            // The distance as u32 is exact for any i32 pair with iv < end.
            format!("{iv} = uint({e}) - uint({iv}) > uint({st}) ? {iv} + {st} : {e}")
        };
        let guarded = step_const.is_none_or(|c| c <= 0);
        if guarded {
            // A zero (or negative) step would never end: the loop does not run, and the
            // emulator reports it (TESSERA_TRAP is a no-op on Metal).
            self.line(&format!("if ({st} > 0) {{"));
            self.depth += 1;
        }
        self.line(&format!("for ({ty} {iv} = {s}; {iv} < {e}; {next}) {{"));
        self.depth += 1;
        self.lanes.insert(body.args[0], vec![iv]);
        for (&a, &r) in body.args[1..].iter().zip(&inst.results) {
            let cur = self.lanes_of(r)?.to_vec();
            self.define(a, cur)?;
        }
        self.block(body)?;
        self.current = "yield".into();
        for (&r, &y) in inst.results.iter().zip(&body.yields) {
            self.assign(r, y)?;
        }
        self.depth -= 1;
        self.line("}");
        if guarded {
            self.depth -= 1;
            self.line("} else {");
            self.depth += 1;
            self.line("TESSERA_TRAP(2);");
            self.depth -= 1;
            self.line("}");
        }
        Ok(())
    }
}

/// What the generated code relies on before the kernel: the Metal standard library, and two
/// hooks the Linux emulator redefines (they are no-ops or plain qualifiers on Metal).
const PRELUDE: &str = "#include <metal_stdlib>
using namespace metal;

// Reached where the IR's meaning is an error (integer division by zero, a non-positive
// loop step); the Linux emulator reports it, Metal carries on.
#ifndef TESSERA_TRAP
#define TESSERA_TRAP(code) ((void)0)
#endif
// Declares a threadgroup array (the emulator shares it between a threadgroup's threads).
#ifndef TESSERA_THREADGROUP_ARRAY
#define TESSERA_THREADGROUP_ARRAY threadgroup
#endif
";

/// A short description of an op for error messages.
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
        Op::Load { mem, .. } => format!("load {mem}"),
        Op::Store { mem, .. } => format!("store {mem}"),
        Op::VecLoad { mem, width, .. } => format!("vector load x{width} {mem}"),
        Op::VecStore { mem, .. } => format!("vector store {mem}"),
        Op::Extract(_, k) => format!("extract {k}"),
        Op::Pack(_) => "pack".into(),
        Op::Atomic { op, mem, .. } => format!("{} {mem}", op.name()),
        Op::Barrier => "barrier".into(),
        Op::SimdBarrier => "simd_barrier".into(),
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
        #[allow(unreachable_patterns)]
        other => format!("{other:?}")
            .split([' ', '(', '{'])
            .next()
            .unwrap_or("op")
            .to_string(),
    }
}
