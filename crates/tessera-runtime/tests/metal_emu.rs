//! The Metal backend checked on Linux: the MSL emitted for hand-built kernels compiles
//! against the Metal model (`g++ -fsyntax-only`), runs under the fiber emulator with the
//! CPU backend's results on random inputs, and broken MSL (a wrong index, a dropped
//! barrier, divergent collectives, an out-of-bounds access) is caught. Needs g++.

mod metal_kernels;

use half::{bf16, f16};
use metal_kernels as mk;
use tessera_compiler::msl;
use tessera_compiler::{optimize, Target};
use tessera_ir::{Kernel, Literal, Scalar};
use tessera_runtime::metal_emu::{syntax_check, syntax_check_all, MetalEmuBackend};
use tessera_runtime::{
    Backend, BackendKind, CompiledKernel, Context, KernelArg, RuntimeError, Violation,
};

// ── inputs and comparison ──────────────────────────────────────────────────────────

struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        eprintln!("seed {t}");
        Rng(t | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [-2, 2).
    fn f32(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

fn bytes_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn bytes_f16(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| f16::from_f32(x).to_le_bytes())
        .collect()
}
fn bytes_bf16(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
        .collect()
}

/// A tensor argument: its contents, and whether the test reads it back.
struct Arg {
    name: &'static str,
    dtype: Scalar,
    data: Vec<u8>,
    output: bool,
}

fn input(name: &'static str, dtype: Scalar, data: Vec<u8>) -> Arg {
    Arg {
        name,
        dtype,
        data,
        output: false,
    }
}

/// An output poisoned with 0xff bytes (NaN for floats) so an unwritten element shows.
fn output(name: &'static str, dtype: Scalar, len: usize) -> Arg {
    Arg {
        name,
        dtype,
        data: vec![0xff; len * dtype.size_bytes()],
        output: true,
    }
}

/// The error of running `k` as one threadgroup of `group` threads on the emulator; the
/// run must fail.
fn one_group_error(k: &Kernel, args: &[Arg], scalars: &[(&str, Literal)], group: u32) -> String {
    run(&emu(), k, args, scalars, [1, 1, 1], group)
        .unwrap_err()
        .to_string()
}

fn run(
    ctx: &Context,
    k: &Kernel,
    args: &[Arg],
    scalars: &[(&str, Literal)],
    grid: [u32; 3],
    group: u32,
) -> Result<Vec<Vec<u8>>, RuntimeError> {
    let mut tensors = Vec::new();
    for a in args {
        let n = a.data.len() / a.dtype.size_bytes();
        tensors.push(ctx.tensor_from_bytes(a.dtype, &a.data, &[n])?);
    }
    let mut l = ctx.launch_ir(k).grid(grid).group_size(group);
    for (a, t) in args.iter().zip(&tensors) {
        l = l.arg(a.name, t);
    }
    for (name, v) in scalars {
        l = l.scalar(name, *v);
    }
    l.run()?;
    let mut out = Vec::new();
    for (a, t) in args.iter().zip(&tensors) {
        if a.output {
            out.push(t.to_bytes()?);
        }
    }
    Ok(out)
}

fn emu() -> Context {
    Context::by_name("metal-emu").expect("the metal-emu backend needs g++")
}

fn decode(dtype: Scalar, bytes: &[u8]) -> Vec<f64> {
    let w = dtype.size_bytes();
    bytes
        .chunks_exact(w)
        .map(|c| match dtype {
            Scalar::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            Scalar::F16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
            Scalar::BF16 => bf16::from_le_bytes([c[0], c[1]]).to_f64(),
            Scalar::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            Scalar::U32 => u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            Scalar::I8 => c[0] as i8 as f64,
            Scalar::U8 | Scalar::Bool => c[0] as f64,
        })
        .collect()
}

/// Elementwise equality within `tol` (relative), NaN only matching NaN.
fn assert_same(what: &str, dtype: Scalar, emu: &[u8], cpu: &[u8], tol: f64) {
    let (e, c) = (decode(dtype, emu), decode(dtype, cpu));
    assert_eq!(e.len(), c.len(), "{what}: lengths differ");
    for (i, (x, y)) in e.iter().zip(&c).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol * (1.0 + y.abs());
        assert!(ok, "{what}[{i}]: metal-emu gave {x}, cpu gave {y}");
    }
}

