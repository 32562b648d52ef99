//! Asynchronous copies in the DSL: a two-stage pipeline that copies tile `j + 1` while it
//! computes on tile `j` (zero-filling past the end) matches a host reference on the CPU
//! and the Metal emulator for 4-, 8- and 16-byte copies; the CPU's race checker names a
//! read of a stage before its wait, a stage overwritten while it is read, a store into a
//! copy in flight, a wait with uncommitted copies and a kernel ending with copies in
//! flight; misuse is a build error saying what to write.

use tessera::prelude::*;
use tessera::runtime::{SanitizerError, Violation};

/// Threads per group; each copies `w` elements per tile.
const THREADS: usize = 64;

/// Thread `t` of group `g` sums `(j + 1) · x[g·n + j·tile + (63 − t)·w + e]` over tiles `j`
/// and `e < w` (0 past `n`), reading each tile from threadgroup memory where the copy put
/// it. `mode` plants one bug (0: none; 1: no wait; 2: the next tile into the stage being
/// read; 3: a store into a stage in flight; 4: a wait with the copy uncommitted; 5: a copy
/// left in flight at the end).
#[kernel]
fn tile_sums<T>(
    x: Tensor<T>,
    mut out: Tensor<f32>,
    n: u32,
    #[constexpr] w: u32,
    #[constexpr] mode: u32,
) {
    let tid = thread_id();
    let tile = 64 * w;
    let stages = threadgroup_array::<T>(2 * 64 * w);
    let row = group_id_x() * n;
    let tiles = (n + tile - 1) / tile;
    copy_async_or_zero(stages[tid * w], x[row + tid * w], w, tid * w < n);
    if mode != 4 {
        commit_copies();
    }
    let mut acc = 0.0f32;
    for j in 0..tiles {
        // Tile j has landed for this thread; after the barrier, for every thread, and no
        // thread still reads the other stage (tile j − 1).
        if mode != 1 {
            wait_copies(0);
        }
        barrier();
        let next = j + 1;
        if next < tiles {
            let at = next * tile + tid * w;
            let stage = select(mode == 2, j % 2, next % 2);
            copy_async_or_zero(stages[stage * tile + tid * w], x[row + at], w, at < n);
        }
        commit_copies();
        if mode == 3 {
            store(stages[(next % 2) * tile + tid * w], load(x[row]));
        }
        let base = (j % 2) * tile + (63 - tid) * w;
        for e in 0..w {
            acc += load(stages[base + e]).cast::<f32>() * (j + 1).cast::<f32>();
        }
    }
    if mode == 5 {
        copy_async(stages[tid * w], x[row + tid * w], w);
        commit_copies();
    }
    store(out[group_id_x() * 64 + tid], acc);
}

/// Copies into a tensor: not threadgroup memory.
#[kernel]
fn copy_into_tensor(x: Tensor<f32>, mut out: Tensor<f32>) {
    copy_async(out[0], x[0], 4);
    commit_copies();
    wait_copies(0);
}

/// Copies 12 bytes per thread.
#[kernel]
fn copy_twelve_bytes(x: Tensor<f32>, mut out: Tensor<f32>) {
    let t = threadgroup_array::<f32>(64);
    copy_async(t[0], x[0], 3);
    commit_copies();
    wait_copies(0);
    barrier();
    store(out[0], load(t[0]));
}

/// Copies f16 into an f32 array.
#[kernel]
fn copy_converting(x: Tensor<f16>, mut out: Tensor<f32>) {
    let t = threadgroup_array::<f32>(64);
    copy_async(t[0], x[0], 4);
    commit_copies();
    wait_copies(0);
    barrier();
    store(out[0], load(t[0]));
}

/// Copies from a threadgroup array.
#[kernel]
fn copy_from_threadgroup(x: Tensor<f32>, mut out: Tensor<f32>) {
    let a = threadgroup_array::<f32>(64);
    let t = threadgroup_array::<f32>(64);
    store(a[thread_id()], load(x[thread_id()]));
    barrier();
    copy_async(t[0], a[0], 4);
    commit_copies();
    wait_copies(0);
    store(out[0], load(t[0]));
}

