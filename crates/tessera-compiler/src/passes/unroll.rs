//! Full unrolling of loops with constant bounds and a small size, so that per-thread stack
//! arrays indexed by the induction variable end up with constant indices (and can then be
//! promoted to registers by [`super::promote_locals`]).
//!
//! Budget: a loop is unrolled when its trip count is at most [`MAX_TRIP_COUNT`] and the
//! trip count times the instructions in its body (nested ones included, inner loops
//! already unrolled) is at most [`MAX_UNROLLED_INSTS`], or [`MAX_UNROLLED_INSTS_LOCALS`]
//! when the body reads or writes a stack array (left rolled, the array would live in
//! local memory, far slower than the extra code). Inner loops are unrolled first.
//! After unrolling, the kernel is constant-folded, and unrolling repeats (a few rounds)
//! for inner loops whose bounds only became constant through an outer induction variable.

use super::fold::fold;
use super::util::{clone_block, push_const, trip_count, Subst};
use std::collections::HashMap;
use tessera_ir::{eval, Block, Body, Kernel, Literal, MemRef, Op, ValueId};

/// The largest trip count unrolled.
pub const MAX_TRIP_COUNT: u64 = 64;
/// The largest number of instructions a loop may expand to.
pub const MAX_UNROLLED_INSTS: u64 = 1024;
/// The largest expansion of a loop whose body touches a per-thread stack array.
pub const MAX_UNROLLED_INSTS_LOCALS: u64 = 8192;
/// Rounds of unroll-then-fold.
const ROUNDS: usize = 4;

/// Unrolls every small constant-bound loop of `kernel`; returns how many loops it unrolled.
pub fn unroll(kernel: &mut Kernel) -> usize {
    let mut total = 0;
    for _ in 0..ROUNDS {
        let mut u = Unroller {
            consts: super::util::constants(&kernel.body.block),
            subst: Subst::new(),
            count: 0,
        };
        let block = std::mem::take(&mut kernel.body.block);
        kernel.body.block = u.block(block, &mut kernel.body);
        if u.count == 0 {
            break;
        }
        total += u.count;
        fold(kernel);
    }
    total
}

/// Whether `block` (nested blocks included) accesses a per-thread stack array.
fn touches_locals(block: &Block) -> bool {
    let mut found = false;
    block.walk(&mut |i| {
        if let Op::Load { mem, .. }
        | Op::Store { mem, .. }
        | Op::VecLoad { mem, .. }
        | Op::VecStore { mem, .. } = &i.op
        {
            found |= matches!(mem, MemRef::Local(_));
        }
    });
    found
}

struct Unroller {
    consts: HashMap<ValueId, Literal>,
    subst: Subst,
    count: usize,
}

impl Unroller {
    fn block(&mut self, block: Block, body: &mut Body) -> Block {
        let mut out = Vec::with_capacity(block.insts.len());
        for mut inst in block.insts {
            self.subst.apply_op(&mut inst.op);
            for b in inst.op.blocks_mut() {
                let taken = std::mem::take(b);
                *b = self.block(taken, body);
            }
            if let Op::For {
                bounds: [start, end, step],
                inits,
                body: lb,
            } = &inst.op
            {
                let k = |v: &ValueId| self.consts.get(v).copied();
                if let (Some(s), Some(e), Some(st)) = (k(start), k(end), k(step)) {
                    let size = lb.count() as u64;
                    let budget = if touches_locals(lb) {
                        MAX_UNROLLED_INSTS_LOCALS
                    } else {
                        MAX_UNROLLED_INSTS
                    };
                    if let Some(n) = trip_count(s, e, st) {
                        if n <= MAX_TRIP_COUNT && n.saturating_mul(size.max(1)) <= budget {
                            let finals = self.expand(s, st, n, inits, lb, body, &mut out);
                            for (&r, &f) in inst.results.iter().zip(&finals) {
                                self.subst.insert(r, f);
                            }
                            self.count += 1;
                            continue;
                        }
                    }
                }
            }
            out.push(inst);
        }
        self.subst.block(block.args, out, &block.yields)
    }