/// Runs on the CPU and the emulator and compares every output.
fn compare(
    k: &Kernel,
    args: &[Arg],
    scalars: &[(&str, Literal)],
    grid: [u32; 3],
    group: u32,
    tol: f64,
) {
    let cpu = run(&Context::cpu(), k, args, scalars, grid, group).expect("cpu run");
    let emu = run(&emu(), k, args, scalars, grid, group).expect("metal-emu run");
    let outs: Vec<&Arg> = args.iter().filter(|a| a.output).collect();
    for ((a, e), c) in outs.iter().zip(&emu).zip(&cpu) {
        let t = if a.dtype.is_float() { tol } else { 0.0 };
        let t = match a.dtype {
            Scalar::F16 => t.max(1e-3),
            Scalar::BF16 => t.max(8e-3),
            _ => t,
        };
        assert_same(&format!("{} `{}`", k.name, a.name), a.dtype, e, c, t);
    }
}

// ── the compile check ──────────────────────────────────────────────────────────────

fn all_kernels() -> Vec<Kernel> {
    let mut ks = vec![
        mk::simd_ops(),
        mk::tg_reduce(),
        mk::loops(),
        mk::scalar_math(),
        mk::atomics(),
        mk::barrier_in_if(),
        mk::simd_in_if(),
        mk::simd_rotate(),
        mk::offset_copy(),
        mk::runtime_step(),
    ];
    for elem in [Scalar::F32, Scalar::F16, Scalar::BF16, Scalar::U8] {
        for width in [2, 4, 8] {
            ks.push(mk::vector_io(elem, width));
        }
    }
    // As the Metal pipeline leaves them too (group reductions lowered, vectorized); the
    // pipeline's verifier rightly refuses the two divergent ones.
    let optimized: Vec<Kernel> = ks
        .iter()
        .filter(|k| !k.name.ends_with("_in_if"))
        .cloned()
        .chain([mk::group_max()])
        .map(|k| optimize(k, Target::Metal).expect("optimize"))
        .collect();
    ks.extend(optimized);
    ks
}

#[test]
fn every_test_kernel_passes_the_msl_syntax_check() {
    let sources: Vec<msl::MslSource> = all_kernels()
        .iter()
        .map(|k| msl::emit(k).expect("emit"))
        .collect();
    let results = syntax_check_all(&sources).expect("g++ runs");
    assert_eq!(results.len(), sources.len());
    for (s, r) in sources.iter().zip(&results) {
        assert!(
            r.is_ok(),
            "{}:\n{}\n{}",
            s.kernel_name,
            s.code,
            r.as_ref().unwrap_err()
        );
    }
    // What the shim must see to accept these: Metal idioms, not C++ ones.
    let all: String = sources.iter().map(|s| s.code.as_str()).collect();
    for needle in [
        "kernel void",
        "[[buffer(0)]]",
        "[[thread_position_in_threadgroup]]",
        "[[thread_index_in_simdgroup]]",
        "simd_sum(",
        "simd_prefix_inclusive_sum(",
        "simd_shuffle_xor(",
        "simd_shuffle_up(",
        "TESSERA_THREADGROUP_ARRAY float",
        "threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);",
        "atomic_fetch_add_explicit((device atomic_uint*)",
        "atomic_fetch_add_explicit((device atomic_float*)",
        "(const device half4*)",
        "(const device bfloat4*)",
        "constant uint& delta [[buffer(3)]]",
        "bfloat(",
    ] {
        assert!(all.contains(needle), "no `{needle}` in the emitted MSL");
    }
}