/// Waits on a runtime count.
#[kernel]
fn wait_runtime_count(x: Tensor<f32>, mut out: Tensor<f32>, k: u32) {
    let t = threadgroup_array::<f32>(64);
    copy_async(t[0], x[0], 4);
    commit_copies();
    wait_copies(k);
    store(out[0], load(t[0]));
}

fn contexts() -> Vec<Context> {
    let mut v = vec![Context::cpu()];
    // The Metal emulator needs g++; CI has it.
    if let Ok(c) = Context::by_name("metal-emu") {
        v.push(c);
    }
    v
}

/// Random values exact in f16 and bf16 (multiples of 1/8 in ±8).
fn inputs(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s % 129) as f32 - 64.0) / 8.0
        })
        .collect()
}

fn reference(xs: &[f32], groups: usize, n: usize, w: usize) -> Vec<f32> {
    let tile = THREADS * w;
    let tiles = n.div_ceil(tile);
    let mut out = vec![0f32; groups * THREADS];
    for g in 0..groups {
        for t in 0..THREADS {
            let mut acc = 0f64;
            for j in 0..tiles {
                for e in 0..w {
                    let i = j * tile + (THREADS - 1 - t) * w + e;
                    if i < n {
                        acc += xs[g * n + i] as f64 * (j + 1) as f64;
                    }
                }
            }
            out[g * THREADS + t] = acc as f32;
        }
    }
    out
}

fn tensor_of(ctx: &Context, dt: DType, xs: &[f32]) -> Tensor {
    match dt {
        DType::F16 => ctx.tensor(
            &xs.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>(),
            &[xs.len()],
        ),
        DType::BF16 => ctx.tensor(
            &xs.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>(),
            &[xs.len()],
        ),
        _ => ctx.tensor(xs, &[xs.len()]),
    }
    .unwrap()
}

fn launch(
    ctx: &Context,
    x: &Tensor,
    out: &Tensor,
    groups: usize,
    n: usize,
    w: u32,
    mode: u32,
) -> Result<(), RuntimeError> {
    tile_sums::launch(
        ctx,
        tile_sums::Args {
            x,
            out,
            n: n as u32,
        },
        tile_sums::Consts { w, mode },
    )
    .grid([groups as u32, 1, 1])
    .group_size(THREADS as u32)
    .run()
}

#[test]
fn a_two_stage_pipeline_matches_the_reference_on_every_backend() {
    let groups = 3;
    // 4, 8 and 16 bytes per copy; lengths with a partial last tile and a whole one.
    let shapes = [
        (DType::F32, 1usize),
        (DType::F32, 2),
        (DType::F32, 4),
        (DType::F16, 2),
        (DType::F16, 8),
        (DType::BF16, 4),
        (DType::BF16, 8),
    ];
    for ctx in contexts() {
        for (k, &(dt, w)) in shapes.iter().enumerate() {
            for tiles_x4 in [3usize, 8, 9] {
                // A multiple of `w` elements: whole copies in bounds, the rest zero-filled.
                let n = tiles_x4 * THREADS * w / 4 + w;
                let xs = inputs(groups * n, 17 + k as u64 * 31 + n as u64);
                let want = reference(&xs, groups, n, w);
                let x = tensor_of(&ctx, dt, &xs);
                let out = ctx.zeros(DType::F32, &[groups * THREADS]).unwrap();
                launch(&ctx, &x, &out, groups, n, w as u32, 0)
                    .unwrap_or_else(|e| panic!("{:?} {dt:?} w={w} n={n}: {e}", ctx.kind()));
                let got = out.to_vec::<f32>().unwrap();
                for (i, (g, r)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (g - r).abs() <= 1e-5 * r.abs().max(1.0),
                        "{:?} {dt:?} w={w} n={n} [{i}]: {g} vs {r}",
                        ctx.kind()
                    );
                }
            }
        }
    }
}

