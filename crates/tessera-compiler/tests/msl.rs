//! The MSL emitter's output shape: binding layout, the IR's semantics spelled in MSL,
//! guards, determinism, and clear errors for ops that must be lowered first; and the
//! declared occupancy in both the MSL and the CUDA entry point. (That the output compiles
//! and computes the CPU backend's results is checked in tessera-runtime's `metal_emu`
//! tests, which need g++.)

use std::sync::Arc;
use tessera_compiler::msl::{emit, EmitError, MslArg, MslBuiltin};
use tessera_ir::{
    BinaryOp, Builder, Builtin, Kernel, ReduceOp, Scalar, ShuffleKind, SimdOp, Value,
};

fn axpy_f16() -> Kernel {
    let mut b = Builder::kernel("axpy");
    b.generic("T", Scalar::F16);
    let x = b.tensor_param("x", Scalar::F16, false);
    let out = b.tensor_param("half", Scalar::F16, true);
    let a = b.scalar_param("a", Scalar::F32);
    let step = b.scalar_param("step", Scalar::U32);
    let n = b.constexpr("n", tessera_ir::Literal::U32(256));
    let tid = b.builtin(Builtin::ThreadId);
    let (i, c) = b.begin_for(tid, n, step, &[Value::Float(0.0)]).unwrap();
    let xi = b.load(x, i).unwrap();
    let sq = b.binary(BinaryOp::Mul, xi, xi).unwrap();
    let f = b.cast(sq, Scalar::F32).unwrap();
    let acc = b.fma(a, f, c[0]).unwrap();
    let r = b.end_for(&[acc]).unwrap();
    let (j, d) = b
        .begin_for(Value::Int(0), Value::Int(8), Value::Int(2), &[r[0]])
        .unwrap();
    let jf = b.cast(j, Scalar::F32).unwrap();
    let s = b.binary(BinaryOp::Add, d[0], jf).unwrap();
    let r2 = b.end_for(&[s]).unwrap();
    let h = b.cast(r2[0], Scalar::F16).unwrap();
    let q = b.binary(BinaryOp::Div, tid, Value::Int(3)).unwrap();
    let q = b.binary(BinaryOp::Rem, q, step).unwrap();
    b.store(out, q, h).unwrap();
    b.finish_kernel().unwrap()
}

#[test]
fn buffers_scalars_and_attributes_follow_the_parameter_order() {
    let src = emit(&axpy_f16()).unwrap();
    assert_eq!(src.entry, "axpy");
    assert_eq!(src.kernel_name, "axpy[T=f16, n=256u32]");
    let code = &src.code;
    assert!(
        code.contains("const device half* x [[buffer(0)]]"),
        "{code}"
    );
    // A parameter named like a Metal type is renamed, never emitted as is.
    assert!(code.contains("device half* half_ [[buffer(1)]]"), "{code}");
    assert!(code.contains("constant float& a [[buffer(2)]]"), "{code}");
    assert!(code.contains("constant uint& step [[buffer(3)]]"), "{code}");
    assert!(
        code.contains("uint3 tsr_tid [[thread_position_in_threadgroup]]"),
        "{code}"
    );
    assert!(matches!(
        src.args[1],
        MslArg::Tensor {
            buffer: 1,
            writable: true,
            elem: Scalar::F16,
            ..
        }
    ));
    assert!(matches!(
        src.args[3],
        MslArg::Scalar {
            buffer: 3,
            ty: Scalar::U32,
            ..
        }
    ));
    assert_eq!(
        src.args[4],
        MslArg::Builtin(MslBuiltin::ThreadPositionInThreadgroup)
    );
    assert_eq!(src.args.len(), 5, "only the attributes used are declared");
}

#[test]
fn half_math_happens_in_float_and_loops_are_guarded() {
    let code = emit(&axpy_f16()).unwrap().code;
    // f16 * f16 computed in f32, rounded once.
    assert!(code.contains("half(float(v"), "{code}");
    assert!(code.contains(") * float(v"), "{code}");
    // A runtime step: the loop only runs for a positive step, and cannot wrap past `end`.
    assert!(code.contains("if (step > 0) {"), "{code}");
    assert!(code.contains("TESSERA_TRAP(2);"), "{code}");
    assert!(code.contains(" > step ? "), "{code}");
    // A constant step and end: a plain loop.
    assert!(code.contains("< 8u; v"), "{code}");
    assert!(code.contains(" += 2u)"), "{code}");
    // Division by a known non-zero constant is plain; by a runtime value it is total.
    assert!(code.contains("tsr_tid.x / 3u"), "{code}");
    assert!(code.contains("tsr_rem_u32("), "{code}");
    assert!(code.contains("inline uint tsr_rem_u32("), "{code}");
    assert!(
        !code.contains("tsr_div_u32"),
        "unused helpers are left out: {code}"
    );
}

