//! What the CUDA emitter writes for hand-built kernels: signatures, memory, control flow,
//! collectives, half types, vector accesses, and the errors for ops it must not see.

use super::samples::{self, Sample};
use super::*;
use tessera_ir::{BinaryOp, Builder, Builtin, Literal, ReduceOp, Scalar, Value};

fn source_of(s: &Sample) -> String {
    tessera_ir::verify_kernel(&s.kernel).unwrap_or_else(|e| panic!("{}: {e}", s.name));
    emit(&s.kernel)
        .unwrap_or_else(|e| panic!("{}: {e}", s.name))
        .source
}

#[test]
fn every_sample_verifies_and_emits() {
    let all = samples::all().unwrap();
    assert!(all.len() >= 10);
    for s in &all {
        let src = source_of(s);
        let entry = format!("extern \"C\" __global__ void tessera_{}(", s.name);
        assert!(src.contains(&entry), "{}:\n{src}", s.name);
        assert!(
            !src.contains("#include"),
            "{}: must need no headers",
            s.name
        );
    }
}

#[test]
fn every_kernel_waits_for_the_previous_grid_before_touching_memory() {
    for s in &samples::all().unwrap() {
        let src = source_of(s);
        let kernel = &src[src.find("__global__").expect("a kernel")..];
        let body = &kernel[kernel.find(") {\n").expect("a kernel body")..];
        let wait = body
            .find("TS_AFTER_PREVIOUS_GRID();")
            .unwrap_or_else(|| panic!("{}: no wait\n{src}", s.name));
        // Before it only declarations: threadgroup and stack arrays, fragment registers.
        for line in body[..wait].lines().skip(1).map(str::trim) {
            let declares = line.is_empty()
                || line.starts_with("__shared__")
                || line.starts_with("extern __shared__")
                || line.starts_with("__attribute__((aligned(16)))")
                || line.contains("(ts_smem + ")
                || line.ends_with("16x16");
            assert!(declares, "{}: `{line}` before the wait\n{src}", s.name);
        }
    }
    assert!(prelude::CORE.contains("griddepcontrol.wait"));
}

#[test]
fn output_is_deterministic() {
    let a = samples::all().unwrap();
    let b = samples::all().unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            emit(&x.kernel).unwrap(),
            emit(&y.kernel).unwrap(),
            "{}",
            x.name
        );
    }
}

#[test]
fn parameters_come_in_order_with_const_restrict_on_read_only_tensors() {
    let src = source_of(&samples::shuffles().unwrap());
    let sig =
        "const ts_f16* __restrict__ p_x,\n    ts_f16* p_out,\n    unsigned int* p_outu,\n    \
               const unsigned int p_d,\n    const unsigned int p_far) {";
    assert!(src.contains(sig), "{src}");
}

#[test]
fn simd_collectives_are_full_mask_butterflies_and_scans() {
    let src = source_of(&samples::simd_float().unwrap());
    assert!(src.contains("static __device__ __forceinline__ float ts_simd_sum_f32(float v)"));
    assert!(src.contains("__shfl_xor_sync(TS_FULL, x, m)"), "{src}");
    assert!(src.contains("for (int m = 16; m > 0; m >>= 1)"), "{src}");
    assert!(src.contains("__shfl_up_sync(TS_FULL, x, d)"), "{src}");
    assert!(src.contains("x = lane == 0u ? 0.0f : p;"), "{src}");
    assert!(src.contains("x = fmaxf(x, t);"), "{src}");
    // The f16 sum accumulates in f32 and rounds once.
    assert!(src.contains("ts_f16 ts_simd_sum_f16(ts_f16 v)"), "{src}");
    assert!(src.contains("float x = ts_f16_to_f32(v);"), "{src}");
    let src = source_of(&samples::simd_int().unwrap());
    assert!(src.contains("__all_sync(TS_FULL, v)"), "{src}");
    assert!(
        src.contains("__popc(__ballot_sync(TS_FULL, v)) & 1"),
        "{src}"
    );
    // Signed max compares as int; sums wrap in unsigned.
    assert!(
        src.contains("int ts_simd_max_i32(int v) {\n  int x = (int)v;"),
        "{src}"
    );
    assert!(src.contains("int ts_simd_sum_i32(int v) {\n  unsigned int x = (unsigned int)v;"));
}

#[test]
fn shuffles_keep_own_value_out_of_range() {
    let src = source_of(&samples::shuffles().unwrap());
    // Constant deltas below 32 use the hardware's up / down.
    assert!(src.contains("ts_shfl_up_native_f16(v"), "{src}");
    assert!(src.contains("__shfl_up_sync(TS_FULL, w, a)"), "{src}");
    // Runtime deltas compute the source lane, so 32 and above keep the own value.
    assert!(src.contains("a <= lane ? lane - a : lane"), "{src}");
    assert!(src.contains("a < 32u - lane ? lane + a : lane"), "{src}");
    assert!(src.contains("ts_f16{(unsigned short)w}"), "{src}");
}

