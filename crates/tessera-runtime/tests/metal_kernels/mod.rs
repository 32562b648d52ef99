//! Hand-built kernels covering what the MSL emitter must translate: simdgroup reductions,
//! scans, votes and shuffles, threadgroup memory with barriers, loops with carried values,
//! f16 / bf16 math and casts, integer wrap-around, atomics and vector loads / stores.

#![allow(dead_code)]

use tessera_ir::{
    AtomicOp, BinaryOp, Builder, Builtin, Inst, Kernel, Literal, MemRef, Op, ReduceOp, Scalar,
    ShuffleKind, SimdOp, Type, UnaryOp, Value, ValueId,
};

/// Simdgroup collectives on f32: `outf[k * total + gid] = op_k(x[gid])`, and integer /
/// bool ones into `outi`. `delta` is a runtime shuffle distance (tests pass ≥ 32 too).
pub fn simd_ops() -> Kernel {
    let mut b = Builder::kernel("simd_ops");
    let x = b.tensor_param("x", Scalar::F32, false);
    let outf = b.tensor_param("outf", Scalar::F32, true);
    let outi = b.tensor_param("outi", Scalar::U32, true);
    let delta = b.scalar_param("delta", Scalar::U32);
    let gid = b.builtin(Builtin::GlobalId);
    let gs = b.builtin(Builtin::GroupSize);
    let ng = b.builtin(Builtin::NumGroupsX);
    let total = b.binary(BinaryOp::Mul, gs, ng).unwrap();
    let lane = b.builtin(Builtin::SimdLane);
    let v = b.load(x, gid).unwrap();
    let mut fres = Vec::new();
    for op in [
        SimdOp::Sum,
        SimdOp::Max,
        SimdOp::Min,
        SimdOp::PrefixSum,
        SimdOp::PrefixExclusiveSum,
    ] {
        fres.push(b.simd(op, v).unwrap());
    }
    let small = b.binary(BinaryOp::Mul, v, Value::Float(0.01)).unwrap();
    let near1 = b.binary(BinaryOp::Add, small, Value::Float(1.0)).unwrap();
    fres.push(b.simd(SimdOp::Prod, near1).unwrap());
    let src = b.binary(BinaryOp::Mul, lane, Value::Int(7)).unwrap();
    let src = b.binary(BinaryOp::Rem, src, Value::Int(32)).unwrap();
    fres.push(b.shuffle(ShuffleKind::Index, v, src).unwrap());
    fres.push(b.shuffle(ShuffleKind::Xor, v, Value::Int(3)).unwrap());
    fres.push(b.shuffle(ShuffleKind::Up, v, Value::Int(1)).unwrap());
    fres.push(b.shuffle(ShuffleKind::Down, v, Value::Int(2)).unwrap());
    fres.push(b.shuffle(ShuffleKind::Up, v, delta).unwrap());
    fres.push(b.shuffle(ShuffleKind::Down, v, delta).unwrap());
    let per_lane = b.binary(BinaryOp::Rem, lane, Value::Int(5)).unwrap();
    fres.push(b.shuffle(ShuffleKind::Up, v, per_lane).unwrap());
    for (k, r) in fres.iter().enumerate() {
        let base = b
            .binary(BinaryOp::Mul, total, Value::Int(k as i64))
            .unwrap();
        let at = b.binary(BinaryOp::Add, base, gid).unwrap();
        b.store(outf, at, *r).unwrap();
    }
    // Integer and bool collectives.
    let scaled = b.binary(BinaryOp::Mul, v, Value::Float(1000.0)).unwrap();
    let bits = b.cast(scaled, Scalar::I32).unwrap();
    let u = b.cast(bits, Scalar::U32).unwrap();
    let pos = b.binary(BinaryOp::Gt, v, Value::Float(0.0)).unwrap();
    let big = b.binary(BinaryOp::Gt, v, Value::Float(-100.0)).unwrap();
    let mut ires = vec![
        b.simd(SimdOp::And, u).unwrap(),
        b.simd(SimdOp::Or, u).unwrap(),
        b.simd(SimdOp::Xor, u).unwrap(),
        b.simd(SimdOp::Sum, u).unwrap(),
        b.simd(SimdOp::PrefixSum, u).unwrap(),
    ];
    let imax = b.simd(SimdOp::Max, bits).unwrap();
    ires.push(b.cast(imax, Scalar::U32).unwrap());
    let imin = b.simd(SimdOp::Min, bits).unwrap();
    ires.push(b.cast(imin, Scalar::U32).unwrap());
    for vote in [
        b.simd(SimdOp::Any, pos).unwrap(),
        b.simd(SimdOp::All, pos).unwrap(),
        b.simd(SimdOp::All, big).unwrap(),
    ] {
        ires.push(b.cast(vote, Scalar::U32).unwrap());
    }
    // Quantised to eighths (|v| < 2), every partial sum of 32 lanes is exact in f16, so the
    // sum does not depend on the order the backend adds the lanes in.
    let v8 = b.binary(BinaryOp::Mul, v, Value::Float(8.0)).unwrap();
    let v8 = b.unary(UnaryOp::Floor, v8).unwrap();
    let q = b.binary(BinaryOp::Div, v8, Value::Float(8.0)).unwrap();
    let hv = b.cast(q, Scalar::F16).unwrap();
    let hs = b.shuffle(ShuffleKind::Xor, hv, Value::Int(16)).unwrap();
    let hsum = b.simd(SimdOp::Sum, hs).unwrap();
    let hbits = b.cast(hsum, Scalar::F32).unwrap();
    let hbits = b.binary(BinaryOp::Mul, hbits, Value::Float(16.0)).unwrap();
    ires.push(b.cast(hbits, Scalar::U32).unwrap());
    let bv = b.cast(v, Scalar::BF16).unwrap();
    let bs = b.shuffle(ShuffleKind::Down, bv, Value::Int(5)).unwrap();
    let bsf = b.cast(bs, Scalar::F32).unwrap();
    let bsf = b.binary(BinaryOp::Mul, bsf, Value::Float(64.0)).unwrap();
    ires.push(b.cast(bsf, Scalar::I32).unwrap());
    let last = ires.len() - 1;
    ires[last] = b.cast(ires[last], Scalar::U32).unwrap();
    let pb = b.shuffle(ShuffleKind::Index, pos, Value::Int(0)).unwrap();
    ires.push(b.cast(pb, Scalar::U32).unwrap());
    for (k, r) in ires.iter().enumerate() {
        let base = b
            .binary(BinaryOp::Mul, total, Value::Int(k as i64))
            .unwrap();
        let at = b.binary(BinaryOp::Add, base, gid).unwrap();
        b.store(outi, at, *r).unwrap();
    }
    b.finish_kernel().unwrap()
}

