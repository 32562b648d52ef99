//! DSL functions that take memory (`Mem<T>`): one function body moves data between
//! device, threadgroup and stack memory, passes its memory on to another function, and
//! gives the same results on the CPU and the Metal emulator as the host computes; wrong
//! memory arguments are build errors.

use tessera::prelude::*;

/// Copies `n` elements of `src` from `s` into `dst` from `d`, each times `k`; returns their
/// sum (in f32).
#[func]
fn copy_scaled<T>(mut dst: Mem<T>, d: u32, src: Mem<T>, s: u32, n: u32, k: f32) -> f32 {
    let mut acc = 0.0f32;
    for i in 0..n {
        let x = load(src[s + i]).cast::<f32>() * k;
        store(dst[d + i], x.cast::<T>());
        acc += x;
    }
    acc
}

/// `copy_scaled` by 2, its memory arguments passed straight through.
#[func]
fn copy_doubled<T>(mut dst: Mem<T>, d: u32, src: Mem<T>, s: u32, n: u32) -> f32 {
    copy_scaled(dst, d, src, s, n, 2.0)
}

/// Thread `t` of a group stages its `n` elements of `x` in threadgroup memory, takes its
/// right neighbour's (halved) into a stack array, and writes them doubled to `out`.
/// `sums` gets the three copies' sums.
#[kernel]
fn staged<T>(x: Tensor<T>, mut out: Tensor<T>, mut sums: Tensor<f32>, #[constexpr] n: u32) {
    let tid = thread_id();
    let tile = threadgroup_array::<T>(64 * n);
    let regs = stack_array::<T>(n);
    let base = global_id() * n;
    let a = copy_scaled(tile, tid * n, x, base, n, 1.0);
    barrier();
    let right = (tid + 1) % group_size();
    let b = copy_scaled(regs, 0, tile, right * n, n, 0.5);
    let c = copy_doubled(out, base, regs, 0, n);
    store(sums[global_id()], a + b + c);
}

/// Passes a loaded value where the function takes memory.
#[kernel]
fn value_for_memory(x: Tensor<f32>, mut out: Tensor<f32>) {
    let v = load(x[0]);
    let s = copy_scaled(out, 0, v, 0, 1, 1.0);
    store(out[1], s);
}

/// Passes a read-only tensor where the function stores.
#[kernel]
fn read_only_for_store(x: Tensor<f32>, mut out: Tensor<f32>) {
    let s = copy_scaled(x, 0, out, 0, 1, 1.0);
    store(out[1], s);
}

/// Passes memory of two element types to one generic function.
#[kernel]
fn mixed_elements(x: Tensor<f16>, mut out: Tensor<f32>) {
    let s = copy_scaled(out, 0, x, 0, 1, 1.0);
    store(out[1], s);
}

fn contexts() -> Vec<Context> {
    let mut v = vec![Context::cpu()];
    // The Metal emulator needs g++; CI has it.
    if let Ok(c) = Context::by_name("metal-emu") {
        v.push(c);
    }
    v
}

#[test]
fn memory_arguments_move_data_between_every_memory_space() {
    let (groups, group, n) = (3usize, 64usize, 4usize);
    let total = groups * group * n;
    // Values exact in bf16 and f16 (multiples of 1/8 below 16), so every dtype is exact.
    let xs: Vec<f32> = (0..total)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 8.0)
        .collect();
    let mut want_out = vec![0f32; total];
    let mut want_sums = vec![0f32; groups * group];
    for g in 0..groups {
        for t in 0..group {
            let me = (g * group + t) * n;
            let right = (g * group + (t + 1) % group) * n;
            let mut s = 0f32;
            for i in 0..n {
                want_out[me + i] = xs[right + i];
                s += xs[me + i] + 0.5 * xs[right + i] + xs[right + i];
            }
            want_sums[g * group + t] = s;
        }
    }
    for ctx in contexts() {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let x = match dt {
                DType::F16 => ctx.tensor(
                    &xs.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>(),
                    &[total],
                ),
                DType::BF16 => ctx.tensor(
                    &xs.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>(),
                    &[total],
                ),
                _ => ctx.tensor(&xs, &[total]),
            }
            .unwrap();
            let out = ctx.zeros(dt, &[total]).unwrap();
            let sums = ctx.zeros(DType::F32, &[groups * group]).unwrap();
            staged::launch(
                &ctx,
                staged::Args {
                    x: &x,
                    out: &out,
                    sums: &sums,
                },
                staged::Consts { n: n as u32 },
            )
            .grid([groups as u32, 1, 1])
            .group_size(group as u32)
            .run()
            .unwrap_or_else(|e| panic!("{:?} {dt:?}: {e}", ctx.kind()));
            let got: Vec<f32> = out
                .to_f64_vec()
                .unwrap()
                .iter()
                .map(|&v| v as f32)
                .collect();
            assert_eq!(got, want_out, "{:?} {dt:?}", ctx.kind());
            let got = sums.to_vec::<f32>().unwrap();
            for (i, (g, w)) in got.iter().zip(&want_sums).enumerate() {
                assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{i}: {g} vs {w}");
            }
        }
    }
}

#[test]
fn wrong_memory_arguments_are_build_errors() {
    let e = value_for_memory::ir().unwrap_err().to_string();
    assert!(e.contains("is memory"), "{e}");
    let e = read_only_for_store::ir().unwrap_err().to_string();
    assert!(
        e.contains("stores to its memory but `x` is read-only"),
        "{e}"
    );
    let e = mixed_elements::ir().unwrap_err().to_string();
    assert!(e.contains("holds f16 but `src` is memory of f32"), "{e}");
}
