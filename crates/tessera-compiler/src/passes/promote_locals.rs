//! Promotion of per-thread stack arrays to registers (mem2reg): an array whose every
//! access is a scalar load or store at a constant in-range index becomes one SSA value
//! per element, threaded through `if` results and loop-carried values where a branch or
//! a loop body writes it. An array that might be read before it is written (on some path)
//! is left in memory, so the backend's behaviour for such reads is unchanged.

use super::util::{constants, Subst};
use std::collections::{BTreeSet, HashMap};
use tessera_ir::{Block, Body, Kernel, Literal, MemRef, Op, Type, ValueId};

/// Promotes every eligible stack array of `kernel`; returns how many it promoted.
pub fn promote_locals(kernel: &mut Kernel) -> usize {
    let consts = constants(&kernel.body.block);
    let mut promoted = BTreeSet::new();
    for a in 0..kernel.body.locals.len() as u32 {
        let len = kernel.body.locals[a as usize].len;
        if !eligible(&kernel.body.block, a, len, &consts) {
            continue;
        }
        let mut body = kernel.body.clone();
        let mut p = Promoter {
            array: a,
            elem: Type::Scalar(kernel.body.locals[a as usize].elem),
            consts: &consts,
            subst: Subst::new(),
        };
        let mut state = vec![None; len as usize];
        let mut block = std::mem::take(&mut body.block);
        if p.block(&mut block, &mut body, &mut state).is_ok() {
            body.block = block;
            kernel.body = body;
            promoted.insert(a);
        }
    }
    if !promoted.is_empty() {
        drop_arrays(&mut kernel.body, &promoted);
    }
    promoted.len()
}

/// True if every access to local array `a` is a scalar load/store at a constant index below `len`.
fn eligible(block: &Block, a: u32, len: u32, consts: &HashMap<ValueId, Literal>) -> bool {
    let mut ok = true;
    block.walk(&mut |inst| match &inst.op {
        Op::Load { mem, index } | Op::Store { mem, index, .. } if *mem == MemRef::Local(a) => {
            ok &= const_index(consts, *index).is_some_and(|i| i < len as usize);
        }
        Op::VecLoad { mem, .. } | Op::VecStore { mem, .. } | Op::Atomic { mem, .. }
            if *mem == MemRef::Local(a) =>
        {
            ok = false;
        }
        _ => {}
    });
    ok
}

fn const_index(consts: &HashMap<ValueId, Literal>, v: ValueId) -> Option<usize> {
    consts
        .get(&v)
        .and_then(|l| l.as_i64())
        .and_then(|i| usize::try_from(i).ok())
}

/// The array might be read before written on some path.
struct Bail;

struct Promoter<'a> {
    array: u32,
    elem: Type,
    consts: &'a HashMap<ValueId, Literal>,
    subst: Subst,
}

type State = Vec<Option<ValueId>>;

impl Promoter<'_> {
    fn element(&self, index: ValueId) -> Result<usize, Bail> {
        const_index(self.consts, index).ok_or(Bail)
    }

    fn block(&mut self, b: &mut Block, body: &mut Body, state: &mut State) -> Result<(), Bail> {
        let insts = std::mem::take(&mut b.insts);
        for mut inst in insts {
            self.subst.apply_op(&mut inst.op);
            match &mut inst.op {
                Op::Load { mem, index } if *mem == MemRef::Local(self.array) => {
                    let e = self.element(*index)?;
                    let v = state.get(e).copied().flatten().ok_or(Bail)?;
                    if let Some(r) = inst.result() {
                        self.subst.insert(r, v);
                    }
                    continue;
                }
                Op::Store { mem, index, value } if *mem == MemRef::Local(self.array) => {
                    let e = self.element(*index)?;
                    *state.get_mut(e).ok_or(Bail)? = Some(*value);
                    continue;
                }
                Op::If {
                    then_block,
                    else_block,
                    ..
                } => {
                    let mut st = state.clone();
                    let mut se = state.clone();
                    self.block(then_block, body, &mut st)?;
                    self.block(else_block, body, &mut se)?;
                    for e in 0..state.len() {
                        state[e] = match (st[e], se[e]) {
                            (Some(x), Some(y)) if x == y => Some(x),
                            (Some(x), Some(y)) => {
                                let r = body.new_value(self.elem);
                                then_block.yields.push(x);
                                else_block.yields.push(y);
                                inst.results.push(r);
                                Some(r)
                            }
                            _ => None,
                        };
                    }
                }
                Op::For {
                    inits, body: lb, ..
                } => {
                    let written = self.written(lb);
                    let mut inner = state.clone();
                    let mut carried = Vec::new();
                    for &e in &written {
                        match state[e] {
                            Some(v) => {
                                let a = body.new_value(self.elem);
                                lb.args.push(a);
                                inits.push(v);
                                inner[e] = Some(a);
                                carried.push(e);
                            }
                            None => inner[e] = None,
                        }
                    }
                    self.block(lb, body, &mut inner)?;
                    for &e in &written {
                        state[e] = None;
                    }
                    for &e in &carried {
                        let end = inner[e].ok_or(Bail)?;
                        lb.yields.push(end);
                        let r = body.new_value(self.elem);
                        inst.results.push(r);
                        state[e] = Some(r);
                    }
                }
                _ => {}
            }
            b.insts.push(inst);
        }
        for y in &mut b.yields {
            *y = self.subst.get(*y);
        }
        Ok(())
    }

    /// The elements stored anywhere in `block`.
    fn written(&self, block: &Block) -> Vec<usize> {
        let mut set = BTreeSet::new();
        block.walk(&mut |inst| {
            if let Op::Store { mem, index, .. } = &inst.op {
                if *mem == MemRef::Local(self.array) {
                    if let Some(e) = const_index(self.consts, *index) {
                        set.insert(e);
                    }
                }
            }
        });
        set.into_iter().collect()
    }
}

