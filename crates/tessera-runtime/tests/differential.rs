//! Differential fuzzing of the compiler: random valid, safe kernels ([`random_kernel`])
//! run on random inputs (NaN, infinities, signed zeros, huge and subnormal values
//! included) on the CPU interpreter without the optimising passes, on the CPU after the
//! whole pipeline, on the emitted MSL under metal-emu, and — where a GPU is present — on
//! the emitted CUDA C. Every exact output must agree bit for bit (all NaNs count as one
//! value), every approximate output within its op's ULP bound
//! ([`random_kernel::ulp_bound`]). Every kernel's CUDA C must also compile under NVRTC
//! when `TESSERA_NVRTC_PATH` (or a system libnvrtc) is there.
//!
//! `TESSERA_FUZZ_SEED` picks the first seed and `TESSERA_FUZZ_CASES` the number of
//! kernels (12 by default: each costs metal-emu a g++ build the first time, cached after); a failure names the seed and
//! prints the kernel, so `TESSERA_FUZZ_SEED=<seed> TESSERA_FUZZ_CASES=1` replays it.
//! Needs g++ (metal-emu).

mod random_kernel;

use random_kernel as rk;
use tessera_compiler::{Source, Target};
use tessera_ir::{Kernel, Scalar};
use tessera_runtime::cuda::nvrtc::Nvrtc;
use tessera_runtime::{Context, RuntimeError, Tensor};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// The bytes of every output, in the order `out0..out4`, `approx_out`, `frag_out`.
type Outputs = Vec<Vec<u8>>;

fn run(
    ctx: &Context,
    kernel: &Kernel,
    optimize: bool,
    inp: &rk::HostInputs,
) -> Result<Outputs, RuntimeError> {
    let n_in = [rk::N_IN];
    let ins: Vec<(String, Tensor)> = vec![
        ("in0".into(), ctx.tensor(&inp.u32s, &n_in)?),
        ("in1".into(), ctx.tensor(&inp.i32s, &n_in)?),
        ("in2".into(), ctx.tensor(&inp.f32s, &n_in)?),
        ("in3".into(), ctx.tensor(&inp.f16s, &n_in)?),
        ("in4".into(), ctx.tensor(&inp.bf16s, &n_in)?),
        ("frag_in".into(), ctx.tensor(&inp.frag, &n_in)?),
    ];
    let mut outs: Vec<(String, Tensor)> = Vec::new();
    for (i, &t) in rk::TYPES.iter().enumerate() {
        let len = rk::THREADS * rk::SLOTS as usize;
        outs.push((format!("out{i}"), ctx.zeros(t, &[len])?));
    }
    let approx_len = rk::THREADS * rk::APPROX_SLOTS as usize;
    outs.push(("approx_out".into(), ctx.zeros(Scalar::F32, &[approx_len])?));
    let frag_len = rk::SIMDGROUPS * rk::FRAG_ELEMS;
    outs.push(("frag_out".into(), ctx.zeros(Scalar::F32, &[frag_len])?));
    let mut l = ctx.launch_ir(kernel);
    if !optimize {
        l = l.no_optimize();
    }
    for (name, t) in ins.iter().chain(&outs) {
        l = l.arg(name, t);
    }
    l.scalar("n", inp.n)
        .scalar("s", inp.s)
        .scalar("k", inp.k)
        .grid([rk::GROUPS, 1, 1])
        .group_size(rk::GROUP)
        .run()?;
    outs.iter().map(|(_, t)| t.to_bytes()).collect()
}

/// Distance in ULPs between two f32s of one sign class (`u32::MAX` across a sign change
/// or when only one is NaN).
fn ulps(a: f32, b: f32) -> u32 {
    if a.is_nan() && b.is_nan() {
        return 0;
    }
    if a.is_nan() || b.is_nan() {
        return u32::MAX;
    }
    if a == b {
        return 0;
    }
    let key = |x: f32| {
        let bits = x.to_bits() as i64;
        if bits < 0x8000_0000 {
            bits
        } else {
            0x8000_0000 - bits
        }
    };
    (key(a) - key(b)).unsigned_abs().min(u32::MAX as u64) as u32
}