    /// Appends `n` copies of the loop body to `out`; returns the final carried values.
    #[allow(clippy::too_many_arguments)]
    fn expand(
        &mut self,
        start: Literal,
        step: Literal,
        n: u64,
        inits: &[ValueId],
        lb: &Block,
        body: &mut Body,
        out: &mut Vec<tessera_ir::Inst>,
    ) -> Vec<ValueId> {
        let types = body.values.clone();
        let inner = Block {
            args: vec![],
            insts: lb.insts.clone(),
            yields: lb.yields.clone(),
        };
        let mut carried: Vec<ValueId> = inits.to_vec();
        let mut iv = start;
        for k in 0..n {
            if k > 0 {
                // Checked by `trip_count`: the induction variable does not wrap.
                iv = eval::binary(tessera_ir::BinaryOp::Add, iv, step).unwrap_or(iv);
            }
            let cv = push_const(&mut body.values, out, iv);
            self.consts.insert(cv, iv);
            let mut map: HashMap<ValueId, ValueId> = HashMap::new();
            if let Some(&a) = lb.args.first() {
                map.insert(a, cv);
            }
            for (&a, &c) in lb.args.iter().skip(1).zip(&carried) {
                map.insert(a, c);
            }
            let copy = clone_block(&inner, &types, body, &mut map);
            for i in &copy.insts {
                if let (Op::Const(l), Some(r)) = (&i.op, i.result()) {
                    self.consts.insert(r, *l);
                }
            }
            out.extend(copy.insts);
            carried = copy.yields;
        }
        carried
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::{verify_kernel, BinaryOp, Builder, Builtin, MemRef, Scalar, Value};

    #[test]
    fn small_constant_loops_unroll_and_indices_become_constant() {
        let (mut b, x, out) = Builder::kernel_x_out("u", Scalar::F32);
        let tmp = b.local_array("tmp", Scalar::F32, Value::Int(4)).unwrap();
        let tid = b.builtin(Builtin::ThreadId);
        let (i, _) = b
            .begin_for(Value::Int(0), Value::Int(4), Value::Int(1), &[])
            .unwrap();
        let base = b.binary(BinaryOp::Mul, tid, Value::Int(4)).unwrap();
        let idx = b.binary(BinaryOp::Add, base, i).unwrap();
        let v = b.load(x, idx).unwrap();
        b.store(tmp, i, v).unwrap();
        b.end_for(&[]).unwrap();
        let (i, c) = b
            .begin_for(
                Value::Int(0),
                Value::Int(4),
                Value::Int(1),
                &[Value::Float(0.0)],
            )
            .unwrap();
        let t = b.load(tmp, i).unwrap();
        let s = b.binary(BinaryOp::Add, c[0], t).unwrap();
        let r = b.end_for(&[s]).unwrap();
        b.store(out, tid, r[0]).unwrap();
        let mut k = b.finish_kernel().unwrap();
        verify_kernel(&k).unwrap();
        assert_eq!(unroll(&mut k), 2);
        verify_kernel(&k).unwrap();
        let consts = super::super::util::constants(&k.body.block);
        let mut local_indices = Vec::new();
        k.body.block.walk(&mut |i| match &i.op {
            Op::For { .. } => panic!("a loop survived"),
            Op::Load {
                mem: MemRef::Local(_),
                index,
            }
            | Op::Store {
                mem: MemRef::Local(_),
                index,
                ..
            } => local_indices.push(consts.get(index).copied()),
            _ => {}
        });
        let expect: Vec<_> = (0..4).chain(0..4).map(|i| Some(Literal::U32(i))).collect();
        assert_eq!(local_indices, expect, "{k}");
    }

    #[test]
    fn large_or_runtime_bounded_loops_stay() {
        let mut b = Builder::kernel("big");
        let out = b.tensor_param("out", Scalar::U32, true);
        let n = b.scalar_param("n", Scalar::U32);
        let (i, _) = b.begin_for(Value::Int(0), n, Value::Int(1), &[]).unwrap();
        b.store(out, i, i).unwrap();
        b.end_for(&[]).unwrap();
        let (i, _) = b
            .begin_for(Value::Int(0), Value::Int(1000), Value::Int(1), &[])
            .unwrap();
        b.store(out, i, i).unwrap();
        b.end_for(&[]).unwrap();
        let mut k = b.finish_kernel().unwrap();
        assert_eq!(unroll(&mut k), 0);
        assert_eq!(
            k.body
                .block
                .insts
                .iter()
                .filter(|i| matches!(i.op, Op::For { .. }))
                .count(),
            2
        );
    }
}
