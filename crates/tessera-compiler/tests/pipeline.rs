//! The whole pass pipeline on seed-like kernels: what the backends receive.

use std::sync::Arc;
use tessera_compiler::{optimize, optimize_with, PassOptions, Target};
use tessera_ir::{
    verify_kernel, BinaryOp, Builder, Builtin, Function, Kernel, Literal, Op, ReduceOp, Scalar,
    UnaryOp, Value,
};

/// An RMSNorm row kernel in the style of the reference: each thread owns four
/// consecutive elements of a row of `n`, clamps its base for out-of-range threads,
/// reduces the sum of squares over the threadgroup and scales under `if in_bounds`.
fn rms_norm(t: Scalar, n: u32) -> Kernel {
    let mut b = Builder::kernel("rms_norm");
    b.generic("T", t);
    let x = b.tensor_param("x", t, false);
    let w = b.tensor_param("w", t, false);
    let out = b.tensor_param("out", t, true);
    let eps_buf = b.tensor_param("eps_buf", Scalar::F32, false);
    let n = b.constexpr("n", Literal::U32(n));
    let row = b.builtin(Builtin::GroupIdX);
    let rs = b.binary(BinaryOp::Mul, row, n).unwrap();
    let tid = b.builtin(Builtin::ThreadId);
    let col = b.binary(BinaryOp::Mul, tid, Value::Int(4)).unwrap();
    let last = b.binary(BinaryOp::Add, col, Value::Int(3)).unwrap();
    let in_bounds = b.binary(BinaryOp::Lt, last, n).unwrap();
    let safe_col = b.select(in_bounds, col, Value::Int(0)).unwrap();
    let safe_base = b.binary(BinaryOp::Add, rs, safe_col).unwrap();
    let base = b.binary(BinaryOp::Add, rs, col).unwrap();
    let mut xs = Vec::new();
    for k in 0..4 {
        let i = b.binary(BinaryOp::Add, safe_base, Value::Int(k)).unwrap();
        let v = b.load(x, i).unwrap();
        xs.push(b.cast(v, Scalar::F32).unwrap());
    }
    let mut ssq = Value::Float(0.0);
    for &v in &xs {
        let sq = b.binary(BinaryOp::Mul, v, v).unwrap();
        ssq = b.binary(BinaryOp::Add, ssq, sq).unwrap();
    }
    let partial = b.select(in_bounds, ssq, Value::Float(0.0)).unwrap();
    let total = b.group_reduce(ReduceOp::Sum, partial).unwrap();
    let eps = b.load(eps_buf, Value::Int(0)).unwrap();
    let nf = b.cast(n, Scalar::F32).unwrap();
    let mean = b.binary(BinaryOp::Div, total, nf).unwrap();
    let arg = b.binary(BinaryOp::Add, mean, eps).unwrap();
    let rms = b.unary(UnaryOp::Rsqrt, arg).unwrap();
    b.begin_if(in_bounds).unwrap();
    for (k, &xv) in xs.iter().enumerate() {
        let wi = b.binary(BinaryOp::Add, col, Value::Int(k as i64)).unwrap();
        let wv = b.load(w, wi).unwrap();
        let wf = b.cast(wv, Scalar::F32).unwrap();
        let y = b.binary(BinaryOp::Mul, xv, rms).unwrap();
        let y = b.binary(BinaryOp::Mul, y, wf).unwrap();
        let yt = b.cast(y, t).unwrap();
        let oi = b.binary(BinaryOp::Add, base, Value::Int(k as i64)).unwrap();
        b.store(out, oi, yt).unwrap();
    }
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.finish_kernel().unwrap()
}

#[test]
fn rms_norm_f32_gets_16_byte_loads_and_stores_and_no_group_reduce() {
    let k = optimize(rms_norm(Scalar::F32, 4096), Target::Cuda).unwrap();
    verify_kernel(&k).unwrap();
    let text = k.to_string();
    assert!(text.contains(": f32x4 = vload4 x["), "{text}");
    assert!(text.contains(": f32x4 = vload4 w["), "{text}");
    assert!(text.contains("vstore out["), "{text}");
    assert!(!text.contains("group_sum"), "{text}");
    assert!(text.contains("simd_sum"), "{text}");
    assert!(text.contains("barrier"), "{text}");
    // Only the eps load and the scratch load stay scalar.
    assert_eq!(text.matches("= load ").count(), 2, "{text}");
}

