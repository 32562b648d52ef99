//! Common-subexpression elimination: a pure op (`Op::is_pure`) identical to one that
//! dominates it (earlier in the same block or in an enclosing one) is replaced by that
//! op's result. Commutative binary ops match with their operands in either order.

use super::util::Subst;
use std::collections::HashMap;
use tessera_ir::{BinaryOp, Block, Builtin, Kernel, Literal, Op, Scalar, UnaryOp, ValueId};

/// What makes two pure ops compute the same value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Const(Literal),
    Builtin(Builtin),
    Param(u32),
    Unary(UnaryOp, ValueId),
    Binary(BinaryOp, ValueId, ValueId),
    Fma(ValueId, ValueId, ValueId),
    Select(ValueId, ValueId, ValueId),
    Cast(ValueId, Scalar),
    Bitcast(ValueId, Scalar),
    Extract(ValueId, u8),
    Pack(Vec<ValueId>),
}

fn key(op: &Op) -> Option<Key> {
    Some(match op {
        Op::Const(l) => Key::Const(*l),
        Op::Builtin(b) => Key::Builtin(*b),
        Op::Param(i) => Key::Param(*i),
        Op::Unary(u, a) => Key::Unary(*u, *a),
        Op::Binary(b, x, y) => {
            let (x, y) = if b.is_commutative() && y < x {
                (*y, *x)
            } else {
                (*x, *y)
            };
            Key::Binary(*b, x, y)
        }
        Op::Fma(a, b, c) => Key::Fma(*a, *b, *c),
        Op::Select(c, a, b) => Key::Select(*c, *a, *b),
        Op::Cast(a, t) => Key::Cast(*a, *t),
        Op::Bitcast(a, t) => Key::Bitcast(*a, *t),
        Op::Extract(v, l) => Key::Extract(*v, *l),
        Op::Pack(vs) => Key::Pack(vs.clone()),
        _ => return None,
    })
}

/// Merges identical pure ops in `kernel`.
pub fn cse(kernel: &mut Kernel) {
    let mut c = Cse {
        scopes: vec![HashMap::new()],
        subst: Subst::new(),
    };
    c.block(&mut kernel.body.block);
}

struct Cse {
    scopes: Vec<HashMap<Key, ValueId>>,
    subst: Subst,
}

impl Cse {
    fn lookup(&self, k: &Key) -> Option<ValueId> {
        self.scopes.iter().rev().find_map(|s| s.get(k).copied())
    }

    fn block(&mut self, block: &mut Block) {
        let insts = std::mem::take(&mut block.insts);
        for mut inst in insts {
            self.subst.apply_op(&mut inst.op);
            if let (true, Some(r)) = (inst.op.is_pure(), inst.result()) {
                if let Some(k) = key(&inst.op) {
                    if let Some(prev) = self.lookup(&k) {
                        self.subst.insert(r, prev);
                        continue;
                    }
                    if let Some(scope) = self.scopes.last_mut() {
                        scope.insert(k, r);
                    }
                }
            }
            for b in inst.op.blocks_mut() {
                self.scopes.push(HashMap::new());
                self.block(b);
                self.scopes.pop();
            }
            block.insts.push(inst);
        }
        for y in &mut block.yields {
            *y = self.subst.get(*y);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::{verify_kernel, Builder, Value};

    #[test]
    fn merges_dominating_duplicates_only() {
        let mut b = Builder::kernel("cse");
        let out = b.tensor_param("out", Scalar::U32, true);
        let tid = b.builtin(Builtin::ThreadId);
        let a = b.binary(BinaryOp::Mul, tid, Value::Int(4)).unwrap();
        let tid2 = b.builtin(Builtin::ThreadId);
        let four = b.lit(Literal::U32(4));
        let a2 = b.binary(BinaryOp::Mul, four, tid2).unwrap(); // commuted duplicate
        let c = b.binary(BinaryOp::Lt, tid, Value::Int(8)).unwrap();
        b.begin_if(c).unwrap();
        let inner = b.binary(BinaryOp::Add, a, Value::Int(1)).unwrap();
        b.store(out, inner, a2).unwrap();
        b.begin_else(&[]).unwrap();
        b.end_if(&[]).unwrap();
        // Same op as `inner` but after the `if`: `inner` does not dominate it.
        let after = b.binary(BinaryOp::Add, a2, Value::Int(1)).unwrap();
        b.store(out, after, a).unwrap();
        let mut k = b.finish_kernel().unwrap();
        verify_kernel(&k).unwrap();
        cse(&mut k);
        verify_kernel(&k).unwrap();
        let mut muls = 0;
        let mut adds = 0;
        let mut builtins = 0;
        k.body.block.walk(&mut |i| match i.op {
            Op::Binary(BinaryOp::Mul, ..) => muls += 1,
            Op::Binary(BinaryOp::Add, ..) => adds += 1,
            Op::Builtin(_) => builtins += 1,
            _ => {}
        });
        assert_eq!((muls, adds, builtins), (1, 2, 1), "{k}");
    }
}
