//! Walks an optimised kernel and writes its CUDA C: the `extern "C" __global__` entry
//! (tensor pointers and runtime scalars in `Kernel::params` order), threadgroup arrays as
//! `__shared__`, one `const` C variable per SSA value, `if` / `for` regions with their
//! carried values as mutable C variables, and calls into the generated helpers.

mod frag;

use super::error::CudaEmitError;
use super::helpers::{helper_name, Helper, ShuffleKindKey, SimdOpKey};
use super::names::{ident, literal, scalar_type, value_type, vector_type};
use super::scalar;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write;
use tessera_ir::{
    AtomicOp, Block, Body, Builtin, Inst, Kernel, Literal, MemRef, Op, ParamKind, Scalar,
    ShuffleKind, Type, ValueId,
};

/// Threadgroup memory above this many bytes is declared dynamic (`extern __shared__`),
/// which the launch must opt into; below it, arrays are static `__shared__`.
pub const STATIC_SHARED_LIMIT: usize = 48 * 1024;

/// What the walk produced, before the prelude is put in front.
pub struct Emitted {
    pub entry: String,
    pub kernel_text: String,
    pub helpers: BTreeSet<Helper>,
    pub static_shared_bytes: usize,
    pub dynamic_shared_bytes: usize,
}

pub struct Emitter<'k> {
    kernel: &'k Kernel,
    body: &'k Body,
    /// The C expression naming each value: `v12`, a literal, or a parameter.
    names: Vec<String>,
    consts: HashMap<ValueId, Literal>,
    param_names: Vec<String>,
    shared_names: Vec<String>,
    local_names: Vec<String>,
    frag_names: Vec<String>,
    helpers: BTreeSet<Helper>,
    out: String,
    depth: usize,
}

type R<T> = Result<T, CudaEmitError>;

/// Distinct identifiers for a list of names, each `prefix` + the sanitised name, with the
/// index appended where two would collide.
fn unique_idents<'a>(prefix: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen = HashSet::new();
    names
        .enumerate()
        .map(|(i, n)| {
            let mut id = ident(prefix, n);
            if !seen.insert(id.clone()) {
                id = format!("{id}_{i}");
                seen.insert(id.clone());
            }
            id
        })
        .collect()
}

impl<'k> Emitter<'k> {
    pub fn new(kernel: &'k Kernel) -> Self {
        let body = &kernel.body;
        Emitter {
            kernel,
            body,
            names: (0..body.values.len()).map(|i| format!("v{i}")).collect(),
            consts: HashMap::new(),
            param_names: unique_idents("p_", kernel.params.iter().map(|p| p.name.as_str())),
            shared_names: unique_idents("s_", body.shared.iter().map(|a| a.name.as_str())),
            local_names: unique_idents("l_", body.locals.iter().map(|a| a.name.as_str())),
            frag_names: unique_idents("f_", body.frags.iter().map(|f| f.name.as_str())),
            helpers: BTreeSet::new(),
            out: String::new(),
            depth: 1,
        }
    }

    fn malformed(&self, message: impl Into<String>) -> CudaEmitError {
        CudaEmitError::Malformed {
            kernel: self.kernel.name.clone(),
            message: message.into(),
        }
    }

    fn unsupported(&self, what: impl Into<String>) -> CudaEmitError {
        CudaEmitError::Unsupported {
            kernel: self.kernel.name.clone(),
            what: what.into(),
        }
    }

    fn ty(&self, v: ValueId) -> R<Type> {
        self.body
            .values
            .get(v.index())
            .copied()
            .ok_or_else(|| self.malformed(format!("value {v} is not in the value table")))
    }

    fn scalar_ty(&self, v: ValueId, what: &str) -> R<Scalar> {
        match self.ty(v)? {
            Type::Scalar(s) => Ok(s),
            t => Err(self.unsupported(format!("{what} on a vector value ({v}: {t})"))),
        }
    }

    fn name(&self, v: ValueId) -> R<&str> {
        self.names
            .get(v.index())
            .map(String::as_str)
            .ok_or_else(|| self.malformed(format!("value {v} is not in the value table")))
    }

    fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// Declares `r` as `const T r = expr;`.
    fn define(&mut self, r: ValueId, expr: &str) -> R<()> {
        let t = value_type(self.ty(r)?);
        let n = self.name(r)?.to_string();
        self.line(&format!("const {t} {n} = {expr};"));
        Ok(())
    }

    fn use_vector(&mut self, t: Type) {
        if let Type::Vector(s, w) = t {
            self.helpers.insert(Helper::Vector(s, w));
        }
    }

    fn one_result(&self, inst: &Inst) -> R<ValueId> {
        inst.result().ok_or_else(|| {
            self.malformed(format!(
                "an op with one result has {} results",
                inst.results.len()
            ))
        })
    }

    /// The C lvalue base of a memory reference, and its element type.
    fn mem(&self, m: MemRef) -> R<(String, Scalar)> {
        match m {
            MemRef::Param(i) => match self.kernel.params.get(i as usize).map(|p| p.kind) {
                Some(ParamKind::Tensor { elem, .. }) => {
                    Ok((self.param_names[i as usize].clone(), elem))
                }
                _ => Err(self.malformed(format!("memory reference param{i} is not a tensor"))),
            },
            MemRef::Shared(i) => self
                .body
                .shared
                .get(i as usize)
                .map(|a| (self.shared_names[i as usize].clone(), a.elem))
                .ok_or_else(|| self.malformed(format!("no threadgroup array {i}"))),
            MemRef::Local(i) => self
                .body
                .locals
                .get(i as usize)
                .map(|a| (self.local_names[i as usize].clone(), a.elem))
                .ok_or_else(|| self.malformed(format!("no stack array {i}"))),
            MemRef::Arg(i) => Err(self.malformed(format!(
                "memory argument {i} of a DSL function outside it (inline calls first)"
            ))),
        }
    }

    fn writable(&self, m: MemRef) -> bool {
        match m {
            MemRef::Param(i) => matches!(
                self.kernel.params.get(i as usize).map(|p| p.kind),
                Some(ParamKind::Tensor { writable: true, .. })
            ),
            _ => true,
        }
    }

    /// Runs the walk.
    pub fn run(mut self) -> R<Emitted> {
        let entry = ident("tessera_", &self.kernel.name);
        let mut sig = Vec::new();
        for (i, p) in self.kernel.params.iter().enumerate() {
            let n = &self.param_names[i];
            sig.push(match p.kind {
                ParamKind::Tensor {
                    elem,
                    writable: false,
                } => {
                    format!("const {}* __restrict__ {n}", scalar_type(elem))
                }
                ParamKind::Tensor {
                    elem,
                    writable: true,
                } => format!("{}* {n}", scalar_type(elem)),
                ParamKind::Scalar(s) => format!("const {} {n}", scalar_type(s)),
            });
        }

        // Threadgroup arrays: static up to the default limit, one dynamic block above it.
        let total_shared: usize = self
            .body
            .shared
            .iter()
            .map(|a| a.size_bytes().next_multiple_of(16))
            .sum();
        let dynamic = total_shared > STATIC_SHARED_LIMIT;
        let mut decls = Vec::new();
        let mut offset = 0usize;
        if dynamic {
            decls.push(
                "extern __shared__ __attribute__((aligned(16))) unsigned char ts_smem[];"
                    .to_string(),
            );
        }
        for (i, a) in self.body.shared.iter().enumerate() {
            let (t, n) = (scalar_type(a.elem), &self.shared_names[i]);
            if dynamic {
                decls.push(format!(
                    "{t}* const {n} = reinterpret_cast<{t}*>(ts_smem + {offset}); // {} x {}",
                    a.len, a.elem
                ));
                offset += a.size_bytes().next_multiple_of(16);
            } else {
                decls.push(format!(
                    "__shared__ __attribute__((aligned(16))) {t} {n}[{}];",
                    a.len
                ));
            }
        }
        for (i, a) in self.body.locals.iter().enumerate() {
            decls.push(format!(
                "__attribute__((aligned(16))) {} {}[{}];",
                scalar_type(a.elem),
                self.local_names[i],
                a.len
            ));
        }
        decls.extend(self.frag_decls());
        for d in &decls {
            self.line(d);
        }
        self.line("TS_AFTER_PREVIOUS_GRID();");
        let body = self.body;
        self.block(&body.block)?;

        let mut text = String::new();
        let _ = writeln!(text, "// {}", self.kernel.specialized_name());
        // A declared occupancy caps the registers per thread, so that many groups fit.
        let bounds = self
            .kernel
            .occupancy
            .map(|o| {
                format!(
                    "__launch_bounds__({}, {}) ",
                    o.group_size, o.groups_per_core
                )
            })
            .unwrap_or_default();
        let _ = writeln!(text, "extern \"C\" __global__ void {bounds}{entry}(");
        let _ = writeln!(text, "    {}) {{", sig.join(",\n    "));
        text.push_str(&self.out);
        text.push_str("}\n");
        Ok(Emitted {
            entry,
            kernel_text: text,
            helpers: self.helpers,
            static_shared_bytes: if dynamic { 0 } else { total_shared },
            dynamic_shared_bytes: if dynamic { total_shared } else { 0 },
        })
    }