/// Outputs of [`simd_ops`] per thread: (f32 outputs, u32 outputs).
pub const SIMD_OPS_OUTPUTS: (usize, usize) = (13, 13);

/// A cross-simdgroup sum through threadgroup memory: `out[group] = sum(x[group, :])`, and
/// `rev[gid] = x[group, gs - 1 - tid]` through a second threadgroup array.
pub fn tg_reduce() -> Kernel {
    let (mut b, x, out) = Builder::kernel_x_out("tg_reduce", Scalar::F32);
    let rev = b.tensor_param("rev", Scalar::F32, true);
    let partial = b
        .shared_array("partial", Scalar::F32, Value::Int(32))
        .unwrap();
    let stage = b
        .shared_array("stage", Scalar::F32, Value::Int(1024))
        .unwrap();
    let gid = b.builtin(Builtin::GlobalId);
    let tid = b.builtin(Builtin::ThreadId);
    let gs = b.builtin(Builtin::GroupSize);
    let group = b.builtin(Builtin::GroupIdX);
    let lane = b.builtin(Builtin::SimdLane);
    let sid = b.builtin(Builtin::SimdId);
    let nsg = b.builtin(Builtin::SimdGroups);
    let v = b.load(x, gid).unwrap();
    b.store(stage, tid, v).unwrap();
    let s = b.simd(SimdOp::Sum, v).unwrap();
    let lane0 = b.binary(BinaryOp::Eq, lane, Value::Int(0)).unwrap();
    b.begin_if(lane0).unwrap();
    b.store(partial, sid, s).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.barrier();
    let first_sg = b.binary(BinaryOp::Eq, sid, Value::Int(0)).unwrap();
    b.begin_if(first_sg).unwrap();
    let has = b.binary(BinaryOp::Lt, lane, nsg).unwrap();
    b.begin_if(has).unwrap();
    let p = b.load(partial, lane).unwrap();
    b.begin_else(&[p]).unwrap();
    let z = b.end_if(&[Value::Float(0.0)]).unwrap();
    let total = b.simd(SimdOp::Sum, z[0]).unwrap();
    let t0 = b.binary(BinaryOp::Eq, tid, Value::Int(0)).unwrap();
    b.begin_if(t0).unwrap();
    b.store(out, group, total).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    let last = b.binary(BinaryOp::Sub, gs, Value::Int(1)).unwrap();
    let mirror = b.binary(BinaryOp::Sub, last, tid).unwrap();
    let m = b.load(stage, mirror).unwrap();
    b.store(rev, gid, m).unwrap();
    b.finish_kernel().unwrap()
}

