//! The interpreter stays fast enough for a whole check suite: a 1024-thread group
//! running a 4096-iteration loop of ~30 ops finishes well under a second.

use std::time::Instant;
use tessera_ir::{BinaryOp, Builder, Builtin, Scalar, UnaryOp, Value};
use tessera_runtime::{Context, DType};

mod common;
use common::run_x_out;

#[test]
fn a_long_loop_in_a_full_group_is_fast() {
    let (mut b, x, out) = Builder::kernel_x_out("long_loop", Scalar::F32);
    let t = b.builtin(Builtin::ThreadId);
    let (i, c) = b
        .begin_for(
            Value::Int(0),
            Value::Int(4096),
            Value::Int(1),
            &[Value::Float(0.0), Value::Float(1.0)],
        )
        .unwrap();
    let mut acc = c[0];
    let mut p = c[1];
    // ~30 ops: index math, a load, float arithmetic, a select.
    let m = b.binary(BinaryOp::And, i, Value::Int(1023)).unwrap();
    let idx = b.binary(BinaryOp::Xor, m, t).unwrap();
    let idx = b.binary(BinaryOp::And, idx, Value::Int(1023)).unwrap();
    let v = b.load(x, idx).unwrap();
    for _ in 0..6 {
        let a = b.binary(BinaryOp::Mul, v, p).unwrap();
        acc = b.binary(BinaryOp::Add, acc, a).unwrap();
        p = b.binary(BinaryOp::Mul, p, Value::Float(0.999)).unwrap();
        let q = b.unary(UnaryOp::Abs, acc).unwrap();
        let big = b.binary(BinaryOp::Gt, q, Value::Float(1e6)).unwrap();
        acc = b.select(big, Value::Float(0.0), acc).unwrap();
    }
    let r = b.end_for(&[acc, p]).unwrap();
    b.store(out, t, r[0]).unwrap();
    let k = b.finish_kernel().unwrap();
    assert!(k.body.block.count() > 30);

    let ctx = Context::cpu();
    let xs: Vec<f32> = (0..1024).map(|i| (i as f32).sin()).collect();
    let xt = ctx.tensor(&xs, &[1024]).unwrap();
    let o = ctx.full_nan(DType::F32, &[1024]).unwrap();
    let start = Instant::now();
    run_x_out(&ctx, &k, &xt, &o, 1024).unwrap();
    let took = start.elapsed();
    eprintln!(
        "1024 threads x 4096 iterations x {} ops: {took:?}",
        k.body.block.count()
    );
    assert!(o.to_vec::<f32>().unwrap().iter().all(|v| v.is_finite()));
    assert!(took.as_secs_f64() < 3.0, "took {took:?}");
}