    fn block(&mut self, b: &Block) -> R<()> {
        for inst in &b.insts {
            self.inst(inst)?;
        }
        Ok(())
    }

    /// Operand expressions, lane `k` of a vector operand, or the scalar itself.
    fn lane(&self, v: ValueId, k: Option<usize>) -> R<String> {
        let n = self.name(v)?;
        Ok(match (k, self.ty(v)?) {
            (Some(k), Type::Vector(..)) => format!("{n}.e[{k}]"),
            _ => n.to_string(),
        })
    }

    /// Emits an elementwise op, lane by lane when its result or an operand is a vector.
    fn elementwise(
        &mut self,
        r: ValueId,
        operands: &[ValueId],
        what: &str,
        f: impl Fn(&[String]) -> Option<String>,
    ) -> R<()> {
        let rt = self.ty(r)?;
        let width = operands
            .iter()
            .map(|&v| self.ty(v).map(Type::width))
            .chain(std::iter::once(Ok(rt.width())))
            .try_fold(1, |m, w| w.map(|w| m.max(w)))?;
        let lanes: Vec<Option<usize>> = if width == 1 {
            vec![None]
        } else {
            (0..width).map(Some).collect()
        };
        let mut exprs = Vec::new();
        for k in lanes {
            let ops = operands
                .iter()
                .map(|&v| self.lane(v, k))
                .collect::<R<Vec<_>>>()?;
            let e = f(&ops).ok_or_else(|| {
                self.unsupported(format!(
                    "`{what}` on {}",
                    self.ty(operands[0])
                        .map(|t| t.to_string())
                        .unwrap_or_default()
                ))
            })?;
            exprs.push(e);
        }
        self.use_vector(rt);
        let expr = if width == 1 {
            exprs.remove(0)
        } else {
            format!("{{{{{}}}}}", exprs.join(", "))
        };
        self.define(r, &expr)
    }

