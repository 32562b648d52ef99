//! The CPU backend's sanitizer: undefined behaviour comes back as an error naming the
//! kernel, the op, the index, the threadgroup and the thread — never a panic or a hang.

use tessera_ir::{BinaryOp, Builder, Builtin, Kernel, Scalar, SimdOp, Value};
use tessera_runtime::{Context, DType, RuntimeError, SanitizerError, Violation};

fn sanitizer_error(r: Result<(), RuntimeError>) -> SanitizerError {
    match r {
        Err(RuntimeError::Sanitizer(e)) => *e,
        other => panic!("expected a sanitizer error, got {other:?}"),
    }
}

fn run(
    ctx: &Context,
    k: &Kernel,
    out: &tessera_runtime::Tensor,
    group: u32,
) -> Result<(), RuntimeError> {
    ctx.launch_ir(k)
        .no_optimize()
        .arg("out", out)
        .grid([2, 1, 1])
        .group_size(group)
        .run()
}

#[test]
fn out_of_bounds_store_names_kernel_op_index_and_thread() {
    let mut b = Builder::kernel("oob_store");
    let out = b.tensor_param("out", Scalar::F32, true);
    let t = b.builtin(Builtin::ThreadId);
    let i = b.binary(BinaryOp::Add, t, Value::Int(1)).unwrap();
    b.set_loc(12, 9);
    b.store(out, i, Value::Float(1.0)).unwrap();
    let k = b.finish_kernel().unwrap();
    let ctx = Context::cpu();
    let o = ctx.zeros(DType::F32, &[64]).unwrap();
    let e = sanitizer_error(run(&ctx, &k, &o, 64));
    assert_eq!(e.kernel, "oob_store");
    assert!(e.op.starts_with("store out["), "{}", e.op);
    assert_eq!(e.loc.map(|l| l.line), Some(12));
    assert_eq!(e.group, [0, 0, 0]);
    assert_eq!(e.thread, 63);
    assert_eq!(
        e.violation,
        Violation::OutOfBounds {
            memory: "out".into(),
            index: 64,
            len: 64
        }
    );
    let msg = e.to_string();
    assert!(
        msg.contains("oob_store") && msg.contains("index 64") && msg.contains("12:9"),
        "{msg}"
    );
}

#[test]
fn divergent_barrier_is_reported() {
    let mut b = Builder::kernel("div_barrier");
    let out = b.tensor_param("out", Scalar::F32, true);
    let t = b.builtin(Builtin::ThreadId);
    let c = b.binary(BinaryOp::Lt, t, Value::Int(16)).unwrap();
    b.begin_if(c).unwrap();
    b.barrier();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.store(out, t, Value::Float(0.0)).unwrap();
    let k = b.finish_kernel().unwrap();
    let ctx = Context::cpu();
    let o = ctx.zeros(DType::F32, &[64]).unwrap();
    let e = sanitizer_error(run(&ctx, &k, &o, 64));
    assert_eq!(e.kernel, "div_barrier");
    assert_eq!(e.op, "barrier");
    assert_eq!(e.thread, 16);
    assert_eq!(
        e.violation,
        Violation::DivergentBarrier {
            active: 16,
            group_size: 64
        }
    );
}

#[test]
fn divergent_simd_sum_is_reported() {
    let mut b = Builder::kernel("div_simd");
    let out = b.tensor_param("out", Scalar::F32, true);
    let t = b.builtin(Builtin::ThreadId);
    let c = b.binary(BinaryOp::Lt, t, Value::Int(16)).unwrap();
    b.begin_if(c).unwrap();
    let one = b.cast(t, Scalar::F32).unwrap();
    let s = b.simd(SimdOp::Sum, one).unwrap();
    b.store(out, t, s).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    let k = b.finish_kernel().unwrap();
    let ctx = Context::cpu();
    let o = ctx.zeros(DType::F32, &[64]).unwrap();
    let e = sanitizer_error(run(&ctx, &k, &o, 64));
    assert!(e.op.starts_with("simd_sum"), "{}", e.op);
    assert_eq!(e.thread, 16);
    assert_eq!(
        e.violation,
        Violation::DivergentSimd {
            simdgroup: 0,
            active: 16
        }
    );
}

