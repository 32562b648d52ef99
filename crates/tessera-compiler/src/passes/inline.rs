//! Inlining: every `Op::Call` is replaced by the callee's body, at any depth (callees that
//! call callees are inlined first). Callee values get fresh ids in the caller; callee
//! threadgroup and stack arrays are appended to the caller's with unique names, one copy
//! per call site; its memory arguments become the caller's memory and its fragment
//! arguments the caller's fragments (its other fragments are appended, one set per call
//! site), so the inlined body is the code a kernel would hold had it been written there.

use super::util::{clone_block, Subst};
use std::collections::HashMap;
use tessera_ir::{ArrayDecl, Block, Body, FragDecl, Function, Kernel, MemRef, Op};

/// Inlines every call in `kernel`.
pub fn inline(kernel: &mut Kernel) {
    inline_body(&mut kernel.body);
}

/// Inlines every call in a body, in place.
fn inline_body(body: &mut Body) {
    if !body.block.any(&mut |op| matches!(op, Op::Call { .. })) {
        return;
    }
    let mut subst = Subst::new();
    let block = std::mem::take(&mut body.block);
    body.block = inline_block(block, body, &mut subst);
    subst.apply_block(&mut body.block);
}

/// A copy of a function's body with its own calls inlined.
fn flattened(func: &Function) -> Body {
    let mut body = func.body.clone();
    inline_body(&mut body);
    body
}

fn inline_block(block: Block, body: &mut Body, subst: &mut Subst) -> Block {
    let mut insts = Vec::with_capacity(block.insts.len());
    for mut inst in block.insts {
        if let Op::Call {
            func,
            args,
            mems,
            frags,
        } = &inst.op
        {
            let callee = flattened(func);
            let shared_base = body.shared.len() as u32;
            let local_base = body.locals.len() as u32;
            for a in &callee.shared {
                let name = unique_name(&body.shared, &func.name, &a.name);
                body.shared.push(ArrayDecl { name, ..a.clone() });
            }
            for a in &callee.locals {
                let name = unique_name(&body.locals, &func.name, &a.name);
                body.locals.push(ArrayDecl { name, ..a.clone() });
            }
            // Each callee fragment: the caller's fragment a fragment argument names, or a
            // fresh one.
            let mut frag_map: Vec<Option<u32>> = vec![None; callee.frags.len()];
            let mut given = frags.iter();
            for arg in &func.frags {
                for i in arg.first..arg.first + arg.count() {
                    if let (Some(slot), Some(&f)) = (frag_map.get_mut(i as usize), given.next()) {
                        *slot = Some(f);
                    }
                }
            }
            for (f, slot) in callee.frags.iter().zip(&mut frag_map) {
                if slot.is_some() {
                    continue;
                }
                let mut name = format!("{}.{}", func.name, f.name);
                let mut n = 1;
                while body.frags.iter().any(|g| g.name == name) {
                    name = format!("{}.{}.{n}", func.name, f.name);
                    n += 1;
                }
                *slot = Some(body.frags.len() as u32);
                body.frags.push(FragDecl { name, ..f.clone() });
            }
            let frag_map: Vec<u32> = frag_map.into_iter().flatten().collect();
            let mut map: HashMap<_, _> = callee
                .block
                .args
                .iter()
                .copied()
                .zip(args.iter().copied())
                .collect();
            let inner = Block {
                args: vec![],
                insts: callee.block.insts,
                yields: callee.block.yields,
            };
            let mut copy = clone_block(&inner, &callee.values, body, &mut map);
            rebase_mems(&mut copy, shared_base, local_base, mems);
            map_frags(&mut copy, &frag_map);
            for i in &mut copy.insts {
                i.loc = i.loc.or(inst.loc);
            }
            for (&r, &y) in inst.results.iter().zip(&copy.yields) {
                subst.insert(r, y);
            }
            insts.extend(copy.insts);
            continue;
        }
        for b in inst.op.blocks_mut() {
            let taken = std::mem::take(b);
            *b = inline_block(taken, body, subst);
        }
        insts.push(inst);
    }
    Block {
        args: block.args,
        insts,
        yields: block.yields,
    }
}

fn unique_name(existing: &[ArrayDecl], func: &str, name: &str) -> String {
    let base = format!("{func}.{name}");
    let mut candidate = base.clone();
    let mut n = 1;
    while existing.iter().any(|a| a.name == candidate) {
        candidate = format!("{base}.{n}");
        n += 1;
    }
    candidate
}

/// Renames matrix fragment references: callee fragment `f` becomes `map[f]`.
fn map_frags(block: &mut Block, map: &[u32]) {
    for inst in &mut block.insts {
        for f in inst.op.frags_mut() {
            *f = map[*f as usize];
        }
        for b in inst.op.blocks_mut() {
            map_frags(b, map);
        }
    }
}

