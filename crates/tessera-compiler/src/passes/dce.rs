//! Dead-code elimination: removes pure ops whose results are never read, loop-carried
//! values nothing reads, `if` results nothing reads, and whole `if`s and loops that have
//! no effect and no used result.
//!
//! An op has an effect when removing it could change what the CPU backend observes:
//! stores, atomics, barriers, loads (which may fault), calls, integer divisions whose
//! divisor is not a non-zero constant (which may fault), and loops whose step is not a
//! known positive constant (a zero step is an error). Liveness is solved to a fixpoint,
//! so a carried value that only feeds itself is dead.

use super::util::constants;
use std::collections::HashMap;
use tessera_ir::{BinaryOp, Block, Inst, Kernel, Literal, Op, Type, ValueId};

/// Removes dead code from `kernel`.
pub fn dce(kernel: &mut Kernel) {
    let consts = constants(&kernel.body.block);
    let mut d = Dce {
        live: vec![false; kernel.body.values.len()],
        consts,
        types: &kernel.body.values,
        changed: false,
    };
    loop {
        d.changed = false;
        d.mark(&kernel.body.block);
        if !d.changed {
            break;
        }
    }
    let live = std::mem::take(&mut d.live);
    let consts = std::mem::take(&mut d.consts);
    let types = kernel.body.values.clone();
    let d = Dce {
        live,
        consts,
        types: &types,
        changed: false,
    };
    d.sweep(&mut kernel.body.block);
}

struct Dce<'a> {
    live: Vec<bool>,
    consts: HashMap<ValueId, Literal>,
    types: &'a [Type],
    changed: bool,
}