#[test]
fn the_syntax_check_reports_the_compiler_message_and_the_right_kernel() {
    let good = msl::emit(&mk::offset_copy()).unwrap();
    let mut bad = good.clone();
    bad.code = bad.code.replace("out[", "missing_buffer[");
    bad.kernel_name = "broken".into();
    let results = syntax_check_all(&[good.clone(), bad.clone(), good.clone()]).unwrap();
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    let msg = results[1].as_ref().unwrap_err();
    assert!(msg.contains("missing_buffer"), "{msg}");
    assert!(msg.contains("error"), "{msg}");
    assert!(
        msg.contains("offset_copy.metal:"),
        "diagnostics name the MSL file: {msg}"
    );
    let e = syntax_check(&bad).unwrap_err().to_string();
    assert!(e.contains("broken") && e.contains("missing_buffer"), "{e}");
    syntax_check(&good).unwrap();
}

// ── the emulator against the CPU backend ───────────────────────────────────────────

#[test]
fn simd_collectives_and_shuffles_match_the_cpu() {
    let k = mk::simd_ops();
    let (nf, ni) = mk::SIMD_OPS_OUTPUTS;
    let mut rng = Rng::new();
    for (groups, group, delta) in [(2u32, 64u32, 3u32), (1, 96, 33), (3, 32, 0)] {
        let total = (groups * group) as usize;
        let x = rng.f32s(total);
        let args = [
            input("x", Scalar::F32, bytes_f32(&x)),
            output("outf", Scalar::F32, nf * total),
            output("outi", Scalar::U32, ni * total),
        ];
        compare(
            &k,
            &args,
            &[("delta", Literal::U32(delta))],
            [groups, 1, 1],
            group,
            1e-5,
        );
    }
}

#[test]
fn threadgroup_memory_and_barriers_match_the_cpu() {
    let mut rng = Rng::new();
    for (groups, group) in [(3u32, 64u32), (2, 1024), (1, 96)] {
        let total = (groups * group) as usize;
        let x = rng.f32s(total);
        let args = [
            input("x", Scalar::F32, bytes_f32(&x)),
            output("out", Scalar::F32, groups as usize),
            output("rev", Scalar::F32, total),
        ];
        compare(&mk::tg_reduce(), &args, &[], [groups, 1, 1], group, 1e-5);
        let args = [
            input("x", Scalar::F32, bytes_f32(&x)),
            output("out", Scalar::F32, groups as usize),
        ];
        compare(&mk::group_max(), &args, &[], [groups, 1, 1], group, 0.0);
    }
}

/// Where `simd_rotate` puts `x`: even simdgroups rotate by one lane, odd ones copy.
fn simd_rotated(x: &[f32]) -> Vec<f64> {
    (0..x.len())
        .map(|i| {
            let (sg, lane) = (i / 32, i % 32);
            let from = if sg % 2 == 0 {
                sg * 32 + (lane + 1) % 32
            } else {
                i
            };
            x[from] as f64
        })
        .collect()
}

#[test]
fn a_simdgroup_barrier_orders_its_lanes_and_waits_for_no_other_simdgroup() {
    let mut rng = Rng::new();
    let (groups, group) = (3u32, 128u32);
    let x = rng.f32s((groups * group) as usize);
    let want = simd_rotated(&x);
    for ctx in [Context::cpu(), emu()] {
        let args = [
            input("x", Scalar::F32, bytes_f32(&x)),
            output("out", Scalar::F32, x.len()),
        ];
        let got = run(&ctx, &mk::simd_rotate(), &args, &[], [groups, 1, 1], group)
            .expect("simd_rotate runs");
        assert_eq!(decode(Scalar::F32, &got[0]), want, "{:?}", ctx.kind());
    }
}