/// Shifts threadgroup and stack array references by the given offsets and puts the
/// caller's memory `args` in place of the function's memory arguments.
fn rebase_mems(block: &mut Block, shared: u32, local: u32, args: &[MemRef]) {
    for inst in &mut block.insts {
        for mem in inst.op.mems_mut() {
            match mem {
                MemRef::Shared(i) => *i += shared,
                MemRef::Local(i) => *i += local,
                MemRef::Param(_) => {}
                MemRef::Arg(j) => *mem = args[*j as usize],
            }
        }
        for b in inst.op.blocks_mut() {
            rebase_mems(b, shared, local, args);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tessera_ir::{verify_kernel, BinaryOp, Builder, Builtin, CallArg, FragRole, Scalar, Value};

    fn leaf() -> Arc<Function> {
        let mut f = Builder::function("leaf");
        let a = f.func_arg(Scalar::F32);
        let tmp = f.local_array("tmp", Scalar::F32, Value::Int(2)).unwrap();
        f.store(tmp, Value::Int(1), a).unwrap();
        let v = f.load(tmp, Value::Int(1)).unwrap();
        let r = f.binary(BinaryOp::Mul, v, Value::Float(2.0)).unwrap();
        Arc::new(f.finish_function(&[r], &[Scalar::F32]).unwrap())
    }

    fn middle() -> Arc<Function> {
        let mut f = Builder::function("middle");
        let a = f.func_arg(Scalar::F32);
        let x = f.call(leaf(), &[a.into()]).unwrap();
        let y = f.call(leaf(), &[x[0].into()]).unwrap();
        Arc::new(f.finish_function(&[y[0]], &[Scalar::F32]).unwrap())
    }

    #[test]
    fn nested_calls_are_inlined_with_fresh_arrays() {
        let mut b = Builder::kernel("k");
        let out = b.tensor_param("out", Scalar::F32, true);
        let tid = b.builtin(Builtin::ThreadId);
        let x = b.cast(tid, Scalar::F32).unwrap();
        let r = b.call(middle(), &[x.into()]).unwrap();
        let r2 = b.call(middle(), &[r[0].into()]).unwrap();
        b.store(out, tid, r2[0]).unwrap();
        let mut k = b.finish_kernel().unwrap();
        verify_kernel(&k).unwrap();
        inline(&mut k);
        verify_kernel(&k).unwrap();
        assert!(!k.body.block.any(&mut |op| matches!(op, Op::Call { .. })));
        // Four leaf calls, each with its own copy of `tmp`.
        assert_eq!(k.body.locals.len(), 4);
        let names: std::collections::HashSet<_> =
            k.body.locals.iter().map(|a| a.name.clone()).collect();
        assert_eq!(names.len(), 4, "{names:?}");
        let muls = k
            .body
            .block
            .count_matching(|op| matches!(op, Op::Binary(BinaryOp::Mul, ..)));
        assert_eq!(muls, 4);
        // The final store reads the last multiplication.
        let last_mul = k
            .body
            .block
            .insts
            .iter()
            .rev()
            .find(|i| matches!(i.op, Op::Binary(BinaryOp::Mul, ..)))
            .and_then(|i| i.result())
            .unwrap();
        match k.body.block.insts.last().map(|i| &i.op) {
            Some(Op::Store { value, .. }) => assert_eq!(*value, last_mul),
            other => panic!("expected a store, got {other:?}"),
        }
    }

    /// `scale_all(acc: [MatrixAcc; 2], x: f32)`: scales both accumulators by `x` through
    /// a fragment of its own (filled with `x`, added in).
    fn scale_all() -> Arc<Function> {
        let mut f = Builder::function("scale_all");
        let acc = f
            .func_frag_arg("acc", FragRole::Acc, Scalar::F32, Some(2))
            .unwrap();
        let x = f.func_arg(Scalar::F32);
        let own = f.frag("own", FragRole::Acc, Scalar::F32).unwrap();
        f.frag_fill(own, x).unwrap();
        for &a in &acc.frags {
            f.frag_scale(a, x).unwrap();
            f.frag_add(a, a, own).unwrap();
        }
        Arc::new(f.finish_function(&[], &[]).unwrap())
    }

    #[test]
    fn a_function_prints_its_fragment_arguments() {
        let text = scale_all().to_string();
        assert!(
            text.starts_with("func scale_all(acc: [MatrixAcc; 2], "),
            "{text}"
        );
    }

    #[test]
    fn fragment_arguments_become_the_callers_fragments() {
        let mut b = Builder::kernel("k");
        let out = b.tensor_param("out", Scalar::F32, true);
        let first = b.frag("first", FragRole::Acc, Scalar::F32).unwrap();
        let acc = b
            .frag_array("acc", FragRole::Acc, Scalar::F32, Value::Int(2))
            .unwrap();
        b.call(
            scale_all(),
            &[CallArg::Frags(acc.clone()), Value::Float(2.0).into()],
        )
        .unwrap();
        b.call(
            scale_all(),
            &[CallArg::Frags(acc.clone()), Value::Float(3.0).into()],
        )
        .unwrap();
        b.frag_store(acc.frags[1], out, Value::Int(0), Value::Int(16))
            .unwrap();
        let mut k = b.finish_kernel().unwrap();
        verify_kernel(&k).unwrap();
        inline(&mut k);
        verify_kernel(&k).unwrap();
        // The caller's three fragments, then one `own` per call site.
        let names: Vec<&str> = k.body.frags.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "first",
                "acc[0]",
                "acc[1]",
                "scale_all.own",
                "scale_all.own.1"
            ]
        );
        // Every scale and add lands on the caller's `acc`, never on `first`.
        let mut scaled = Vec::new();
        let mut added = Vec::new();
        k.body.block.walk(&mut |i| match &i.op {
            Op::FragScale { frag, .. } => scaled.push(*frag),
            Op::FragAdd { d, a, b } => added.push((*d, *a, *b)),
            _ => {}
        });
        let (a0, a1) = (acc.frags[0].index, acc.frags[1].index);
        assert_eq!(scaled, [a0, a1, a0, a1]);
        assert_eq!(added, [(a0, a0, 3), (a1, a1, 3), (a0, a0, 4), (a1, a1, 4)]);
        assert_ne!(first.index, a0);
    }

    trait CountMatching {
        fn count_matching(&self, f: impl Fn(&Op) -> bool) -> usize;
    }

    impl CountMatching for Block {
        fn count_matching(&self, f: impl Fn(&Op) -> bool) -> usize {
            let mut n = 0;
            self.walk(&mut |i| n += f(&i.op) as usize);
            n
        }
    }
}
