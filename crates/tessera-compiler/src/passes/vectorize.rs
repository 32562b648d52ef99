//! Vectorisation of memory accesses: a run of scalar loads (or stores) of one memory
//! object at indices `base + 0 … base + w-1`, in one block, with nothing between them that
//! may write (or, for stores, read or write) that memory, becomes one `VecLoad` plus
//! `Extract`s (or a `Pack` plus one `VecStore`) of 16 bytes, or of 8 bytes where 16 do
//! not fit. `base` must be a provable multiple of `w`: a small known-multiple analysis
//! tracks the power of two that divides each u32 value (constants, `x * c`, `x << c`,
//! sums and differences, selects). Tensor and array base addresses are 16-byte aligned
//! (the runtime guarantees it), so the wide access is aligned.
//!
//! Distinct tensor parameters are assumed not to alias (the launch API hands each one its
//! own buffer). A load run is placed at its first load, a store run at its last store;
//! barriers end every run on threadgroup and device memory.

use super::util::{constants, Subst};
use std::collections::{BTreeMap, HashMap, HashSet};
use tessera_ir::{
    BinaryOp, Block, Body, Inst, Kernel, Literal, Loc, MemRef, Op, Scalar, Type, ValueId,
};

/// The largest power of two tracked by the known-multiple analysis.
const MAX_MULTIPLE: u64 = 1 << 16;

/// Vectorises the memory accesses of `kernel`; returns how many wide accesses it made.
pub fn vectorize(kernel: &mut Kernel) -> usize {
    let mut defs = HashMap::new();
    kernel.body.block.walk(&mut |inst| {
        if let Some(r) = inst.result() {
            defs.insert(r, inst.op.clone());
        }
    });
    let elems = elem_types(kernel);
    let mut v = Vectorizer {
        consts: constants(&kernel.body.block),
        defs,
        multiple: HashMap::new(),
        subst: Subst::new(),
        elems,
        count: 0,
    };
    let mut block = std::mem::take(&mut kernel.body.block);
    v.block(&mut block, &mut kernel.body);
    v.subst.apply_block(&mut block);
    kernel.body.block = block;
    v.count
}

fn elem_types(kernel: &Kernel) -> HashMap<MemRef, Scalar> {
    let mut m = HashMap::new();
    for (i, p) in kernel.params.iter().enumerate() {
        if let tessera_ir::ParamKind::Tensor { elem, .. } = p.kind {
            m.insert(MemRef::Param(i as u32), elem);
        }
    }
    for (i, a) in kernel.body.shared.iter().enumerate() {
        m.insert(MemRef::Shared(i as u32), a.elem);
    }
    for (i, a) in kernel.body.locals.iter().enumerate() {
        m.insert(MemRef::Local(i as u32), a.elem);
    }
    m
}

/// An index split into a root value (`None`: the constant zero) and a constant offset.
type Root = Option<ValueId>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Load,
    Store,
}

/// A run found in a block: the positions of the scalar accesses at each lane.
struct Run {
    kind: Kind,
    mem: MemRef,
    root: Root,
    offset: u32,
    /// Positions in the block, per lane (loads may repeat an index).
    lanes: Vec<Vec<usize>>,
}

struct Vectorizer {
    consts: HashMap<ValueId, Literal>,
    defs: HashMap<ValueId, Op>,
    multiple: HashMap<ValueId, u64>,
    subst: Subst,
    elems: HashMap<MemRef, Scalar>,
    count: usize,
}

/// Open groups of accesses, per (mem, root): offset → positions.
type Groups = HashMap<(MemRef, Root), BTreeMap<u32, Vec<usize>>>;

impl Vectorizer {
    fn const_u32(&self, v: ValueId) -> Option<u32> {
        match self.consts.get(&v) {
            Some(Literal::U32(c)) => Some(*c),
            _ => None,
        }
    }