    fn inst(&mut self, inst: &Inst) -> R<()> {
        match &inst.op {
            Op::Const(l) => {
                let r = self.one_result(inst)?;
                self.consts.insert(r, *l);
                self.names[r.index()] = literal(*l);
            }
            Op::Builtin(b) => {
                let r = self.one_result(inst)?;
                let e = match b {
                    Builtin::ThreadId => "threadIdx.x",
                    Builtin::GroupSize => "blockDim.x",
                    Builtin::GroupIdX => "blockIdx.x",
                    Builtin::GroupIdY => "blockIdx.y",
                    Builtin::GroupIdZ => "blockIdx.z",
                    Builtin::NumGroupsX => "gridDim.x",
                    Builtin::NumGroupsY => "gridDim.y",
                    Builtin::NumGroupsZ => "gridDim.z",
                    Builtin::GlobalId => "blockIdx.x * blockDim.x + threadIdx.x",
                    Builtin::SimdLane => "threadIdx.x & 31u",
                    Builtin::SimdId => "threadIdx.x >> 5",
                    Builtin::SimdGroups => "(blockDim.x + 31u) >> 5",
                };
                self.define(r, e)?;
            }
            Op::Param(i) => {
                let r = self.one_result(inst)?;
                match self.kernel.params.get(*i as usize).map(|p| p.kind) {
                    Some(ParamKind::Scalar(_)) => {
                        self.names[r.index()] = self.param_names[*i as usize].clone();
                    }
                    _ => return Err(self.malformed(format!("`param {i}` is not a runtime scalar"))),
                }
            }
            Op::Unary(op, a) => {
                let r = self.one_result(inst)?;
                let ty = self.ty(*a)?.elem();
                self.elementwise(r, &[*a], op.name(), |o| scalar::unary(*op, ty, &o[0]))?;
            }
            Op::Binary(op, a, b) => {
                let r = self.one_result(inst)?;
                let ty = self.ty(*a)?.elem();
                self.elementwise(r, &[*a, *b], op.name(), |o| {
                    scalar::binary(*op, ty, &o[0], &o[1])
                })?;
            }
            Op::Fma(a, b, c) => {
                let r = self.one_result(inst)?;
                let ty = self.ty(*a)?.elem();
                self.elementwise(r, &[*a, *b, *c], "fma", |o| {
                    scalar::fma(ty, &o[0], &o[1], &o[2])
                })?;
            }
            Op::Select(c, a, b) => {
                let r = self.one_result(inst)?;
                self.elementwise(r, &[*c, *a, *b], "select", |o| {
                    Some(format!("({} ? {} : {})", o[0], o[1], o[2]))
                })?;
            }
            Op::Cast(a, to) => {
                let r = self.one_result(inst)?;
                let from = self.ty(*a)?.elem();
                self.elementwise(r, &[*a], "cast", |o| Some(scalar::cast(from, *to, &o[0])))?;
            }
            Op::Load { mem, index } => {
                let r = self.one_result(inst)?;
                let (m, _) = self.mem(*mem)?;
                let i = self.name(*index)?.to_string();
                self.define(r, &format!("{m}[{i}]"))?;
            }
            Op::Store { mem, index, value } => {
                let (m, _) = self.mem(*mem)?;
                if !self.writable(*mem) {
                    return Err(self.malformed(format!("a store into the read-only tensor `{m}`")));
                }
                let (i, v) = (self.name(*index)?.to_string(), self.name(*value)?.to_string());
                self.line(&format!("{m}[{i}] = {v};"));
            }
            Op::VecLoad { mem, index, width } => {
                let r = self.one_result(inst)?;
                let (m, elem) = self.mem(*mem)?;
                let vt = vector_type(elem, *width);
                self.helpers.insert(Helper::Vector(elem, *width));
                let i = self.name(*index)?.to_string();
                self.define(r, &format!("*reinterpret_cast<const {vt}*>(&{m}[{i}])"))?;
            }
            Op::VecStore { mem, index, value } => {
                let (m, elem) = self.mem(*mem)?;
                if !self.writable(*mem) {
                    return Err(self.malformed(format!("a store into the read-only tensor `{m}`")));
                }
                let Type::Vector(ve, w) = self.ty(*value)? else {
                    return Err(self.malformed("`vec_store` of a scalar value"));
                };
                if ve != elem {
                    return Err(self.malformed(format!("`vec_store` of {ve} lanes into {elem} memory")));
                }
                let vt = vector_type(elem, w);
                self.helpers.insert(Helper::Vector(elem, w));
                let (i, v) = (self.name(*index)?.to_string(), self.name(*value)?.to_string());
                self.line(&format!("*reinterpret_cast<{vt}*>(&{m}[{i}]) = {v};"));
            }
            Op::Extract(v, lane) => {
                let r = self.one_result(inst)?;
                let t = self.ty(*v)?;
                if (*lane as usize) >= t.width() || t.scalar().is_some() {
                    return Err(self.malformed(format!("`extract` of lane {lane} from {t}")));
                }
                let n = self.name(*v)?.to_string();
                self.define(r, &format!("{n}.e[{lane}]"))?;
            }
            Op::Pack(vs) => {
                let r = self.one_result(inst)?;
                let rt = self.ty(r)?;
                self.use_vector(rt);
                let parts = vs
                    .iter()
                    .map(|&v| self.name(v).map(str::to_string))
                    .collect::<R<Vec<_>>>()?;
                self.define(r, &format!("{{{{{}}}}}", parts.join(", ")))?;
            }
            Op::Atomic {
                op,
                mem,
                index,
                value,
            } => {
                let r = self.one_result(inst)?;
                let (m, elem) = self.mem(*mem)?;
                if matches!(mem, MemRef::Local(_)) || !self.writable(*mem) {
                    return Err(self.malformed(format!(
                        "`{}` on `{m}`, which is not writable device or threadgroup memory",
                        op.name()
                    )));
                }
                let ok = match op {
                    AtomicOp::Add => matches!(elem, Scalar::F32 | Scalar::U32 | Scalar::I32),
                    AtomicOp::Exchange => matches!(elem, Scalar::F32 | Scalar::U32 | Scalar::I32),
                    _ => matches!(elem, Scalar::U32 | Scalar::I32),
                };
                if !ok {
                    return Err(self.unsupported(format!("`{}` on {elem}", op.name())));
                }
                let f = match op {
                    AtomicOp::Add => "atomicAdd",
                    AtomicOp::Max => "atomicMax",
                    AtomicOp::Min => "atomicMin",
                    AtomicOp::And => "atomicAnd",
                    AtomicOp::Or => "atomicOr",
                    AtomicOp::Exchange => "atomicExch",
                };
                let (i, v) = (self.name(*index)?.to_string(), self.name(*value)?.to_string());
                self.define(r, &format!("{f}(&{m}[{i}], {v})"))?;
            }
            Op::Barrier => self.line("__syncthreads();"),
            Op::SimdBarrier => self.line("__syncwarp();"),
            Op::Simd(op, a) => {
                let r = self.one_result(inst)?;
                let ty = self.scalar_ty(*a, op.name())?;
                let h = Helper::Simd(SimdOpKey::new(*op), ty);
                self.helpers.insert(h);
                let a = self.name(*a)?.to_string();
                self.define(r, &format!("{}({a})", helper_name(h)))?;
            }
            Op::Shuffle { kind, value, arg } => {
                let r = self.one_result(inst)?;
                let ty = self.scalar_ty(*value, kind.name())?;
                // A constant delta below 32 maps onto the hardware's up / down exactly.
                let native = matches!(kind, ShuffleKind::Up | ShuffleKind::Down)
                    && matches!(self.consts.get(arg), Some(Literal::U32(d)) if *d < 32);
                let h = Helper::Shuffle {
                    kind: ShuffleKindKey::new(*kind),
                    ty,
                    native,
                };
                self.helpers.insert(h);
                let (v, a) = (self.name(*value)?.to_string(), self.name(*arg)?.to_string());
                self.define(r, &format!("{}({v}, {a})", helper_name(h)))?;
            }
            Op::GroupReduce(op, _) => {
                return Err(CudaEmitError::NotLowered {
                    kernel: self.kernel.name.clone(),
                    op: op.name(),
                    hint: "threadgroup reductions are lowered to simdgroup ops, threadgroup memory and barriers by the compiler",
                })
            }
            Op::Call { func, .. } => {
                let _ = func;
                return Err(CudaEmitError::NotLowered {
                    kernel: self.kernel.name.clone(),
                    op: "call",
                    hint: "DSL function calls are inlined by the compiler",
                });
            }
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
        }
        Ok(())
    }

