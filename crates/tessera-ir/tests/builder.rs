//! The builder types values, adapts literals, folds constants and builds structured regions.

use tessera_ir::*;

fn axpy_like() -> Kernel {
    let mut b = Builder::kernel("axpy");
    b.generic("T", Scalar::F16);
    let x = b.tensor_param("x", Scalar::F16, false);
    let out = b.tensor_param("out", Scalar::F16, true);
    let a = b.scalar_param("a", Scalar::F32);
    let n = b.constexpr("n", Literal::U32(64));
    let tid = b.builtin(Builtin::ThreadId);
    let zero = Value::Float(0.0);
    let (i, carried) = b.begin_for(tid, n, Value::Int(32), &[zero]).unwrap();
    let xi = b.load(x, i).unwrap();
    let xf = b.cast(xi, Scalar::F32).unwrap();
    let prod = b.binary(BinaryOp::Mul, a, xf).unwrap();
    let acc = b.binary(BinaryOp::Add, carried[0], prod).unwrap();
    let r = b.end_for(&[acc]).unwrap();
    let big = b.binary(BinaryOp::Gt, r[0], Value::Int(1)).unwrap();
    b.begin_if(big).unwrap();
    b.begin_else(&[Value::Float(1.0)]).unwrap();
    let y = b.end_if(&[r[0]]).unwrap();
    let yt = b.cast(y[0], Scalar::F16).unwrap();
    b.store(out, tid, yt).unwrap();
    b.finish_kernel().unwrap()
}

#[test]
fn builds_structured_ssa_and_prints_it() {
    let k = axpy_like();
    let text = k.to_string();
    assert!(
        text.starts_with(
            "kernel axpy[T=f16, n=64u32](x: tensor<f16>, out: mut tensor<f16>, a: f32) {"
        ),
        "{text}"
    );
    assert!(text.contains("for %"), "{text}");
    assert!(text.contains("carry("), "{text}");
    assert!(text.contains(" = if %"), "{text}");
    // The untyped `1` compared with an f32 became an f32 constant.
    assert!(text.contains("const 1.0f32"), "{text}");
}

#[test]
fn mismatched_operand_types_are_errors_with_a_hint() {
    let mut b = Builder::kernel("bad");
    let x = b.tensor_param("x", Scalar::F32, true);
    let v = b.load(x, Value::Int(0)).unwrap();
    let t = b.builtin(Builtin::ThreadId);
    b.set_loc(7, 5);
    let e = b.binary(BinaryOp::Div, v, t).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("line 7:5"), "{msg}");
    assert!(msg.contains("f32 and u32"), "{msg}");
    assert!(msg.contains(".cast::<"), "{msg}");
}

#[test]
fn constants_fold_while_building() {
    let mut b = Builder::kernel("fold");
    let n = b.constexpr("n", Literal::U32(128));
    let q = b.binary(BinaryOp::Div, n, Value::Int(4)).unwrap();
    assert_eq!(b.known_const(q), Some(Literal::U32(32)));
    let arr = b.shared_array("tg", Scalar::F32, q).unwrap();
    assert_eq!(arr.elem, Scalar::F32);
    let tid = b.builtin(Builtin::ThreadId);
    assert!(b.shared_array("dyn", Scalar::F32, tid).is_err());
}

#[test]
fn stores_check_writability_and_element_type() {
    let (mut b, x, out) = Builder::kernel_x_out("st", Scalar::F16);
    let v = b.load(x, Value::Int(0)).unwrap();
    let f = b.cast(v, Scalar::F32).unwrap();
    assert!(b
        .store(x, Value::Int(0), v)
        .unwrap_err()
        .to_string()
        .contains("read-only"));
    assert!(b
        .store(out, Value::Int(0), f)
        .unwrap_err()
        .to_string()
        .contains("must be f16"));
    b.store(out, Value::Int(0), v).unwrap();
}

#[test]
fn a_kernel_without_output_is_rejected() {
    let mut b = Builder::kernel("noout");
    let _x = b.tensor_param("x", Scalar::F32, false);
    assert!(b.finish_kernel().unwrap_err().to_string().contains("mut"));
}

#[test]
fn zero_constant_step_is_rejected() {
    let mut b = Builder::kernel("zs");
    let _o = b.tensor_param("o", Scalar::F32, true);
    assert!(b
        .begin_for(Value::Int(0), Value::Int(4), Value::Int(0), &[])
        .is_err());
}

#[test]
fn literal_range_is_checked() {
    let mut b = Builder::kernel("lit");
    let t = b.builtin(Builtin::ThreadId);
    assert!(b.binary(BinaryOp::Add, t, Value::Int(-1)).is_err());
    assert!(b.binary(BinaryOp::Add, t, Value::Float(0.5)).is_err());
}

#[test]
fn a_constant_division_by_zero_names_the_specialisation_behind_it() {
    let mut b = Builder::kernel("split");
    b.generic("T", Scalar::F32);
    let head_dim = b.constexpr("head_dim", Literal::U32(7));
    let epl = b.constexpr("epl", Literal::U32(8));
    let lanes = b.binary(BinaryOp::Div, head_dim, epl).unwrap();
    let e = b
        .binary(BinaryOp::Div, Value::Int(32), lanes)
        .unwrap_err()
        .to_string();
    assert!(e.contains("by zero"), "{e}");
    assert!(e.contains("head_dim = 7") && e.contains("epl = 8"), "{e}");
    assert!(e.contains("op wrapper allows"), "{e}");
}

/// A bitcast keeps the width: the builder refuses another width, the verifier refuses a
/// hand-made one, and a valid one prints and folds its constant operand exactly.
#[test]
fn bitcasts_keep_the_width_and_fold_exactly() {
    let mut b = Builder::kernel("bits");
    let x = b.tensor_param("x", Scalar::U32, false);
    let out = b.tensor_param("out", Scalar::F32, true);
    let tid = b.builtin(Builtin::ThreadId);
    let u = b.load(x, tid).unwrap();
    let e = b.bitcast(u, Scalar::F16).unwrap_err().to_string();
    assert!(e.contains("keeps the width") && e.contains("u32"), "{e}");
    let e = b.bitcast(u, Scalar::Bool).unwrap_err().to_string();
    assert!(e.contains("numbers only"), "{e}");
    let f = b.bitcast(u, Scalar::F32).unwrap();
    let one = b.bitcast(Value::Int(0x3f80_0000), Scalar::F32).unwrap();
    let s = b.binary(BinaryOp::Add, f, one).unwrap();
    b.store(out, tid, s).unwrap();
    let mut k = b.finish_kernel().unwrap();
    let text = k.to_string();
    assert!(
        text.contains("bitcast") && text.contains("to f32"),
        "{text}"
    );
    // The folded constant is exactly 1.0.
    assert!(
        text.contains("1.0") || text.contains("0x3f800000"),
        "{text}"
    );

    // Damage the bitcast into u32 → f16: the verifier names it.
    let bitcast = k
        .body
        .block
        .insts
        .iter_mut()
        .find_map(|inst| match &mut inst.op {
            Op::Bitcast(_, to) => Some(to),
            _ => None,
        })
        .expect("the kernel keeps its bitcast of a loaded value");
    *bitcast = Scalar::F16;
    let err = verify_kernel(&k)
        .expect_err("a u32 bitcast to f16")
        .to_string();
    assert!(err.contains("bitcast") && err.contains("16 bits"), "{err}");
}