    /// The largest power of two (up to [`MAX_MULTIPLE`]) known to divide `v`.
    fn multiple_of(&mut self, v: ValueId, depth: u32) -> u64 {
        if let Some(&m) = self.multiple.get(&v) {
            return m;
        }
        if depth > 32 {
            return 1;
        }
        let m = match self.defs.get(&v).cloned() {
            Some(Op::Const(Literal::U32(c))) => pow2_divisor(c),
            Some(Op::Binary(BinaryOp::Mul, a, b)) => {
                (self.multiple_of(a, depth + 1) * self.multiple_of(b, depth + 1)).min(MAX_MULTIPLE)
            }
            Some(Op::Binary(BinaryOp::Shl, a, b)) => match self.const_u32(b) {
                Some(s) => (self.multiple_of(a, depth + 1) << (s % 32).min(16)).min(MAX_MULTIPLE),
                None => 1,
            },
            Some(Op::Binary(BinaryOp::Add | BinaryOp::Sub, a, b)) | Some(Op::Select(_, a, b)) => {
                self.multiple_of(a, depth + 1)
                    .min(self.multiple_of(b, depth + 1))
            }
            _ => 1,
        };
        self.multiple.insert(v, m);
        m
    }

    fn split(&self, index: ValueId) -> (Root, u32) {
        let mut v = index;
        let mut off = 0u32;
        for _ in 0..16 {
            if let Some(c) = self.const_u32(v) {
                return (None, off.wrapping_add(c));
            }
            match self.defs.get(&v) {
                Some(Op::Binary(BinaryOp::Add, a, b)) => {
                    if let Some(c) = self.const_u32(*b) {
                        off = off.wrapping_add(c);
                        v = *a;
                    } else if let Some(c) = self.const_u32(*a) {
                        off = off.wrapping_add(c);
                        v = *b;
                    } else {
                        break;
                    }
                }
                _ => break,
            }
        }
        (Some(v), off)
    }

    fn block(&mut self, block: &mut Block, body: &mut Body) {
        for inst in &mut block.insts {
            for b in inst.op.blocks_mut() {
                self.block(b, body);
            }
        }
        let runs = self.find_runs(block);
        if runs.is_empty() {
            return;
        }
        self.rewrite(block, body, runs);
    }

    fn find_runs(&mut self, block: &Block) -> Vec<Run> {
        let mut loads: Groups = HashMap::new();
        let mut stores: Groups = HashMap::new();
        let mut runs = Vec::new();
        for (pos, inst) in block.insts.iter().enumerate() {
            match &inst.op {
                Op::Load { mem, index } => {
                    self.flush(&mut stores, Kind::Store, |m| m == *mem, &mut runs);
                    let (root, off) = self.split(*index);
                    loads
                        .entry((*mem, root))
                        .or_default()
                        .entry(off)
                        .or_default()
                        .push(pos);
                }
                Op::Store { mem, index, .. } => {
                    self.flush(&mut loads, Kind::Load, |m| m == *mem, &mut runs);
                    let (root, off) = self.split(*index);
                    let clash = stores
                        .iter()
                        .any(|((m, r), g)| *m == *mem && (*r != root || g.contains_key(&off)));
                    if clash {
                        self.flush(&mut stores, Kind::Store, |m| m == *mem, &mut runs);
                    }
                    stores
                        .entry((*mem, root))
                        .or_default()
                        .entry(off)
                        .or_default()
                        .push(pos);
                }
                Op::VecLoad { mem, .. } | Op::VecStore { mem, .. } | Op::Atomic { mem, .. } => {
                    let m0 = *mem;
                    self.flush(&mut loads, Kind::Load, |m| m == m0, &mut runs);
                    self.flush(&mut stores, Kind::Store, |m| m == m0, &mut runs);
                }
                // A fragment op touches a whole tile of its memory: nothing moves across it.
                op if op.is_frag()
                    || matches!(
                        op,
                        Op::CopyAsync { .. } | Op::CommitCopies | Op::WaitCopies(_)
                    ) =>
                {
                    self.flush(&mut loads, Kind::Load, |_| true, &mut runs);
                    self.flush(&mut stores, Kind::Store, |_| true, &mut runs);
                }
                Op::Barrier | Op::SimdBarrier => {
                    let shared = |m: MemRef| !matches!(m, MemRef::Local(_));
                    self.flush(&mut loads, Kind::Load, shared, &mut runs);
                    self.flush(&mut stores, Kind::Store, shared, &mut runs);
                }
                Op::If { .. } | Op::For { .. } | Op::Call { .. } => {
                    let (touched, barrier) = touched(inst);
                    let hit = |m: MemRef| {
                        touched.contains(&m)
                            || matches!(inst.op, Op::Call { .. })
                            || (barrier && !matches!(m, MemRef::Local(_)))
                    };
                    self.flush(&mut loads, Kind::Load, hit, &mut runs);
                    self.flush(&mut stores, Kind::Store, hit, &mut runs);
                }
                _ => {}
            }
        }
        self.flush(&mut loads, Kind::Load, |_| true, &mut runs);
        self.flush(&mut stores, Kind::Store, |_| true, &mut runs);
        runs
    }

