//! One threadgroup in lock-step: the per-lane register file with poison tags, the
//! threadgroup and stack arrays, and the execution of blocks, control flow and pure ops.
//! Memory ops live in `memops.rs`, collectives in `collective.rs`.

use super::async_copy::AsyncCopies;
use super::mask::{each_lane, Mask};
use super::program::{Hoisted, Program};
use super::scalar::{with_binary, with_cast, with_fma, with_unary};
use crate::error::{Result, RuntimeError, SanitizerError, Violation};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU8};
use tessera_ir::{BinaryOp, Block, Builtin, Inst, Op, Scalar, ValueId};

/// Marks a threadgroup or stack element nothing has written.
pub(crate) const UNWRITTEN: u32 = u32::MAX;

/// The most lock-step iterations one loop execution may run before it is called runaway.
pub(crate) const MAX_LOOP_ITERATIONS: u64 = 1 << 30;
/// The most loop iterations (all loops together) one threadgroup may run.
pub(crate) const MAX_GROUP_ITERATIONS: u64 = 1 << 32;

/// A tensor argument seen as elements of its width.
#[derive(Clone, Copy)]
pub(crate) enum DevView<'a> {
    B8(&'a [AtomicU8]),
    B16(&'a [AtomicU16]),
    B32(&'a [AtomicU32]),
}

impl DevView<'_> {
    pub fn len(&self) -> usize {
        match self {
            DevView::B8(s) => s.len(),
            DevView::B16(s) => s.len(),
            DevView::B32(s) => s.len(),
        }
    }
}

/// What every threadgroup of one launch shares.
pub(crate) struct LaunchState<'a> {
    pub prog: &'a Program,
    /// By parameter index: the tensor view, or `None` for a scalar.
    pub tensors: Vec<Option<DevView<'a>>>,
    /// By parameter index: the scalar's bits (0 for tensors).
    pub scalars: Vec<u32>,
    pub grid: [u32; 3],
    pub group_size: u32,
}

/// A threadgroup or stack array: values and, per element, a poison tag
/// (0 written clean, [`UNWRITTEN`], or the origin of the poison stored).
pub(crate) struct Array {
    pub len: usize,
    pub data: Vec<u32>,
    pub tag: Vec<u32>,
}

/// The state of one threadgroup; reused for the next threadgroup a worker runs.
pub(crate) struct Group<'a> {
    pub l: &'a LaunchState<'a>,
    pub p: &'a Program,
    pub n: usize,
    pub regs: Vec<u32>,
    /// Per slot and lane: 0 clean, else the poison origin (a load's result id + 1).
    pub ptag: Vec<u32>,
    /// Per slot: whether `ptag` may hold non-zero tags for the lanes last written.
    pub pflag: Vec<bool>,
    pub shared: Vec<Array>,
    /// Stack arrays: element `i` of lane `l` at `l * len + i`.
    pub locals: Vec<Array>,
    /// Per value: the first poisoned read it made (index, thread).
    pub origins: Vec<Option<(u64, u32)>>,
    pub origins_used: bool,
    pub pool: Vec<Vec<u32>>,
    pub group: [u32; 3],
    pub iterations: u64,
    /// Matrix fragments: per fragment, a 16×16 f32 tile per simdgroup.
    pub frags: Vec<Vec<f32>>,
    /// Per fragment and simdgroup: whether it has been filled or loaded.
    pub frag_set: Vec<Vec<bool>>,
    /// Asynchronous copies in flight and each lane's groups.
    pub copies: AsyncCopies,
    /// The asynchronous tile products in flight, oldest first.
    pub products: Vec<super::frag_tiles::ProductInFlight>,
}

/// The destination slot and source slots of an elementwise op, borrowed together.
/// `d` must differ from every source (SSA; checked when the program is prepared).
#[inline(always)]
pub(crate) fn split<const K: usize>(
    v: &mut [u32],
    n: usize,
    d: usize,
    srcs: [usize; K],
) -> (&mut [u32], [&[u32]; K]) {
    let (lo, rest) = v.split_at_mut(d * n);
    let (dst, hi) = rest.split_at_mut(n);
    let lo: &[u32] = lo;
    let hi: &[u32] = hi;
    let get = |s: usize| -> &[u32] {
        if s < d {
            &lo[s * n..s * n + n]
        } else {
            &hi[(s - d - 1) * n..(s - d) * n]
        }
    };
    (dst, srcs.map(get))
}

