//! Lowering of threadgroup-wide reductions (`Op::GroupReduce`) to primitive ops, so no
//! backend has to implement them:
//!
//! 1. each simdgroup reduces its lanes (`simd_sum` / `simd_max` / `simd_min`);
//! 2. lane 0 of every simdgroup writes its partial to slot `simd_id` of a 32-slot
//!    threadgroup scratch array (one array per reduction site);
//! 3. a barrier;
//! 4. every simdgroup reads the partials (lane `l` reads slot `l`; lanes at or past
//!    `simd_groups` read slot 0 instead, masked by the identity element for a sum) and
//!    reduces them again, so every thread holds the result without a second barrier.
//!
//! A reduction inside a loop gets a trailing barrier as well, so the next iteration's
//! writes to the scratch slots cannot overtake a slower simdgroup's reads. Needs the
//! threadgroup size to be a multiple of 32, which the runtime enforces.

use super::util::Subst;
use tessera_ir::{
    ArrayDecl, BinaryOp, Block, Body, Builtin, Inst, Kernel, Literal, MemRef, Op, ReduceOp, Scalar,
    SimdOp, Type, ValueId,
};

/// Slots in each scratch array: the most simdgroups a threadgroup can have.
pub const SCRATCH_SLOTS: u32 = 32;

/// Lowers every `GroupReduce` of `kernel`; returns how many it lowered.
pub fn lower_group_reduce(kernel: &mut Kernel) -> usize {
    let mut l = Lowering {
        subst: Subst::new(),
        count: 0,
    };
    let block = std::mem::take(&mut kernel.body.block);
    kernel.body.block = l.block(block, &mut kernel.body, false);
    l.count
}

/// The identity element of a reduction on `ty` (`-0.0` for a float sum: `x + -0.0` is
/// `x` for every `x`, `-0.0` included).
pub fn identity(op: ReduceOp, ty: Scalar) -> Literal {
    match op {
        ReduceOp::Sum if ty.is_float() => Literal::from_f64(ty, -0.0),
        ReduceOp::Sum => Literal::zero(ty),
        ReduceOp::Max | ReduceOp::Min => {
            let low = op == ReduceOp::Max;
            if ty.is_float() {
                Literal::from_f64(
                    ty,
                    if low {
                        f64::NEG_INFINITY
                    } else {
                        f64::INFINITY
                    },
                )
            } else {
                let (min, max) = match ty {
                    Scalar::I8 => (i8::MIN as i64, i8::MAX as i64),
                    Scalar::U8 => (0, u8::MAX as i64),
                    Scalar::I32 => (i32::MIN as i64, i32::MAX as i64),
                    Scalar::U32 => (0, u32::MAX as i64),
                    _ => (0, 1),
                };
                Literal::from_i64(ty, if low { min } else { max })
            }
        }
    }
}

fn simd_op(op: ReduceOp) -> SimdOp {
    match op {
        ReduceOp::Sum => SimdOp::Sum,
        ReduceOp::Max => SimdOp::Max,
        ReduceOp::Min => SimdOp::Min,
    }
}

struct Lowering {
    subst: Subst,
    count: usize,
}

struct Emit<'a> {
    body: &'a mut Body,
    out: &'a mut Vec<Inst>,
    loc: Option<tessera_ir::Loc>,
}

impl Emit<'_> {
    fn push(&mut self, op: Op, ty: Option<Type>) -> ValueId {
        let results: Vec<ValueId> = ty.map(|t| self.body.new_value(t)).into_iter().collect();
        let r = results.first().copied().unwrap_or(ValueId(u32::MAX));
        self.out.push(Inst {
            op,
            results,
            loc: self.loc,
        });
        r
    }
}

impl Lowering {
    fn block(&mut self, block: Block, body: &mut Body, in_loop: bool) -> Block {
        let mut out = Vec::with_capacity(block.insts.len());
        for mut inst in block.insts {
            self.subst.apply_op(&mut inst.op);
            let nested_loop = in_loop || matches!(inst.op, Op::For { .. });
            for b in inst.op.blocks_mut() {
                let taken = std::mem::take(b);
                *b = self.block(taken, body, nested_loop);
            }
            if let (Op::GroupReduce(op, v), Some(r)) = (&inst.op, inst.result()) {
                let ty = body.ty(*v).elem();
                let res = self.lower(*op, *v, ty, in_loop, body, &mut out, inst.loc);
                self.subst.insert(r, res);
                self.count += 1;
                continue;
            }
            out.push(inst);
        }
        self.subst.block(block.args, out, &block.yields)
    }

