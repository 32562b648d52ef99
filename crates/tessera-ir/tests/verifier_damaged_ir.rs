//! Regression tests from fuzzing the verifier with damaged IR: each input once made it
//! panic; it must answer with an error instead.

use tessera_ir::{verify_kernel, Builder, Kernel, Op, Scalar, Value, ValueId};

/// `for i in 0..n { out[i] = i }`, built through the builder (valid).
fn loop_kernel() -> Kernel {
    let mut b = Builder::kernel("loop");
    let out = b.tensor_param("out", Scalar::U32, true);
    let n = b.scalar_param("n", Scalar::U32);
    let (i, _) = b
        .begin_for(Value::Int(0), n, Value::Int(1), &[])
        .expect("for");
    b.store(out, i, i).expect("store");
    b.end_for(&[]).expect("end for");
    b.finish_kernel().expect("kernel")
}

fn body_of_first_for(k: &mut Kernel) -> &mut tessera_ir::Block {
    k.body
        .block
        .insts
        .iter_mut()
        .find_map(|inst| match &mut inst.op {
            Op::For { body, .. } => Some(body),
            _ => None,
        })
        .expect("the kernel has a loop")
}

#[test]
fn a_loop_argument_outside_the_value_table_is_an_error() {
    let mut k = loop_kernel();
    verify_kernel(&k).expect("the undamaged kernel is valid");
    let past_the_end = ValueId(k.body.values.len() as u32);
    body_of_first_for(&mut k).args[0] = past_the_end;
    let err = verify_kernel(&k).expect_err("a loop argument past the value table");
    assert!(err.to_string().contains("not in the value table"), "{err}");
}

/// A stack array too large for any thread once passed the verifier, and the pass that
/// promotes stack arrays to registers then tried to allocate one slot per element and
/// aborted the process.
#[test]
fn a_stack_array_larger_than_a_thread_can_hold_is_an_error() {
    let mut b = Builder::kernel("huge_stack");
    let out = b.tensor_param("out", Scalar::F32, true);
    let regs = b
        .local_array("regs", Scalar::F32, Value::Int(i64::from(u32::MAX / 2)))
        .expect("the builder accepts any positive constant length");
    b.store(regs, Value::Int(0), Value::Float(1.0))
        .expect("store");
    let v = b.load(regs, Value::Int(0)).expect("load");
    b.store(out, Value::Int(0), v).expect("store");
    let k = b.finish_kernel().expect("kernel");
    let err = verify_kernel(&k).expect_err("8 GiB of stack per thread");
    assert!(err.to_string().contains("stack arrays take"), "{err}");

    // At the limit it is still accepted.
    let mut b = Builder::kernel("big_stack");
    let out = b.tensor_param("out", Scalar::F32, true);
    let elems = tessera_ir::MAX_STACK_BYTES / 4;
    let regs = b
        .local_array("regs", Scalar::F32, Value::Int(elems as i64))
        .expect("local");
    b.store(regs, Value::Int(0), Value::Float(1.0))
        .expect("store");
    let v = b.load(regs, Value::Int(0)).expect("load");
    b.store(out, Value::Int(0), v).expect("store");
    verify_kernel(&b.finish_kernel().expect("kernel")).expect("64 KiB of stack is allowed");
}
