//! The IR verifier: operand and result types of every op, single definition and
//! dominance of every value, region yields, memory references, and the placement of
//! barriers and collectives (checked with a small uniformity analysis).
//!
//! Uniformity is a three-level lattice. *Threadgroup-uniform* values are the same on
//! every thread of a threadgroup (constants, runtime scalar parameters, group ids and
//! sizes, `simd_groups`, threadgroup reductions, and pure ops on such values).
//! *Simdgroup-uniform* values are the same on every lane of a simdgroup (`simd_id`,
//! simdgroup reductions and broadcasts). Everything else is *varying* (thread and lane
//! ids, loads, atomics, prefix scans…). A barrier or threadgroup reduction must not sit
//! under a condition or loop bound that is less than threadgroup-uniform; a simdgroup
//! collective must not sit under one that is less than simdgroup-uniform.

use crate::error::IrError;
use crate::kernel::{
    Block, Body, FragDecl, FragRole, Function, Inst, Kernel, Loc, MemArg, Param, ParamKind,
    ValueId, MAX_STACK_BYTES,
};
use crate::ops::{AtomicOp, BinaryOp, Builtin, MemRef, Op, ShuffleKind, SimdOp, TileA, UnaryOp};
use crate::types::{Scalar, Type};
use std::collections::HashSet;

/// How far a value is known to agree across threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Uniformity {
    /// May differ between any two threads.
    Varying,
    /// The same on every lane of a simdgroup.
    Simdgroup,
    /// The same on every thread of a threadgroup.
    Threadgroup,
}

/// Checks a kernel; the error names the kernel and the offending instruction's location.
pub fn verify_kernel(kernel: &Kernel) -> Result<(), IrError> {
    let mut v = Verifier::new(&kernel.specialized_name(), Some(&kernel.params));
    v.body(&kernel.body, &[], &[], Uniformity::Threadgroup)?;
    Ok(())
}

/// Checks a kernel whose threadgroup reductions have been lowered to simdgroup ops,
/// threadgroup memory and barriers. A lowered reduction's result is the same on every
/// thread, but the analysis can only prove it simdgroup-uniform (it comes from a
/// `simd_sum` of values read back from threadgroup memory), so here a barrier needs
/// control flow that is at least simdgroup-uniform. Everything else is checked as in
/// [`verify_kernel`]; run that on the IR before lowering to check barriers fully.
pub fn verify_lowered_kernel(kernel: &Kernel) -> Result<(), IrError> {
    let mut v = Verifier::new(&kernel.specialized_name(), Some(&kernel.params));
    v.barrier_level = Uniformity::Simdgroup;
    v.body(&kernel.body, &[], &[], Uniformity::Threadgroup)?;
    Ok(())
}

/// Checks a DSL function on its own (its arguments assumed varying). Tensor references
/// cannot be checked without the calling kernel; they are checked when a kernel that
/// calls the function is verified.
pub fn verify_function(func: &Function) -> Result<(), IrError> {
    let mut v = Verifier::new(&func.name, None);
    let args = vec![Uniformity::Varying; func.body.block.args.len()];
    v.body(&func.body, &func.mems, &args, Uniformity::Threadgroup)?;
    Ok(())
}

/// The uniformity of every value of a kernel body (indexed by [`ValueId`]), for passes
/// that need it. Values never defined are reported as varying.
pub fn uniformity(kernel: &Kernel) -> Vec<Uniformity> {
    let mut u = vec![Uniformity::Threadgroup; kernel.body.values.len()];
    let mut a = Analysis {
        uni: &mut u,
        changed: false,
    };
    a.fixpoint(&kernel.body.block);
    u
}

struct Verifier<'a> {
    kernel: String,
    params: Option<&'a [Param]>,
    /// Functions already verified at a given argument uniformity / control level.
    seen: HashSet<(usize, Vec<Uniformity>, Uniformity)>,
    /// Name of the function being checked, for messages.
    func_stack: Vec<String>,
    /// Location of the outermost call being checked, or of the current instruction.
    call_loc: Option<Loc>,
    /// The control-flow uniformity a barrier or threadgroup reduction needs.
    barrier_level: Uniformity,
}

type R<T> = Result<T, IrError>;

/// Per-body state: which values are defined and visible.
struct Scope<'b> {
    body: &'b Body,
    /// The memory arguments of the function whose body this is (none for a kernel).
    mem_args: &'b [MemArg],
    defined: Vec<bool>,
    visible: Vec<bool>,
    uni: Vec<Uniformity>,
}

impl<'a> Verifier<'a> {
    fn new(kernel: &str, params: Option<&'a [Param]>) -> Self {
        Verifier {
            kernel: kernel.to_string(),
            params,
            seen: HashSet::new(),
            func_stack: Vec::new(),
            call_loc: None,
            barrier_level: Uniformity::Threadgroup,
        }
    }

    fn err(&self, loc: Option<Loc>, message: String) -> IrError {
        let message = if self.func_stack.is_empty() {
            message
        } else {
            format!("in function `{}`: {message}", self.func_stack.join("` → `"))
        };
        IrError::Verify {
            kernel: self.kernel.clone(),
            loc: self.call_loc.or(loc),
            message,
        }
    }

    /// Verifies one body whose top block's args have the given uniformity, reached under
    /// control of uniformity `ctrl`. Returns the uniformity of its yields.
    fn body(
        &mut self,
        body: &Body,
        mem_args: &[MemArg],
        args: &[Uniformity],
        ctrl: Uniformity,
    ) -> R<Vec<Uniformity>> {
        let n = body.values.len();
        let mut uni = vec![Uniformity::Threadgroup; n];
        for (&a, &u) in body.block.args.iter().zip(args) {
            if a.index() < n {
                uni[a.index()] = u;
            }
        }
        let mut an = Analysis {
            uni: &mut uni,
            changed: false,
        };
        an.fixpoint(&body.block);
        let mut s = Scope {
            body,
            mem_args,
            defined: vec![false; n],
            visible: vec![false; n],
            uni,
        };
        for a in &body.shared {
            if a.len == 0 {
                return Err(self.err(None, format!("threadgroup array `{}` has length 0", a.name)));
            }
        }
        for a in &body.locals {
            if a.len == 0 {
                return Err(self.err(None, format!("stack array `{}` has length 0", a.name)));
            }
        }
        let stack_bytes: usize = body.locals.iter().map(|a| a.size_bytes()).sum();
        if stack_bytes > MAX_STACK_BYTES {
            return Err(self.err(
                None,
                format!(
                    "stack arrays take {stack_bytes} bytes per thread, more than the \
                     {MAX_STACK_BYTES} allowed: keep large data in threadgroup or device memory"
                ),
            ));
        }
        self.block(&mut s, &body.block, ctrl, None)?;
        Ok(body
            .block
            .yields
            .iter()
            .map(|y| s.uni.get(y.index()).copied().unwrap_or(Uniformity::Varying))
            .collect())
    }

    fn define(&self, s: &mut Scope, v: ValueId, loc: Option<Loc>) -> R<()> {
        let i = v.index();
        if i >= s.defined.len() {
            return Err(self.err(
                loc,
                format!("{v} is not in the value table ({} values)", s.defined.len()),
            ));
        }
        if s.defined[i] {
            return Err(self.err(loc, format!("{v} is defined more than once")));
        }
        s.defined[i] = true;
        s.visible[i] = true;
        Ok(())
    }

    fn use_(&self, s: &Scope, v: ValueId, loc: Option<Loc>, what: &str) -> R<Type> {
        let i = v.index();
        if i >= s.visible.len() {
            return Err(self.err(loc, format!("{what} {v} is not in the value table")));
        }
        if !s.visible[i] {
            let why = if s.defined[i] {
                "its definition does not dominate this use"
            } else {
                "it is not defined before this use"
            };
            return Err(self.err(loc, format!("{what} uses {v}, but {why}")));
        }
        Ok(s.body.ty(v))
    }

    fn block(&mut self, s: &mut Scope, b: &Block, ctrl: Uniformity, owner: Option<Loc>) -> R<()> {
        let mut local: Vec<ValueId> = Vec::new();
        for &a in &b.args {
            self.define(s, a, owner)?;
            local.push(a);
        }
        for inst in &b.insts {
            self.inst(s, inst, ctrl)?;
            local.extend(inst.results.iter().copied());
        }
        for &y in &b.yields {
            self.use_(s, y, owner, "a yield")?;
        }
        // Nothing defined in a region is visible after it.
        for v in local {
            s.visible[v.index()] = false;
        }
        Ok(())
    }