#[test]
fn loops_carry_values_in_variables_and_guard_runtime_steps() {
    let src = source_of(&samples::strided_loop().unwrap());
    // A runtime step runs the loop only when positive and traps otherwise, whatever
    // the bounds, as the CPU sanitizer reports a non-positive step.
    assert!(src.contains("if (p_step > 0) {"), "{src}");
    assert!(src.contains("} else {\n    __trap();\n  }"), "{src}");
    // The swapped pair is read into `const` block arguments before the yields assign the
    // carried variables, so the swap needs no temporaries.
    assert!(!src.contains("ts_next"), "{src}");
    // A runtime bound advances without wrapping past it.
    assert!(src.contains(" > p_step ? "), "{src}");
    // The i32 loop compares distances as unsigned, so negative bounds work.
    assert!(src.contains("for (int "), "{src}");
    assert!(src.contains(" = (-3); "), "{src}");
    assert!(src.contains("> (unsigned int)2 ? "), "{src}");
    assert!(src.contains("if ("), "{src}");
    assert!(src.contains("} else {"), "{src}");
}

#[test]
fn threadgroup_memory_and_barriers() {
    let s = samples::threadgroup_reduce().unwrap();
    let src = source_of(&s);
    assert!(src.contains("__shared__ __attribute__((aligned(16))) float s_partial[32];"));
    assert!(src.contains("__shared__ __attribute__((aligned(16))) float s_stage[256];"));
    assert!(src.contains("__syncthreads();"), "{src}");
    let c = emit(&s.kernel).unwrap();
    assert_eq!(c.static_shared_bytes, (32 + 256) * 4);
    assert_eq!(c.dynamic_shared_bytes, 0);
    assert!(c.uses_simdgroups);
}

#[test]
fn large_threadgroup_memory_is_dynamic() {
    let s = samples::dynamic_shared().unwrap();
    let c = emit(&s.kernel).unwrap();
    assert_eq!(c.static_shared_bytes, 0);
    assert_eq!(c.dynamic_shared_bytes, 16384 * 4 + 256 * 4);
    assert!(c.source.contains("extern __shared__"), "{}", c.source);
    assert!(c
        .source
        .contains("reinterpret_cast<unsigned int*>(ts_smem + 65536)"));
}

#[test]
fn half_types_use_own_helpers_and_casts_saturate() {
    let src = source_of(&samples::half_casts().unwrap());
    assert!(src.contains("struct ts_f16 { unsigned short bits; };"));
    assert!(src.contains("struct ts_bf16 { unsigned short bits; };"));
    assert!(src.contains("cvt.rn.f16.f32"), "{src}");
    assert!(src.contains("u += 0x7fffu + ((u >> 16) & 1u);"), "{src}");
    assert!(src.contains("__float2int_rz("), "{src}");
    assert!(src.contains("__float2uint_rz("), "{src}");
    assert!(src.contains("ts_f16_from_f32((ts_f16_to_f32("), "{src}");
    // A kernel without half types carries no half helpers.
    let src = source_of(&samples::int_semantics().unwrap());
    assert!(!src.contains("ts_f16"), "{src}");
    assert!(src.contains("ts_div_i32("), "{src}");
}

#[test]
fn atomics_map_to_cuda_atomics() {
    let src = source_of(&samples::atomics().unwrap());
    for f in [
        "atomicAdd(&p_sums[",
        "atomicMax(&p_ext[",
        "atomicMin(",
        "atomicOr(",
        "atomicAnd(",
        "atomicExch(",
    ] {
        assert!(src.contains(f), "{f}:\n{src}");
    }
    assert!(src.contains("atomicAdd(&s_tg[0u], "), "{src}");
}

#[test]
fn vector_accesses_are_wide_loads_and_stores() {
    let src = source_of(&samples::vector_access().unwrap());
    assert!(src.contains("struct __attribute__((aligned(16))) ts_f32x4 { float e[4]; };"));
    assert!(src.contains("struct __attribute__((aligned(16))) ts_bf16x8 { ts_bf16 e[8]; };"));
    assert!(
        src.contains("*reinterpret_cast<const ts_f32x4*>(&p_x["),
        "{src}"
    );
    assert!(
        src.contains("*reinterpret_cast<ts_bf16x8*>(&p_outb["),
        "{src}"
    );
    assert!(src.contains(".e[3]"), "{src}");
}

#[test]
fn group_reduce_and_calls_must_be_lowered_first() {
    let mut b = Builder::kernel("gr");
    let out = b.tensor_param("out", Scalar::F32, true);
    let t = b.builtin(Builtin::ThreadId);
    let f = b.cast(t, Scalar::F32).unwrap();
    let s = b.group_reduce(ReduceOp::Sum, f).unwrap();
    b.store(out, t, s).unwrap();
    let k = b.finish_kernel().unwrap();
    let e = emit(&k).unwrap_err();
    assert!(matches!(e, EmitError::NotLowered { .. }), "{e}");
    assert!(e.to_string().contains("group_sum"), "{e}");
    assert!(e.to_string().contains("optimize"), "{e}");
}

