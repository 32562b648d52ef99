//! Constant folding and exact algebraic simplification: ops on constants are evaluated
//! with [`tessera_ir::eval`] (an integer division by zero is left for the runtime to
//! report), exact identities are applied (`x + 0`, `x * 1` … on integers, `select` on a
//! constant condition, casts to the same type), an `if` on a constant condition becomes
//! the block it takes, and a loop that runs zero times becomes its initial values.

use super::util::{trip_count, Subst};
use std::collections::HashMap;
use tessera_ir::eval::{self, EvalError};
use tessera_ir::{BinaryOp, Block, Body, Inst, Kernel, Literal, Op, Type, ValueId};

/// Folds constants in `kernel`.
pub fn fold(kernel: &mut Kernel) {
    let mut f = Folder {
        consts: HashMap::new(),
        subst: Subst::new(),
    };
    let block = std::mem::take(&mut kernel.body.block);
    kernel.body.block = f.block(block, &kernel.body);
}

struct Folder {
    consts: HashMap<ValueId, Literal>,
    subst: Subst,
}

impl Folder {
    fn block(&mut self, block: Block, body: &Body) -> Block {
        let mut out = Vec::with_capacity(block.insts.len());
        self.insts(block.insts, body, &mut out);
        self.subst.block(block.args, out, &block.yields)
    }

    fn insts(&mut self, insts: Vec<Inst>, body: &Body, out: &mut Vec<Inst>) {
        for mut inst in insts {
            self.subst.apply_op(&mut inst.op);
            let result = inst.result();
            match self.simplify(&inst.op, result, body) {
                Simplified::Keep => {}
                Simplified::Const(l) => {
                    inst.op = Op::Const(l);
                }
                Simplified::Alias(v) => {
                    if let Some(r) = result {
                        self.subst.insert(r, v);
                        continue;
                    }
                }
            }
            if let (Op::Const(l), Some(r)) = (&inst.op, result) {
                self.consts.insert(r, *l);
            }
            match inst.op {
                Op::If {
                    cond,
                    then_block,
                    else_block,
                } => {
                    if let Some(Literal::Bool(c)) = self.consts.get(&cond).copied() {
                        let taken = if c { then_block } else { else_block };
                        self.insts(taken.insts, body, out);
                        for (&r, &y) in inst.results.iter().zip(&taken.yields) {
                            let y = self.subst.get(y);
                            self.subst.insert(r, y);
                        }
                        continue;
                    }
                    inst.op = Op::If {
                        cond,
                        then_block: self.block(then_block, body),
                        else_block: self.block(else_block, body),
                    };
                }
                Op::For {
                    bounds,
                    inits,
                    body: b,
                } => {
                    let k = |v: ValueId| self.consts.get(&v).copied();
                    let [start, end, step] = bounds;
                    if let (Some(s), Some(e), Some(st)) = (k(start), k(end), k(step)) {
                        if trip_count(s, e, st) == Some(0) {
                            for (&r, &i) in inst.results.iter().zip(&inits) {
                                self.subst.insert(r, i);
                            }
                            continue;
                        }
                    }
                    inst.op = Op::For {
                        bounds,
                        inits,
                        body: self.block(b, body),
                    };
                }
                _ => {}
            }
            out.push(inst);
        }
    }