/// A threadgroup reduction the compiler lowers: `out[group] = max(x[group, :])`.
pub fn group_max() -> Kernel {
    let (mut b, x, out) = Builder::kernel_x_out("group_max", Scalar::F32);
    let gid = b.builtin(Builtin::GlobalId);
    let tid = b.builtin(Builtin::ThreadId);
    let group = b.builtin(Builtin::GroupIdX);
    let v = b.load(x, gid).unwrap();
    let m = b.group_reduce(ReduceOp::Max, v).unwrap();
    let t0 = b.binary(BinaryOp::Eq, tid, Value::Int(0)).unwrap();
    b.begin_if(t0).unwrap();
    b.store(out, group, m).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.finish_kernel().unwrap()
}

/// Loops: a strided per-thread sum with a runtime step and two carried values, a nested
/// i32 loop counting down through a negative start, and a loop whose carried value is
/// updated in an `if`.
pub fn loops() -> Kernel {
    let (mut b, x, out) = Builder::kernel_x_out("loops", Scalar::F32);
    let cnt = b.tensor_param("cnt", Scalar::I32, true);
    let n = b.scalar_param("n", Scalar::U32);
    let step = b.scalar_param("step", Scalar::U32);
    let gid = b.builtin(Builtin::GlobalId);
    let (i, c) = b
        .begin_for(
            gid,
            n,
            step,
            &[Value::Float(0.0), Value::Float(f64::NEG_INFINITY)],
        )
        .unwrap();
    let v = b.load(x, i).unwrap();
    let s = b.binary(BinaryOp::Add, c[0], v).unwrap();
    let m = b.binary(BinaryOp::Max, c[1], v).unwrap();
    let r = b.end_for(&[s, m]).unwrap();
    let both = b.binary(BinaryOp::Add, r[0], r[1]).unwrap();
    b.store(out, gid, both).unwrap();
    // for j in -3..(gid % 5) as i32 { for k in 0..2 { acc += j * (k + 1) } } with an if.
    let g5 = b.binary(BinaryOp::Rem, gid, Value::Int(5)).unwrap();
    let hi = b.cast(g5, Scalar::I32).unwrap();
    let lo = b.lit(Literal::I32(-3));
    let one = b.lit(Literal::I32(1));
    let zero = b.lit(Literal::I32(0));
    let (j, acc) = b.begin_for(lo, hi, one, &[zero]).unwrap();
    let zero_i = b.lit(Literal::I32(0));
    let two_i = b.lit(Literal::I32(2));
    let (k, acc2) = b.begin_for(zero_i, two_i, one, &[acc[0]]).unwrap();
    let k1 = b.binary(BinaryOp::Add, k, Value::Int(1)).unwrap();
    let jk = b.binary(BinaryOp::Mul, j, k1).unwrap();
    let neg = b.binary(BinaryOp::Lt, jk, Value::Int(0)).unwrap();
    b.begin_if(neg).unwrap();
    let a = b.binary(BinaryOp::Sub, acc2[0], jk).unwrap();
    b.begin_else(&[a]).unwrap();
    let a2 = b.binary(BinaryOp::Add, acc2[0], jk).unwrap();
    let a2 = b.binary(BinaryOp::Mul, a2, Value::Int(3)).unwrap();
    let y = b.end_if(&[a2]).unwrap();
    let inner = b.end_for(&[y[0]]).unwrap();
    let outer = b.end_for(&[inner[0]]).unwrap();
    b.store(cnt, gid, outer[0]).unwrap();
    b.finish_kernel().unwrap()
}