#[test]
fn output_is_deterministic() {
    let a = emit(&axpy_f16()).unwrap();
    let b = emit(&axpy_f16()).unwrap();
    assert_eq!(a, b);
}

fn shuffles() -> Kernel {
    let (mut b, x, out) = Builder::kernel_x_out("shuffles", Scalar::BF16);
    let d = b.scalar_param("d", Scalar::U32);
    let gid = b.builtin(Builtin::GlobalId);
    let v = b.load(x, gid).unwrap();
    let up = b.shuffle(ShuffleKind::Up, v, Value::Int(1)).unwrap();
    let down = b.shuffle(ShuffleKind::Down, up, d).unwrap();
    let s = b.simd(SimdOp::Sum, down).unwrap();
    b.store(out, gid, s).unwrap();
    b.finish_kernel().unwrap()
}

#[test]
fn shuffles_keep_the_own_value_for_any_delta() {
    let src = emit(&shuffles()).unwrap();
    let code = &src.code;
    assert!(src.uses_simdgroups);
    // bf16 travels as its bits; a constant delta below 32 uses Metal's intrinsic.
    assert!(
        code.contains("simd_shuffle_up(uint(as_type<ushort>(v"),
        "{code}"
    );
    // A runtime delta reads lane + d only where that lane exists.
    assert!(
        code.contains("simd_shuffle(uint(as_type<ushort>(v")
            && code.contains("d < 32u - tsr_lane ? tsr_lane + d : tsr_lane"),
        "{code}"
    );
    assert!(code.contains("bfloat(simd_sum(float(v"), "{code}");
    assert!(
        code.contains("const uint tsr_gid = tsr_tgid.x * tsr_tpg.x + tsr_tid.x;"),
        "{code}"
    );
}

#[test]
fn group_reductions_and_calls_must_be_lowered_first() {
    let mut b = Builder::kernel("gr");
    let out = b.tensor_param("out", Scalar::F32, true);
    let t = b.builtin(Builtin::ThreadId);
    let f = b.cast(t, Scalar::F32).unwrap();
    let s = b.group_reduce(ReduceOp::Sum, f).unwrap();
    b.store(out, t, s).unwrap();
    let e = emit(&b.finish_kernel().unwrap()).unwrap_err();
    assert!(matches!(e, EmitError::NotLowered { .. }), "{e}");
    assert!(e.to_string().contains("optimize"), "{e}");

    let mut fb = Builder::function("twice");
    let a = fb.func_arg(Scalar::F32);
    let r = fb.binary(BinaryOp::Add, a, a).unwrap();
    let func = Arc::new(fb.finish_function(&[r], &[Scalar::F32]).unwrap());
    let mut b = Builder::kernel("calls");
    let out = b.tensor_param("out", Scalar::F32, true);
    let t = b.builtin(Builtin::ThreadId);
    let f = b.cast(t, Scalar::F32).unwrap();
    let r = b.call(func, &[f.into()]).unwrap();
    b.store(out, t, r[0]).unwrap();
    let e = emit(&b.finish_kernel().unwrap()).unwrap_err().to_string();
    assert!(e.contains("call twice") && e.contains("inlined"), "{e}");
}

#[test]
fn malformed_ir_is_an_error_not_a_panic() {
    let mut k = shuffles();
    // Point a load at a parameter that does not exist.
    let load = k
        .body
        .block
        .insts
        .iter_mut()
        .find(|i| matches!(i.op, tessera_ir::Op::Load { .. }))
        .expect("a load");
    if let tessera_ir::Op::Load { mem, .. } = &mut load.op {
        *mem = tessera_ir::MemRef::Param(9);
    }
    let e = emit(&k).unwrap_err();
    assert!(matches!(e, EmitError::Malformed { .. }), "{e}");
}

#[test]
fn a_declared_occupancy_bounds_the_entry_point_in_cuda_and_msl() {
    let mut k = axpy_f16();
    assert!(!tessera_compiler::cuda::emit(&k)
        .unwrap()
        .source
        .contains("__launch_bounds__"));
    assert!(!emit(&k)
        .unwrap()
        .code
        .contains("max_total_threads_per_threadgroup"));
    k.occupancy = Some(tessera_ir::Occupancy {
        group_size: 128,
        groups_per_core: 4,
    });
    let cuda = tessera_compiler::cuda::emit(&k).unwrap().source;
    assert!(
        cuda.contains("__global__ void __launch_bounds__(128, 4) tessera_axpy"),
        "{cuda}"
    );
    let msl = emit(&k).unwrap().code;
    assert!(
        msl.contains("[[max_total_threads_per_threadgroup(128)]] kernel void"),
        "{msl}"
    );
}