/// Threads 0..32 fill `tg`; every thread then reads `tg[thread_id]`.
fn uninit_kernel(discard_with_select: bool) -> Kernel {
    let mut b = Builder::kernel("uninit_tg");
    let out = b.tensor_param("out", Scalar::F32, true);
    let tg = b.shared_array("tg", Scalar::F32, Value::Int(64)).unwrap();
    let t = b.builtin(Builtin::ThreadId);
    let c = b.binary(BinaryOp::Lt, t, Value::Int(32)).unwrap();
    b.begin_if(c).unwrap();
    let f = b.cast(t, Scalar::F32).unwrap();
    b.store(tg, t, f).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.barrier();
    b.set_loc(30, 5);
    let v = b.load(tg, t).unwrap();
    // Arithmetic and collectives carry the poison along.
    let w = b.binary(BinaryOp::Mul, v, Value::Float(2.0)).unwrap();
    let w = if discard_with_select {
        b.select(c, w, Value::Float(0.0)).unwrap()
    } else {
        w
    };
    b.set_loc(31, 5);
    b.store(out, t, w).unwrap();
    b.finish_kernel().unwrap()
}

#[test]
fn uninitialised_threadgroup_read_reaching_a_store_is_reported() {
    let ctx = Context::cpu();
    let o = ctx.zeros(DType::F32, &[64]).unwrap();
    let e = sanitizer_error(run(&ctx, &uninit_kernel(false), &o, 64));
    assert_eq!(e.kernel, "uninit_tg");
    assert!(e.op.starts_with("store out["), "{}", e.op);
    assert_eq!(e.thread, 32);
    match &e.violation {
        Violation::Uninitialized {
            origin,
            memory,
            index,
            sink,
        } => {
            assert_eq!(memory, "tg");
            assert_eq!(*index, 32);
            assert!(
                origin.contains("load shared tg[") && origin.contains("30:5"),
                "{origin}"
            );
            assert!(sink.contains("out"), "{sink}");
        }
        v => panic!("wrong violation {v:?}"),
    }
}