/// Scalar semantics: f16 / bf16 math, saturating casts, wrapping integer ops, shifts,
/// division, min / max with NaN, select. `outf[k * total + gid]`, `outi[k * total + gid]`.
pub fn scalar_math() -> Kernel {
    let mut b = Builder::kernel("scalar_math");
    let x = b.tensor_param("x", Scalar::F32, false);
    let h = b.tensor_param("h", Scalar::F16, false);
    let bf = b.tensor_param("bf", Scalar::BF16, false);
    let outf = b.tensor_param("outf", Scalar::F32, true);
    let outh = b.tensor_param("outh", Scalar::F16, true);
    let outb = b.tensor_param("outb", Scalar::BF16, true);
    let outi = b.tensor_param("outi", Scalar::I32, true);
    let gid = b.builtin(Builtin::GlobalId);
    let gs = b.builtin(Builtin::GroupSize);
    let ng = b.builtin(Builtin::NumGroupsX);
    let total = b.binary(BinaryOp::Mul, gs, ng).unwrap();
    let v = b.load(x, gid).unwrap();
    let hv = b.load(h, gid).unwrap();
    let bv = b.load(bf, gid).unwrap();
    let at = |b: &mut Builder, k: i64| {
        let base = b.binary(BinaryOp::Mul, total, Value::Int(k)).unwrap();
        b.binary(BinaryOp::Add, base, gid).unwrap()
    };
    // f32 results.
    let mut f = Vec::new();
    for op in [
        UnaryOp::Exp,
        UnaryOp::Tanh,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Abs,
        UnaryOp::Neg,
        UnaryOp::Sin,
    ] {
        f.push(b.unary(op, v).unwrap());
    }
    let av = b.unary(UnaryOp::Abs, v).unwrap();
    let av1 = b.binary(BinaryOp::Add, av, Value::Float(0.5)).unwrap();
    f.push(b.unary(UnaryOp::Sqrt, av1).unwrap());
    f.push(b.unary(UnaryOp::Log, av1).unwrap());
    f.push(b.unary(UnaryOp::Rsqrt, av1).unwrap());
    f.push(b.unary(UnaryOp::Recip, av1).unwrap());
    f.push(b.binary(BinaryOp::Pow, av1, Value::Float(1.5)).unwrap());
    f.push(b.binary(BinaryOp::Rem, v, Value::Float(0.75)).unwrap());
    f.push(b.fma(v, v, Value::Float(-1.0)).unwrap());
    let nan = b.lit(Literal::F32(f32::NAN));
    f.push(b.binary(BinaryOp::Max, nan, v).unwrap());
    f.push(b.binary(BinaryOp::Min, v, nan).unwrap());
    let hf = b.cast(hv, Scalar::F32).unwrap();
    let bff = b.cast(bv, Scalar::F32).unwrap();
    f.push(hf);
    f.push(bff);
    for (k, r) in f.iter().enumerate() {
        let i = at(&mut b, k as i64);
        b.store(outf, i, *r).unwrap();
    }
    // f16 and bf16 results: math in f32, rounded once.
    let hh = [
        b.binary(BinaryOp::Mul, hv, hv).unwrap(),
        b.binary(BinaryOp::Add, hv, Value::Float(0.0004)).unwrap(),
        b.unary(UnaryOp::Exp, hv).unwrap(),
        b.cast(v, Scalar::F16).unwrap(),
        b.cast(bv, Scalar::F16).unwrap(),
        b.fma(hv, hv, hv).unwrap(),
    ];
    for (k, r) in hh.iter().enumerate() {
        let i = at(&mut b, k as i64);
        b.store(outh, i, *r).unwrap();
    }
    let bb = [
        b.binary(BinaryOp::Div, bv, Value::Float(3.0)).unwrap(),
        b.binary(BinaryOp::Sub, bv, Value::Float(1.0)).unwrap(),
        b.cast(v, Scalar::BF16).unwrap(),
        b.cast(hv, Scalar::BF16).unwrap(),
        b.unary(UnaryOp::Tanh, bv).unwrap(),
    ];
    for (k, r) in bb.iter().enumerate() {
        let i = at(&mut b, k as i64);
        b.store(outb, i, *r).unwrap();
    }
    // Integers: saturating casts, wrapping arithmetic, shifts, division, 8-bit types.
    let big = b.binary(BinaryOp::Mul, v, Value::Float(1e9)).unwrap();
    let vi = b.cast(big, Scalar::I32).unwrap();
    let vu = b.cast(big, Scalar::U32).unwrap();
    let v8 = b.cast(big, Scalar::I8).unwrap();
    let vu8 = b.cast(big, Scalar::U8).unwrap();
    let nan_i = b.cast(nan, Scalar::I32).unwrap();
    let gi = b.cast(gid, Scalar::I32).unwrap();
    let gi7 = b.binary(BinaryOp::Sub, gi, Value::Int(7)).unwrap();
    let mut ints = vec![
        vi,
        b.cast(vu, Scalar::I32).unwrap(),
        b.cast(v8, Scalar::I32).unwrap(),
        b.cast(vu8, Scalar::I32).unwrap(),
        nan_i,
        b.binary(BinaryOp::Mul, vi, Value::Int(65_537)).unwrap(),
        b.binary(BinaryOp::Add, vi, Value::Int(i32::MAX as i64))
            .unwrap(),
        b.binary(BinaryOp::Shl, vi, gi7).unwrap(),
        b.binary(BinaryOp::Shr, vi, gi).unwrap(),
        vi, // replaced below by a division whose divisor is never zero
        b.binary(BinaryOp::Rem, vi, Value::Int(-1000)).unwrap(),
        b.unary(UnaryOp::Abs, gi7).unwrap(),
        b.unary(UnaryOp::Neg, vi).unwrap(),
        b.unary(UnaryOp::Not, vi).unwrap(),
        b.binary(BinaryOp::Max, vi, gi7).unwrap(),
        b.binary(BinaryOp::Xor, vi, gi).unwrap(),
    ];
    // Divide by gid - 7, with -1 where that is zero.
    let is_zero = b.binary(BinaryOp::Eq, gi7, Value::Int(0)).unwrap();
    let safe = b.select(is_zero, Value::Int(-1), gi7).unwrap();
    ints[9] = b.binary(BinaryOp::Div, vi, safe).unwrap();
    let u = b.cast(vi, Scalar::U32).unwrap();
    let us = b.binary(BinaryOp::Shr, u, gid).unwrap();
    ints.push(b.cast(us, Scalar::I32).unwrap());
    let ud = b.binary(BinaryOp::Div, u, Value::Int(7)).unwrap();
    ints.push(b.cast(ud, Scalar::I32).unwrap());
    let m8 = b.binary(BinaryOp::Mul, v8, v8).unwrap();
    ints.push(b.cast(m8, Scalar::I32).unwrap());
    let sh8 = b.cast(gid, Scalar::I8).unwrap();
    let s8 = b.binary(BinaryOp::Shr, v8, sh8).unwrap();
    ints.push(b.cast(s8, Scalar::I32).unwrap());
    let a8 = b.binary(BinaryOp::Add, vu8, vu8).unwrap();
    ints.push(b.cast(a8, Scalar::I32).unwrap());
    let isnan = b.unary(UnaryOp::IsNan, nan).unwrap();
    let sel = b.select(isnan, vi, gi).unwrap();
    ints.push(sel);
    let flag = b.cast(v, Scalar::Bool).unwrap();
    let nf = b.unary(UnaryOp::Not, flag).unwrap();
    ints.push(b.cast(nf, Scalar::I32).unwrap());
    for (k, r) in ints.iter().enumerate() {
        let i = at(&mut b, k as i64);
        b.store(outi, i, *r).unwrap();
    }
    b.finish_kernel().unwrap()
}