fn sanitizer_error(mode: u32) -> SanitizerError {
    let ctx = Context::cpu();
    let (groups, w) = (2usize, 4usize);
    let n = 3 * THREADS * w;
    let x = tensor_of(&ctx, DType::F32, &inputs(groups * n, 5));
    let out = ctx.zeros(DType::F32, &[groups * THREADS]).unwrap();
    match launch(&ctx, &x, &out, groups, n, w as u32, mode) {
        Err(RuntimeError::Sanitizer(e)) => *e,
        other => panic!("mode {mode}: expected a sanitizer error, got {other:?}"),
    }
}

#[test]
fn a_read_before_the_wait_is_an_error_naming_kernel_op_and_index() {
    let e = sanitizer_error(1);
    assert!(e.kernel.starts_with("tile_sums"), "{}", e.kernel);
    assert!(e.op.contains("load shared stages["), "{}", e.op);
    // Thread 0 reads thread 63's first element of stage 0.
    assert_eq!(e.thread, 0);
    assert_eq!(
        e.violation,
        Violation::PendingCopy {
            memory: "stages".into(),
            index: 63 * 4,
            issuer: 63,
            write: false,
        }
    );
    let msg = e.to_string();
    assert!(msg.contains("wait_copies") && msg.contains("line"), "{msg}");
}

#[test]
fn overwriting_the_stage_being_read_is_an_error() {
    let e = sanitizer_error(2);
    assert!(e.op.contains("load shared stages["), "{}", e.op);
    // Tile 1 went into stage 0, which tile 0's sums still read.
    assert_eq!(
        e.violation,
        Violation::PendingCopy {
            memory: "stages".into(),
            index: 63 * 4,
            issuer: 63,
            write: false,
        }
    );
}

#[test]
fn a_store_into_a_copy_in_flight_is_an_error() {
    let e = sanitizer_error(3);
    assert!(e.op.starts_with("store shared stages["), "{}", e.op);
    assert_eq!(
        e.violation,
        Violation::PendingCopy {
            memory: "stages".into(),
            index: 256,
            issuer: 0,
            write: true,
        }
    );
}

#[test]
fn a_wait_on_uncommitted_copies_is_an_error() {
    let e = sanitizer_error(4);
    assert_eq!(e.op, "wait_copies");
    assert_eq!(
        e.violation,
        Violation::CopiesInFlight {
            copies: 1,
            at_end: false
        }
    );
    assert!(e.to_string().contains("commit_copies()"), "{e}");
}

#[test]
fn a_kernel_ending_with_copies_in_flight_is_an_error() {
    let e = sanitizer_error(5);
    assert!(e.op.starts_with("copy_async"), "{}", e.op);
    assert_eq!(
        e.violation,
        Violation::CopiesInFlight {
            copies: THREADS as u32,
            at_end: true
        }
    );
}

#[test]
fn misused_copies_are_build_errors_that_say_what_to_write() {
    let e = copy_into_tensor::ir().unwrap_err().to_string();
    assert!(
        e.contains("not a threadgroup array") && e.contains("threadgroup_array"),
        "{e}"
    );
    let e = copy_twelve_bytes::ir().unwrap_err().to_string();
    assert!(
        e.contains("12 bytes") && e.contains("copy 1, 2, 4 elements of f32"),
        "{e}"
    );
    let e = copy_converting::ir().unwrap_err().to_string();
    assert!(e.contains("holds f16 but `t` holds f32"), "{e}");
    let e = copy_from_threadgroup::ir().unwrap_err().to_string();
    assert!(e.contains("copies from device memory"), "{e}");
    let e = wait_runtime_count::ir().unwrap_err().to_string();
    assert!(e.contains("must be known when the kernel is built"), "{e}");
    // Every message carries the line of the misuse.
    assert!(e.contains("line"), "{e}");
}