#[test]
fn rms_norm_f16_gets_8_byte_accesses() {
    let k = optimize(rms_norm(Scalar::F16, 1024), Target::Metal).unwrap();
    let text = k.to_string();
    assert!(text.contains(": f16x4 = vload4 x["), "{text}");
    assert!(text.contains(": f16x4 = vload4 w["), "{text}");
    assert!(text.contains("vstore out["), "{text}");
}

/// A DSL function with a small stack array and a constant loop, called from a kernel.
fn dot4() -> Arc<Function> {
    let mut f = Builder::function("dot4");
    let a = f.func_arg(Scalar::F32);
    let tmp = f.local_array("tmp", Scalar::F32, Value::Int(4)).unwrap();
    let (i, _) = f
        .begin_for(Value::Int(0), Value::Int(4), Value::Int(1), &[])
        .unwrap();
    let fi = f.cast(i, Scalar::F32).unwrap();
    let v = f.binary(BinaryOp::Mul, a, fi).unwrap();
    f.store(tmp, i, v).unwrap();
    f.end_for(&[]).unwrap();
    let (i, c) = f
        .begin_for(
            Value::Int(0),
            Value::Int(4),
            Value::Int(1),
            &[Value::Float(0.0)],
        )
        .unwrap();
    let t = f.load(tmp, i).unwrap();
    let s = f.binary(BinaryOp::Add, c[0], t).unwrap();
    let r = f.end_for(&[s]).unwrap();
    Arc::new(f.finish_function(&[r[0]], &[Scalar::F32]).unwrap())
}

#[test]
fn calls_loops_and_stack_arrays_become_straight_line_registers() {
    let (mut b, x, out) = Builder::kernel_x_out("uses_dot4", Scalar::F32);
    let tid = b.builtin(Builtin::GlobalId);
    let v = b.load(x, tid).unwrap();
    let r = b.call(dot4(), &[v.into()]).unwrap();
    b.store(out, tid, r[0]).unwrap();
    let k = optimize(b.finish_kernel().unwrap(), Target::Cpu).unwrap();
    verify_kernel(&k).unwrap();
    assert!(k.body.locals.is_empty(), "{k}");
    assert!(
        !k.body
            .block
            .any(&mut |op| matches!(op, Op::For { .. } | Op::Call { .. } | Op::Load { .. } if !matches!(op, Op::Load { mem: tessera_ir::MemRef::Param(_), .. }))),
        "{k}"
    );
}

#[test]
fn passes_can_be_switched_off() {
    let k = optimize_with(rms_norm(Scalar::F32, 4096), &PassOptions::none()).unwrap();
    let text = k.to_string();
    assert!(!text.contains("vload"), "{text}");
    assert!(!text.contains("group_sum"), "{text}");
    let opts = PassOptions {
        lower_group_reduce: false,
        ..PassOptions::none()
    };
    let k = optimize_with(rms_norm(Scalar::F32, 4096), &opts).unwrap();
    assert!(k.to_string().contains("group_sum"));
}

#[test]
fn invalid_input_ir_is_reported_before_any_pass() {
    let mut k = rms_norm(Scalar::F32, 4096);
    k.body.block.yields.push(tessera_ir::ValueId(999_999));
    let e = optimize(k, Target::Cpu).unwrap_err().to_string();
    assert!(e.contains("rms_norm"), "{e}");
}

#[test]
fn a_barrier_guarded_by_a_group_reduction_survives_lowering() {
    let (mut b, x, out) = Builder::kernel_x_out("guarded", Scalar::F32);
    let tid = b.builtin(Builtin::ThreadId);
    let v = b.load(x, tid).unwrap();
    let m = b.group_reduce(ReduceOp::Max, v).unwrap();
    let c = b.binary(BinaryOp::Gt, m, Value::Float(0.0)).unwrap();
    b.begin_if(c).unwrap();
    b.barrier();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.store(out, tid, m).unwrap();
    let k = optimize_with(
        b.finish_kernel().unwrap(),
        &PassOptions {
            verify_each: true,
            ..PassOptions::default()
        },
    )
    .unwrap();
    assert!(!k.to_string().contains("group_max"), "{k}");
}
