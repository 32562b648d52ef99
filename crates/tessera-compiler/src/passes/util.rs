//! Helpers the passes share: value substitution, region cloning with fresh values,
//! constant lookup and use counting.

use std::collections::HashMap;
use tessera_ir::{Block, Body, Inst, Literal, Op, Type, ValueId};

/// A value-to-value replacement, followed transitively.
#[derive(Default, Debug)]
pub struct Subst {
    map: HashMap<ValueId, ValueId>,
}

impl Subst {
    pub fn new() -> Self {
        Subst::default()
    }

    /// From now on, uses of `from` read `to`.
    pub fn insert(&mut self, from: ValueId, to: ValueId) {
        let to = self.get(to);
        if from != to {
            self.map.insert(from, to);
        }
    }

    /// The value that replaces `v` (itself if none).
    pub fn get(&self, mut v: ValueId) -> ValueId {
        // Chains are short; the bound guards against a malformed cycle.
        for _ in 0..64 {
            match self.map.get(&v) {
                Some(&n) if n != v => v = n,
                _ => break,
            }
        }
        v
    }

    /// Rewrites the direct operands of an instruction.
    pub fn apply_op(&self, op: &mut Op) {
        if !self.map.is_empty() {
            op.map_operands(|v| self.get(v));
        }
    }

    /// The block of `args` and `insts` (already rewritten) yielding `yields` rewritten:
    /// how a pass that rebuilds a block's instructions ends it.
    pub fn block(&self, args: Vec<ValueId>, insts: Vec<Inst>, yields: &[ValueId]) -> Block {
        Block {
            args,
            insts,
            yields: yields.iter().map(|&y| self.get(y)).collect(),
        }
    }

    /// Rewrites every use in `block` and the blocks nested in it.
    pub fn apply_block(&self, block: &mut Block) {
        if self.map.is_empty() {
            return;
        }
        for inst in &mut block.insts {
            self.apply_op(&mut inst.op);
            for b in inst.op.blocks_mut() {
                self.apply_block(b);
            }
        }
        for y in &mut block.yields {
            *y = self.get(*y);
        }
    }
}

/// Copies `block` into `body`'s value table: every value defined in the block (args,
/// results, nested ones) gets a fresh id; uses of values defined outside are looked up in
/// `map` (left as they are when absent). `map` is extended with the renaming.
pub fn clone_block(
    block: &Block,
    types: &[Type],
    body: &mut Body,
    map: &mut HashMap<ValueId, ValueId>,
) -> Block {
    let fresh = |v: ValueId, body: &mut Body, map: &mut HashMap<ValueId, ValueId>| {
        let n = body.new_value(types[v.index()]);
        map.insert(v, n);
        n
    };
    let args = block.args.iter().map(|&a| fresh(a, body, map)).collect();
    let mut insts = Vec::with_capacity(block.insts.len());
    for inst in &block.insts {
        let mut op = inst.op.clone();
        op.map_operands(|v| map.get(&v).copied().unwrap_or(v));
        // Nested blocks: clone them (they see the renaming so far).
        match &mut op {
            Op::If {
                then_block,
                else_block,
                ..
            } => {
                *then_block = clone_block(then_block, types, body, map);
                *else_block = clone_block(else_block, types, body, map);
            }
            Op::For { body: b, .. } => {
                *b = clone_block(b, types, body, map);
            }
            _ => {}
        }
        let results = inst.results.iter().map(|&r| fresh(r, body, map)).collect();
        insts.push(Inst {
            op,
            results,
            loc: inst.loc,
        });
    }
    let yields = block
        .yields
        .iter()
        .map(|v| map.get(v).copied().unwrap_or(*v))
        .collect();
    Block {
        args,
        insts,
        yields,
    }
}

/// Every constant defined anywhere in `block`, by value.
pub fn constants(block: &Block) -> HashMap<ValueId, Literal> {
    let mut m = HashMap::new();
    block.walk(&mut |inst| {
        if let (Op::Const(l), Some(r)) = (&inst.op, inst.result()) {
            m.insert(r, *l);
        }
    });
    m
}

/// A one-result instruction.
pub fn inst1(op: Op, result: ValueId) -> Inst {
    Inst {
        op,
        results: vec![result],
        loc: None,
    }
}

/// Appends a constant to `out` and returns its value.
pub fn push_const(body_values: &mut Vec<Type>, out: &mut Vec<Inst>, l: Literal) -> ValueId {
    let v = ValueId(body_values.len() as u32);
    body_values.push(Type::Scalar(l.ty()));
    out.push(inst1(Op::Const(l), v));
    v
}

/// The constant trip count of a loop whose bounds are known, `None` if unknown or if the
/// step is not positive, or if the induction variable could wrap around on its last step
/// (where the meaning of the loop would hinge on overflow).
pub fn trip_count(start: Literal, end: Literal, step: Literal) -> Option<u64> {
    let (s, e, st) = (start.as_i64()?, end.as_i64()?, step.as_i64()?);
    if st <= 0 {
        return None;
    }
    let max = match start.ty() {
        tessera_ir::Scalar::I32 => i32::MAX as i64,
        tessera_ir::Scalar::U32 => u32::MAX as i64,
        _ => return None,
    };
    if e.max(s) + st > max {
        return None;
    }
    if e <= s {
        return Some(0);
    }
    Some(((e - s + st - 1) / st) as u64)
}