    /// Closes the groups whose memory satisfies `pred`, recording the runs they hold.
    fn flush(
        &mut self,
        groups: &mut Groups,
        kind: Kind,
        pred: impl Fn(MemRef) -> bool,
        runs: &mut Vec<Run>,
    ) {
        // In key order, not the map's: the fresh values the runs get, and so the emitted
        // source, must not change from one process to the next.
        let mut keys: Vec<(MemRef, Root)> =
            groups.keys().filter(|(m, _)| pred(*m)).copied().collect();
        keys.sort_unstable();
        for key in keys {
            let Some(group) = groups.remove(&key) else {
                continue;
            };
            let (mem, root) = key;
            let Some(&elem) = self.elems.get(&mem) else {
                continue;
            };
            let size = elem.size_bytes() as u32;
            let root_mult = match root {
                Some(r) => self.multiple_of(r, 0),
                None => MAX_MULTIPLE,
            };
            let mut used: HashSet<u32> = HashSet::new();
            for bytes in [16u32, 8] {
                let w = (bytes / size).min(8);
                if w < 2 || (root_mult as u32) < w {
                    continue;
                }
                for &start in group.keys() {
                    if start % w != 0 || used.contains(&start) {
                        continue;
                    }
                    let offs: Vec<u32> = (0..w).map(|j| start.wrapping_add(j)).collect();
                    if offs
                        .iter()
                        .all(|o| group.contains_key(o) && !used.contains(o))
                    {
                        used.extend(offs.iter().copied());
                        runs.push(Run {
                            kind,
                            mem,
                            root,
                            offset: start,
                            lanes: offs.iter().map(|o| group[o].clone()).collect(),
                        });
                    }
                }
            }
        }
    }

    fn rewrite(&mut self, block: &mut Block, body: &mut Body, runs: Vec<Run>) {
        let mut remove: HashSet<usize> = HashSet::new();
        let mut anchor: HashMap<usize, Vec<Inst>> = HashMap::new();
        for run in runs {
            let all: Vec<usize> = run.lanes.iter().flatten().copied().collect();
            let at = match run.kind {
                Kind::Load => all.iter().min(),
                Kind::Store => all.iter().max(),
            };
            let Some(&at) = at else { continue };
            let loc = block.insts[at].loc;
            let elem = self.elems[&run.mem];
            let w = run.lanes.len() as u8;
            let mut new = Vec::new();
            let index = self.index_value(run.root, run.offset, body, &mut new, loc);
            match run.kind {
                Kind::Load => {
                    let vec = body.new_value(Type::Vector(elem, w));
                    new.push(Inst {
                        op: Op::VecLoad {
                            mem: run.mem,
                            index,
                            width: w,
                        },
                        results: vec![vec],
                        loc,
                    });
                    for (lane, positions) in run.lanes.iter().enumerate() {
                        let x = body.new_value(Type::Scalar(elem));
                        new.push(Inst {
                            op: Op::Extract(vec, lane as u8),
                            results: vec![x],
                            loc,
                        });
                        for &p in positions {
                            if let Some(r) = block.insts[p].result() {
                                self.subst.insert(r, x);
                            }
                        }
                    }
                }
                Kind::Store => {
                    let values: Vec<ValueId> = run
                        .lanes
                        .iter()
                        .filter_map(|ps| match ps.first().map(|&p| &block.insts[p].op) {
                            Some(Op::Store { value, .. }) => Some(*value),
                            _ => None,
                        })
                        .collect();
                    if values.len() != w as usize {
                        continue;
                    }
                    let vec = body.new_value(Type::Vector(elem, w));
                    new.push(Inst {
                        op: Op::Pack(values),
                        results: vec![vec],
                        loc,
                    });
                    new.push(Inst {
                        op: Op::VecStore {
                            mem: run.mem,
                            index,
                            value: vec,
                        },
                        results: vec![],
                        loc,
                    });
                }
            }
            remove.extend(all);
            anchor.insert(at, new);
            self.count += 1;
        }
        let insts = std::mem::take(&mut block.insts);
        for (pos, inst) in insts.into_iter().enumerate() {
            if let Some(new) = anchor.remove(&pos) {
                block.insts.extend(new);
            }
            if !remove.contains(&pos) {
                block.insts.push(inst);
            }
        }
    }