/// Outputs per thread of [`scalar_math`]: f32, f16, bf16, i32.
pub const SCALAR_MATH_OUTPUTS: [usize; 4] = [18, 6, 5, 23];

/// Atomics on device and threadgroup memory: a histogram (u32 add), an f32 sum, i32
/// max / min, u32 and / or, an exchange, and a threadgroup f32 sum.
pub fn atomics() -> Kernel {
    let mut b = Builder::kernel("atomics");
    let x = b.tensor_param("x", Scalar::F32, false);
    let hist = b.tensor_param("hist", Scalar::U32, true);
    let fsum = b.tensor_param("fsum", Scalar::F32, true);
    let ext = b.tensor_param("ext", Scalar::I32, true);
    let bits = b.tensor_param("bits", Scalar::U32, true);
    let tgsum = b.tensor_param("tgsum", Scalar::F32, true);
    let acc = b.shared_array("acc", Scalar::F32, Value::Int(1)).unwrap();
    let cnt = b.shared_array("cnt", Scalar::U32, Value::Int(1)).unwrap();
    let gid = b.builtin(Builtin::GlobalId);
    let tid = b.builtin(Builtin::ThreadId);
    let group = b.builtin(Builtin::GroupIdX);
    let v = b.load(x, gid).unwrap();
    let t0 = b.binary(BinaryOp::Eq, tid, Value::Int(0)).unwrap();
    b.begin_if(t0).unwrap();
    b.store(acc, Value::Int(0), Value::Float(0.0)).unwrap();
    b.store(cnt, Value::Int(0), Value::Int(0)).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.barrier();
    let bucket = b.binary(BinaryOp::Mul, v, Value::Float(4.0)).unwrap();
    let bucket = b.binary(BinaryOp::Add, bucket, Value::Float(8.0)).unwrap();
    let bucket = b.cast(bucket, Scalar::U32).unwrap();
    let bucket = b.binary(BinaryOp::Min, bucket, Value::Int(15)).unwrap();
    b.atomic(AtomicOp::Add, hist, bucket, Value::Int(1))
        .unwrap();
    let q = b.binary(BinaryOp::Mul, v, Value::Float(256.0)).unwrap();
    let q = b.unary(UnaryOp::Floor, q).unwrap();
    let q = b.binary(BinaryOp::Div, q, Value::Float(256.0)).unwrap();
    b.atomic(AtomicOp::Add, fsum, Value::Int(0), q).unwrap();
    let vi = b.binary(BinaryOp::Mul, v, Value::Float(1000.0)).unwrap();
    let vi = b.cast(vi, Scalar::I32).unwrap();
    b.atomic(AtomicOp::Max, ext, Value::Int(0), vi).unwrap();
    b.atomic(AtomicOp::Min, ext, Value::Int(1), vi).unwrap();
    let bit = b.binary(BinaryOp::Rem, gid, Value::Int(32)).unwrap();
    let mask = b.binary(BinaryOp::Shl, Value::Int(1), bit).unwrap();
    b.atomic(AtomicOp::Or, bits, Value::Int(0), mask).unwrap();
    let notmask = b.unary(UnaryOp::Not, mask).unwrap();
    b.atomic(AtomicOp::And, bits, Value::Int(1), notmask)
        .unwrap();
    b.atomic(AtomicOp::Add, acc, Value::Int(0), q).unwrap();
    b.atomic(AtomicOp::Add, cnt, Value::Int(0), Value::Int(1))
        .unwrap();
    b.barrier();
    b.begin_if(t0).unwrap();
    let s = b.load(acc, Value::Int(0)).unwrap();
    let c = b.load(cnt, Value::Int(0)).unwrap();
    let cf = b.cast(c, Scalar::F32).unwrap();
    let s = b.binary(BinaryOp::Add, s, cf).unwrap();
    let old = b.atomic(AtomicOp::Exchange, tgsum, group, s).unwrap();
    let g2 = b.binary(BinaryOp::Add, group, Value::Int(100)).unwrap();
    b.store(tgsum, g2, old).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.finish_kernel().unwrap()
}

