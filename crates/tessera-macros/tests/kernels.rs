//! Kernels written in the DSL build IR with the structure their source describes.

use tessera_ir::{Literal, Op, Scalar};
use tessera_macros::{func, kernel};

/// Threadgroup-wide inverse RMS of per-thread partial sums of squares.
#[func]
fn rms_inv(partial: f32, eps: f32, n: u32) -> f32 {
    let total = group_sum(partial);
    rsqrt(total / n.cast::<f32>() + eps)
}

#[func]
fn square_plus(x: f32, y: f32) -> f32 {
    x * x + y
}

#[func]
fn sum_and_max<T>(a: T, b: T) -> (T, T) {
    (a + b, max(a, b))
}

/// RMSNorm over rows of `n` with each thread striding over the row.
#[kernel]
pub fn rms_norm_strided<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    mut out: Tensor<T>,
    eps: f32,
    #[constexpr] n: u32,
) {
    let row = group_id_x();
    let base = row * n;
    let mut acc = 0.0f32;
    for i in range(thread_id(), n, group_size()) {
        let v = load(x[base + i]).cast::<f32>();
        acc += v * v;
    }
    let inv = rms_inv(acc, eps, n);
    for i in range(thread_id(), n, group_size()) {
        let v = load(x[base + i]).cast::<f32>() * inv * load(w[i]).cast::<f32>();
        store(out[base + i], v.cast::<T>());
    }
}

/// Exercises if-expressions, compound assignment, `!`, stack and threadgroup arrays.
#[kernel]
fn mixed(x: Tensor<f32>, mut out: Tensor<f32>, #[constexpr] k: u32) {
    let tid = thread_id();
    let scratch = threadgroup_array::<f32>(32);
    let regs = stack_array::<f32>(k);
    let mut best = neg_infinity();
    let mut count = 0u32;
    for j in 0..k {
        let v = load(x[tid * k + j]);
        store(regs[j], v);
        best = max(best, v);
        if !(v < 0.0) {
            count += 1;
        } else if v < -1.0 {
            count += 2;
        }
    }
    let sign = if best > 0.0 { 1.0f32 } else { -1.0 };
    if simd_lane() == 0 {
        store(scratch[simd_id()], best);
    }
    barrier();
    let first = load(scratch[0]);
    let (s, m) = sum_and_max(first, sign);
    let extra = square_plus(load(regs[0]), s);
    store(out[tid], extra * m + count.cast::<f32>() + simd_sum(best));
}

#[test]
fn generic_kernel_builds_for_each_float_dtype() {
    for t in Scalar::FLOATS {
        let k = rms_norm_strided::ir(t, 4096).unwrap();
        assert_eq!(k.name, "rms_norm_strided");
        assert_eq!(k.params.len(), 4);
        let text = k.to_string();
        assert!(text.contains(&format!("T={t}")), "{text}");
        assert!(text.contains("n=4096u32"), "{text}");
        assert!(text.contains("call rms_inv("), "{text}");
        // Two strided loops, the first carrying the f32 accumulator.
        assert_eq!(
            text.matches(" = for ").count() + text.matches("  for ").count(),
            2,
            "{text}"
        );
        assert!(text.contains("carry("), "{text}");
    }
}

#[test]
fn signature_describes_parameters() {
    let sig = rms_norm_strided::DEF.signature;
    assert_eq!(sig.generics, &["T"]);
    assert_eq!(sig.params.len(), 4);
    assert_eq!(sig.constexprs[0].name, "n");
    assert_eq!(sig.constexprs[0].ty, Scalar::U32);
    assert!(sig.doc.starts_with("RMSNorm over rows"));
}

#[test]
fn constexpr_is_baked_as_a_constant() {
    let k = mixed::ir(8).unwrap();
    let mut consts = Vec::new();
    k.body.block.walk(&mut |i| {
        if let Op::Const(l) = i.op {
            consts.push(l);
        }
    });
    assert!(consts.contains(&Literal::U32(8)));
    assert_eq!(k.body.locals[0].len, 8);
    assert_eq!(k.body.shared[0].len, 32);
    let text = k.to_string();
    assert!(text.contains("call sum_and_max("), "{text}");
    assert!(text.contains("simd_sum"), "{text}");
    assert!(text.contains(" = if "), "{text}");
}

#[test]
fn wrong_specialisation_is_an_error_not_a_panic() {
    let e = (rms_norm_strided::DEF)
        .build(&tessera_ir::Specialization::new(vec![], vec![]))
        .unwrap_err();
    assert!(e.to_string().contains("expected 1 dtype"), "{e}");
    let e = rms_norm_strided::DEF
        .build(&tessera_ir::Specialization::new(
            vec![Scalar::F32],
            vec![Literal::F32(1.0)],
        ))
        .unwrap_err();
    assert!(e.to_string().contains("constexpr `n` is u32"), "{e}");
}

#[kernel]
fn type_error(x: Tensor<f32>, mut out: Tensor<f32>) {
    let v = load(x[thread_id()]);
    store(out[0], v / thread_id());
}

#[test]
fn type_errors_surface_at_build_time_with_the_source_line() {
    let e = type_error::ir().unwrap_err().to_string();
    assert!(e.contains("f32 and u32"), "{e}");
    assert!(e.contains("line "), "{e}");
}

#[test]
#[ignore = "prints IR for inspection"]
fn print_ir() {
    println!("{}", mixed::ir(2).unwrap());
    println!("{}", rms_norm_strided::ir(Scalar::F16, 64).unwrap());
}

/// Declares the launch shape it is compiled for.
#[kernel(group_size = 64, groups_per_core = 3)]
fn bounded(x: Tensor<f32>, mut out: Tensor<f32>) {
    let i = global_id();
    store(out[i], load(x[i]) * 2.0);
}

#[test]
fn a_declared_occupancy_reaches_the_ir_and_its_text() {
    let k = bounded::ir().unwrap();
    assert_eq!(
        k.occupancy,
        Some(tessera_ir::Occupancy {
            group_size: 64,
            groups_per_core: 3
        })
    );
    assert!(tessera_ir::printer::print_kernel(&k).contains("[group_size 64, groups_per_core 3]"));
    assert_eq!(mixed::ir(4).unwrap().occupancy, None);
}

/// A simdgroup passes values round through threadgroup memory behind `simd_barrier()`,
/// under a branch on the simdgroup.
#[kernel]
fn simd_round(x: Tensor<f32>, mut out: Tensor<f32>) {
    let tid = thread_id();
    let stage = threadgroup_array::<f32>(128);
    let mut v = load(x[tid]);
    if simd_id() == 0 {
        store(stage[tid], v);
        simd_barrier();
        v = load(stage[(tid + 1) % 32]);
    }
    store(out[tid], v);
}

#[test]
fn simd_barrier_builds_a_simdgroup_barrier_that_verifies() {
    let k = simd_round::ir().unwrap();
    let mut barriers = 0;
    k.body.block.walk(&mut |i| {
        barriers += usize::from(matches!(i.op, Op::SimdBarrier));
    });
    assert_eq!(barriers, 1, "{k}");
    assert!(k.to_string().contains("simd_barrier"), "{k}");
    tessera_ir::verify::verify_kernel(&k).unwrap();
}