    /// A value holding `root + offset`, emitting the ops it needs into `out`.
    fn index_value(
        &mut self,
        root: Root,
        offset: u32,
        body: &mut Body,
        out: &mut Vec<Inst>,
        loc: Option<Loc>,
    ) -> ValueId {
        let u32t = Type::Scalar(Scalar::U32);
        let mut konst = |c: u32, body: &mut Body, out: &mut Vec<Inst>| {
            let v = body.new_value(u32t);
            out.push(Inst {
                op: Op::Const(Literal::U32(c)),
                results: vec![v],
                loc,
            });
            self.consts.insert(v, Literal::U32(c));
            v
        };
        match root {
            None => konst(offset, body, out),
            Some(r) if offset == 0 => r,
            Some(r) => {
                let c = konst(offset, body, out);
                let v = body.new_value(u32t);
                out.push(Inst {
                    op: Op::Binary(BinaryOp::Add, r, c),
                    results: vec![v],
                    loc,
                });
                v
            }
        }
    }
}

fn pow2_divisor(c: u32) -> u64 {
    if c == 0 {
        MAX_MULTIPLE
    } else {
        (1u64 << c.trailing_zeros()).min(MAX_MULTIPLE)
    }
}

/// The memory objects an op's nested blocks access, and whether they hold a barrier.
fn touched(inst: &Inst) -> (HashSet<MemRef>, bool) {
    let mut set = HashSet::new();
    let mut barrier = false;
    for b in inst.op.blocks() {
        b.walk(&mut |i| match &i.op {
            Op::Load { mem, .. }
            | Op::Store { mem, .. }
            | Op::VecLoad { mem, .. }
            | Op::VecStore { mem, .. }
            | Op::Atomic { mem, .. } => {
                set.insert(*mem);
            }
            Op::FragLoad { mem, .. } | Op::FragStore { mem, .. } => {
                set.insert(*mem);
                barrier = true;
            }
            Op::Barrier
            | Op::SimdBarrier
            | Op::GroupReduce(..)
            | Op::Call { .. }
            | Op::CopyAsync { .. }
            | Op::CommitCopies
            | Op::WaitCopies(_) => barrier = true,
            _ => {}
        });
    }
    (set, barrier)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::{verify_kernel, Builder, Builtin, Value};

    /// Four consecutive elements per lane at `row * n + tid * 4 + k`, as in an RMSNorm row.
    fn four_per_lane(elem: Scalar, barrier_between: bool) -> Kernel {
        let (mut b, x, out) = Builder::kernel_x_out("four", elem);
        let row = b.builtin(Builtin::GroupIdX);
        let rs = b.binary(BinaryOp::Mul, row, Value::Int(256)).unwrap();
        let tid = b.builtin(Builtin::ThreadId);
        let col = b.binary(BinaryOp::Mul, tid, Value::Int(4)).unwrap();
        let base = b.binary(BinaryOp::Add, rs, col).unwrap();
        let mut xs = Vec::new();
        for k in 0..4 {
            let i = b.binary(BinaryOp::Add, base, Value::Int(k)).unwrap();
            xs.push(b.load(x, i).unwrap());
            if barrier_between && k == 1 {
                b.barrier();
            }
        }
        for (k, &v) in xs.iter().enumerate().rev() {
            let i = b.binary(BinaryOp::Add, base, Value::Int(k as i64)).unwrap();
            b.store(out, i, v).unwrap();
        }
        b.finish_kernel().unwrap()
    }

    /// [`four_per_lane`] after the pass: what the pass returned and the verified result's
    /// text.
    fn vectorized_four_per_lane(elem: Scalar, barrier_between: bool) -> (usize, String) {
        let mut k = four_per_lane(elem, barrier_between);
        let rewrites = vectorize(&mut k);
        verify_kernel(&k).unwrap();
        (rewrites, k.to_string())
    }

    #[test]
    fn four_f32_loads_and_stores_become_one_16_byte_access_each() {
        let (rewrites, text) = vectorized_four_per_lane(Scalar::F32, false);
        assert_eq!(rewrites, 2);
        assert!(text.contains("vload4 x["), "{text}");
        assert!(text.contains("vstore out["), "{text}");
        assert!(!text.contains("= load "), "{text}");
        assert!(!text.contains("  store "), "{text}");
    }

    #[test]
    fn four_f16_loads_become_one_8_byte_access() {
        let (rewrites, text) = vectorized_four_per_lane(Scalar::F16, false);
        assert_eq!(rewrites, 2);
        assert!(text.contains(": f16x4 = vload4 x["), "{text}");
    }

    #[test]
    fn a_barrier_splits_the_run() {
        let (_, text) = vectorized_four_per_lane(Scalar::F32, true);
        assert!(!text.contains("vload4"), "{text}");
        // Two pairs of 8 bytes each remain possible.
        assert_eq!(text.matches("vload2 x[").count(), 2, "{text}");
    }

    #[test]
    fn unaligned_bases_are_left_scalar() {
        let (mut b, x, out) = Builder::kernel_x_out("odd", Scalar::F32);
        let tid = b.builtin(Builtin::ThreadId);
        let base = b.binary(BinaryOp::Mul, tid, Value::Int(3)).unwrap();
        let mut acc = Value::Float(0.0);
        for k in 0..4 {
            let i = b.binary(BinaryOp::Add, base, Value::Int(k)).unwrap();
            let v = b.load(x, i).unwrap();
            acc = b.binary(BinaryOp::Add, acc, v).unwrap();
        }
        b.store(out, tid, acc).unwrap();
        let mut k = b.finish_kernel().unwrap();
        assert_eq!(vectorize(&mut k), 0);
    }

    #[test]
    fn a_store_between_loads_of_the_same_tensor_splits_the_run() {
        let mut b = Builder::kernel("rw");
        let out = b.tensor_param("out", Scalar::U32, true);
        let tid = b.builtin(Builtin::ThreadId);
        let base = b.binary(BinaryOp::Mul, tid, Value::Int(4)).unwrap();
        let mut vals = Vec::new();
        for k in 0..4 {
            let i = b.binary(BinaryOp::Add, base, Value::Int(k)).unwrap();
            vals.push(b.load(out, i).unwrap());
            if k == 0 {
                b.store(out, Value::Int(7), Value::Int(1)).unwrap();
            }
        }
        let s = b.binary(BinaryOp::Add, vals[0], vals[3]).unwrap();
        b.store(out, tid, s).unwrap();
        let mut k = b.finish_kernel().unwrap();
        vectorize(&mut k);
        let text = k.to_string();
        assert!(!text.contains("vload4"), "{text}");
    }

    #[test]
    fn runs_of_several_tensors_come_out_in_the_same_order_every_time() {
        // Loads from eight tensors close together at the barrier; the fresh values of
        // their runs must not follow a hash map's per-instance order.
        let build = || {
            let mut b = Builder::kernel("many");
            let ins: Vec<_> = (0..8)
                .map(|t| b.tensor_param(&format!("x{t}"), Scalar::F32, false))
                .collect();
            let out = b.tensor_param("out", Scalar::F32, true);
            let tid = b.builtin(Builtin::ThreadId);
            let base = b.binary(BinaryOp::Mul, tid, Value::Int(4)).unwrap();
            let mut acc = Value::Float(0.0);
            for &x in &ins {
                for k in 0..4 {
                    let i = b.binary(BinaryOp::Add, base, Value::Int(k)).unwrap();
                    let v = b.load(x, i).unwrap();
                    acc = b.binary(BinaryOp::Add, acc, v).unwrap();
                }
            }
            b.barrier();
            b.store(out, tid, acc).unwrap();
            b.finish_kernel().unwrap()
        };
        let first = {
            let mut k = build();
            assert_eq!(vectorize(&mut k), 8);
            k.to_string()
        };
        for _ in 0..16 {
            let mut k = build();
            vectorize(&mut k);
            assert_eq!(k.to_string(), first);
        }
    }
}