#[test]
fn a_dropped_simdgroup_barrier_in_the_msl_gives_a_wrong_result() {
    let be = MetalEmuBackend::new().unwrap();
    let barrier = "simdgroup_barrier(mem_flags::mem_threadgroup);";
    let (good, bad) = mutated(&be, &mk::simd_rotate(), |code| code.replace(barrier, ""));
    let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let want = simd_rotated(&x);
    assert_eq!(launch_f32(&be, &good, &x, 64, 64, 1).unwrap(), want);
    let got = launch_f32(&be, &bad, &x, 64, 64, 1).unwrap();
    assert!(
        differs(&got, &want),
        "the emulator did not notice the missing simdgroup barrier"
    );
}

#[test]
fn loops_with_carried_values_match_the_cpu() {
    let mut rng = Rng::new();
    let (groups, group) = (2u32, 64u32);
    let total = (groups * group) as usize;
    for (n, step) in [(1000u32, 128u32), (500, 1), (7, 200)] {
        let x = rng.f32s(n as usize);
        let args = [
            input("x", Scalar::F32, bytes_f32(&x)),
            output("out", Scalar::F32, total),
            output("cnt", Scalar::I32, total),
        ];
        compare(
            &mk::loops(),
            &args,
            &[("n", Literal::U32(n)), ("step", Literal::U32(step))],
            [groups, 1, 1],
            group,
            1e-5,
        );
    }
    for step in [1u32, 7, 99, 100, 1000] {
        let args = [output("out", Scalar::U32, 32)];
        compare(
            &mk::runtime_step(),
            &args,
            &[("step", Literal::U32(step))],
            [1, 1, 1],
            32,
            0.0,
        );
    }
}

#[test]
fn scalar_semantics_match_the_cpu() {
    let mut rng = Rng::new();
    let (groups, group) = (2u32, 64u32);
    let total = (groups * group) as usize;
    let [nf, nh, nb, ni] = mk::SCALAR_MATH_OUTPUTS;
    let mut x = rng.f32s(total);
    // Values that reach the casts' edges: saturation, exact halves, zero.
    x[0] = 0.0;
    x[1] = 3.0;
    x[2] = -3.0;
    x[3] = 0.5;
    x[4] = 1e-3;
    let h = rng.f32s(total);
    let bf = rng.f32s(total);
    let args = [
        input("x", Scalar::F32, bytes_f32(&x)),
        input("h", Scalar::F16, bytes_f16(&h)),
        input("bf", Scalar::BF16, bytes_bf16(&bf)),
        output("outf", Scalar::F32, nf * total),
        output("outh", Scalar::F16, nh * total),
        output("outb", Scalar::BF16, nb * total),
        output("outi", Scalar::I32, ni * total),
    ];
    // Same libm on both sides: f32 results agree to rounding.
    compare(&mk::scalar_math(), &args, &[], [groups, 1, 1], group, 1e-6);
}

#[test]
fn atomics_match_the_cpu() {
    let mut rng = Rng::new();
    let (groups, group) = (4u32, 128u32);
    let total = (groups * group) as usize;
    let x = rng.f32s(total);
    let zeros = |n: usize, t: Scalar| Arg {
        name: "",
        dtype: t,
        data: vec![0; n * t.size_bytes()],
        output: true,
    };
    let mut ext = Vec::new();
    ext.extend_from_slice(&i32::MIN.to_le_bytes());
    ext.extend_from_slice(&i32::MAX.to_le_bytes());
    let mut bits = Vec::new();
    bits.extend_from_slice(&0u32.to_le_bytes());
    bits.extend_from_slice(&u32::MAX.to_le_bytes());
    let args = [
        input("x", Scalar::F32, bytes_f32(&x)),
        Arg {
            name: "hist",
            ..zeros(16, Scalar::U32)
        },
        Arg {
            name: "fsum",
            ..zeros(1, Scalar::F32)
        },
        Arg {
            name: "ext",
            dtype: Scalar::I32,
            data: ext,
            output: true,
        },
        Arg {
            name: "bits",
            dtype: Scalar::U32,
            data: bits,
            output: true,
        },
        Arg {
            name: "tgsum",
            ..zeros(100 + groups as usize, Scalar::F32)
        },
    ];
    compare(&mk::atomics(), &args, &[], [groups, 1, 1], group, 0.0);
}