fn push(k: &mut Kernel, op: Op, ty: Option<Type>) -> ValueId {
    let r = ty.map(|t| k.body.new_value(t));
    k.body.block.insts.push(Inst {
        op,
        results: r.into_iter().collect(),
        loc: None,
    });
    r.unwrap_or(ValueId(u32::MAX))
}

/// Vector loads and stores as the vectorize pass emits them: for each `width`-element
/// chunk, `out = x * 2 + 1` (math in f32), staged through threadgroup memory with a vector
/// store and load, plus the lanes reversed into `rev` with `Extract` / `Pack`.
pub fn vector_io(elem: Scalar, width: u8) -> Kernel {
    let mut b = Builder::kernel("vector_io");
    b.generic("T", elem);
    b.tensor_param("x", elem, false);
    b.tensor_param("out", elem, true);
    b.tensor_param("rev", elem, true);
    b.shared_array("stage", elem, Value::Int(256 * width as i64))
        .unwrap();
    let tid = b.builtin(Builtin::ThreadId);
    let gid = b.builtin(Builtin::GlobalId);
    let base = b
        .binary(BinaryOp::Mul, gid, Value::Int(width as i64))
        .unwrap();
    let tbase = b
        .binary(BinaryOp::Mul, tid, Value::Int(width as i64))
        .unwrap();
    let mut k = b.finish_kernel().unwrap();
    let (Value::Id(base), Value::Id(tbase)) = (base, tbase) else {
        panic!("indices are values")
    };
    let vt = Type::Vector(elem, width);
    let st = Type::Scalar(elem);
    let f = Type::Scalar(Scalar::F32);
    let v = push(
        &mut k,
        Op::VecLoad {
            mem: MemRef::Param(0),
            index: base,
            width,
        },
        Some(vt),
    );
    let two = push(&mut k, Op::Const(Literal::F32(2.0)), Some(f));
    let one = push(&mut k, Op::Const(Literal::F32(1.0)), Some(f));
    let mut lanes = Vec::new();
    let mut raw = Vec::new();
    for l in 0..width {
        let e = push(&mut k, Op::Extract(v, l), Some(st));
        raw.push(e);
        let ef = push(&mut k, Op::Cast(e, Scalar::F32), Some(f));
        let y = push(&mut k, Op::Fma(ef, two, one), Some(f));
        lanes.push(push(&mut k, Op::Cast(y, elem), Some(st)));
    }
    let packed = push(&mut k, Op::Pack(lanes), Some(vt));
    push(
        &mut k,
        Op::VecStore {
            mem: MemRef::Shared(0),
            index: tbase,
            value: packed,
        },
        None,
    );
    push(&mut k, Op::Barrier, None);
    let back = push(
        &mut k,
        Op::VecLoad {
            mem: MemRef::Shared(0),
            index: tbase,
            width,
        },
        Some(vt),
    );
    push(
        &mut k,
        Op::VecStore {
            mem: MemRef::Param(1),
            index: base,
            value: back,
        },
        None,
    );
    raw.reverse();
    let reversed = push(&mut k, Op::Pack(raw), Some(vt));
    push(
        &mut k,
        Op::VecStore {
            mem: MemRef::Param(2),
            index: base,
            value: reversed,
        },
        None,
    );
    k
}