    #[allow(clippy::too_many_arguments)]
    fn lower(
        &mut self,
        op: ReduceOp,
        v: ValueId,
        ty: Scalar,
        in_loop: bool,
        body: &mut Body,
        out: &mut Vec<Inst>,
        loc: Option<tessera_ir::Loc>,
    ) -> ValueId {
        let slot = body.shared.len() as u32;
        let mut name = format!("group_reduce.{}", self.count);
        while body.shared.iter().any(|a| a.name == name) {
            name.push('_');
        }
        body.shared.push(ArrayDecl {
            name,
            elem: ty,
            len: SCRATCH_SLOTS,
        });
        let scratch = MemRef::Shared(slot);
        let t = Some(Type::Scalar(ty));
        let u32t = Some(Type::Scalar(Scalar::U32));
        let boolt = Some(Type::Scalar(Scalar::Bool));
        let mut e = Emit { body, out, loc };
        let partial = e.push(Op::Simd(simd_op(op), v), t);
        let lane = e.push(Op::Builtin(Builtin::SimdLane), u32t);
        let sid = e.push(Op::Builtin(Builtin::SimdId), u32t);
        let groups = e.push(Op::Builtin(Builtin::SimdGroups), u32t);
        let zero = e.push(Op::Const(Literal::U32(0)), u32t);
        let first = e.push(Op::Binary(BinaryOp::Eq, lane, zero), boolt);
        let write = Block {
            args: vec![],
            insts: vec![Inst {
                op: Op::Store {
                    mem: scratch,
                    index: sid,
                    value: partial,
                },
                results: vec![],
                loc,
            }],
            yields: vec![],
        };
        e.push(
            Op::If {
                cond: first,
                then_block: write,
                else_block: Block::default(),
            },
            None,
        );
        e.push(Op::Barrier, None);
        // Lanes past the last simdgroup read slot 0, which is always written, so no lane
        // reads unwritten memory. For min / max that duplicate is harmless (and keeps a
        // NaN-only input NaN, where an infinite identity would not); a sum masks it with
        // its identity.
        let present = e.push(Op::Binary(BinaryOp::Lt, lane, groups), boolt);
        let slot_index = e.push(Op::Select(present, lane, zero), u32t);
        let read = e.push(
            Op::Load {
                mem: scratch,
                index: slot_index,
            },
            t,
        );
        let masked = match op {
            ReduceOp::Sum => {
                let ident = e.push(Op::Const(identity(op, ty)), t);
                e.push(Op::Select(present, read, ident), t)
            }
            ReduceOp::Max | ReduceOp::Min => read,
        };
        let total = e.push(Op::Simd(simd_op(op), masked), t);
        if in_loop {
            e.push(Op::Barrier, None);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::{verify_kernel, Builder, Value};

    #[test]
    fn group_reductions_become_simd_ops_scratch_and_barriers() {
        let (mut b, x, out) = Builder::kernel_x_out("gr", Scalar::F32);
        let tid = b.builtin(Builtin::ThreadId);
        let v = b.load(x, tid).unwrap();
        let s = b.group_reduce(ReduceOp::Sum, v).unwrap();
        let (_, c) = b
            .begin_for(Value::Int(0), Value::Int(3), Value::Int(1), &[s])
            .unwrap();
        let m = b.group_reduce(ReduceOp::Max, c[0]).unwrap();
        let r = b.end_for(&[m]).unwrap();
        b.store(out, tid, r[0]).unwrap();
        let mut k = b.finish_kernel().unwrap();
        assert_eq!(lower_group_reduce(&mut k), 2);
        verify_kernel(&k).unwrap();
        let mut n = (0, 0, 0);
        k.body.block.walk(&mut |i| match i.op {
            Op::GroupReduce(..) => n.0 += 1,
            Op::Barrier => n.1 += 1,
            Op::Simd(..) => n.2 += 1,
            _ => {}
        });
        // One barrier outside the loop, two inside it (the second guards the scratch reuse).
        assert_eq!(n, (0, 3, 4), "{k}");
        assert_eq!(k.body.shared.len(), 2);
        assert!(k.body.shared.iter().all(|a| a.len == 32));
        let text = k.to_string();
        assert!(text.contains("simd_max"), "{text}");
    }

    #[test]
    fn identities_are_neutral() {
        assert_eq!(
            identity(ReduceOp::Sum, Scalar::F16),
            Literal::F16(tessera_ir::half::f16::from_f32(-0.0))
        );
        assert_eq!(identity(ReduceOp::Sum, Scalar::I32), Literal::I32(0));
        assert_eq!(identity(ReduceOp::Max, Scalar::I32), Literal::I32(i32::MIN));
        assert_eq!(identity(ReduceOp::Min, Scalar::U32), Literal::U32(u32::MAX));
        assert_eq!(
            identity(ReduceOp::Min, Scalar::F32),
            Literal::F32(f32::INFINITY)
        );
    }
}