    fn mem(&self, s: &Scope, m: MemRef, loc: Option<Loc>, write: bool) -> R<Scalar> {
        match m {
            MemRef::Param(i) => {
                let Some(params) = self.params else {
                    // A function checked alone: the calling kernel checks the reference.
                    return Ok(Scalar::U32);
                };
                match params.get(i as usize).map(|p| p.kind) {
                    Some(ParamKind::Tensor { elem, writable }) => {
                        if write && !writable {
                            return Err(self.err(
                                loc,
                                format!(
                                    "writes the read-only tensor `{}`",
                                    params[i as usize].name
                                ),
                            ));
                        }
                        Ok(elem)
                    }
                    Some(ParamKind::Scalar(_)) => Err(self.err(
                        loc,
                        format!(
                            "`{}` is a scalar parameter, not a tensor",
                            params[i as usize].name
                        ),
                    )),
                    None => Err(self.err(
                        loc,
                        format!(
                            "tensor parameter {i} does not exist ({} params)",
                            params.len()
                        ),
                    )),
                }
            }
            MemRef::Shared(i) => s
                .body
                .shared
                .get(i as usize)
                .map(|a| a.elem)
                .ok_or_else(|| self.err(loc, format!("threadgroup array {i} does not exist"))),
            MemRef::Local(i) => s
                .body
                .locals
                .get(i as usize)
                .map(|a| a.elem)
                .ok_or_else(|| self.err(loc, format!("stack array {i} does not exist"))),
            MemRef::Arg(i) => match s.mem_args.get(i as usize) {
                Some(a) if write && !a.writable => Err(self.err(
                    loc,
                    format!("writes the read-only memory argument `{}`", a.name),
                )),
                Some(a) => Ok(a.elem),
                None => Err(self.err(
                    loc,
                    format!(
                        "memory argument {i} does not exist ({} here)",
                        s.mem_args.len()
                    ),
                )),
            },
        }
    }

    /// The element type a memory reference holds, accepting any type for tensors of a
    /// function checked alone.
    fn elem_matches(&self, m: MemRef, elem: Scalar, have: Scalar) -> bool {
        matches!(m, MemRef::Param(_)) && self.params.is_none() || elem == have
    }

    fn inst(&mut self, s: &mut Scope, inst: &Inst, ctrl: Uniformity) -> R<()> {
        let loc = inst.loc;
        let name = op_name(&inst.op);
        let mut operand_types = Vec::new();
        for v in inst.op.operands() {
            operand_types.push(self.use_(s, v, loc, &format!("`{name}`"))?);
        }
        let expected = self.result_types(s, inst, &operand_types)?;
        if let Some(exp) = expected {
            if exp.len() != inst.results.len() {
                return Err(self.err(
                    loc,
                    format!(
                        "`{name}` has {} result(s), expected {}",
                        inst.results.len(),
                        exp.len()
                    ),
                ));
            }
            for (&r, &t) in inst.results.iter().zip(&exp) {
                let have = s.body.values.get(r.index()).copied();
                if have.is_some() && have != Some(t) {
                    return Err(self.err(
                        loc,
                        format!(
                            "result {r} of `{name}` is typed {}, expected {t}",
                            s.body.ty(r)
                        ),
                    ));
                }
            }
        }
        // Collective placement.
        match &inst.op {
            Op::Barrier | Op::GroupReduce(..) if ctrl < self.barrier_level => {
                return Err(self.err(
                    loc,
                    format!(
                        "`{name}` is under control flow that is not uniform across the \
                         threadgroup (an `if` condition or loop bound depends on the thread); \
                         every thread must reach it: move it out of the branch or loop"
                    ),
                ));
            }
            Op::FragMmaTiles { .. } | Op::FragMmaWait { .. }
                if ctrl < self.barrier_level
                    || inst
                        .op
                        .operands()
                        .iter()
                        .any(|v| s.uni.get(v.index()).copied() < Some(self.barrier_level)) =>
            {
                return Err(self.err(
                    loc,
                    format!(
                        "`{name}` is a threadgroup collective (each warpgroup of four simdgroups \
                         multiplies together): every thread must reach it, and its tile indices \
                         must be the same on every thread (computed from constants, parameters \
                         and group ids, not from the thread or simdgroup id)"
                    ),
                ));
            }
            op if op.is_frag() && ctrl < Uniformity::Simdgroup => {
                return Err(self.err(
                    loc,
                    format!(
                        "`{name}` is under control flow that is not uniform across the \
                         simdgroup (an `if` condition or loop bound depends on the lane); \
                         a matrix fragment op needs every lane: move it out of the branch or loop"
                    ),
                ));
            }
            op if op.is_frag()
                && op
                    .operands()
                    .iter()
                    .any(|v| s.uni.get(v.index()).copied() < Some(Uniformity::Simdgroup)) =>
            {
                return Err(self.err(
                    loc,
                    format!(
                        "`{name}`: its operands must be the same on every lane of the simdgroup \
                         (computed from constants, parameters, group and simdgroup ids); \
                         make a loaded or lane-dependent value uniform with `simd_broadcast(x, 0)`"
                    ),
                ));
            }
            Op::Simd(..) | Op::Shuffle { .. } | Op::SimdBarrier if ctrl < Uniformity::Simdgroup => {
                return Err(self.err(
                    loc,
                    format!(
                        "`{name}` is under control flow that is not uniform across the \
                         simdgroup (an `if` condition or loop bound depends on the lane); \
                         every lane must reach it: move it out of the branch or loop"
                    ),
                ));
            }
            _ => {}
        }
        // Regions.
        match &inst.op {
            Op::If {
                cond,
                then_block,
                else_block,
            } => {
                let inner = ctrl.min(s.uni[cond.index()]);
                for (b, which) in [(then_block, "then"), (else_block, "else")] {
                    if !b.args.is_empty() {
                        return Err(
                            self.err(loc, format!("the {which} block of `if` has arguments"))
                        );
                    }
                    self.check_yields(
                        s,
                        b,
                        &inst.results,
                        loc,
                        &format!("the {which} block of `if`"),
                    )?;
                    self.block(s, b, inner, loc)?;
                }
            }
            Op::For {
                bounds,
                inits,
                body,
            } => {
                let bound = bounds
                    .iter()
                    .map(|v| s.uni[v.index()])
                    .min()
                    .unwrap_or(Uniformity::Threadgroup);
                let inner = ctrl.min(bound);
                if body.args.len() != inits.len() + 1 {
                    return Err(self.err(
                        loc,
                        format!(
                            "`for` body has {} argument(s), expected the induction variable and {} carried",
                            body.args.len(),
                            inits.len()
                        ),
                    ));
                }
                if let Some(a) = body.args.iter().find(|a| a.index() >= s.body.values.len()) {
                    return Err(self.err(
                        loc,
                        format!("argument {a} of the `for` body is not in the value table"),
                    ));
                }
                let iv_ty = s.body.ty(bounds[0]);
                if body.args.first().map(|&a| s.body.ty(a)) != Some(iv_ty) {
                    return Err(self.err(
                        loc,
                        format!("the induction variable of `for` must be {iv_ty}"),
                    ));
                }
                for (k, (&a, &i)) in body.args[1..].iter().zip(inits).enumerate() {
                    if s.body.ty(a) != s.body.ty(i) {
                        return Err(self.err(
                            loc,
                            format!(
                                "carried value {k} of `for` is {} in the body but its init is {}",
                                s.body.ty(a),
                                s.body.ty(i)
                            ),
                        ));
                    }
                }
                self.check_yields(s, body, &inst.results, loc, "the body of `for`")?;
                self.block(s, body, inner, loc)?;
            }
            Op::Call {
                func,
                args,
                mems,
                frags,
            } => {
                self.call_frags(s, func, frags, loc)?;
                if mems.len() != func.mems.len() {
                    return Err(self.err(
                        loc,
                        format!(
                            "`{}` takes {} memory argument(s), {} given",
                            func.name,
                            func.mems.len(),
                            mems.len()
                        ),
                    ));
                }
                for (&m, want) in mems.iter().zip(&func.mems) {
                    let have = self.mem(s, m, loc, want.writable)?;
                    if !self.elem_matches(m, want.elem, have) {
                        return Err(self.err(
                            loc,
                            format!(
                                "`{}`'s memory argument `{}` holds {}, given memory of {have}",
                                func.name, want.name, want.elem
                            ),
                        ));
                    }
                }
                let key = (
                    std::sync::Arc::as_ptr(func) as usize,
                    args.iter().map(|a| s.uni[a.index()]).collect::<Vec<_>>(),
                    ctrl,
                );
                if !self.seen.contains(&key) {
                    let outer_loc = self.call_loc;
                    if self.call_loc.is_none() {
                        self.call_loc = loc;
                    }
                    self.func_stack.push(func.name.clone());
                    let r = self.body(&func.body, &func.mems, &key.1, ctrl);
                    self.func_stack.pop();
                    self.call_loc = outer_loc;
                    r?;
                    self.seen.insert(key);
                }
            }
            _ => {}
        }
        for &r in &inst.results {
            self.define(s, r, loc)?;
        }
        Ok(())
    }