impl Dce<'_> {
    fn is_live(&self, v: ValueId) -> bool {
        self.live.get(v.index()).copied().unwrap_or(true)
    }

    fn set_live(&mut self, v: ValueId) {
        if let Some(l) = self.live.get_mut(v.index()) {
            if !*l {
                *l = true;
                self.changed = true;
            }
        }
    }

    /// True if the op itself (not its blocks) has an effect.
    fn effectful(&self, op: &Op) -> bool {
        match op {
            Op::Store { .. }
            | Op::VecStore { .. }
            | Op::Atomic { .. }
            | Op::Barrier
            | Op::SimdBarrier
            | Op::CopyAsync { .. }
            | Op::CommitCopies
            | Op::WaitCopies(_)
            | Op::Load { .. }
            | Op::VecLoad { .. }
            | Op::Call { .. }
            | Op::FragFill { .. }
            | Op::FragScale { .. }
            | Op::FragLoad { .. }
            | Op::FragStore { .. }
            | Op::FragMma { .. } => true,
            op if op.is_frag() => true,
            Op::Binary(BinaryOp::Div | BinaryOp::Rem, _, d) => {
                let int = self
                    .types
                    .get(d.index())
                    .is_some_and(|t| !t.elem().is_float());
                int && self
                    .consts
                    .get(d)
                    .is_none_or(|l| l.as_i64().is_none_or(|v| v == 0))
            }
            Op::For {
                bounds: [_, _, step],
                ..
            } => self
                .consts
                .get(step)
                .is_none_or(|l| l.as_i64().is_none_or(|v| v <= 0)),
            _ => false,
        }
    }

    fn has_effects(&self, inst: &Inst) -> bool {
        self.effectful(&inst.op)
            || inst
                .op
                .blocks()
                .iter()
                .any(|b| b.insts.iter().any(|i| self.has_effects(i)))
    }

    fn needed(&self, inst: &Inst) -> bool {
        inst.results.iter().any(|&r| self.is_live(r)) || self.has_effects(inst)
    }

    fn mark(&mut self, b: &Block) {
        for inst in b.insts.iter().rev() {
            if !self.needed(inst) {
                continue;
            }
            match &inst.op {
                Op::If {
                    cond,
                    then_block,
                    else_block,
                } => {
                    self.set_live(*cond);
                    for (k, &r) in inst.results.iter().enumerate() {
                        if self.is_live(r) {
                            for blk in [then_block, else_block] {
                                if let Some(&y) = blk.yields.get(k) {
                                    self.set_live(y);
                                }
                            }
                        }
                    }
                    self.mark(then_block);
                    self.mark(else_block);
                }
                Op::For {
                    bounds,
                    inits,
                    body,
                } => {
                    bounds.iter().for_each(|&v| self.set_live(v));
                    for (k, &init) in inits.iter().enumerate() {
                        let r = inst.results.get(k).copied();
                        let a = body.args.get(k + 1).copied();
                        let used = r.is_some_and(|r| self.is_live(r))
                            || a.is_some_and(|a| self.is_live(a));
                        if used {
                            for v in [r, a, Some(init), body.yields.get(k).copied()]
                                .into_iter()
                                .flatten()
                            {
                                self.set_live(v);
                            }
                        }
                    }
                    self.mark(body);
                }
                op => {
                    for v in op.operands() {
                        self.set_live(v);
                    }
                }
            }
        }
    }

    fn sweep(&self, b: &mut Block) {
        b.insts.retain(|i| self.needed(i));
        for inst in &mut b.insts {
            match &mut inst.op {
                Op::If {
                    then_block,
                    else_block,
                    ..
                } => {
                    let keep: Vec<bool> = inst.results.iter().map(|&r| self.is_live(r)).collect();
                    for blk in [&mut *then_block, &mut *else_block] {
                        let mut k = 0;
                        blk.yields.retain(|_| {
                            k += 1;
                            keep.get(k - 1).copied().unwrap_or(true)
                        });
                    }
                    let mut k = 0;
                    inst.results.retain(|_| {
                        k += 1;
                        keep.get(k - 1).copied().unwrap_or(true)
                    });
                }
                Op::For { inits, body, .. } => {
                    let keep: Vec<bool> = (0..inits.len())
                        .map(|k| {
                            inst.results.get(k).is_some_and(|&r| self.is_live(r))
                                || body.args.get(k + 1).is_some_and(|&a| self.is_live(a))
                        })
                        .collect();
                    let filt = |v: &mut Vec<ValueId>, offset: usize| {
                        let mut k = 0;
                        v.retain(|_| {
                            k += 1;
                            k <= offset || keep.get(k - 1 - offset).copied().unwrap_or(true)
                        });
                    };
                    filt(inits, 0);
                    filt(&mut body.args, 1);
                    filt(&mut body.yields, 0);
                    filt(&mut inst.results, 0);
                }
                _ => {}
            }
            for blk in inst.op.blocks_mut() {
                self.sweep(blk);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::{verify_kernel, Builder, Builtin, Scalar, Value};

    #[test]
    fn removes_unused_pure_ops_and_dead_carried_values() {
        let (mut b, x, out) = Builder::kernel_x_out("dce", Scalar::F32);
        let tid = b.builtin(Builtin::ThreadId);
        let _unused = b.binary(BinaryOp::Mul, tid, Value::Int(3)).unwrap();
        let n = b.scalar_param("n", Scalar::U32);
        let (i, c) = b
            .begin_for(
                Value::Int(0),
                Value::Int(8),
                Value::Int(1),
                &[Value::Float(0.0), Value::Float(1.0)],
            )
            .unwrap();
        let v = b.load(x, i).unwrap();
        let a0 = b.binary(BinaryOp::Add, c[0], v).unwrap();
        let a1 = b.binary(BinaryOp::Mul, c[1], v).unwrap(); // only feeds itself
        let r = b.end_for(&[a0, a1]).unwrap();
        // A loop without effects whose result is unused.
        let (_, c2) = b
            .begin_for(Value::Int(0), Value::Int(8), Value::Int(1), &[tid])
            .unwrap();
        let s = b.binary(BinaryOp::Add, c2[0], Value::Int(1)).unwrap();
        b.end_for(&[s]).unwrap();
        // A division by a runtime value stays: it may fault.
        let _q = b.binary(BinaryOp::Div, tid, n).unwrap();
        b.store(out, tid, r[0]).unwrap();
        let mut k = b.finish_kernel().unwrap();
        verify_kernel(&k).unwrap();
        dce(&mut k);
        verify_kernel(&k).unwrap();
        let mut fors = Vec::new();
        let mut muls = 0;
        let mut divs = 0;
        k.body.block.walk(&mut |i| match &i.op {
            Op::For { inits, .. } => fors.push(inits.len()),
            Op::Binary(BinaryOp::Mul, ..) => muls += 1,
            Op::Binary(BinaryOp::Div, ..) => divs += 1,
            _ => {}
        });
        assert_eq!(fors, vec![1], "{k}");
        assert_eq!((muls, divs), (0, 1), "{k}");
    }

    #[test]
    fn keeps_ifs_with_effects_but_drops_their_dead_results() {
        let mut b = Builder::kernel("ifs");
        let out = b.tensor_param("out", Scalar::U32, true);
        let tid = b.builtin(Builtin::ThreadId);
        let c = b.binary(BinaryOp::Lt, tid, Value::Int(4)).unwrap();
        b.begin_if(c).unwrap();
        b.store(out, tid, Value::Int(1)).unwrap();
        b.begin_else(&[tid]).unwrap();
        b.end_if(&[Value::Int(3)]).unwrap();
        let mut k = b.finish_kernel().unwrap();
        dce(&mut k);
        verify_kernel(&k).unwrap();
        let ifs: Vec<usize> = k
            .body
            .block
            .insts
            .iter()
            .filter(|i| matches!(i.op, Op::If { .. }))
            .map(|i| i.results.len())
            .collect();
        assert_eq!(ifs, vec![0], "{k}");
    }
}