#[test]
fn constants_are_inlined_with_their_types() {
    let mut b = Builder::kernel("consts");
    let out = b.tensor_param("out", Scalar::I32, true);
    let t = b.builtin(Builtin::ThreadId);
    let ti = b.cast(t, Scalar::I32).unwrap();
    let m = b.lit(Literal::I32(i32::MIN));
    let v = b.binary(BinaryOp::Add, ti, m).unwrap();
    let w = b.binary(BinaryOp::Mul, v, Value::Int(-3)).unwrap();
    b.store(out, t, w).unwrap();
    let src = emit(&b.finish_kernel().unwrap()).unwrap().source;
    assert!(src.contains("(unsigned int)(-2147483647 - 1)"), "{src}");
    assert!(src.contains("(unsigned int)(-3)"), "{src}");
}

#[test]
fn the_vectorize_pass_widened_accesses_reach_the_source() {
    // out[4g + k] = x[4g + k] * 2 for k in 0..4, and bf16 y[8g + k] copied for k in 0..8.
    let mut b = Builder::kernel("widen");
    let x = b.tensor_param("x", Scalar::F32, false);
    let y = b.tensor_param("y", Scalar::BF16, false);
    let out = b.tensor_param("out", Scalar::F32, true);
    let outb = b.tensor_param("outb", Scalar::BF16, true);
    let g = b.builtin(Builtin::GlobalId);
    let base = b.binary(BinaryOp::Mul, g, Value::Int(4)).unwrap();
    let vals: Vec<Value> = (0..4)
        .map(|k| {
            let i = b.binary(BinaryOp::Add, base, Value::Int(k)).unwrap();
            b.load(x, i).unwrap()
        })
        .collect();
    for (k, v) in vals.into_iter().enumerate() {
        let d = b.binary(BinaryOp::Mul, v, Value::Float(2.0)).unwrap();
        let i = b.binary(BinaryOp::Add, base, Value::Int(k as i64)).unwrap();
        b.store(out, i, d).unwrap();
    }
    let base8 = b.binary(BinaryOp::Mul, g, Value::Int(8)).unwrap();
    let hs: Vec<Value> = (0..8)
        .map(|k| {
            let i = b.binary(BinaryOp::Add, base8, Value::Int(k)).unwrap();
            b.load(y, i).unwrap()
        })
        .collect();
    for (k, h) in hs.into_iter().enumerate() {
        let i = b
            .binary(BinaryOp::Add, base8, Value::Int(k as i64))
            .unwrap();
        b.store(outb, i, h).unwrap();
    }
    let k = crate::optimize(b.finish_kernel().unwrap(), crate::Target::Cuda).unwrap();
    let src = emit(&k).unwrap().source;
    assert!(
        src.contains("*reinterpret_cast<const ts_f32x4*>(&p_x["),
        "{src}"
    );
    assert!(
        src.contains("*reinterpret_cast<ts_f32x4*>(&p_out["),
        "{src}"
    );
    assert!(
        src.contains("*reinterpret_cast<const ts_bf16x8*>(&p_y["),
        "{src}"
    );
    assert!(
        src.contains("*reinterpret_cast<ts_bf16x8*>(&p_outb["),
        "{src}"
    );
}

#[test]
fn every_sample_still_emits_after_the_optimiser() {
    for s in samples::all().unwrap() {
        let k = crate::optimize(s.kernel.clone(), crate::Target::Cuda)
            .unwrap_or_else(|e| panic!("{}: {e}", s.name));
        emit(&k).unwrap_or_else(|e| panic!("{}: {e}", s.name));
    }
}

#[test]
fn constant_bounds_that_cannot_overflow_just_add() {
    let mut b = Builder::kernel("sum64");
    let out = b.tensor_param("out", Scalar::U32, true);
    let t = b.builtin(Builtin::ThreadId);
    let (i, c) = b
        .begin_for(
            Value::Int(0),
            Value::Int(64),
            Value::Int(4),
            &[Value::Int(0)],
        )
        .unwrap();
    let acc = b.binary(BinaryOp::Add, c[0], i).unwrap();
    let r = b.end_for(&[acc]).unwrap();
    b.store(out, t, r[0]).unwrap();
    let src = emit(&b.finish_kernel().unwrap()).unwrap().source;
    assert!(src.contains(" < 64u; v"), "{src}");
    assert!(src.contains(" += 4u) {"), "{src}");
    assert!(!src.contains("__trap"), "{src}");
}

#[test]
fn fragments_in_threadgroup_memory_use_ldmatrix_with_a_gather_fallback() {
    let src = source_of(&samples::fragments().unwrap());
    assert!(
        src.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"),
        "{src}"
    );
    assert!(
        src.contains("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"),
        "{src}"
    );
    // Every ldmatrix sits behind a check of 16-byte row alignment, with the gather after.
    assert_eq!(
        src.matches("ldmatrix").count(),
        src.matches("& 7u) == 0u)").count(),
        "{src}"
    );
    assert!(src.contains(".bits << 16"), "{src}");
    assert!(src.contains("reinterpret_cast<ts_pair*>"), "{src}");
}