#[test]
fn vector_loads_and_stores_match_the_cpu() {
    let mut rng = Rng::new();
    let (groups, group) = (2u32, 64u32);
    for elem in [Scalar::F32, Scalar::F16, Scalar::BF16, Scalar::U8] {
        for width in [2u8, 4, 8] {
            let n = (groups * group) as usize * width as usize;
            let x = rng.f32s(n);
            let data = match elem {
                Scalar::F32 => bytes_f32(&x),
                Scalar::F16 => bytes_f16(&x),
                Scalar::BF16 => bytes_bf16(&x),
                _ => x.iter().map(|v| ((v + 2.0) * 60.0) as u8).collect(),
            };
            let k = mk::vector_io(elem, width);
            let args = [
                input("x", elem, data),
                output("out", elem, n),
                output("rev", elem, n),
            ];
            compare(&k, &args, &[], [groups, 1, 1], group, 0.0);
        }
    }
}

#[test]
fn a_multi_dimensional_grid_fills_every_threadgroup_position() {
    use tessera_ir::{BinaryOp, Builder, Builtin, Value};
    let mut b = Builder::kernel("grid3");
    let out = b.tensor_param("out", Scalar::U32, true);
    let tid = b.builtin(Builtin::ThreadId);
    let gs = b.builtin(Builtin::GroupSize);
    let (x, y, z) = (
        b.builtin(Builtin::GroupIdX),
        b.builtin(Builtin::GroupIdY),
        b.builtin(Builtin::GroupIdZ),
    );
    let (nx, ny, nz) = (
        b.builtin(Builtin::NumGroupsX),
        b.builtin(Builtin::NumGroupsY),
        b.builtin(Builtin::NumGroupsZ),
    );
    let lin = b.binary(BinaryOp::Mul, z, ny).unwrap();
    let lin = b.binary(BinaryOp::Add, lin, y).unwrap();
    let lin = b.binary(BinaryOp::Mul, lin, nx).unwrap();
    let lin = b.binary(BinaryOp::Add, lin, x).unwrap();
    let at = b.binary(BinaryOp::Mul, lin, gs).unwrap();
    let at = b.binary(BinaryOp::Add, at, tid).unwrap();
    let v = b.binary(BinaryOp::Mul, lin, Value::Int(1000)).unwrap();
    let v = b.binary(BinaryOp::Add, v, nz).unwrap();
    let sg = b.builtin(Builtin::SimdGroups);
    let v = b.binary(BinaryOp::Add, v, sg).unwrap();
    b.store(out, at, v).unwrap();
    let k = b.finish_kernel().unwrap();
    let args = [output("out", Scalar::U32, 3 * 2 * 4 * 40)];
    compare(&k, &args, &[], [3, 2, 4], 40, 0.0);
}

// ── what the emulator must catch ───────────────────────────────────────────────────

// The launch's verifier rejects these two kernels before they run on any backend; the
// emulator is driven directly to show it catches the divergence at run time too (as it
// must for MSL that went wrong after verification).

#[test]
fn a_barrier_reached_by_part_of_the_threadgroup_is_reported() {
    let be = MetalEmuBackend::new().unwrap();
    let k = be.compile_emu(&mk::barrier_in_if()).unwrap();
    let x = vec![1.0f32; 64];
    let e = launch_with(&be, &k, &x, 64, &[Literal::U32(40)], 64, 1).unwrap_err();
    let s = e
        .sanitizer()
        .unwrap_or_else(|| panic!("not a sanitizer report: {e}"));
    assert_eq!(
        s.violation,
        Violation::DivergentBarrier {
            active: 40,
            group_size: 64
        },
        "{e}"
    );
    assert!(e.to_string().contains("threadgroup_barrier"), "{e}");
    // Everyone inside: fine.
    let ok = launch_with(&be, &k, &x, 64, &[Literal::U32(64)], 64, 1).unwrap();
    assert_eq!(ok, vec![1.0; 64]);
}