#[test]
fn poison_discarded_by_select_is_fine() {
    let ctx = Context::cpu();
    let o = ctx.full_nan(DType::F32, &[64]).unwrap();
    ctx.launch_ir(&uninit_kernel(true))
        .no_optimize()
        .arg("out", &o)
        .grid([1, 1, 1])
        .group_size(64)
        .run()
        .unwrap();
    let got = o.to_vec::<f32>().unwrap();
    let want: Vec<f32> = (0..64)
        .map(|t| if t < 32 { 2.0 * t as f32 } else { 0.0 })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn poisoned_branch_condition_is_reported() {
    let mut b = Builder::kernel("poison_branch");
    let out = b.tensor_param("out", Scalar::F32, true);
    let loc = b
        .local_array("scratch", Scalar::U32, Value::Int(4))
        .unwrap();
    let t = b.builtin(Builtin::ThreadId);
    let v = b.load(loc, Value::Int(2)).unwrap();
    let c = b.binary(BinaryOp::Gt, v, Value::Int(0)).unwrap();
    b.begin_if(c).unwrap();
    b.store(out, t, Value::Float(1.0)).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    let k = b.finish_kernel().unwrap();
    let ctx = Context::cpu();
    let o = ctx.zeros(DType::F32, &[32]).unwrap();
    let e = sanitizer_error(run(&ctx, &k, &o, 32));
    assert!(e.op.starts_with("if"), "{}", e.op);
    assert!(
        matches!(&e.violation, Violation::Uninitialized { memory, index: 2, sink, .. }
            if memory == "scratch" && sink.contains("branch")),
        "{:?}",
        e.violation
    );
}

#[test]
fn zero_runtime_loop_step_is_an_error_not_a_hang() {
    let mut b = Builder::kernel("zero_step");
    let out = b.tensor_param("out", Scalar::F32, true);
    let step = b.scalar_param("step", Scalar::U32);
    let t = b.builtin(Builtin::ThreadId);
    let (_i, c) = b
        .begin_for(Value::Int(0), Value::Int(10), step, &[Value::Float(0.0)])
        .unwrap();
    let acc = b.binary(BinaryOp::Add, c[0], Value::Float(1.0)).unwrap();
    let r = b.end_for(&[acc]).unwrap();
    b.store(out, t, r[0]).unwrap();
    let k = b.finish_kernel().unwrap();
    let ctx = Context::cpu();
    let o = ctx.zeros(DType::F32, &[32]).unwrap();
    let r = ctx
        .launch_ir(&k)
        .no_optimize()
        .arg("out", &o)
        .scalar("step", 0u32)
        .grid([1, 1, 1])
        .group_size(32)
        .run();
    let e = sanitizer_error(r);
    assert!(e.op.starts_with("for"), "{}", e.op);
    assert_eq!(e.violation, Violation::NonPositiveStep { step: 0 });
}

#[test]
fn overflowing_induction_variable_is_an_error_not_a_hang() {
    let mut b = Builder::kernel("overflow");
    let out = b.tensor_param("out", Scalar::U32, true);
    let end = b.scalar_param("end", Scalar::U32);
    let t = b.builtin(Builtin::ThreadId);
    let (i, c) = b
        .begin_for(
            Value::Int(0xFFFF_FFF0),
            end,
            Value::Int(4),
            &[Value::Int(0)],
        )
        .unwrap();
    let _ = i;
    let acc = b.binary(BinaryOp::Add, c[0], Value::Int(1)).unwrap();
    let r = b.end_for(&[acc]).unwrap();
    b.store(out, t, r[0]).unwrap();
    let k = b.finish_kernel().unwrap();
    let ctx = Context::cpu();
    let o = ctx.zeros(DType::U32, &[32]).unwrap();
    let r = ctx
        .launch_ir(&k)
        .no_optimize()
        .arg("out", &o)
        .scalar("end", u32::MAX)
        .grid([1, 1, 1])
        .group_size(32)
        .run();
    assert!(matches!(
        sanitizer_error(r).violation,
        Violation::RunawayLoop { .. }
    ));
}

#[test]
fn integer_division_by_zero_is_an_error() {
    let mut b = Builder::kernel("div0");
    let out = b.tensor_param("out", Scalar::U32, true);
    let t = b.builtin(Builtin::ThreadId);
    let m = b.binary(BinaryOp::Rem, t, Value::Int(8)).unwrap();
    let q = b.binary(BinaryOp::Div, Value::Int(100), m).unwrap();
    b.store(out, t, q).unwrap();
    let k = b.finish_kernel().unwrap();
    let ctx = Context::cpu();
    let o = ctx.zeros(DType::U32, &[32]).unwrap();
    let e = sanitizer_error(run(&ctx, &k, &o, 32));
    assert_eq!(e.violation, Violation::DivisionByZero);
    assert_eq!(e.thread, 0);
}

#[test]
fn out_of_bounds_shared_and_stack_accesses_are_reported() {
    for shared in [true, false] {
        let mut b = Builder::kernel("oob_arrays");
        let out = b.tensor_param("out", Scalar::F32, true);
        let arr = if shared {
            b.shared_array("tg", Scalar::F32, Value::Int(16)).unwrap()
        } else {
            b.local_array("st", Scalar::F32, Value::Int(16)).unwrap()
        };
        let t = b.builtin(Builtin::ThreadId);
        b.store(arr, t, Value::Float(1.0)).unwrap();
        let v = b.load(arr, t).unwrap();
        b.store(out, t, v).unwrap();
        let k = b.finish_kernel().unwrap();
        let ctx = Context::cpu();
        let o = ctx.zeros(DType::F32, &[32]).unwrap();
        let e = sanitizer_error(run(&ctx, &k, &o, 32));
        assert_eq!(e.thread, 16);
        assert!(
            matches!(
                &e.violation,
                Violation::OutOfBounds {
                    index: 16,
                    len: 16,
                    ..
                }
            ),
            "{:?}",
            e.violation
        );
    }
}

#[test]
fn call_not_inlined_is_an_error() {
    let mut f = Builder::function("twice");
    let a = f.func_arg(Scalar::F32);
    let r = f.binary(BinaryOp::Mul, a, Value::Float(2.0)).unwrap();
    let func = std::sync::Arc::new(f.finish_function(&[r], &[Scalar::F32]).unwrap());
    let mut b = Builder::kernel("calls");
    let out = b.tensor_param("out", Scalar::F32, true);
    let t = b.builtin(Builtin::ThreadId);
    let x = b.cast(t, Scalar::F32).unwrap();
    let y = b.call(func, &[x.into()]).unwrap();
    b.store(out, t, y[0]).unwrap();
    let k = b.finish_kernel().unwrap();
    let ctx = Context::cpu();
    let o = ctx.zeros(DType::F32, &[32]).unwrap();
    let e = sanitizer_error(run(&ctx, &k, &o, 32));
    assert!(e.to_string().contains("not inlined"), "{e}");
}