    fn check_yields(
        &self,
        s: &Scope,
        b: &Block,
        results: &[ValueId],
        loc: Option<Loc>,
        what: &str,
    ) -> R<()> {
        if b.yields.len() != results.len() {
            return Err(self.err(
                loc,
                format!(
                    "{what} yields {} value(s) for {} result(s)",
                    b.yields.len(),
                    results.len()
                ),
            ));
        }
        for (k, (&y, &r)) in b.yields.iter().zip(results).enumerate() {
            let (ty, tr) = (s.body.values.get(y.index()), s.body.values.get(r.index()));
            if ty.is_none() || ty != tr {
                return Err(self.err(
                    loc,
                    format!("{what} yields {y} as value {k}, whose type does not match result {r}"),
                ));
            }
        }
        Ok(())
    }

    /// The result types an op must have, given its operand types, or an error if the
    /// operands are ill-typed. `None` for ops whose results are checked elsewhere.
    fn result_types(&self, s: &Scope, inst: &Inst, ops: &[Type]) -> R<Option<Vec<Type>>> {
        let loc = inst.loc;
        let name = op_name(&inst.op);
        let bad = |msg: String| Err(self.err(loc, format!("`{name}`: {msg}")));
        let scalar = |t: Type| -> R<Scalar> {
            t.scalar().ok_or_else(|| {
                self.err(loc, format!("`{name}`: expected a scalar operand, got {t}"))
            })
        };
        let one = |t: Scalar| Ok(Some(vec![Type::Scalar(t)]));
        match &inst.op {
            Op::Const(l) => one(l.ty()),
            Op::Builtin(_) => one(Scalar::U32),
            Op::Param(i) => match self.params {
                None => bad("a DSL function cannot read kernel parameters".into()),
                Some(ps) => match ps.get(*i as usize).map(|p| p.kind) {
                    Some(ParamKind::Scalar(t)) => one(t),
                    Some(ParamKind::Tensor { .. }) => {
                        bad(format!("parameter {i} is a tensor; load from it instead"))
                    }
                    None => bad(format!("parameter {i} does not exist")),
                },
            },
            Op::Unary(op, _) => {
                let t = scalar(ops[0])?;
                if !unary_defined(*op, t) {
                    return bad(format!("not defined on {t}"));
                }
                one(if matches!(op, UnaryOp::IsNan | UnaryOp::IsInf) {
                    Scalar::Bool
                } else {
                    t
                })
            }
            Op::Binary(op, _, _) => {
                let (a, b) = (scalar(ops[0])?, scalar(ops[1])?);
                if a != b {
                    return bad(format!("operands have different types, {a} and {b}"));
                }
                if !binary_defined(*op, a) {
                    return bad(format!("not defined on {a}"));
                }
                one(if op.is_comparison() { Scalar::Bool } else { a })
            }
            Op::Fma(..) => {
                let t = scalar(ops[0])?;
                if !t.is_float() || ops.iter().any(|&o| o != Type::Scalar(t)) {
                    return bad(format!(
                        "expects three operands of one float type, got {ops:?}"
                    ));
                }
                one(t)
            }
            Op::Select(..) => {
                if ops[0] != Type::Scalar(Scalar::Bool) {
                    return bad(format!("the condition must be bool, got {}", ops[0]));
                }
                if ops[1] != ops[2] {
                    return bad(format!(
                        "the two values have different types, {} and {}",
                        ops[1], ops[2]
                    ));
                }
                Ok(Some(vec![ops[1]]))
            }
            Op::Cast(_, to) => {
                scalar(ops[0])?;
                one(*to)
            }
            Op::Bitcast(_, to) => {
                let from = scalar(ops[0])?;
                if let Err(why) = crate::eval::bitcast_allowed(from, *to) {
                    return bad(why);
                }
                one(*to)
            }
            Op::Load { mem, .. } => {
                let elem = self.mem(s, *mem, loc, false)?;
                self.index_u32(ops[0], loc, name)?;
                if self.params.is_none() && matches!(mem, MemRef::Param(_)) {
                    return Ok(None);
                }
                one(elem)
            }
            Op::Store { mem, .. } => {
                let elem = self.mem(s, *mem, loc, true)?;
                self.index_u32(ops[0], loc, name)?;
                if !self.elem_matches(*mem, elem, ops[1].elem()) || ops[1].scalar().is_none() {
                    return bad(format!("stores a {} into {elem} memory", ops[1]));
                }
                Ok(Some(vec![]))
            }
            Op::VecLoad { mem, width, .. } => {
                let elem = self.mem(s, *mem, loc, false)?;
                self.index_u32(ops[0], loc, name)?;
                check_width(*width as usize)
                    .map_err(|m| self.err(loc, format!("`{name}`: {m}")))?;
                if self.params.is_none() && matches!(mem, MemRef::Param(_)) {
                    return Ok(None);
                }
                Ok(Some(vec![Type::Vector(elem, *width)]))
            }
            Op::VecStore { mem, .. } => {
                let elem = self.mem(s, *mem, loc, true)?;
                self.index_u32(ops[0], loc, name)?;
                let Type::Vector(e, w) = ops[1] else {
                    return bad(format!(
                        "stores the scalar type {}; expected a vector",
                        ops[1]
                    ));
                };
                check_width(w as usize).map_err(|m| self.err(loc, format!("`{name}`: {m}")))?;
                if !self.elem_matches(*mem, elem, e) {
                    return bad(format!("stores {} into {elem} memory", ops[1]));
                }
                Ok(Some(vec![]))
            }
            Op::Extract(_, lane) => match ops[0] {
                Type::Vector(e, w) if (*lane as usize) < w as usize => one(e),
                t => bad(format!("lane {lane} of {t}")),
            },
            Op::Pack(_) => {
                let Some(&first) = ops.first() else {
                    return bad("packs no values".into());
                };
                let e = scalar(first)?;
                if ops.iter().any(|&o| o != first) {
                    return bad("packs values of different types".into());
                }
                check_width(ops.len()).map_err(|m| self.err(loc, format!("`{name}`: {m}")))?;
                Ok(Some(vec![Type::Vector(e, ops.len() as u8)]))
            }
            Op::Atomic { op, mem, .. } => {
                if matches!(mem, MemRef::Local(_)) {
                    return bad("atomics need device or threadgroup memory".into());
                }
                let elem = self.mem(s, *mem, loc, true)?;
                self.index_u32(ops[0], loc, name)?;
                let v = scalar(ops[1])?;
                if !self.elem_matches(*mem, elem, v) {
                    return bad(format!("operand is {v}, memory holds {elem}"));
                }
                let ok = match op {
                    AtomicOp::Add => matches!(v, Scalar::F32 | Scalar::U32 | Scalar::I32),
                    AtomicOp::Max | AtomicOp::Min | AtomicOp::And | AtomicOp::Or => {
                        matches!(v, Scalar::U32 | Scalar::I32)
                    }
                    AtomicOp::Exchange => v.size_bytes() == 4,
                };
                if !ok {
                    return bad(format!("not available on {v}"));
                }
                one(v)
            }
            Op::Barrier | Op::SimdBarrier | Op::CommitCopies | Op::WaitCopies(_) => {
                Ok(Some(vec![]))
            }
            Op::CopyAsync {
                dst, src, width, ..
            } => {
                let in_function = self.params.is_none();
                // A function's memory argument is checked where it is inlined.
                let shared_dst = matches!(dst, MemRef::Shared(_) | MemRef::Arg(_));
                if !shared_dst {
                    return bad(format!(
                        "copies into {dst}; the destination must be a threadgroup array"
                    ));
                }
                let device_src = matches!(src, MemRef::Param(_) | MemRef::Arg(_));
                if !device_src {
                    return bad(format!(
                        "copies from {src}; the source must be device memory (a tensor parameter)"
                    ));
                }
                let d = self.mem(s, *dst, loc, true)?;
                let e = self.mem(s, *src, loc, false)?;
                if !self.elem_matches(*src, d, e) {
                    return bad(format!("copies {e} elements into {d} memory"));
                }
                if !(in_function && matches!(dst, MemRef::Arg(_))) {
                    crate::builder::check_copy_width(d, *width)
                        .map_err(|m| self.err(loc, format!("`{name}`: {m}")))?;
                }
                self.index_u32(ops[0], loc, name)?;
                self.index_u32(ops[1], loc, name)?;
                if let Some(&t) = ops.get(2) {
                    if t != Type::Scalar(Scalar::Bool) {
                        return bad(format!("the in-bounds flag is {t}; expected bool"));
                    }
                }
                Ok(Some(vec![]))
            }
            Op::FragFill { .. }
            | Op::FragScale { .. }
            | Op::FragLoad { .. }
            | Op::FragStore { .. }
            | Op::FragMma { .. }
            | Op::FragRowReduce { .. }
            | Op::FragRowMap { .. }
            | Op::FragMask { .. }
            | Op::FragRows { .. }
            | Op::FragRowsRaise { .. }
            | Op::FragAdd { .. }
            | Op::FragConvert { .. }
            | Op::FragMmaTiles { .. }
            | Op::FragMmaWait { .. } => self.frag_op(s, inst, ops),
            Op::Simd(op, _) => {
                let t = scalar(ops[0])?;
                let ok = match op {
                    SimdOp::Sum
                    | SimdOp::Prod
                    | SimdOp::Max
                    | SimdOp::Min
                    | SimdOp::PrefixSum
                    | SimdOp::PrefixExclusiveSum => t.is_numeric(),
                    SimdOp::And | SimdOp::Or | SimdOp::Xor => t.is_int() || t == Scalar::Bool,
                    SimdOp::All | SimdOp::Any => t == Scalar::Bool,
                };
                if !ok {
                    return bad(format!("not defined on {t}"));
                }
                one(t)
            }
            Op::Shuffle { .. } => {
                let t = scalar(ops[0])?;
                if ops[1] != Type::Scalar(Scalar::U32) {
                    return bad(format!("the lane argument must be u32, got {}", ops[1]));
                }
                one(t)
            }
            Op::GroupReduce(_, _) => {
                let t = scalar(ops[0])?;
                if !t.is_numeric() {
                    return bad(format!("not defined on {t}"));
                }
                one(t)
            }
            Op::If { .. } => {
                if ops[0] != Type::Scalar(Scalar::Bool) {
                    return bad(format!("the condition must be bool, got {}", ops[0]));
                }
                Ok(None)
            }
            Op::For { .. } => {
                let t = ops[0];
                if !matches!(t, Type::Scalar(Scalar::U32 | Scalar::I32))
                    || ops[1] != t
                    || ops[2] != t
                {
                    return bad(format!(
                        "start, end and step must share one type, u32 or i32; got {}, {}, {}",
                        ops[0], ops[1], ops[2]
                    ));
                }
                Ok(Some(ops[3..].to_vec()))
            }
            Op::Call { func, .. } => {
                let params = func.param_types();
                if params.as_slice() != ops {
                    return bad(format!(
                        "`{}` takes ({}), called with ({})",
                        func.name,
                        list(&params),
                        list(ops)
                    ));
                }
                if func
                    .body
                    .block
                    .yields
                    .iter()
                    .any(|y| y.index() >= func.body.values.len())
                {
                    return bad(format!("`{}` yields a value outside its table", func.name));
                }
                Ok(Some(func.return_types()))
            }
        }
    }