/// `out[gid] = x[gid]` inside `if (gid < n)`, with a barrier inside the `if`: divergent
/// whenever `n` splits a threadgroup.
pub fn barrier_in_if() -> Kernel {
    let (mut b, x, out) = Builder::kernel_x_out("barrier_in_if", Scalar::F32);
    let n = b.scalar_param("n", Scalar::U32);
    let gid = b.builtin(Builtin::GlobalId);
    let inside = b.binary(BinaryOp::Lt, gid, n).unwrap();
    b.begin_if(inside).unwrap();
    let v = b.load(x, gid).unwrap();
    b.barrier();
    b.store(out, gid, v).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.finish_kernel().unwrap()
}

/// A `simd_sum` inside `if (lane < n)`: divergent whenever `n < 32`.
pub fn simd_in_if() -> Kernel {
    let (mut b, x, out) = Builder::kernel_x_out("simd_in_if", Scalar::F32);
    let n = b.scalar_param("n", Scalar::U32);
    let gid = b.builtin(Builtin::GlobalId);
    let lane = b.builtin(Builtin::SimdLane);
    let inside = b.binary(BinaryOp::Lt, lane, n).unwrap();
    let v = b.load(x, gid).unwrap();
    b.begin_if(inside).unwrap();
    let s = b.simd(SimdOp::Sum, v).unwrap();
    b.begin_else(&[s]).unwrap();
    let r = b.end_if(&[Value::Float(0.0)]).unwrap();
    b.store(out, gid, r[0]).unwrap();
    b.finish_kernel().unwrap()
}