fn as_f32s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

/// Two exact elements agree: equal bits, or both NaN for a float type.
fn same_exact(ty: Scalar, a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    match ty {
        Scalar::F32 => as_f32s(a)
            .zip(as_f32s(b))
            .all(|(x, y)| x.is_nan() && y.is_nan()),
        Scalar::F16 => {
            let x = tessera_ir::half::f16::from_le_bytes([a[0], a[1]]);
            let y = tessera_ir::half::f16::from_le_bytes([b[0], b[1]]);
            x.is_nan() && y.is_nan()
        }
        Scalar::BF16 => {
            let x = tessera_ir::half::bf16::from_le_bytes([a[0], a[1]]);
            let y = tessera_ir::half::bf16::from_le_bytes([b[0], b[1]]);
            x.is_nan() && y.is_nan()
        }
        _ => false,
    }
}

/// The first disagreement between `want` and `got`, described, or `None`.
fn difference(case: &rk::Case, want: &Outputs, got: &Outputs) -> Option<String> {
    let exact: Vec<(String, Scalar)> = rk::TYPES
        .iter()
        .enumerate()
        .map(|(i, &t)| (format!("out{i}"), t))
        .chain([("frag_out".to_string(), Scalar::F32)])
        .collect();
    let index_of = |name: &str| match name {
        "frag_out" => rk::TYPES.len() + 1,
        _ => name[3..].parse::<usize>().unwrap_or(0),
    };
    for (name, ty) in &exact {
        let k = index_of(name);
        let size = ty.size_bytes();
        for (e, (a, b)) in want[k]
            .chunks_exact(size)
            .zip(got[k].chunks_exact(size))
            .enumerate()
        {
            if !same_exact(*ty, a, b) {
                return Some(format!(
                    "{name} ({ty}) element {e} (thread {}, slot {}): want {a:02x?}, got {b:02x?}",
                    e / rk::SLOTS as usize,
                    e % rk::SLOTS as usize
                ));
            }
        }
    }
    let k = rk::TYPES.len();
    for (e, (a, b)) in as_f32s(&want[k]).zip(as_f32s(&got[k])).enumerate() {
        let slot = e % rk::APPROX_SLOTS as usize;
        let bound = case.approx.get(slot).map_or(0, |&op| rk::ulp_bound(op));
        let d = ulps(a, b);
        if d > bound {
            return Some(format!(
                "approx_out element {e} (thread {}, {:?}): want {a:e}, got {b:e}, {d} ULPs > {bound}",
                e / rk::APPROX_SLOTS as usize,
                case.approx.get(slot)
            ));
        }
    }
    None
}

/// NVRTC and the architecture to compile for, if the library is there.
fn nvrtc() -> Option<(&'static Nvrtc, String)> {
    match Nvrtc::get() {
        Ok(n) => Some((n, n.arch_for(90))),
        Err(e) => {
            println!("differential: NVRTC not found ({e}); CUDA C is not compiled");
            None
        }
    }
}