#[test]
fn a_collective_reached_by_part_of_a_simdgroup_is_reported() {
    let be = MetalEmuBackend::new().unwrap();
    let k = be.compile_emu(&mk::simd_in_if()).unwrap();
    let x = vec![1.0f32; 64];
    let e = launch_with(&be, &k, &x, 64, &[Literal::U32(20)], 64, 1).unwrap_err();
    match e.sanitizer().map(|s| &s.violation) {
        Some(Violation::DivergentSimd { active: 20, .. }) => {}
        _ => panic!("expected a divergent simdgroup report, got: {e}"),
    }
    let ok = launch_with(&be, &k, &x, 64, &[Literal::U32(32)], 64, 1).unwrap();
    assert_eq!(ok, vec![32.0; 64]);
}

#[test]
fn an_out_of_bounds_read_is_reported_with_the_tensor() {
    let x = vec![1.0f32; 64];
    let args = [
        input("x", Scalar::F32, bytes_f32(&x)),
        output("out", Scalar::F32, 64),
    ];
    let e = one_group_error(
        &mk::offset_copy(),
        &args,
        &[("off", Literal::U32(4096))],
        64,
    );
    assert!(e.contains("past the end of tensor `x`"), "{e}");
}

#[test]
fn a_zero_loop_step_is_an_error_not_a_hang() {
    let args = [output("out", Scalar::U32, 32)];
    let e = one_group_error(&mk::runtime_step(), &args, &[("step", Literal::U32(0))], 32);
    assert!(e.contains("step"), "{e}");
}

/// Compiles `k` for the emulator, and a copy whose MSL `mutate` changed.
fn mutated(
    be: &MetalEmuBackend,
    k: &Kernel,
    mutate: impl Fn(&str) -> String,
) -> (impl CompiledKernel, impl CompiledKernel) {
    let opt = optimize(k.clone(), Target::Metal).unwrap();
    let good = be.compile_emu(&opt).unwrap();
    let code = mutate(&good.source().code);
    assert_ne!(code, good.source().code, "the mutation changed nothing");
    let bad = be.with_source(&good, code).unwrap();
    (good, bad)
}

/// Runs a compiled kernel with one input and one output of `n` f32s; the output is
/// poisoned with NaN first.
fn launch_f32(
    be: &MetalEmuBackend,
    k: &dyn CompiledKernel,
    x: &[f32],
    n_out: usize,
    group: u32,
    groups: u32,
) -> Result<Vec<f64>, RuntimeError> {
    launch_with(be, k, x, n_out, &[], group, groups)
}

/// [`launch_f32`] with runtime scalars after the two tensors.
fn launch_with(
    be: &MetalEmuBackend,
    k: &dyn CompiledKernel,
    x: &[f32],
    n_out: usize,
    scalars: &[Literal],
    group: u32,
    groups: u32,
) -> Result<Vec<f64>, RuntimeError> {
    let xb = be.alloc(x.len() * 4)?;
    be.upload(&*xb, 0, &bytes_f32(x))?;
    let ob = be.alloc(n_out * 4)?;
    be.upload(&*ob, 0, &bytes_f32(&vec![f32::NAN; n_out]))?;
    let mut args = vec![KernelArg::Buffer(&*xb), KernelArg::Buffer(&*ob)];
    args.extend(scalars.iter().map(|&l| KernelArg::Scalar(l)));
    be.launch(k, &args, [groups, 1, 1], group)?;
    let mut out = vec![0u8; n_out * 4];
    be.download(&*ob, 0, &mut out)?;
    Ok(decode(Scalar::F32, &out))
}

