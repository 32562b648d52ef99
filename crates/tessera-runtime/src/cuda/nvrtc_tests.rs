//! Compiles the CUDA C of hand-built kernels with NVRTC — no GPU needed. Skips (saying
//! so) when NVRTC is absent, unless `TESSERA_REQUIRE_NVRTC=1` demands it.

use super::nvrtc::{Nvrtc, NvrtcError};
use tessera_compiler::cuda::{emit, samples};

fn nvrtc() -> Option<&'static Nvrtc> {
    match Nvrtc::get() {
        Ok(n) => Some(n),
        Err(e) => {
            if std::env::var("TESSERA_REQUIRE_NVRTC").is_ok_and(|v| v == "1") {
                panic!("TESSERA_REQUIRE_NVRTC=1 but NVRTC could not be loaded: {e}");
            }
            eprintln!("skipping: NVRTC not available ({e})");
            None
        }
    }
}

/// The PTX of a sample's CUDA C for the virtual architecture `arch`.
fn sample_ptx(n: &Nvrtc, s: &samples::Sample, arch: &str) -> String {
    let src = emit(&s.kernel).unwrap();
    n.compile(&src.source, s.name, arch, &src.options)
        .unwrap()
        .text
}

#[test]
fn every_sample_compiles_to_ptx_for_sm_90() {
    let Some(n) = nvrtc() else { return };
    for s in samples::all().unwrap() {
        let src = emit(&s.kernel).unwrap();
        let ptx = n
            .compile(&src.source, s.name, "compute_90", &src.options)
            .unwrap_or_else(|e| panic!("{e}\n--- source ---\n{}", src.source));
        assert!(ptx.text.contains(".target sm_90"), "{}", s.name);
        assert!(
            ptx.text.contains(&format!(".entry {}", src.entry)),
            "{}",
            s.name
        );
    }
}

#[test]
fn older_architectures_compile_too() {
    let Some(n) = nvrtc() else { return };
    let s = samples::half_casts().unwrap();
    // Before sm_80 bf16 rounding takes the integer path.
    let ptx = sample_ptx(n, &s, "compute_75");
    assert!(!ptx.contains("cvt.rn.bf16.f32"), "{ptx}");
    let ptx = sample_ptx(n, &s, "compute_90");
    assert!(ptx.contains("cvt.rn.bf16.f32"));
}

#[test]
fn vector_accesses_become_128_bit_memory_ops() {
    let Some(n) = nvrtc() else { return };
    let ptx = sample_ptx(n, &samples::vector_access().unwrap(), "compute_90");
    assert!(
        ptx.contains("ld.global.nc.v4.f32") || ptx.contains("ld.global.v4.f32"),
        "{ptx}"
    );
    assert!(ptx.contains("st.global.v4.f32"), "{ptx}");
    // bf16x8 is 16 bytes: one 128-bit access each way.
    assert!(ptx.contains(".v4.u32") || ptx.contains(".v4.b32"), "{ptx}");
}

#[test]
fn compile_errors_carry_the_nvrtc_log() {
    let Some(n) = nvrtc() else { return };
    let e = n
        .compile(
            "__global__ void k() { undefined_thing(); }",
            "broken",
            "compute_90",
            &[],
        )
        .unwrap_err();
    let NvrtcError::Compile { log, .. } = &e else {
        panic!("{e}")
    };
    assert!(log.contains("undefined_thing"), "{log}");
    assert!(e.to_string().contains("NVRTC log"), "{e}");
}

#[test]
fn fmad_is_off_so_mul_add_rounds_twice() {
    let Some(n) = nvrtc() else { return };
    let src =
        "extern \"C\" __global__ void k(float* o, float a, float b, float c) { o[0] = a * b + c; }";
    let opts = tessera_compiler::cuda::NVRTC_OPTIONS
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>();
    let ptx = n.compile(src, "k", "compute_90", &opts).unwrap().text;
    assert!(!ptx.contains("fma.rn.f32"), "{ptx}");
    let ptx = n.compile(src, "k", "compute_90", &[]).unwrap().text;
    assert!(ptx.contains("fma.rn.f32"), "{ptx}");
}

#[test]
fn every_optimised_sample_compiles_too() {
    let Some(n) = nvrtc() else { return };
    for s in samples::all().unwrap() {
        let k = tessera_compiler::optimize(s.kernel.clone(), tessera_compiler::Target::Cuda)
            .unwrap_or_else(|e| panic!("{}: {e}", s.name));
        let src = emit(&k).unwrap();
        n.compile(&src.source, s.name, "compute_90", &src.options)
            .unwrap_or_else(|e| panic!("{e}\n--- source ---\n{}", src.source));
    }
}

#[test]
fn asynchronous_copies_are_cp_async_from_sm_80_and_plain_copies_before() {
    let Some(n) = nvrtc() else { return };
    let s = samples::async_copy().unwrap();
    let ptx = sample_ptx(n, &s, "compute_90");
    for op in [
        "cp.async.cg.shared.global",
        "cp.async.ca.shared.global",
        "cp.async.commit_group",
        "cp.async.wait_group 0",
        "cvta.to.shared",
    ] {
        assert!(ptx.contains(op), "no {op}:\n{ptx}");
    }
    let ptx = sample_ptx(n, &s, "compute_75");
    assert!(!ptx.contains("cp.async"), "{ptx}");
}

#[test]
fn tile_products_are_wgmma_on_sm_90a_and_mma_sync_elsewhere() {
    let Some(n) = nvrtc() else { return };
    let s = samples::tile_mma().unwrap();
    let ptx = sample_ptx(n, &s, "compute_90a");
    for op in [
        "wgmma.fence.sync.aligned",
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16",
        "wgmma.commit_group.sync.aligned",
        "wgmma.wait_group.sync.aligned 0",
        "fence.proxy.async.shared::cta",
    ] {
        assert!(ptx.contains(op), "no {op}:\n{ptx}");
    }
    assert!(!ptx.contains("mma.sync.aligned.m16n8k16"), "{ptx}");
    for arch in ["compute_90", "compute_80"] {
        let ptx = sample_ptx(n, &s, arch);
        assert!(!ptx.contains("wgmma"), "{arch}: {ptx}");
        assert!(
            ptx.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"),
            "{arch}: {ptx}"
        );
        assert!(
            ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
            "{arch}: {ptx}"
        );
    }
}

#[test]
fn a_real_architecture_runs_ptxas_and_reports_registers() {
    let Some(n) = nvrtc() else { return };
    let s = samples::tile_mma().unwrap();
    let src = emit(&s.kernel).unwrap();
    let mut options = src.options.clone();
    options.push("-Xptxas=-v".into());
    let out = n.compile(&src.source, s.name, "sm_90a", &options).unwrap();
    assert!(out.text.is_empty(), "machine code, not PTX: {}", out.text);
    assert!(
        out.log.contains("Used ") && out.log.contains("registers"),
        "{}",
        out.log
    );
    // The sample waits for its products before touching the accumulators again.
    assert!(!out.log.contains("serialized"), "{}", out.log);
}
