//! Vector loads and stores, extract and pack (the vectorize pass's ops), built by editing
//! IR directly; a misaligned vector index is an error.

use tessera_ir::{BinaryOp, Builder, Builtin, Inst, Kernel, MemRef, Op, Scalar, Type, Value};
use tessera_runtime::{Context, DType, RuntimeError, Violation};

mod common;
use common::run_x_out;

/// out[4t..4t+4] = reverse(x[4t+off..4t+off+4]) * 2 through a shared array and a vector.
fn kernel(offset: u32) -> Kernel {
    let (mut b, _x, _out) = Builder::kernel_x_out("vec4", Scalar::F32);
    let _tg = b.shared_array("tg", Scalar::F32, Value::Int(256)).unwrap();
    let t = b.builtin(Builtin::ThreadId);
    let base = b.binary(BinaryOp::Mul, t, Value::Int(4)).unwrap();
    let idx = b
        .binary(BinaryOp::Add, base, Value::Int(offset as i64))
        .unwrap();
    let mut k = b.finish_kernel().unwrap();
    let (Value::Id(base), Value::Id(idx)) = (base, idx) else {
        panic!("expected values")
    };
    let body = &mut k.body;
    let v4 = body.new_value(Type::Vector(Scalar::F32, 4));
    let lanes: Vec<_> = (0..4)
        .map(|_| body.new_value(Type::Scalar(Scalar::F32)))
        .collect();
    let two = body.new_value(Type::Scalar(Scalar::F32));
    let doubled: Vec<_> = (0..4)
        .map(|_| body.new_value(Type::Scalar(Scalar::F32)))
        .collect();
    let packed = body.new_value(Type::Vector(Scalar::F32, 4));
    let back = body.new_value(Type::Vector(Scalar::F32, 4));
    let inst = |op: Op, results: Vec<tessera_ir::ValueId>| Inst {
        op,
        results,
        loc: None,
    };
    let insts = &mut body.block.insts;
    insts.push(inst(
        Op::VecLoad {
            mem: MemRef::Param(0),
            index: idx,
            width: 4,
        },
        vec![v4],
    ));
    for (i, &l) in lanes.iter().enumerate() {
        insts.push(inst(Op::Extract(v4, 3 - i as u8), vec![l]));
    }
    insts.push(inst(Op::Const(tessera_ir::Literal::F32(2.0)), vec![two]));
    for (&l, &d) in lanes.iter().zip(&doubled) {
        insts.push(inst(Op::Binary(BinaryOp::Mul, l, two), vec![d]));
    }
    insts.push(inst(Op::Pack(doubled.clone()), vec![packed]));
    insts.push(inst(
        Op::VecStore {
            mem: MemRef::Shared(0),
            index: base,
            value: packed,
        },
        vec![],
    ));
    insts.push(inst(
        Op::VecLoad {
            mem: MemRef::Shared(0),
            index: base,
            width: 4,
        },
        vec![back],
    ));
    insts.push(inst(
        Op::VecStore {
            mem: MemRef::Param(1),
            index: base,
            value: back,
        },
        vec![],
    ));
    k
}

#[test]
fn vector_ops_round_trip_through_shared_memory() {
    let ctx = Context::cpu();
    let xs: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let x = ctx.tensor(&xs, &[256]).unwrap();
    let out = ctx.full_nan(DType::F32, &[256]).unwrap();
    run_x_out(&ctx, &kernel(0), &x, &out, 64).unwrap();
    let want: Vec<f32> = (0..256).map(|i| xs[i / 4 * 4 + 3 - i % 4] * 2.0).collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);
}

#[test]
fn misaligned_vector_index_is_an_error() {
    let ctx = Context::cpu();
    let x = ctx.zeros(DType::F32, &[260]).unwrap();
    let out = ctx.zeros(DType::F32, &[256]).unwrap();
    let r = run_x_out(&ctx, &kernel(2), &x, &out, 64);
    match r {
        Err(RuntimeError::Sanitizer(e)) => {
            assert!(e.op.starts_with("vload x["), "{}", e.op);
            assert_eq!(e.thread, 0);
            assert_eq!(
                e.violation,
                Violation::Misaligned {
                    memory: "x".into(),
                    index: 2,
                    width: 4
                }
            );
        }
        other => panic!("expected a misaligned access, got {other:?}"),
    }
}