fn differs(a: &[f64], b: &[f64]) -> bool {
    a.iter()
        .zip(b)
        .any(|(x, y)| !(x == y || (x - y).abs() < 1e-4))
}

#[test]
fn a_wrong_index_in_the_msl_gives_a_wrong_result() {
    let be = MetalEmuBackend::new().unwrap();
    // `x[i]` becomes `x[(i) / 2u]`: the upper half of the row is never read.
    let (good, bad) = mutated(&be, &mk::group_max(), |code| {
        let at = code.find("= x[").expect("a load from x");
        let close = at + code[at..].find(']').expect("closing bracket");
        let index = &code[at + 4..close];
        format!("{}= x[({index}) / 2u]{}", &code[..at], &code[close + 1..])
    });
    let mut x: Vec<f32> = (0..64).map(|i| i as f32).collect();
    x[63] = 100.0;
    assert_eq!(launch_f32(&be, &good, &x, 1, 64, 1).unwrap(), vec![100.0]);
    assert_eq!(launch_f32(&be, &bad, &x, 1, 64, 1).unwrap(), vec![31.0]);
}

#[test]
fn a_dropped_barrier_in_the_msl_gives_a_wrong_result() {
    let be = MetalEmuBackend::new().unwrap();
    let k = mk::tg_reduce();
    let opt = optimize(k, Target::Metal).unwrap();
    let good = be.compile_emu(&opt).unwrap();
    let barrier = "threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);";
    assert!(good.source().code.contains(barrier));
    let bad = be
        .with_source(&good, good.source().code.replace(barrier, ""))
        .unwrap();
    let mut rng = Rng::new();
    let (groups, group) = (3u32, 256u32);
    let x = rng.f32s((groups * group) as usize);
    let run3 = |k: &dyn CompiledKernel| -> Result<Vec<f64>, RuntimeError> {
        let xb = be.alloc(x.len() * 4)?;
        be.upload(&*xb, 0, &bytes_f32(&x))?;
        let ob = be.alloc(groups as usize * 4)?;
        let rb = be.alloc(x.len() * 4)?;
        be.launch(
            k,
            &[
                KernelArg::Buffer(&*xb),
                KernelArg::Buffer(&*ob),
                KernelArg::Buffer(&*rb),
            ],
            [groups, 1, 1],
            group,
        )?;
        let mut out = vec![0u8; groups as usize * 4];
        be.download(&*ob, 0, &mut out)?;
        let mut rev = vec![0u8; x.len() * 4];
        be.download(&*rb, 0, &mut rev)?;
        let mut all = decode(Scalar::F32, &out);
        all.extend(decode(Scalar::F32, &rev));
        Ok(all)
    };
    let want = run3(&good).unwrap();
    let sums: Vec<f64> = x
        .chunks(group as usize)
        .map(|c| c.iter().map(|&v| v as f64).sum())
        .collect();
    for (g, s) in want.iter().zip(&sums) {
        assert!(
            (g - s).abs() < 1e-3,
            "the intact kernel is right: {g} vs {s}"
        );
    }
    let got = run3(&bad).unwrap();
    assert!(
        differs(&got, &want),
        "the emulator did not notice the missing barrier"
    );
}

#[test]
fn the_backend_is_registered_by_name_and_is_not_the_default() {
    let ctx = emu();
    assert_eq!(ctx.kind(), BackendKind::MetalEmu);
    assert_eq!(ctx.info().simd_width, 32);
    if std::env::var("TESSERA_BACKEND").is_err() {
        let default = Context::new().unwrap();
        assert_ne!(default.kind(), BackendKind::MetalEmu);
    }
    // The generated MSL is what the compiled kernel keeps as its source.
    let be = MetalEmuBackend::new().unwrap();
    let k = be.compile(&mk::offset_copy()).unwrap();
    let sources = k.sources();
    assert_eq!(sources.len(), 1);
    assert_eq!(sources[0].0, "metal");
    assert!(sources[0].1.contains("kernel void offset_copy("));
}