impl<'a> Group<'a> {
    pub fn new(l: &'a LaunchState<'a>) -> Group<'a> {
        let p = l.prog;
        let n = l.group_size as usize;
        let body = &p.kernel.body;
        let shared = body
            .shared
            .iter()
            .map(|a| Array {
                len: a.len as usize,
                data: vec![0; a.len as usize],
                tag: vec![UNWRITTEN; a.len as usize],
            })
            .collect();
        let locals = body
            .locals
            .iter()
            .map(|a| Array {
                len: a.len as usize,
                data: vec![0; a.len as usize * n],
                tag: vec![UNWRITTEN; a.len as usize * n],
            })
            .collect();
        let mut g = Group {
            l,
            p,
            n,
            regs: vec![0; p.slots * n],
            ptag: vec![0; p.slots * n],
            pflag: vec![false; p.slots],
            shared,
            locals,
            origins: vec![None; p.values.len()],
            origins_used: false,
            pool: Vec::new(),
            group: [0; 3],
            iterations: 0,
            frags: vec![vec![0.0; n.div_ceil(32) * super::frag::TILE]; body.frags.len()],
            frag_set: vec![vec![false; n.div_ceil(32)]; body.frags.len()],
            copies: AsyncCopies::new(n, body.shared.iter().map(|a| a.len as usize)),
            products: Vec::new(),
        };
        // Values the same for every threadgroup of the launch.
        for h in &p.hoisted {
            match *h {
                Hoisted::Const(s, bits) => g.fill(s as usize, |_| bits),
                Hoisted::Param(s, i) => {
                    let bits = l.scalars.get(i as usize).copied().unwrap_or(0);
                    g.fill(s as usize, |_| bits)
                }
                Hoisted::Builtin(s, b) => {
                    let gs = l.group_size;
                    let ng = l.grid;
                    match b {
                        Builtin::ThreadId => g.fill(s as usize, |t| t),
                        Builtin::GroupSize => g.fill(s as usize, |_| gs),
                        Builtin::NumGroupsX => g.fill(s as usize, |_| ng[0]),
                        Builtin::NumGroupsY => g.fill(s as usize, |_| ng[1]),
                        Builtin::NumGroupsZ => g.fill(s as usize, |_| ng[2]),
                        Builtin::SimdLane => g.fill(s as usize, |t| t % 32),
                        Builtin::SimdId => g.fill(s as usize, |t| t / 32),
                        Builtin::SimdGroups => g.fill(s as usize, |_| gs.div_ceil(32)),
                        // Per threadgroup: filled in `run`.
                        Builtin::GroupIdX
                        | Builtin::GroupIdY
                        | Builtin::GroupIdZ
                        | Builtin::GlobalId => {}
                    }
                }
            }
        }
        g
    }

    fn fill(&mut self, slot: usize, f: impl Fn(u32) -> u32) {
        let n = self.n;
        for (t, r) in self.regs[slot * n..slot * n + n].iter_mut().enumerate() {
            *r = f(t as u32);
        }
        self.pflag[slot] = false;
    }

    /// Runs threadgroup `group` of the launch.
    pub fn run(&mut self, group: [u32; 3]) -> Result<()> {
        self.group = group;
        self.iterations = 0;
        let gs = self.l.group_size;
        for i in 0..self.p.hoisted.len() {
            if let Hoisted::Builtin(s, b) = self.p.hoisted[i] {
                match b {
                    Builtin::GroupIdX => self.fill(s as usize, |_| group[0]),
                    Builtin::GroupIdY => self.fill(s as usize, |_| group[1]),
                    Builtin::GroupIdZ => self.fill(s as usize, |_| group[2]),
                    Builtin::GlobalId => {
                        self.fill(s as usize, |t| group[0].wrapping_mul(gs).wrapping_add(t))
                    }
                    _ => {}
                }
            }
        }
        for a in self.shared.iter_mut().chain(self.locals.iter_mut()) {
            a.tag.fill(UNWRITTEN);
        }
        for f in &mut self.frag_set {
            f.fill(false);
        }
        if self.origins_used {
            self.origins.fill(None);
            self.origins_used = false;
        }
        self.copies.reset();
        self.products.clear();
        let p = self.p;
        self.exec_block(&p.kernel.body.block, &Mask::full())?;
        self.check_copies_landed()?;
        self.check_no_product_at_end()
    }

    // ── errors ───────────────────────────────────────────────────────────────

    pub fn fail(&self, inst: &Inst, thread: u32, violation: Violation) -> RuntimeError {
        SanitizerError {
            kernel: self.p.name.clone(),
            op: self.p.describe(inst),
            loc: inst.loc,
            group: self.group,
            thread,
            violation,
        }
        .into()
    }

    /// Fails if any active lane of `v` carries poison: it reached `sink`.
    pub fn check_clean(&self, inst: &Inst, m: &Mask, v: ValueId, sink: &str) -> Result<()> {
        let info = self.p.info(v);
        let n = self.n;
        for k in 0..info.width as usize {
            let s = info.slot as usize + k;
            if !self.pflag[s] {
                continue;
            }
            let tags = &self.ptag[s * n..s * n + n];
            each_lane!(m, n, |l| {
                if tags[l] != 0 {
                    return Err(self.poison_error(inst, l as u32, tags[l], sink));
                }
            });
        }
        Ok(())
    }

    fn poison_error(&self, inst: &Inst, thread: u32, tag: u32, sink: &str) -> RuntimeError {
        let origin_v = ValueId(tag.wrapping_sub(1));
        let (origin, memory) = match self.p.defining_inst(origin_v) {
            Some(i) => {
                let mem = match &i.op {
                    Op::Load { mem, .. } | Op::VecLoad { mem, .. } | Op::Atomic { mem, .. } => {
                        self.p.mem_name(*mem)
                    }
                    _ => "?".into(),
                };
                let at = i
                    .loc
                    .map(|l| format!(" at line {}:{}", l.line, l.col))
                    .unwrap_or_default();
                (format!("{}{at}", self.p.describe(i)), mem)
            }
            None => ("an unknown load".into(), "?".into()),
        };
        let (index, reader) = self
            .origins
            .get(origin_v.index())
            .copied()
            .flatten()
            .unwrap_or((0, thread));
        self.fail(
            inst,
            thread,
            Violation::Uninitialized {
                origin: format!("{origin} (thread {reader})"),
                memory,
                index,
                sink: sink.to_string(),
            },
        )
    }

    // ── masks ────────────────────────────────────────────────────────────────

    pub fn take_vec(&mut self) -> Vec<u32> {
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v
    }

    pub fn give_mask(&mut self, m: Mask) {
        self.pool.push(m.lanes);
    }

    // ── register helpers ─────────────────────────────────────────────────────

    /// Poison of an elementwise result: the first poisoned operand's tag, per lane.
    fn poison_from(&mut self, m: &Mask, d: usize, srcs: &[usize]) {
        if !srcs.iter().any(|&s| self.pflag[s]) {
            self.pflag[d] = false;
            return;
        }
        let n = self.n;
        for l in lanes_of(m, n) {
            let mut t = 0;
            for &s in srcs {
                if self.pflag[s] && self.ptag[s * n + l] != 0 {
                    t = self.ptag[s * n + l];
                    break;
                }
            }
            self.ptag[d * n + l] = t;
        }
        self.pflag[d] = true;
    }

    /// Copies a slot for the active lanes, merging poison (for results written in parts).
    pub fn copy_slot(&mut self, m: &Mask, d: usize, s: usize) {
        if d == s {
            return;
        }
        let n = self.n;
        {
            let (dst, [src]) = split(&mut self.regs, n, d, [s]);
            each_lane!(m, n, |l| {
                dst[l] = src[l];
            });
        }
        if self.pflag[s] {
            let (dst, [src]) = split(&mut self.ptag, n, d, [s]);
            each_lane!(m, n, |l| {
                dst[l] = src[l];
            });
            self.pflag[d] = true;
        } else if self.pflag[d] {
            let dst = &mut self.ptag[d * n..d * n + n];
            each_lane!(m, n, |l| {
                dst[l] = 0;
            });
        }
    }

    pub fn copy_value(&mut self, m: &Mask, d: ValueId, s: ValueId) {
        let (di, si) = (self.p.info(d), self.p.info(s));
        for k in 0..di.width.min(si.width) as usize {
            self.copy_slot(m, di.slot as usize + k, si.slot as usize + k);
        }
    }

    #[inline(always)]
    fn map1(&mut self, m: &Mask, d: usize, a: usize, f: impl Fn(u32) -> u32) {
        let n = self.n;
        {
            let (dst, [x]) = split(&mut self.regs, n, d, [a]);
            each_lane!(m, n, |l| {
                dst[l] = f(x[l]);
            });
        }
        self.poison_from(m, d, &[a]);
    }

    #[inline(always)]
    fn map2(&mut self, m: &Mask, d: usize, a: usize, b: usize, f: impl Fn(u32, u32) -> u32) {
        let n = self.n;
        {
            let (dst, [x, y]) = split(&mut self.regs, n, d, [a, b]);
            if m.full {
                for ((o, &x), &y) in dst.iter_mut().zip(x).zip(y) {
                    *o = f(x, y);
                }
            } else {
                for &l in &m.lanes {
                    let l = l as usize;
                    dst[l] = f(x[l], y[l]);
                }
            }
        }
        self.poison_from(m, d, &[a, b]);
    }

    #[inline(always)]
    fn map3(
        &mut self,
        m: &Mask,
        d: usize,
        [a, b, c]: [usize; 3],
        f: impl Fn(u32, u32, u32) -> u32,
    ) {
        let n = self.n;
        {
            let (dst, [x, y, z]) = split(&mut self.regs, n, d, [a, b, c]);
            each_lane!(m, n, |l| {
                dst[l] = f(x[l], y[l], z[l]);
            });
        }
        self.poison_from(m, d, &[a, b, c]);
    }

    // ── execution ────────────────────────────────────────────────────────────

    pub fn exec_block(&mut self, block: &Block, m: &Mask) -> Result<()> {
        for inst in &block.insts {
            self.exec_inst(inst, m)?;
        }
        Ok(())
    }

    fn unsupported(&self, inst: &Inst, m: &Mask, message: String) -> RuntimeError {
        self.fail(inst, m.first(), Violation::Unsupported { message })
    }

    fn exec_inst(&mut self, inst: &Inst, m: &Mask) -> Result<()> {
        match &inst.op {
            // Filled before the threadgroup runs.
            Op::Const(_) | Op::Param(_) | Op::Builtin(_) => Ok(()),
            Op::Unary(op, a) => {
                let ai = self.p.info(*a);
                if !super::scalar::unary_defined(*op, ai.elem) {
                    let msg = format!("`{}` is not defined on {}", op.name(), ai.elem);
                    return Err(self.unsupported(inst, m, msg));
                }
                let d = self.p.info(inst.results[0]);
                for k in 0..d.width as usize {
                    let (ds, s) = (d.slot as usize + k, ai.slot as usize + k);
                    with_unary!(*op, ai.elem, f => self.map1(m, ds, s, f));
                }
                Ok(())
            }
            Op::Binary(op, a, b) => self.binary(inst, m, *op, *a, *b),
            Op::Fma(a, b, c) => {
                let ai = self.p.info(*a);
                if !ai.elem.is_float() {
                    let msg = format!("`fma` is not defined on {}", ai.elem);
                    return Err(self.unsupported(inst, m, msg));
                }
                let (bi, ci) = (self.p.info(*b), self.p.info(*c));
                let d = self.p.info(inst.results[0]);
                for k in 0..d.width as usize {
                    let srcs = [
                        ai.slot as usize + k,
                        bi.slot as usize + k,
                        ci.slot as usize + k,
                    ];
                    with_fma!(ai.elem, f => self.map3(m, d.slot as usize + k, srcs, f));
                }
                Ok(())
            }
            Op::Select(c, a, b) => {
                let (ci, ai, bi) = (self.p.info(*c), self.p.info(*a), self.p.info(*b));
                let d = self.p.info(inst.results[0]);
                for k in 0..d.width as usize {
                    let cs = ci.slot as usize + if ci.width > 1 { k } else { 0 };
                    self.select(
                        m,
                        d.slot as usize + k,
                        cs,
                        ai.slot as usize + k,
                        bi.slot as usize + k,
                    );
                }
                Ok(())
            }
            Op::Cast(a, to) => {
                let ai = self.p.info(*a);
                let d = self.p.info(inst.results[0]);
                for k in 0..d.width as usize {
                    let (ds, s) = (d.slot as usize + k, ai.slot as usize + k);
                    with_cast!(ai.elem, *to, f => self.map1(m, ds, s, f));
                }
                Ok(())
            }
            Op::Bitcast(a, _) => {
                // Registers hold every type's bit pattern zero-extended to 32 bits and
                // the verifier keeps the width, so the pattern is the result as it is.
                let ai = self.p.info(*a);
                let d = self.p.info(inst.results[0]);
                for k in 0..d.width as usize {
                    self.map1(m, d.slot as usize + k, ai.slot as usize + k, |x| x);
                }
                Ok(())
            }
            Op::Extract(v, lane) => {
                let s = self.p.info(*v).slot as usize + *lane as usize;
                let d = self.p.info(inst.results[0]).slot as usize;
                self.map1(m, d, s, |x| x);
                Ok(())
            }
            Op::Pack(vs) => {
                let d = self.p.info(inst.results[0]).slot as usize;
                for (k, v) in vs.iter().enumerate() {
                    let s = self.p.info(*v).slot as usize;
                    self.map1(m, d + k, s, |x| x);
                }
                Ok(())
            }
            Op::Load { .. }
            | Op::Store { .. }
            | Op::VecLoad { .. }
            | Op::VecStore { .. }
            | Op::Atomic { .. } => self.memory_op(inst, m),
            Op::Barrier => self.check_whole_group(inst, m),
            Op::CopyAsync {
                dst,
                dst_index,
                src,
                src_index,
                width,
                valid,
            } => self.copy_async(
                inst,
                m,
                (*dst, *dst_index),
                (*src, *src_index),
                *width,
                *valid,
            ),
            Op::CommitCopies => {
                self.commit_copies(m);
                Ok(())
            }
            Op::WaitCopies(n) => self.wait_copies(inst, m, *n),
            Op::SimdBarrier => self.active_simdgroups(inst, m).map(|_| ()),
            Op::Simd(op, v) => self.simd(inst, m, *op, *v),
            Op::Shuffle { kind, value, arg } => self.shuffle(inst, m, *kind, *value, *arg),
            Op::GroupReduce(op, v) => self.group_reduce(inst, m, *op, *v),
            Op::If {
                cond,
                then_block,
                else_block,
            } => self.exec_if(inst, m, *cond, then_block, else_block),
            Op::For {
                bounds,
                inits,
                body,
            } => self.exec_for(inst, m, *bounds, inits, body),
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
            | Op::FragConvert { .. } => {
                self.check_accumulators_free(inst)?;
                self.frag_op(inst, m)
            }
            Op::FragMmaTiles { .. } => self.frag_mma_tiles(inst, m),
            Op::FragMmaWait { .. } => self.frag_mma_wait(inst, m),
            Op::Call { func, .. } => Err(self.unsupported(
                inst,
                m,
                format!(
                    "call of `{}` not inlined: run the compiler's pipeline \
                     (tessera_compiler::optimize) before launching",
                    func.name
                ),
            )),
        }
    }

    /// A barrier or threadgroup reduction: every thread must be here.
    pub fn check_whole_group(&self, inst: &Inst, m: &Mask) -> Result<()> {
        if let Some(t) = m.first_inactive(self.n) {
            return Err(self.fail(
                inst,
                t,
                Violation::DivergentBarrier {
                    active: m.count(self.n) as u32,
                    group_size: self.n as u32,
                },
            ));
        }
        Ok(())
    }

    fn binary(
        &mut self,
        inst: &Inst,
        m: &Mask,
        op: BinaryOp,
        a: ValueId,
        b: ValueId,
    ) -> Result<()> {
        let (ai, bi) = (self.p.info(a), self.p.info(b));
        let ty = ai.elem;
        if !tessera_ir::verify::binary_defined(op, ty) || bi.elem != ty {
            let msg = format!("`{}` on {} and {}", op.name(), ty, bi.elem);
            return Err(self.unsupported(inst, m, msg));
        }
        let d = self.p.info(inst.results[0]);
        let int_div = matches!(op, BinaryOp::Div | BinaryOp::Rem) && !ty.is_float();
        for k in 0..d.width as usize {
            let (ds, xs, ys) = (
                d.slot as usize + k,
                ai.slot as usize + k,
                bi.slot as usize + k,
            );
            if int_div {
                self.int_div(inst, m, op, ty, ds, xs, ys)?;
            } else {
                with_binary!(op, ty, f => self.map2(m, ds, xs, ys, f));
            }
        }
        Ok(())
    }

    /// Integer division and remainder: a zero divisor on a clean lane is an error.
    #[allow(clippy::too_many_arguments)]
    fn int_div(
        &mut self,
        inst: &Inst,
        m: &Mask,
        op: BinaryOp,
        ty: Scalar,
        d: usize,
        a: usize,
        b: usize,
    ) -> Result<()> {
        let n = self.n;
        let poisoned = self.pflag[b];
        for l in lanes_of(m, n) {
            if self.regs[b * n + l] == 0 && !(poisoned && self.ptag[b * n + l] != 0) {
                return Err(self.fail(inst, l as u32, Violation::DivisionByZero));
            }
        }
        let signed = ty == Scalar::I32;
        let (is_div, fast) = (op == BinaryOp::Div, matches!(ty, Scalar::I32 | Scalar::U32));
        self.map2(m, d, a, b, move |x, y| {
            if y == 0 {
                0
            } else if fast && signed {
                if is_div {
                    (x as i32).wrapping_div(y as i32) as u32
                } else {
                    (x as i32).wrapping_rem(y as i32) as u32
                }
            } else if fast {
                if is_div {
                    x / y
                } else {
                    x % y
                }
            } else {
                super::scalar::slow_binary(op, ty, x, y)
            }
        });
        Ok(())
    }

    /// `select`: a poisoned condition poisons the result; otherwise only the chosen
    /// operand's poison is kept.
    fn select(&mut self, m: &Mask, d: usize, c: usize, a: usize, b: usize) {
        let n = self.n;
        {
            let (dst, [cv, x, y]) = split(&mut self.regs, n, d, [c, a, b]);
            each_lane!(m, n, |l| {
                dst[l] = if cv[l] != 0 { x[l] } else { y[l] };
            });
        }
        if !(self.pflag[c] || self.pflag[a] || self.pflag[b]) {
            self.pflag[d] = false;
            return;
        }
        for l in lanes_of(m, n) {
            let tag_of = |s: usize| {
                if self.pflag[s] {
                    self.ptag[s * n + l]
                } else {
                    0
                }
            };
            let tc = tag_of(c);
            let t = if tc != 0 {
                tc
            } else if self.regs[c * n + l] != 0 {
                tag_of(a)
            } else {
                tag_of(b)
            };
            self.ptag[d * n + l] = t;
        }
        self.pflag[d] = true;
    }

    fn exec_if(
        &mut self,
        inst: &Inst,
        m: &Mask,
        cond: ValueId,
        then_block: &Block,
        else_block: &Block,
    ) -> Result<()> {
        self.check_clean(inst, m, cond, "a branch condition")?;
        let n = self.n;
        let c = self.p.info(cond).slot as usize;
        let mut t_lanes = self.take_vec();
        let mut e_lanes = self.take_vec();
        {
            let cv = &self.regs[c * n..c * n + n];
            each_lane!(m, n, |l| {
                if cv[l] != 0 {
                    t_lanes.push(l as u32);
                } else {
                    e_lanes.push(l as u32);
                }
            });
        }
        let tm = Mask {
            full: t_lanes.len() == n,
            lanes: t_lanes,
        };
        let em = Mask {
            full: e_lanes.len() == n,
            lanes: e_lanes,
        };
        let mut result = Ok(());
        for (mask, block) in [(&tm, then_block), (&em, else_block)] {
            if mask.is_empty() {
                continue;
            }
            result = self.exec_block(block, mask);
            if result.is_err() {
                break;
            }
            for (r, y) in inst.results.iter().zip(&block.yields) {
                self.copy_value(mask, *r, *y);
            }
        }
        self.give_mask(tm);
        self.give_mask(em);
        result
    }

    fn exec_for(
        &mut self,
        inst: &Inst,
        m: &Mask,
        [start, end, step]: [ValueId; 3],
        inits: &[ValueId],
        body: &Block,
    ) -> Result<()> {
        for (v, what) in [
            (start, "a loop's start"),
            (end, "a loop's end"),
            (step, "a loop's step"),
        ] {
            self.check_clean(inst, m, v, what)?;
        }
        let n = self.n;
        let signed = self.p.info(start).elem == Scalar::I32;
        let (s0, e0, st0) = (
            self.p.info(start).slot as usize,
            self.p.info(end).slot as usize,
            self.p.info(step).slot as usize,
        );
        for l in lanes_of(m, n) {
            let st = self.regs[st0 * n + l];
            let bad = if signed { (st as i32) <= 0 } else { st == 0 };
            if bad {
                let step = if signed { st as i32 as i64 } else { st as i64 };
                return Err(self.fail(inst, l as u32, Violation::NonPositiveStep { step }));
            }
        }
        let iv = self.p.info(body.args[0]).slot as usize;
        self.copy_slot(m, iv, s0);
        for (arg, init) in body.args[1..].iter().zip(inits) {
            self.copy_value(m, *arg, *init);
        }
        let mut active = Mask {
            full: m.full,
            lanes: self.take_vec(),
        };
        if !m.full {
            active.lanes.extend_from_slice(&m.lanes);
        }
        let result = self.run_loop(inst, &mut active, body, signed, [iv, e0, st0]);
        self.give_mask(active);
        result?;
        // Every lane's carried values stay in the body arguments from its last iteration.
        for (r, arg) in inst.results.iter().zip(&body.args[1..]) {
            self.copy_value(m, *r, *arg);
        }
        Ok(())
    }

    fn run_loop(
        &mut self,
        inst: &Inst,
        active: &mut Mask,
        body: &Block,
        signed: bool,
        [iv, end, step]: [usize; 3],
    ) -> Result<()> {
        let n = self.n;
        let mut count: u64 = 0;
        loop {
            // Lanes whose induction variable reached the end leave the loop.
            let keep = |regs: &[u32], l: usize| {
                let (i, e) = (regs[iv * n + l], regs[end * n + l]);
                if signed {
                    (i as i32) < (e as i32)
                } else {
                    i < e
                }
            };
            if active.full {
                if !(0..n).all(|l| keep(&self.regs, l)) {
                    active.full = false;
                    active.lanes.clear();
                    active
                        .lanes
                        .extend((0..n as u32).filter(|&l| keep(&self.regs, l as usize)));
                }
            } else {
                let regs = &self.regs;
                active.lanes.retain(|&l| keep(regs, l as usize));
            }
            if active.is_empty() {
                return Ok(());
            }
            count += 1;
            self.iterations += 1;
            if count > MAX_LOOP_ITERATIONS || self.iterations > MAX_GROUP_ITERATIONS {
                return Err(self.fail(
                    inst,
                    active.first(),
                    Violation::RunawayLoop { iterations: count },
                ));
            }
            self.exec_block(body, active)?;
            // Next carried values go through the results (the yields may name the args).
            for (r, y) in inst.results.iter().zip(&body.yields) {
                self.copy_value(active, *r, *y);
            }
            for (arg, r) in body.args[1..].iter().zip(&inst.results) {
                self.copy_value(active, *arg, *r);
            }
            for l in lanes_of(active, n) {
                let (i, s) = (self.regs[iv * n + l], self.regs[step * n + l]);
                let next = if signed {
                    (i as i32).checked_add(s as i32).map(|v| v as u32)
                } else {
                    i.checked_add(s)
                };
                match next {
                    Some(v) => self.regs[iv * n + l] = v,
                    None => {
                        return Err(self.fail(
                            inst,
                            l as u32,
                            Violation::RunawayLoop { iterations: count },
                        ))
                    }
                }
            }
        }
    }
}

/// The active lanes as an iterator (for the less hot paths).
pub(crate) fn lanes_of(m: &Mask, n: usize) -> impl Iterator<Item = usize> + '_ {
    let (full, list) = if m.full {
        (0..n, &[][..])
    } else {
        (0..0, &m.lanes[..])
    };
    full.chain(list.iter().map(|&l| l as usize))
}