    /// The caller's fragments `frags` of a call of `func`: one per fragment its fragment
    /// arguments stand for, each of the argument's role and element type; and the
    /// function's fragment arguments within its own fragments.
    fn call_frags(&self, s: &Scope, func: &Function, frags: &[u32], loc: Option<Loc>) -> R<()> {
        let want: u32 = func.frags.iter().map(|a| a.count()).sum();
        if frags.len() != want as usize {
            return Err(self.err(
                loc,
                format!(
                    "`{}` takes {want} matrix fragment(s) in its fragment arguments, {} given",
                    func.name,
                    frags.len()
                ),
            ));
        }
        let mut given = frags.iter();
        for arg in &func.frags {
            for i in 0..arg.count() {
                let own = func.body.frags.get((arg.first + i) as usize);
                if own.is_none_or(|d| d.role != arg.role || d.elem != arg.elem) {
                    return Err(self.err(
                        loc,
                        format!(
                            "`{}`'s fragment argument `{}` is not among its fragments",
                            func.name, arg.name
                        ),
                    ));
                }
                let &f = given.next().expect("counted above");
                let d = self.frag(s, f, loc)?;
                if d.role != arg.role || d.elem != arg.elem {
                    return Err(self.err(
                        loc,
                        format!(
                            "`{}`'s fragment argument `{}` is `{}`, given `{}` ({} of {})",
                            func.name,
                            arg.name,
                            arg.describe(),
                            d.name,
                            d.role.name(),
                            d.elem
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A fragment reference: its declaration, checked to exist.
    fn frag<'b>(&self, s: &Scope<'b>, i: u32, loc: Option<Loc>) -> R<&'b FragDecl> {
        s.body
            .frags
            .get(i as usize)
            .ok_or_else(|| self.err(loc, format!("matrix fragment {i} does not exist")))
    }

    /// Types of a fragment op (none of them has results).
    fn frag_op(&self, s: &Scope, inst: &Inst, ops: &[Type]) -> R<Option<Vec<Type>>> {
        let loc = inst.loc;
        let name = op_name(&inst.op);
        let bad = |msg: String| self.err(loc, format!("`{name}`: {msg}"));
        for f in &s.body.frags {
            if !f.role.holds(f.elem) {
                return Err(self.err(
                    loc,
                    format!(
                        "matrix fragment `{}` ({}) holds {}: operands are f16 or bf16, \
                         accumulators and row vectors f32",
                        f.name,
                        f.role.name(),
                        f.elem
                    ),
                ));
            }
        }
        let memory = |mem: MemRef, write: bool, elem: Scalar| -> R<()> {
            if matches!(mem, MemRef::Local(_)) {
                return Err(bad("fragments load from and store to device or threadgroup memory, not stack arrays".into()));
            }
            let have = self.mem(s, mem, loc, write)?;
            if !self.elem_matches(mem, elem, have) {
                return Err(bad(format!(
                    "the memory holds {have} but the fragment {elem}; stage the data through a \
                     threadgroup array of {elem}"
                )));
            }
            Ok(())
        };
        let role = |f: u32, want: FragRole, what: &str| -> R<()> {
            let decl = self.frag(s, f, loc)?;
            if decl.role != want {
                return Err(bad(format!(
                    "{what} must be a fragment of role {}, `{}` is {}",
                    want.name(),
                    decl.name,
                    decl.role.name()
                )));
            }
            Ok(())
        };
        match &inst.op {
            Op::FragFill { frag, .. } => {
                self.frag(s, *frag, loc)?;
                if ops[0] != Type::Scalar(Scalar::F32) {
                    return Err(bad(format!("the fill value must be f32, got {}", ops[0])));
                }
            }
            Op::FragLoad { frag, mem, .. } => {
                let f = self.frag(s, *frag, loc)?;
                if f.role == FragRole::Rows {
                    return Err(bad(format!(
                        "`{}` is a row vector; only the row ops write it",
                        f.name
                    )));
                }
                let have = self.mem(s, *mem, loc, false)?;
                memory(*mem, false, f.role.memory_elem(f.elem, have))?;
                self.index_u32(ops[0], loc, name)?;
                self.index_u32(ops[1], loc, name)?;
            }
            Op::FragScale { frag, .. } => {
                let f = self.frag(s, *frag, loc)?;
                if f.role != FragRole::Acc {
                    return Err(bad(format!(
                        "only accumulators are scaled; `{}` is an operand",
                        f.name
                    )));
                }
                if ops[0] != Type::Scalar(Scalar::F32) {
                    return Err(bad(format!("the scale must be f32, got {}", ops[0])));
                }
            }
            Op::FragStore { frag, mem, .. } => {
                let f = self.frag(s, *frag, loc)?;
                if f.role != FragRole::Acc {
                    return Err(bad(format!(
                        "only accumulators are stored; `{}` is an operand",
                        f.name
                    )));
                }
                let have = self.mem(s, *mem, loc, true)?;
                memory(*mem, true, f.role.memory_elem(f.elem, have))?;
                self.index_u32(ops[0], loc, name)?;
                self.index_u32(ops[1], loc, name)?;
            }
            Op::FragMma { d, a, b, c } => {
                let roles = [
                    (d, FragRole::Acc, "d"),
                    (a, FragRole::A, "a"),
                    (b, FragRole::B, "b"),
                    (c, FragRole::Acc, "c"),
                ];
                for (f, role, what) in roles {
                    let decl = self.frag(s, *f, loc)?;
                    if decl.role != role {
                        return Err(bad(format!(
                            "`{what}` must be a fragment of role {}, `{}` is {}",
                            role.name(),
                            decl.name,
                            decl.role.name()
                        )));
                    }
                }
                let (fa, fb) = (self.frag(s, *a, loc)?, self.frag(s, *b, loc)?);
                if fa.elem != fb.elem {
                    return Err(bad(format!("`a` holds {} but `b` {}", fa.elem, fb.elem)));
                }
            }
            Op::FragRowReduce { rows, frag, .. } | Op::FragRowMap { frag, rows, .. } => {
                role(*rows, FragRole::Rows, "the row vector")?;
                role(*frag, FragRole::Acc, "the accumulator")?;
            }
            Op::FragMask { frag, .. } => {
                role(*frag, FragRole::Acc, "the accumulator")?;
                for (t, what) in [(ops[0], "diag"), (ops[1], "cap")] {
                    if t != Type::Scalar(Scalar::I32) {
                        return Err(bad(format!("`{what}` must be i32, got {t}")));
                    }
                }
                if ops[2] != Type::Scalar(Scalar::F32) {
                    return Err(bad(format!("the fill value must be f32, got {}", ops[2])));
                }
            }
            Op::FragRows { d, a, b, .. } | Op::FragRowsRaise { d, a, b, .. } => {
                for f in [d, a, b] {
                    role(*f, FragRole::Rows, "every operand")?;
                }
                if let Some(t) = ops.first() {
                    if *t != Type::Scalar(Scalar::F32) {
                        return Err(bad(format!("the margin must be f32, got {t}")));
                    }
                }
            }
            Op::FragAdd { d, a, b } => {
                for f in [d, a, b] {
                    role(*f, FragRole::Acc, "every operand")?;
                }
            }
            Op::FragConvert { dst, src } => {
                role(*dst, FragRole::A, "the result")?;
                role(*src, FragRole::Acc, "the source")?;
            }
            Op::FragMmaTiles {
                accs, a, b, b_kn, ..
            } => {
                if *b_kn && !accs.len().is_multiple_of(4) {
                    return Err(bad(format!(
                        "with tile B as [K, N] takes accumulators four at a time, got {}",
                        accs.len()
                    )));
                }
                if accs.is_empty() || accs.len() > 16 {
                    return Err(bad(format!(
                        "takes 1 to 16 accumulators (a tile 16 to 256 columns wide), got {}",
                        accs.len()
                    )));
                }
                for f in accs {
                    role(*f, FragRole::Acc, "every accumulator")?;
                }
                let mut elems = Vec::new();
                let mut tiles = vec![(b, "b")];
                match a {
                    TileA::Tile { mem, .. } => tiles.insert(0, (mem, "a")),
                    TileA::Frags(fa) => {
                        for f in fa {
                            role(*f, FragRole::A, "operand A")?;
                            elems.push(self.frag(s, *f, loc)?.elem);
                        }
                        elems.truncate(1);
                    }
                }
                for (m, what) in tiles {
                    let shared = matches!(m, MemRef::Shared(_) | MemRef::Arg(_));
                    if !shared {
                        return Err(bad(format!(
                            "tile `{what}` is {m}; tiles are threadgroup arrays"
                        )));
                    }
                    let have = self.mem(s, *m, loc, false)?;
                    if !matches!(have, Scalar::F16 | Scalar::BF16) {
                        return Err(bad(format!(
                            "tile `{what}` holds {have}; tiles hold f16 or bf16"
                        )));
                    }
                    elems.push(have);
                }
                if elems[0] != elems[1] {
                    return Err(bad(format!(
                        "tile `a` holds {} but `b` {}",
                        elems[0], elems[1]
                    )));
                }
                for t in ops {
                    self.index_u32(*t, loc, name)?;
                }
            }
            Op::FragMmaWait { accs, .. } => {
                for f in accs {
                    role(*f, FragRole::Acc, "every accumulator")?;
                }
            }
            _ => return Ok(None),
        }
        Ok(Some(vec![]))
    }

    fn index_u32(&self, t: Type, loc: Option<Loc>, name: &str) -> R<()> {
        if t != Type::Scalar(Scalar::U32) {
            return Err(self.err(loc, format!("`{name}`: the index must be u32, got {t}")));
        }
        Ok(())
    }
}

fn list(ts: &[Type]) -> String {
    ts.iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn check_width(w: usize) -> Result<(), String> {
    if matches!(w, 2 | 4 | 8) {
        Ok(())
    } else {
        Err(format!("vector width must be 2, 4 or 8, got {w}"))
    }
}

/// True if `op` is defined on an operand of type `t`.
pub fn unary_defined(op: UnaryOp, t: Scalar) -> bool {
    match op {
        UnaryOp::Not => t.is_int() || t == Scalar::Bool,
        UnaryOp::Neg | UnaryOp::Abs => t.is_numeric(),
        _ => t.is_float(),
    }
}

/// True if `op` is defined on operands of type `t`.
pub fn binary_defined(op: BinaryOp, t: Scalar) -> bool {
    match op {
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Div
        | BinaryOp::Rem
        | BinaryOp::Min
        | BinaryOp::Max
        | BinaryOp::Lt
        | BinaryOp::Le
        | BinaryOp::Gt
        | BinaryOp::Ge => t.is_numeric(),
        BinaryOp::Pow => t.is_float(),
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => t.is_int() || t == Scalar::Bool,
        BinaryOp::Shl | BinaryOp::Shr => t.is_int(),
        BinaryOp::Eq | BinaryOp::Ne => true,
    }
}

/// A short name of an op for messages.
pub fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Const(_) => "const",
        Op::Builtin(b) => b.name(),
        Op::Param(_) => "param",
        Op::Unary(u, _) => u.name(),
        Op::Binary(b, _, _) => b.name(),
        Op::Fma(..) => "fma",
        Op::Select(..) => "select",
        Op::Cast(..) => "cast",
        Op::Bitcast(..) => "bitcast",
        Op::Load { .. } => "load",
        Op::Store { .. } => "store",
        Op::VecLoad { .. } => "vload",
        Op::VecStore { .. } => "vstore",
        Op::Extract(..) => "extract",
        Op::Pack(_) => "pack",
        Op::Atomic { op, .. } => op.name(),
        Op::Barrier => "barrier",
        Op::SimdBarrier => "simd_barrier",
        Op::CopyAsync { .. } => "copy_async",
        Op::CommitCopies => "commit_copies",
        Op::WaitCopies(_) => "wait_copies",
        Op::Simd(s, _) => s.name(),
        Op::Shuffle { kind, .. } => kind.name(),
        Op::GroupReduce(r, _) => r.name(),
        Op::If { .. } => "if",
        Op::For { .. } => "for",
        Op::Call { .. } => "call",
        Op::FragFill { .. } => "frag_fill",
        Op::FragScale { .. } => "frag_scale",
        Op::FragLoad { .. } => "frag_load",
        Op::FragStore { .. } => "frag_store",
        Op::FragMma { .. } => "frag_mma",
        Op::FragRowReduce { op, .. } => op.name(),
        Op::FragRowMap { op, .. } => op.name(),
        Op::FragMask { .. } => "matrix_mask",
        Op::FragRows { op, .. } => op.name(),
        Op::FragRowsRaise { .. } => "matrix_rows_raise",
        Op::FragAdd { .. } => "matrix_add",
        Op::FragConvert { .. } => "frag_convert",
        Op::FragMmaTiles {
            asynchronous: false,
            ..
        } => "matrix_mma_tiles",
        Op::FragMmaTiles { .. } => "matrix_mma_tiles_async",
        Op::FragMmaWait { .. } => "matrix_mma_wait",
    }
}

/// The uniformity analysis: a monotone descent from "everything threadgroup-uniform"
/// (block args of the top block preset by the caller) to a fixpoint.
struct Analysis<'u> {
    uni: &'u mut Vec<Uniformity>,
    changed: bool,
}

impl Analysis<'_> {
    fn get(&self, v: ValueId) -> Uniformity {
        self.uni
            .get(v.index())
            .copied()
            .unwrap_or(Uniformity::Varying)
    }

    fn lower(&mut self, v: ValueId, u: Uniformity) {
        if let Some(slot) = self.uni.get_mut(v.index()) {
            if u < *slot {
                *slot = u;
                self.changed = true;
            }
        }
    }

    fn fixpoint(&mut self, b: &Block) {
        // Each round can only lower values; three levels bound the rounds per value, but a
        // fixed cap keeps malformed IR from looping.
        for _ in 0..(3 * self.uni.len() + 2) {
            self.changed = false;
            self.block(b, Uniformity::Threadgroup);
            if !self.changed {
                break;
            }
        }
    }

    fn min_of(&self, vs: &[ValueId]) -> Uniformity {
        vs.iter()
            .map(|&v| self.get(v))
            .min()
            .unwrap_or(Uniformity::Threadgroup)
    }

    fn block(&mut self, b: &Block, ctrl: Uniformity) {
        for inst in &b.insts {
            self.inst(inst, ctrl);
        }
    }

    fn inst(&mut self, inst: &Inst, ctrl: Uniformity) {
        use Uniformity::*;
        let u = match &inst.op {
            Op::Const(_) | Op::Param(_) => Threadgroup,
            Op::Builtin(b) => match b {
                Builtin::ThreadId | Builtin::GlobalId | Builtin::SimdLane => Varying,
                Builtin::SimdId => Simdgroup,
                _ => Threadgroup,
            },
            Op::Unary(..)
            | Op::Binary(..)
            | Op::Fma(..)
            | Op::Select(..)
            | Op::Cast(..)
            | Op::Bitcast(..)
            | Op::Extract(..)
            | Op::Pack(_) => self.min_of(&inst.op.operands()),
            Op::Load { .. } | Op::VecLoad { .. } | Op::Atomic { .. } => Varying,
            Op::Store { .. }
            | Op::VecStore { .. }
            | Op::Barrier
            | Op::SimdBarrier
            | Op::CopyAsync { .. }
            | Op::CommitCopies
            | Op::WaitCopies(_) => Threadgroup,
            Op::FragFill { .. }
            | Op::FragScale { .. }
            | Op::FragLoad { .. }
            | Op::FragStore { .. }
            | Op::FragMma { .. }
            | Op::FragRowReduce { .. }
            | Op::FragRowMap { .. }
            | Op::FragMask { .. }
            | Op::FragRows { .. }
            | Op::FragRowsRaise { .. }
            | Op::FragAdd { .. }
            | Op::FragConvert { .. }
            | Op::FragMmaTiles { .. }
            | Op::FragMmaWait { .. } => Threadgroup,
            Op::Simd(op, _) => match op {
                SimdOp::PrefixSum | SimdOp::PrefixExclusiveSum => Varying,
                _ => Simdgroup.max(self.min_of(&inst.op.operands())),
            },
            Op::Shuffle { kind, value, arg } => {
                let v = self.get(*value);
                match kind {
                    ShuffleKind::Index if self.get(*arg) >= Simdgroup => v.max(Simdgroup),
                    _ => v,
                }
            }
            Op::GroupReduce(..) => Threadgroup,
            Op::If {
                cond,
                then_block,
                else_block,
            } => {
                let inner = ctrl.min(self.get(*cond));
                self.block(then_block, inner);
                self.block(else_block, inner);
                let c = self.get(*cond);
                for (k, &r) in inst.results.iter().enumerate() {
                    let t = then_block.yields.get(k).map_or(Varying, |&y| self.get(y));
                    let e = else_block.yields.get(k).map_or(Varying, |&y| self.get(y));
                    self.lower(r, c.min(t).min(e));
                }
                return;
            }
            Op::For {
                bounds,
                inits,
                body,
            } => {
                let bound = self.min_of(bounds);
                if let Some(&iv) = body.args.first() {
                    self.lower(iv, bound);
                }
                for (k, &i) in inits.iter().enumerate() {
                    let y = body.yields.get(k).map_or(Varying, |&y| self.get(y));
                    let u = bound.min(self.get(i)).min(y);
                    if let Some(&a) = body.args.get(k + 1) {
                        self.lower(a, u);
                    }
                    if let Some(&r) = inst.results.get(k) {
                        self.lower(r, u);
                    }
                }
                self.block(body, ctrl.min(bound));
                return;
            }
            Op::Call { func, args, .. } => {
                // Results of a call: the callee's yields at these argument uniformities.
                let mut u = vec![Threadgroup; func.body.values.len()];
                for (&a, &v) in func.body.block.args.iter().zip(args) {
                    if let Some(slot) = u.get_mut(a.index()) {
                        *slot = self.get(v);
                    }
                }
                let mut an = Analysis {
                    uni: &mut u,
                    changed: false,
                };
                an.fixpoint(&func.body.block);
                for (&r, &y) in inst.results.iter().zip(&func.body.block.yields) {
                    let yu = u.get(y.index()).copied().unwrap_or(Varying);
                    self.lower(r, yu);
                }
                return;
            }
        };
        for &r in &inst.results {
            self.lower(r, u);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{Builder, Value};

    fn ok_kernel() -> Kernel {
        let (mut b, x, out) = Builder::kernel_x_out("k", Scalar::F32);
        let tid = b.builtin(Builtin::ThreadId);
        let v = b.load(x, tid).unwrap();
        let s = b.group_reduce(crate::ops::ReduceOp::Sum, v).unwrap();
        let (i, c) = b
            .begin_for(Value::Int(0), Value::Int(4), Value::Int(1), &[s])
            .unwrap();
        let f = b.cast(i, Scalar::F32).unwrap();
        let n = b.binary(BinaryOp::Add, c[0], f).unwrap();
        b.barrier();
        let r = b.end_for(&[n]).unwrap();
        b.store(out, tid, r[0]).unwrap();
        b.finish_kernel().unwrap()
    }

    fn msg(k: &Kernel) -> String {
        verify_kernel(k).unwrap_err().to_string()
    }

    #[test]
    fn a_well_formed_kernel_passes() {
        verify_kernel(&ok_kernel()).unwrap();
    }

    #[test]
    fn a_barrier_under_a_thread_dependent_if_is_rejected() {
        let mut b = Builder::kernel("divergent");
        let out = b.tensor_param("out", Scalar::F32, true);
        let tid = b.builtin(Builtin::ThreadId);
        let c = b.binary(BinaryOp::Lt, tid, Value::Int(3)).unwrap();
        b.set_loc(12, 9);
        b.begin_if(c).unwrap();
        b.barrier();
        b.begin_else(&[]).unwrap();
        b.end_if(&[]).unwrap();
        b.store(out, tid, Value::Float(1.0)).unwrap();
        let k = b.finish_kernel().unwrap();
        let m = msg(&k);
        assert!(m.contains("`divergent`") && m.contains("barrier"), "{m}");
        assert!(m.contains("12:9"), "{m}");
    }

    #[test]
    fn a_barrier_under_a_uniform_if_is_accepted() {
        let mut b = Builder::kernel("uniform");
        let out = b.tensor_param("out", Scalar::F32, true);
        let n = b.scalar_param("n", Scalar::U32);
        let g = b.builtin(Builtin::GroupIdX);
        let c = b.binary(BinaryOp::Lt, g, n).unwrap();
        b.begin_if(c).unwrap();
        b.barrier();
        b.begin_else(&[]).unwrap();
        b.end_if(&[]).unwrap();
        let tid = b.builtin(Builtin::ThreadId);
        b.store(out, tid, Value::Float(1.0)).unwrap();
        verify_kernel(&b.finish_kernel().unwrap()).unwrap();
    }

    #[test]
    fn simd_ops_may_depend_on_simd_id_but_barriers_may_not() {
        let mut b = Builder::kernel("simd");
        let out = b.tensor_param("out", Scalar::F32, true);
        let sid = b.builtin(Builtin::SimdId);
        let c = b.binary(BinaryOp::Eq, sid, Value::Int(0)).unwrap();
        b.begin_if(c).unwrap();
        let s = b.simd(SimdOp::Sum, Value::Float(1.0)).unwrap();
        b.begin_else(&[s]).unwrap();
        let r = b.end_if(&[Value::Float(0.0)]).unwrap();
        let tid = b.builtin(Builtin::ThreadId);
        b.store(out, tid, r[0]).unwrap();
        let k = b.finish_kernel().unwrap();
        verify_kernel(&k).unwrap();
        let mut bad = k.clone();
        if let Op::If { then_block, .. } = &mut bad.body.block.insts[3].op {
            then_block.insts.push(Inst {
                op: Op::Barrier,
                results: vec![],
                loc: None,
            });
        } else {
            panic!("expected the if at position 3: {bad}");
        }
        assert!(msg(&bad).contains("threadgroup"));
    }

    #[test]
    fn a_simd_barrier_may_depend_on_simd_id_but_not_on_the_lane() {
        let build = |id: Builtin| {
            let mut b = Builder::kernel("simd_barrier");
            let out = b.tensor_param("out", Scalar::F32, true);
            let v = b.builtin(id);
            let c = b.binary(BinaryOp::Eq, v, Value::Int(0)).unwrap();
            b.begin_if(c).unwrap();
            b.simd_barrier();
            b.begin_else(&[]).unwrap();
            b.end_if(&[]).unwrap();
            let tid = b.builtin(Builtin::ThreadId);
            b.store(out, tid, Value::Float(1.0)).unwrap();
            b.finish_kernel().unwrap()
        };
        verify_kernel(&build(Builtin::SimdId)).unwrap();
        let m = msg(&build(Builtin::SimdLane));
        assert!(m.contains("simd_barrier") && m.contains("simdgroup"), "{m}");
    }

    #[test]
    fn a_loop_bound_from_a_loaded_value_makes_collectives_illegal() {
        let (mut b, x, out) = Builder::kernel_x_out("loopy", Scalar::U32);
        let n = b.load(x, Value::Int(0)).unwrap();
        let (_, c) = b
            .begin_for(Value::Int(0), n, Value::Int(1), &[Value::Int(0)])
            .unwrap();
        let s = b.simd(SimdOp::Sum, c[0]).unwrap();
        let r = b.end_for(&[s]).unwrap();
        b.store(out, Value::Int(0), r[0]).unwrap();
        let m = msg(&b.finish_kernel().unwrap());
        assert!(m.contains("simd_sum") && m.contains("simdgroup"), "{m}");
    }

    #[test]
    fn a_value_used_outside_its_region_is_rejected() {
        let mut k = ok_kernel();
        // Store the loop's inner sum (defined inside the body) after the loop.
        let pos = k
            .body
            .block
            .insts
            .iter()
            .position(|i| matches!(i.op, Op::For { .. }))
            .unwrap();
        let inner = match &k.body.block.insts[pos].op {
            Op::For { body, .. } => body.yields[0],
            _ => unreachable!(),
        };
        let last = k.body.block.insts.len() - 1;
        if let Op::Store { value, .. } = &mut k.body.block.insts[last].op {
            *value = inner;
        }
        assert!(msg(&k).contains("does not dominate"), "{}", msg(&k));
    }

    #[test]
    fn a_value_defined_twice_is_rejected() {
        let mut k = ok_kernel();
        let first = k.body.block.insts[0].results.clone();
        k.body.block.insts[2].results = first;
        assert!(!msg(&k).is_empty());
    }

    #[test]
    fn type_errors_are_reported() {
        let mut k = ok_kernel();
        let tid = k
            .body
            .block
            .insts
            .iter()
            .find(|i| matches!(i.op, Op::Builtin(_)))
            .and_then(Inst::result)
            .unwrap();
        let last = k.body.block.insts.len() - 1;
        if let Op::Store { value, .. } = &mut k.body.block.insts[last].op {
            *value = tid;
        }
        let m = msg(&k);
        assert!(m.contains("u32") && m.contains("f32"), "{m}");
    }

    #[test]
    fn stores_into_read_only_tensors_are_rejected() {
        let mut k = ok_kernel();
        let last = k.body.block.insts.len() - 1;
        if let Op::Store { mem, .. } = &mut k.body.block.insts[last].op {
            *mem = MemRef::Param(0);
        }
        assert!(msg(&k).contains("read-only"));
        if let Op::Store { mem, .. } = &mut k.body.block.insts[last].op {
            *mem = MemRef::Shared(7);
        }
        assert!(msg(&k).contains("does not exist"));
    }

    #[test]
    fn yields_must_match_results() {
        let mut k = ok_kernel();
        for inst in &mut k.body.block.insts {
            if let Op::For { body, .. } = &mut inst.op {
                body.yields.clear();
            }
        }
        assert!(msg(&k).contains("yields 0"));
    }

    #[test]
    fn functions_are_checked_alone_and_through_calls() {
        let mut f = Builder::function("f");
        let a = f.func_arg(Scalar::F32);
        let s = f.group_reduce(crate::ops::ReduceOp::Max, a).unwrap();
        let func = std::sync::Arc::new(f.finish_function(&[s], &[Scalar::F32]).unwrap());
        verify_function(&func).unwrap();
        let mut b = Builder::kernel("caller");
        let out = b.tensor_param("out", Scalar::F32, true);
        let tid = b.builtin(Builtin::ThreadId);
        let c = b.binary(BinaryOp::Lt, tid, Value::Int(3)).unwrap();
        b.begin_if(c).unwrap();
        let r = b.call(func.clone(), &[Value::Float(1.0).into()]).unwrap();
        b.begin_else(&[r[0]]).unwrap();
        let r = b.end_if(&[Value::Float(0.0)]).unwrap();
        b.store(out, tid, r[0]).unwrap();
        let m = msg(&b.finish_kernel().unwrap());
        assert!(
            m.contains("in function `f`") && m.contains("group_max"),
            "{m}"
        );
        // Called from uniform control flow, the group reduction's result is uniform.
        let mut b = Builder::kernel("caller2");
        let out = b.tensor_param("out", Scalar::F32, true);
        let r = b.call(func, &[Value::Float(1.0).into()]).unwrap();
        let c = b.binary(BinaryOp::Gt, r[0], Value::Float(0.0)).unwrap();
        b.begin_if(c).unwrap();
        b.barrier();
        b.begin_else(&[]).unwrap();
        b.end_if(&[]).unwrap();
        b.store(out, Value::Int(0), Value::Float(1.0)).unwrap();
        let k = b.finish_kernel().unwrap();
        verify_kernel(&k).unwrap();
        let u = uniformity(&k);
        assert!(u.contains(&Uniformity::Threadgroup));
    }

    #[test]
    fn memory_arguments_are_checked_in_the_function_and_at_the_call() {
        // A function storing to memory it declared read-only.
        let mut f = Builder::function("fill");
        let m = f.func_mem_arg("dst", Scalar::F32, true);
        f.store(m, Value::Int(0), Value::Float(1.0)).unwrap();
        let mut func = f.finish_function(&[], &[]).unwrap();
        verify_function(&func).unwrap();
        func.mems[0].writable = false;
        let e = verify_function(&func).unwrap_err().to_string();
        assert!(
            e.contains("writes the read-only memory argument `dst`"),
            "{e}"
        );
        func.mems[0].writable = true;
        let func = std::sync::Arc::new(func);
        let call = |mems: Vec<MemRef>| {
            let mut b = Builder::kernel("caller");
            let out = b.tensor_param("out", Scalar::F32, true);
            b.tensor_param("x", Scalar::F32, false);
            b.tensor_param("h", Scalar::F16, true);
            b.store(out, Value::Int(1), Value::Float(0.0)).unwrap();
            let mut k = b.finish_kernel().unwrap();
            k.body.block.insts.push(Inst {
                op: Op::Call {
                    func: func.clone(),
                    args: vec![],
                    mems,
                    frags: vec![],
                },
                results: vec![],
                loc: None,
            });
            verify_kernel(&k).map_err(|e| e.to_string())
        };
        call(vec![MemRef::Param(0)]).unwrap();
        let e = call(vec![MemRef::Param(1)]).unwrap_err();
        assert!(e.contains("writes the read-only tensor `x`"), "{e}");
        let e = call(vec![MemRef::Param(2)]).unwrap_err();
        assert!(e.contains("holds f32, given memory of f16"), "{e}");
        let e = call(vec![]).unwrap_err();
        assert!(e.contains("takes 1 memory argument(s), 0 given"), "{e}");
        // A kernel has no memory arguments of its own.
        let e = call(vec![MemRef::Arg(0)]).unwrap_err();
        assert!(e.contains("memory argument 0 does not exist"), "{e}");
    }

    #[test]
    fn calls_pass_fragments_of_the_declared_role_and_type() {
        let mut f = Builder::function("zero");
        let acc = f
            .func_frag_arg("acc", FragRole::Acc, Scalar::F32, Some(2))
            .unwrap();
        for &a in &acc.frags {
            f.frag_fill(a, Value::Float(0.0)).unwrap();
        }
        let func = std::sync::Arc::new(f.finish_function(&[], &[]).unwrap());
        // The caller has two accumulators (0, 1) and a B operand (2).
        let call = |frags: Vec<u32>| {
            let mut b = Builder::kernel("caller");
            let out = b.tensor_param("out", Scalar::F32, true);
            b.frag_array("acc", FragRole::Acc, Scalar::F32, Value::Int(2))
                .unwrap();
            b.frag("fb", FragRole::B, Scalar::F16).unwrap();
            b.store(out, Value::Int(0), Value::Float(0.0)).unwrap();
            let mut k = b.finish_kernel().unwrap();
            k.body.block.insts.push(Inst {
                op: Op::Call {
                    func: func.clone(),
                    args: vec![],
                    mems: vec![],
                    frags,
                },
                results: vec![],
                loc: None,
            });
            verify_kernel(&k).map_err(|e| e.to_string())
        };
        call(vec![0, 1]).unwrap();
        call(vec![1, 0]).unwrap();
        let e = call(vec![0]).unwrap_err();
        assert!(e.contains("takes 2 matrix fragment(s)"), "{e}");
        let e = call(vec![0, 2]).unwrap_err();
        assert!(
            e.contains("fragment argument `acc` is `[MatrixAcc; 2]`, given `fb` (b of f16)"),
            "{e}"
        );
        let e = call(vec![0, 7]).unwrap_err();
        assert!(e.contains("matrix fragment 7 does not exist"), "{e}");
    }

    #[test]
    fn lowered_kernels_need_simdgroup_uniform_control_around_barriers() {
        let build = |thread_dependent: bool| {
            let mut b = Builder::kernel("lowered");
            let out = b.tensor_param("out", Scalar::F32, true);
            let c = if thread_dependent {
                let t = b.builtin(Builtin::ThreadId);
                b.binary(BinaryOp::Lt, t, Value::Int(3)).unwrap()
            } else {
                let t = b.builtin(Builtin::ThreadId);
                let s = b.simd(SimdOp::Sum, t).unwrap();
                b.binary(BinaryOp::Gt, s, Value::Int(40)).unwrap()
            };
            b.begin_if(c).unwrap();
            b.barrier();
            b.begin_else(&[]).unwrap();
            b.end_if(&[]).unwrap();
            b.store(out, Value::Int(0), Value::Float(1.0)).unwrap();
            b.finish_kernel().unwrap()
        };
        let simd = build(false);
        assert!(verify_kernel(&simd).is_err());
        verify_lowered_kernel(&simd).unwrap();
        let thread = build(true);
        assert!(verify_kernel(&thread).is_err());
        assert!(verify_lowered_kernel(&thread).is_err());
    }

    /// A kernel with one 16×16 f16 multiply-accumulate; `lane_if` puts the mma under a
    /// lane-dependent `if`, `lane_index` loads A at a lane-dependent index.
    fn frag_kernel(lane_if: bool, lane_index: bool) -> Kernel {
        let mut b = Builder::kernel("frag");
        let x = b.tensor_param("x", Scalar::F16, false);
        let out = b.tensor_param("out", Scalar::F32, true);
        let fa = b
            .frag("a", crate::kernel::FragRole::A, Scalar::F16)
            .unwrap();
        let fb = b
            .frag("b", crate::kernel::FragRole::B, Scalar::F16)
            .unwrap();
        let acc = b
            .frag("acc", crate::kernel::FragRole::Acc, Scalar::F32)
            .unwrap();
        let index = if lane_index {
            b.builtin(Builtin::SimdLane)
        } else {
            b.builtin(Builtin::SimdId)
        };
        b.frag_load(fa, x, index, Value::Int(16), false).unwrap();
        b.frag_load(fb, x, Value::Int(0), Value::Int(16), true)
            .unwrap();
        b.frag_fill(acc, Value::Float(0.0)).unwrap();
        let c = if lane_if {
            let l = b.builtin(Builtin::SimdLane);
            b.binary(BinaryOp::Lt, l, Value::Int(16)).unwrap()
        } else {
            b.lit(crate::Literal::Bool(true))
        };
        b.begin_if(c).unwrap();
        b.frag_mma(acc, fa, fb, acc).unwrap();
        b.begin_else(&[]).unwrap();
        b.end_if(&[]).unwrap();
        b.frag_store(acc, out, Value::Int(0), Value::Int(16))
            .unwrap();
        b.finish_kernel().unwrap()
    }

    #[test]
    fn fragment_ops_verify_and_count_as_simdgroup_ops() {
        let k = frag_kernel(false, false);
        verify_kernel(&k).unwrap();
        assert!(k.uses_simdgroups());
        let text = k.to_string();
        assert!(
            text.contains("frag_mma frag acc = frag a * frag b + frag acc"),
            "{text}"
        );
        assert!(text.contains("frag_load_t frag b"), "{text}");
        assert!(
            text.contains("frag a: a f1616x16") || text.contains("frag a: a f16"),
            "{text}"
        );
    }

    #[test]
    fn fragment_ops_need_uniform_control_and_operands() {
        let m = msg(&frag_kernel(true, false));
        assert!(
            m.contains("frag_mma") && m.contains("not uniform across the simdgroup"),
            "{m}"
        );
        let m = msg(&frag_kernel(false, true));
        assert!(
            m.contains("frag_load") && m.contains("simd_broadcast"),
            "{m}"
        );
    }

    #[test]
    fn fragment_roles_and_types_are_checked_when_built() {
        let mut b = Builder::kernel("roles");
        let x = b.tensor_param("x", Scalar::F32, false);
        assert!(b
            .frag("a", crate::kernel::FragRole::A, Scalar::F32)
            .is_err());
        let acc = b
            .frag("acc", crate::kernel::FragRole::Acc, Scalar::F32)
            .unwrap();
        let fa = b
            .frag("a", crate::kernel::FragRole::A, Scalar::BF16)
            .unwrap();
        let e = b
            .frag_load(fa, x, Value::Int(0), Value::Int(16), false)
            .unwrap_err();
        assert!(e.to_string().contains("stage the data"), "{e}");
        let e = b.frag_mma(acc, acc, fa, acc).unwrap_err();
        assert!(e.to_string().contains("left operand"), "{e}");
        assert!(b.frag_store(fa, x, Value::Int(0), Value::Int(16)).is_err());
    }
}