/// `out[gid] = x[gid + off]`: out of bounds when `off` is too large.
pub fn offset_copy() -> Kernel {
    let (mut b, x, out) = Builder::kernel_x_out("offset_copy", Scalar::F32);
    let off = b.scalar_param("off", Scalar::U32);
    let gid = b.builtin(Builtin::GlobalId);
    let i = b.binary(BinaryOp::Add, gid, off).unwrap();
    let v = b.load(x, i).unwrap();
    b.store(out, gid, v).unwrap();
    b.finish_kernel().unwrap()
}

/// A loop whose step comes from a runtime scalar: `out[gid] = number of iterations`.
pub fn runtime_step() -> Kernel {
    let mut b = Builder::kernel("runtime_step");
    let out = b.tensor_param("out", Scalar::U32, true);
    let step = b.scalar_param("step", Scalar::U32);
    let gid = b.builtin(Builtin::GlobalId);
    let (_, c) = b
        .begin_for(Value::Int(0), Value::Int(100), step, &[Value::Int(0)])
        .unwrap();
    let c1 = b.binary(BinaryOp::Add, c[0], Value::Int(1)).unwrap();
    let r = b.end_for(&[c1]).unwrap();
    b.store(out, gid, r[0]).unwrap();
    b.finish_kernel().unwrap()
}

/// Even simdgroups pass their values round through threadgroup memory behind a simdgroup
/// barrier (`out[gid] = x[gid − lane + (lane + 1) % 32]`); odd ones copy `x` and never
/// reach the barrier, which only a simdgroup-scope barrier allows.
pub fn simd_rotate() -> Kernel {
    let (mut b, x, out) = Builder::kernel_x_out("simd_rotate", Scalar::F32);
    let stage = b
        .shared_array("stage", Scalar::F32, Value::Int(1024))
        .unwrap();
    let gid = b.builtin(Builtin::GlobalId);
    let tid = b.builtin(Builtin::ThreadId);
    let lane = b.builtin(Builtin::SimdLane);
    let sid = b.builtin(Builtin::SimdId);
    let v = b.load(x, gid).unwrap();
    let parity = b.binary(BinaryOp::Rem, sid, Value::Int(2)).unwrap();
    let even = b.binary(BinaryOp::Eq, parity, Value::Int(0)).unwrap();
    b.begin_if(even).unwrap();
    b.store(stage, tid, v).unwrap();
    b.simd_barrier();
    let base = b.binary(BinaryOp::Sub, tid, lane).unwrap();
    let next = b.binary(BinaryOp::Add, lane, Value::Int(1)).unwrap();
    let wrapped = b.binary(BinaryOp::Rem, next, Value::Int(32)).unwrap();
    let at = b.binary(BinaryOp::Add, base, wrapped).unwrap();
    let r = b.load(stage, at).unwrap();
    b.begin_else(&[r]).unwrap();
    let got = b.end_if(&[v]).unwrap();
    b.store(out, gid, got[0]).unwrap();
    b.finish_kernel().unwrap()
}