fn compile_cuda(nvrtc: &Nvrtc, arch: &str, kernel: &Kernel) -> Result<(), String> {
    let compiled =
        tessera_compiler::compile(kernel.clone(), Target::Cuda).map_err(|e| e.to_string())?;
    let Source::Cuda(src) = compiled.source else {
        return Err("the CUDA target emitted no CUDA C".into());
    };
    nvrtc
        .compile(&src.source, &src.entry, arch, &src.options)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn backends_agree_on_random_kernels() {
    let first = env_u64("TESSERA_FUZZ_SEED", 0xD1FF_0000);
    let cases = env_u64("TESSERA_FUZZ_CASES", 12);
    let started = std::time::Instant::now();
    let cpu = Context::cpu();
    let emu = Context::by_name("metal-emu").expect("the metal-emu backend needs g++");
    let cuda = Context::cuda(0).ok();
    if cuda.is_none() {
        println!("differential: no CUDA device; CUDA results are not compared");
    }
    let nvrtc = nvrtc();
    let (mut approx_checked, mut fragment_kernels, mut nvrtc_compiled) = (0, 0, 0);
    for seed in first..first + cases {
        let case = rk::gen_kernel(seed);
        let kernel = &case.kernel;
        tessera_ir::verify_kernel(kernel).unwrap_or_else(|e| {
            panic!("seed {seed}: the generator built invalid IR: {e}\n{kernel}")
        });
        let inp = rk::host_inputs(&mut rk::Rng(seed ^ 0x5EED));
        let base = run(&cpu, kernel, false, &inp)
            .unwrap_or_else(|e| panic!("seed {seed}: unoptimised CPU run failed: {e}\n{kernel}"));
        let mut others: Vec<(&str, &Context, bool)> =
            vec![("optimised CPU", &cpu, true), ("metal-emu", &emu, true)];
        if let Some(c) = &cuda {
            others.push(("CUDA", c, true));
        }
        for (what, ctx, optimize) in others {
            let got = run(ctx, kernel, optimize, &inp)
                .unwrap_or_else(|e| panic!("seed {seed}: {what} run failed: {e}\n{kernel}"));
            if let Some(d) = difference(&case, &base, &got) {
                let opt = tessera_compiler::optimize(kernel.clone(), Target::Cpu)
                    .map(|k| k.to_string())
                    .unwrap_or_else(|e| e.to_string());
                panic!(
                    "seed {seed}: {what} disagrees with the unoptimised CPU run: {d}\n\
                     --- kernel ---\n{kernel}\n--- optimised ---\n{opt}"
                );
            }
        }
        if let Some((n, arch)) = &nvrtc {
            compile_cuda(n, arch, kernel).unwrap_or_else(|e| {
                panic!("seed {seed}: NVRTC rejected the CUDA C: {e}\n{kernel}")
            });
            nvrtc_compiled += 1;
        }
        approx_checked += case.approx.len();
        fragment_kernels += case.uses_fragments as u32;
    }
    println!(
        "differential: {cases} kernels (seeds {first}..{}) agree on cpu, optimised cpu, \
         metal-emu{}; {approx_checked} approximate slots checked by ULP; {fragment_kernels} \
         with fragments; {nvrtc_compiled} compiled by NVRTC; {:.1} s",
        first + cases,
        if cuda.is_some() { ", cuda" } else { "" },
        started.elapsed().as_secs_f64()
    );
}

/// The comparison itself: one flipped bit in an exact output, or an approximate result
/// past its bound, is reported; NaNs with different payloads and a result within its
/// bound are not.
#[test]
fn the_comparison_catches_a_wrong_bit_and_respects_ulp_bounds() {
    assert_eq!(ulps(1.0, f32::from_bits(1.0f32.to_bits() + 3)), 3);
    assert_eq!(ulps(-0.0, 0.0), 0);
    assert_eq!(ulps(f32::MIN_POSITIVE, -f32::MIN_POSITIVE), 2 * 0x0080_0000);
    assert_eq!(ulps(f32::NAN, 1.0), u32::MAX);
    let case = rk::gen_kernel(1);
    let inp = rk::host_inputs(&mut rk::Rng(1));
    let want = run(&Context::cpu(), &case.kernel, false, &inp).expect("cpu run");
    assert!(difference(&case, &want, &want).is_none());
    for k in 0..want.len() {
        if want[k].is_empty() {
            continue;
        }
        let mut got = want.clone();
        let last = got[k].len() - 1;
        got[k][last] ^= 0x01;
        let d = difference(&case, &want, &got);
        if k == rk::TYPES.len() && case.approx.is_empty() || k != rk::TYPES.len() {
            assert!(d.is_some(), "a flipped bit in output {k} went unnoticed");
        }
    }
    let mut nan = want.clone();
    nan[2][..4].copy_from_slice(&f32::from_bits(0x7fc0_0001).to_le_bytes());
    let mut other_nan = want.clone();
    other_nan[2][..4].copy_from_slice(&f32::from_bits(0xffc0_0000).to_le_bytes());
    assert!(difference(&case, &nan, &other_nan).is_none());
}