/// Removes the promoted arrays from the declarations and renumbers the others.
fn drop_arrays(body: &mut Body, gone: &BTreeSet<u32>) {
    let mut renumber = HashMap::new();
    let mut kept = Vec::new();
    for (i, a) in body.locals.iter().enumerate() {
        if !gone.contains(&(i as u32)) {
            renumber.insert(i as u32, kept.len() as u32);
            kept.push(a.clone());
        }
    }
    body.locals = kept;
    fn go(b: &mut Block, r: &HashMap<u32, u32>) {
        for inst in &mut b.insts {
            match &mut inst.op {
                Op::Load { mem, .. }
                | Op::Store { mem, .. }
                | Op::VecLoad { mem, .. }
                | Op::VecStore { mem, .. }
                | Op::Atomic { mem, .. } => {
                    if let MemRef::Local(i) = mem {
                        if let Some(&n) = r.get(i) {
                            *i = n;
                        }
                    }
                }
                _ => {}
            }
            for nb in inst.op.blocks_mut() {
                go(nb, r);
            }
        }
    }
    go(&mut body.block, &renumber);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::{verify_kernel, BinaryOp, Builder, Builtin, Scalar, Value};

    #[test]
    fn arrays_with_constant_indices_become_values_through_ifs_and_loops() {
        let (mut b, x, out) = Builder::kernel_x_out("p", Scalar::F32);
        let keep = b.local_array("keep", Scalar::F32, Value::Int(4)).unwrap();
        let acc = b.local_array("acc", Scalar::F32, Value::Int(2)).unwrap();
        let tid = b.builtin(Builtin::ThreadId);
        b.store(acc, Value::Int(0), Value::Float(0.0)).unwrap();
        b.store(acc, Value::Int(1), Value::Float(1.0)).unwrap();
        b.store(keep, tid, Value::Float(1.0)).unwrap(); // runtime index: stays in memory
        let (i, _) = b
            .begin_for(Value::Int(0), Value::Int(100), Value::Int(1), &[])
            .unwrap();
        let v = b.load(x, i).unwrap();
        let a0 = b.load(acc, Value::Int(0)).unwrap();
        let s = b.binary(BinaryOp::Add, a0, v).unwrap();
        b.store(acc, Value::Int(0), s).unwrap();
        let c = b.binary(BinaryOp::Gt, v, Value::Float(0.5)).unwrap();
        b.begin_if(c).unwrap();
        b.store(acc, Value::Int(1), v).unwrap();
        b.begin_else(&[]).unwrap();
        b.end_if(&[]).unwrap();
        b.end_for(&[]).unwrap();
        let r0 = b.load(acc, Value::Int(0)).unwrap();
        let r1 = b.load(acc, Value::Int(1)).unwrap();
        let r = b.binary(BinaryOp::Mul, r0, r1).unwrap();
        b.store(out, tid, r).unwrap();
        let mut k = b.finish_kernel().unwrap();
        verify_kernel(&k).unwrap();
        assert_eq!(promote_locals(&mut k), 1);
        verify_kernel(&k).unwrap();
        assert_eq!(k.body.locals.len(), 1);
        assert_eq!(k.body.locals[0].name, "keep");
        let mut local_accesses = 0;
        let mut carried = 0;
        let mut if_results = 0;
        k.body.block.walk(&mut |i| match &i.op {
            Op::Load {
                mem: MemRef::Local(_),
                ..
            }
            | Op::Store {
                mem: MemRef::Local(_),
                ..
            } => local_accesses += 1,
            Op::For { inits, .. } => carried = inits.len(),
            Op::If { .. } => if_results = i.results.len(),
            _ => {}
        });
        assert_eq!((local_accesses, carried, if_results), (1, 2, 1), "{k}");
    }

    #[test]
    fn a_read_before_any_write_keeps_the_array() {
        let mut b = Builder::kernel("uninit");
        let out = b.tensor_param("out", Scalar::F32, true);
        let t = b.local_array("t", Scalar::F32, Value::Int(2)).unwrap();
        let tid = b.builtin(Builtin::ThreadId);
        let c = b.binary(BinaryOp::Lt, tid, Value::Int(3)).unwrap();
        b.begin_if(c).unwrap();
        b.store(t, Value::Int(0), Value::Float(2.0)).unwrap();
        b.begin_else(&[]).unwrap();
        b.end_if(&[]).unwrap();
        let v = b.load(t, Value::Int(0)).unwrap();
        b.store(out, tid, v).unwrap();
        let mut k = b.finish_kernel().unwrap();
        assert_eq!(promote_locals(&mut k), 0);
        verify_kernel(&k).unwrap();
        assert_eq!(k.body.locals.len(), 1);
    }
}