    /// Declares `results` uninitialised (they are assigned in both branches / after a loop).
    fn declare(&mut self, results: &[ValueId]) -> R<()> {
        for &r in results {
            let t = self.ty(r)?;
            self.use_vector(t);
            let n = self.name(r)?.to_string();
            self.line(&format!("{} {n};", value_type(t)));
        }
        Ok(())
    }

    /// `targets[k] = values[k]` for every k at once (through temporaries when a value
    /// may be one of the targets).
    fn assign_all(&mut self, targets: &[ValueId], values: &[ValueId]) -> R<()> {
        if targets.len() != values.len() {
            return Err(self.malformed(format!(
                "a region yields {} values for {} results",
                values.len(),
                targets.len()
            )));
        }
        let target_set: HashSet<ValueId> = targets.iter().copied().collect();
        let needs_temps = values.iter().any(|v| target_set.contains(v)) && targets.len() > 1;
        if needs_temps {
            for (k, &v) in values.iter().enumerate() {
                let t = value_type(self.ty(v)?);
                let n = self.name(v)?.to_string();
                self.line(&format!("const {t} ts_next{k} = {n};"));
            }
            for (k, &t) in targets.iter().enumerate() {
                let n = self.name(t)?.to_string();
                self.line(&format!("{n} = ts_next{k};"));
            }
        } else {
            for (&t, &v) in targets.iter().zip(values) {
                if t == v {
                    continue;
                }
                let (tn, vn) = (self.name(t)?.to_string(), self.name(v)?.to_string());
                self.line(&format!("{tn} = {vn};"));
            }
        }
        Ok(())
    }