    fn simplify(&self, op: &Op, result: Option<ValueId>, body: &Body) -> Simplified {
        let k = |v: &ValueId| self.consts.get(v).copied();
        match op {
            Op::Unary(u, a) => match k(a).map(|a| eval::unary(*u, a)) {
                Some(Ok(l)) => Simplified::Const(l),
                _ => Simplified::Keep,
            },
            Op::Binary(b, x, y) => {
                if let (Some(cx), Some(cy)) = (k(x), k(y)) {
                    return match eval::binary(*b, cx, cy) {
                        Ok(l) => Simplified::Const(l),
                        Err(EvalError::DivisionByZero) | Err(_) => Simplified::Keep,
                    };
                }
                let exact = body.ty(*x).scalar().is_some_and(|t| !t.is_float());
                if exact {
                    identity(*b, *x, *y, k(x), k(y))
                } else {
                    Simplified::Keep
                }
            }
            Op::Fma(a, b, c) => match (k(a), k(b), k(c)) {
                (Some(a), Some(b), Some(c)) => match eval::fma(a, b, c) {
                    Ok(l) => Simplified::Const(l),
                    Err(_) => Simplified::Keep,
                },
                _ => Simplified::Keep,
            },
            Op::Select(c, a, b) => match k(c) {
                Some(Literal::Bool(true)) => Simplified::Alias(*a),
                Some(Literal::Bool(false)) => Simplified::Alias(*b),
                _ if a == b => Simplified::Alias(*a),
                _ => Simplified::Keep,
            },
            Op::Cast(a, to) => {
                if let Some(l) = k(a) {
                    return Simplified::Const(eval::cast(l, *to));
                }
                if body.ty(*a) == Type::Scalar(*to) && result.is_some() {
                    return Simplified::Alias(*a);
                }
                Simplified::Keep
            }
            Op::Bitcast(a, to) => match k(a).map(|l| eval::bitcast(l, *to)) {
                Some(Ok(l)) => Simplified::Const(l),
                _ if body.ty(*a) == Type::Scalar(*to) && result.is_some() => Simplified::Alias(*a),
                _ => Simplified::Keep,
            },
            _ => Simplified::Keep,
        }
    }
}

enum Simplified {
    Keep,
    Const(Literal),
    /// The result equals an existing value.
    Alias(ValueId),
}