    fn emit_if(&mut self, inst: &Inst, cond: ValueId, then_b: &Block, else_b: &Block) -> R<()> {
        self.declare(&inst.results)?;
        let c = self.name(cond)?.to_string();
        self.line(&format!("if ({c}) {{"));
        self.depth += 1;
        self.block(then_b)?;
        self.assign_all(&inst.results, &then_b.yields)?;
        self.depth -= 1;
        if else_b.insts.is_empty() && inst.results.is_empty() {
            self.line("}");
            return Ok(());
        }
        self.line("} else {");
        self.depth += 1;
        self.block(else_b)?;
        self.assign_all(&inst.results, &else_b.yields)?;
        self.depth -= 1;
        self.line("}");
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
        let ity = self.scalar_ty(start, "a loop bound")?;
        if !matches!(ity, Scalar::U32 | Scalar::I32) {
            return Err(self.malformed(format!("loop bounds of type {ity}")));
        }
        let Some((&iv, carried)) = body.args.split_first() else {
            return Err(self.malformed("a loop body without its induction variable"));
        };
        if carried.len() != inits.len() || inst.results.len() != inits.len() {
            return Err(self.malformed(format!(
                "a loop carries {} values but has {} block arguments and {} results",
                inits.len(),
                carried.len(),
                inst.results.len()
            )));
        }
        self.declare(&inst.results)?;
        self.line("{");
        self.depth += 1;
        // Carried values live in mutable variables named after the block arguments.
        for (&a, &init) in carried.iter().zip(inits) {
            let t = self.ty(a)?;
            self.use_vector(t);
            let (an, initn) = (self.name(a)?.to_string(), self.name(init)?.to_string());
            self.line(&format!("{} {an} = {initn};", value_type(t)));
        }
        let t = scalar_type(ity);
        let (s, e, st) = (
            self.name(start)?.to_string(),
            self.name(end)?.to_string(),
            self.name(step)?.to_string(),
        );
        let ivn = self.name(iv)?.to_string();
        let max = if ity == Scalar::U32 {
            u32::MAX as i64
        } else {
            i32::MAX as i64
        };
        let const_step = self.consts.get(&step).and_then(|l| l.as_i64());
        let const_end = self.consts.get(&end).and_then(|l| l.as_i64());
        match const_step {
            Some(k) if k > 0 => {}
            Some(k) => return Err(self.malformed(format!("a loop with the constant step {k}"))),
            // A step known only at run time must be positive: trap rather than spin forever.
            None => {
                let bad = if ity == Scalar::U32 {
                    format!("{st} == 0u")
                } else {
                    format!("{st} <= 0")
                };
                self.line(&format!(
                    "if ({s} < {e} && {bad}) __trap(); // the step of `for` must be positive"
                ));
            }
        }
        // `iv += step` may wrap past `end` near the type's maximum; advance without wrapping
        // unless constants show it cannot.
        let safe = matches!((const_end, const_step), (Some(e), Some(k)) if e - 1 + k <= max);
        let incr = if safe {
            format!("{ivn} += {st}")
        } else if ity == Scalar::U32 {
            format!("{ivn} = ({e} - {ivn} > {st}) ? {ivn} + {st} : {e}")
        } else {
            format!(
                "{ivn} = ((unsigned int){e} - (unsigned int){ivn} > (unsigned int){st}) ? {ivn} + {st} : {e}"
            )
        };
        self.line(&format!("for ({t} {ivn} = {s}; {ivn} < {e}; {incr}) {{"));
        self.depth += 1;
        self.block(body)?;
        self.assign_all(carried, &body.yields)?;
        self.depth -= 1;
        self.line("}");
        self.assign_all(&inst.results, carried)?;
        self.depth -= 1;
        self.line("}");
        Ok(())
    }
}