/// Exact identities on integers and bools (the caller checks the type): an operand that
/// leaves the other unchanged (`x + 0`, `x && true`) gives the other, and one that decides
/// the result alone (`x && false`, `x || true`, `x & 0`, `x | !0`, `x * 0`) gives itself.
fn identity(
    op: BinaryOp,
    x: ValueId,
    y: ValueId,
    cx: Option<Literal>,
    cy: Option<Literal>,
) -> Simplified {
    let is =
        |c: Option<Literal>, v: i64| c.is_some_and(|l| l.ty().is_int() && l.as_i64() == Some(v));
    let all_ones = |c: Option<Literal>| {
        c.is_some_and(|l| {
            l.ty().is_int()
                && eval::unary(tessera_ir::UnaryOp::Not, l)
                    .ok()
                    .and_then(|n| n.as_i64())
                    == Some(0)
        })
    };
    let is_bool = |c: Option<Literal>, v: bool| c == Some(Literal::Bool(v));
    let zero_shift = |c: Option<Literal>| {
        c.is_some_and(|l| {
            let bits = (l.ty().size_bytes() * 8) as i64;
            l.ty().is_int() && l.as_i64().is_some_and(|v| v.rem_euclid(bits) == 0)
        })
    };
    let absorbs = |c: Option<Literal>| match op {
        BinaryOp::And => is_bool(c, false) || is(c, 0),
        BinaryOp::Or => is_bool(c, true) || all_ones(c),
        BinaryOp::Mul => is(c, 0),
        _ => false,
    };
    use Simplified::{Alias, Const, Keep};
    match op {
        _ if absorbs(cy) => cy.map_or(Keep, Const),
        _ if absorbs(cx) => cx.map_or(Keep, Const),
        BinaryOp::Add | BinaryOp::Or | BinaryOp::Xor if is(cy, 0) => Alias(x),
        BinaryOp::Add | BinaryOp::Or | BinaryOp::Xor if is(cx, 0) => Alias(y),
        BinaryOp::Sub if is(cy, 0) => Alias(x),
        BinaryOp::Mul if is(cy, 1) => Alias(x),
        BinaryOp::Mul if is(cx, 1) => Alias(y),
        BinaryOp::Div if is(cy, 1) => Alias(x),
        BinaryOp::And if all_ones(cy) || is_bool(cy, true) => Alias(x),
        BinaryOp::And if all_ones(cx) || is_bool(cx, true) => Alias(y),
        BinaryOp::Or if is_bool(cy, false) => Alias(x),
        BinaryOp::Or if is_bool(cx, false) => Alias(y),
        BinaryOp::Shl | BinaryOp::Shr if zero_shift(cy) => Alias(x),
        BinaryOp::Min | BinaryOp::Max | BinaryOp::And | BinaryOp::Or if x == y => Alias(x),
        _ => Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::{verify_kernel, Builder, Builtin, MemRef, Scalar, Value};

    fn find(k: &Kernel, f: impl Fn(&Op) -> bool) -> Vec<&Inst> {
        let mut v = Vec::new();
        fn go<'a>(b: &'a Block, f: &dyn Fn(&Op) -> bool, v: &mut Vec<&'a Inst>) {
            for i in &b.insts {
                if f(&i.op) {
                    v.push(i);
                }
                for nb in i.op.blocks() {
                    go(nb, f, v);
                }
            }
        }
        go(&k.body.block, &f, &mut v);
        v
    }

    /// Builds `a op b` on two constants without the builder folding them.
    fn raw_binary(k: &mut Kernel, op: BinaryOp, a: Literal, b: Literal) -> ValueId {
        let body = &mut k.body;
        let ca = body.new_value(Type::Scalar(a.ty()));
        let cb = body.new_value(Type::Scalar(b.ty()));
        let ty = if op.is_comparison() {
            Scalar::Bool
        } else {
            a.ty()
        };
        let r = body.new_value(Type::Scalar(ty));
        let insts = vec![
            Inst {
                op: Op::Const(a),
                results: vec![ca],
                loc: None,
            },
            Inst {
                op: Op::Const(b),
                results: vec![cb],
                loc: None,
            },
            Inst {
                op: Op::Binary(op, ca, cb),
                results: vec![r],
                loc: None,
            },
        ];
        body.block.insts.splice(0..0, insts);
        r
    }

    fn store_kernel() -> Kernel {
        let mut b = Builder::kernel("k");
        let _out = b.tensor_param("out", Scalar::U32, true);
        b.finish_kernel().unwrap()
    }

    fn store(k: &mut Kernel, v: ValueId) {
        let idx = k.body.new_value(Type::Scalar(Scalar::U32));
        k.body.block.insts.push(Inst {
            op: Op::Const(Literal::U32(0)),
            results: vec![idx],
            loc: None,
        });
        k.body.block.insts.push(Inst {
            op: Op::Store {
                mem: MemRef::Param(0),
                index: idx,
                value: v,
            },
            results: vec![],
            loc: None,
        });
    }

    #[test]
    fn folds_constants_but_not_division_by_zero() {
        let mut k = store_kernel();
        let a = raw_binary(
            &mut k,
            BinaryOp::Add,
            Literal::U32(u32::MAX),
            Literal::U32(3),
        );
        store(&mut k, a);
        let d = raw_binary(&mut k, BinaryOp::Div, Literal::U32(7), Literal::U32(0));
        store(&mut k, d);
        verify_kernel(&k).unwrap();
        fold(&mut k);
        verify_kernel(&k).unwrap();
        let consts: Vec<_> = find(&k, |op| matches!(op, Op::Const(Literal::U32(2))))
            .into_iter()
            .collect();
        assert_eq!(consts.len(), 1, "{k}");
        assert_eq!(
            find(&k, |op| matches!(op, Op::Binary(BinaryOp::Div, ..))).len(),
            1,
            "{k}"
        );
        assert!(find(&k, |op| matches!(op, Op::Binary(BinaryOp::Add, ..))).is_empty());
    }

    #[test]
    fn integer_identities_and_constant_selects_fold_away() {
        let mut b = Builder::kernel("id");
        let out = b.tensor_param("out", Scalar::U32, true);
        let tid = b.builtin(Builtin::ThreadId);
        let mut k = b.finish_kernel().unwrap();
        let tid = match tid {
            Value::Id(v) => v,
            _ => unreachable!(),
        };
        let zero = k.body.new_value(Type::Scalar(Scalar::U32));
        let one = k.body.new_value(Type::Scalar(Scalar::U32));
        let t = k.body.new_value(Type::Scalar(Scalar::Bool));
        let (a, m, s) = (
            k.body.new_value(Type::Scalar(Scalar::U32)),
            k.body.new_value(Type::Scalar(Scalar::U32)),
            k.body.new_value(Type::Scalar(Scalar::U32)),
        );
        let i = |op, r: ValueId| Inst {
            op,
            results: vec![r],
            loc: None,
        };
        k.body.block.insts.extend([
            i(Op::Const(Literal::U32(0)), zero),
            i(Op::Const(Literal::U32(1)), one),
            i(Op::Const(Literal::Bool(false)), t),
            i(Op::Binary(BinaryOp::Add, tid, zero), a),
            i(Op::Binary(BinaryOp::Mul, one, a), m),
            i(Op::Select(t, one, m), s),
            Inst {
                op: Op::Store {
                    mem: out.mem,
                    index: tid,
                    value: s,
                },
                results: vec![],
                loc: None,
            },
        ]);
        verify_kernel(&k).unwrap();
        fold(&mut k);
        verify_kernel(&k).unwrap();
        match &k.body.block.insts.last().unwrap().op {
            Op::Store { value, .. } => assert_eq!(*value, tid, "{k}"),
            other => panic!("{other:?}"),
        }
        assert!(
            find(&k, |op| matches!(op, Op::Binary(..) | Op::Select(..))).is_empty(),
            "{k}"
        );
    }

    #[test]
    fn absorbing_operands_decide_the_result() {
        let mut b = Builder::kernel("absorb");
        let out = b.tensor_param("out", Scalar::U32, true);
        let tid = b.builtin(Builtin::ThreadId);
        let mut k = b.finish_kernel().unwrap();
        let tid = match tid {
            Value::Id(v) => v,
            _ => unreachable!(),
        };
        let v = |k: &mut Kernel, t: Scalar| k.body.new_value(Type::Scalar(t));
        let (five, zero, ones, two) = (
            v(&mut k, Scalar::U32),
            v(&mut k, Scalar::U32),
            v(&mut k, Scalar::U32),
            v(&mut k, Scalar::U32),
        );
        let (f, t, c) = (
            v(&mut k, Scalar::Bool),
            v(&mut k, Scalar::Bool),
            v(&mut k, Scalar::Bool),
        );
        // c && false, true || c (either operand order), tid & 0, !0 | tid, tid * 0.
        let (and_f, or_t) = (v(&mut k, Scalar::Bool), v(&mut k, Scalar::Bool));
        let (masked, filled, times, picked, sum, total) = (
            v(&mut k, Scalar::U32),
            v(&mut k, Scalar::U32),
            v(&mut k, Scalar::U32),
            v(&mut k, Scalar::U32),
            v(&mut k, Scalar::U32),
            v(&mut k, Scalar::U32),
        );
        let (picked2, sum2) = (v(&mut k, Scalar::U32), v(&mut k, Scalar::U32));
        let i = |op, r: ValueId| Inst {
            op,
            results: vec![r],
            loc: None,
        };
        k.body.block.insts.extend([
            i(Op::Const(Literal::U32(5)), five),
            i(Op::Const(Literal::U32(0)), zero),
            i(Op::Const(Literal::U32(u32::MAX)), ones),
            i(Op::Const(Literal::U32(2)), two),
            i(Op::Const(Literal::Bool(false)), f),
            i(Op::Const(Literal::Bool(true)), t),
            i(Op::Binary(BinaryOp::Lt, tid, five), c),
            i(Op::Binary(BinaryOp::And, c, f), and_f),
            i(Op::Binary(BinaryOp::Or, t, c), or_t),
            i(Op::Binary(BinaryOp::And, tid, zero), masked),
            i(Op::Binary(BinaryOp::Or, ones, tid), filled),
            i(Op::Binary(BinaryOp::Mul, zero, tid), times),
            // and_f is false: two; or_t is true: masked (0); plus times (0): two.
            i(Op::Select(and_f, five, two), picked),
            i(Op::Select(or_t, masked, five), picked2),
            i(Op::Binary(BinaryOp::Add, picked, picked2), sum),
            i(Op::Binary(BinaryOp::Add, sum, times), sum2),
            // filled is !0, and !0 + 2 wraps to 1.
            i(Op::Binary(BinaryOp::Add, filled, sum2), total),
            Inst {
                op: Op::Store {
                    mem: out.mem,
                    index: tid,
                    value: total,
                },
                results: vec![],
                loc: None,
            },
        ]);
        verify_kernel(&k).unwrap();
        fold(&mut k);
        verify_kernel(&k).unwrap();
        // Only the comparison stays (unused: dead code elimination's to remove).
        let left = find(&k, |op| {
            matches!(op, Op::Select(..)) || matches!(op, Op::Binary(b, ..) if *b != BinaryOp::Lt)
        });
        assert!(left.is_empty(), "{k}");
        let value = match &k.body.block.insts.last().unwrap().op {
            Op::Store { value, .. } => *value,
            other => panic!("{other:?}"),
        };
        let stored = find(&k, |op| matches!(op, Op::Const(_)))
            .into_iter()
            .find(|inst| inst.results == [value])
            .and_then(|inst| match inst.op {
                Op::Const(l) => Some(l),
                _ => None,
            });
        assert_eq!(stored, Some(Literal::U32(1)), "{k}");
    }

    #[test]
    fn float_identities_are_left_alone() {
        let (mut b, x, out) = Builder::kernel_x_out("f", Scalar::F32);
        let v = b.load(x, Value::Int(0)).unwrap();
        let s = b.binary(BinaryOp::Add, v, Value::Float(0.0)).unwrap();
        b.store(out, Value::Int(0), s).unwrap();
        let mut k = b.finish_kernel().unwrap();
        fold(&mut k);
        // -0.0 + 0.0 is +0.0: `x + 0.0` is not an identity on floats.
        assert_eq!(
            find(&k, |op| matches!(op, Op::Binary(BinaryOp::Add, ..))).len(),
            1
        );
    }

    #[test]
    fn constant_ifs_and_empty_loops_disappear() {
        let mut b = Builder::kernel("cf");
        let out = b.tensor_param("out", Scalar::U32, true);
        let n = b.constexpr("n", Literal::U32(0));
        let tid = b.builtin(Builtin::ThreadId);
        let (_, c) = b
            .begin_for(Value::Int(0), n, Value::Int(1), &[tid])
            .unwrap();
        let inc = b.binary(BinaryOp::Add, c[0], Value::Int(1)).unwrap();
        let r = b.end_for(&[inc]).unwrap();
        let mut k = b.finish_kernel().unwrap();
        // An `if true` around a store of the loop result.
        let t = k.body.new_value(Type::Scalar(Scalar::Bool));
        k.body.block.insts.push(Inst {
            op: Op::Const(Literal::Bool(true)),
            results: vec![t],
            loc: None,
        });
        let r = match r[0] {
            Value::Id(v) => v,
            _ => unreachable!(),
        };
        let tid = match tid {
            Value::Id(v) => v,
            _ => unreachable!(),
        };
        let then_block = Block {
            args: vec![],
            insts: vec![Inst {
                op: Op::Store {
                    mem: out.mem,
                    index: tid,
                    value: r,
                },
                results: vec![],
                loc: None,
            }],
            yields: vec![],
        };
        k.body.block.insts.push(Inst {
            op: Op::If {
                cond: t,
                then_block,
                else_block: Block::default(),
            },
            results: vec![],
            loc: None,
        });
        verify_kernel(&k).unwrap();
        fold(&mut k);
        verify_kernel(&k).unwrap();
        assert!(
            find(&k, |op| matches!(op, Op::If { .. } | Op::For { .. })).is_empty(),
            "{k}"
        );
        match &k.body.block.insts.last().unwrap().op {
            Op::Store { value, .. } => assert_eq!(*value, tid, "{k}"),
            other => panic!("{other:?}"),
        }
    }
}
