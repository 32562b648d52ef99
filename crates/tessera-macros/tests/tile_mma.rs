//! The threadgroup's tile product `matrix_mma_tiles`, written in the DSL: tiles stored in
//! the 128-byte-swizzled layout, one and two warpgroups, three accumulators loaded from
//! memory, against an f64 reference (exact: the inputs are on a grid whose products and
//! sums f32 holds exactly) on the CPU, the Metal emulator and CUDA where present, with
//! operand A a tile or in registers; a group that is not whole warpgroups, a misaligned
//! tile, a tile index that differs between simdgroups and an operand in registers written
//! while a product reads it are errors.

use tessera_ir::half::bf16;
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

/// Stores the row-major `rows × 64` matrix `src` into the 128-byte-swizzled tile at `at`
/// of `dst` (element `(r, c)` at `at + 64r + 8((c / 8) ⊕ (r mod 8)) + c mod 8`), spread
/// over `threads` threads.
#[func]
fn stage_tile<T>(mut dst: Mem<T>, at: u32, src: Mem<T>, rows: u32, tid: u32, threads: u32) {
    for e in range(tid, rows * 64, threads) {
        let r = e / 64;
        let c = e % 64;
        store(
            dst[at + r * 64 + (((c >> 3) ^ (r & 7)) << 3) + (c & 7)],
            load(src[e]),
        );
    }
}

/// `x` as a bf16 tensor (every value is on a grid bf16 holds exactly).
fn bf16_tensor(ctx: &Context, x: &[f64]) -> Tensor {
    let h: Vec<bf16> = x.iter().map(|&y| bf16::from_f64(y)).collect();
    ctx.tensor(&h, &[x.len()]).unwrap()
}

/// `out = c + A·Bᵀ` per simdgroup block: A `16·S × 64` (S simdgroups) stored swizzled at
/// `a_at` of `sa`, B `48 × 64` at 0 of `sb`, c and out `16·S × 48` f32.
#[kernel]
fn tiles_product<T>(a: Tensor<T>, b: Tensor<T>, c: Tensor<f32>, mut out: Tensor<f32>, a_at: u32) {
    let sa = threadgroup_array::<T>(512 + 128 * 64);
    let sb = threadgroup_array::<T>(48 * 64);
    let tid = thread_id();
    stage_tile(sa, a_at, a, 16 * simd_groups(), tid, group_size());
    stage_tile(sb, 0, b, 48, tid, group_size());
    barrier();
    let acc = [matrix_acc(); 3];
    let s = simd_id();
    for j in 0..3 {
        matrix_load(acc[j], c[s * 768 + 16 * j], 48);
    }
    matrix_mma_tiles(acc, sa[a_at], sb[0]);
    for j in 0..3 {
        matrix_store(acc[j], out[s * 768 + 16 * j], 48);
    }
}

/// The product started asynchronously, then (by `mode`) 0: waited for and stored; 1: tile
/// A written before the wait; 2: an accumulator stored before the wait; 3: never waited for.
#[kernel]
fn async_product(a: Tensor<bf16>, mut out: Tensor<f32>, mode: u32) {
    let sa = threadgroup_array::<bf16>(64 * 64);
    let tid = thread_id();
    stage_tile(sa, 0, a, 64, tid, 128);
    barrier();
    let acc = [matrix_acc(); 4];
    for j in 0..4 {
        matrix_fill(acc[j], 0.0);
    }
    matrix_mma_tiles_async(acc, sa[0], sa[0]);
    if mode == 1 {
        store(sa[tid], load(a[0]));
    }
    if mode == 2 {
        matrix_store(acc[1], out[0], 64);
    }
    if mode != 3 {
        matrix_mma_wait(acc, 0);
    }
    if mode != 3 {
        let s = simd_id();
        for j in 0..4 {
            matrix_store(acc[j], out[s * 1024 + 16 * j], 64);
        }
    }
}

/// Two products chained into the same accumulators (A·Aᵀ from two tiles of `a`), one left
/// in flight by `matrix_mma_wait(acc, 1)`; then (by `mode`) 0: nothing; 1: the first
/// product's tile rewritten (retired: allowed); 2: the second's (in flight: an error).
#[kernel]
fn chained_products(a: Tensor<bf16>, mut out: Tensor<f32>, mode: u32) {
    let sa = threadgroup_array::<bf16>(2 * 64 * 64);
    let tid = thread_id();
    stage_tile(sa, 0, a, 2 * 64, tid, 128);
    barrier();
    let acc = [matrix_acc(); 4];
    for j in 0..4 {
        matrix_fill(acc[j], 0.0);
    }
    matrix_mma_tiles_async(acc, sa[0], sa[0]);
    matrix_mma_tiles_async(acc, sa[4096], sa[4096]);
    matrix_mma_wait(acc, 1);
    if mode == 1 {
        store(sa[tid], load(a[0]));
    }
    if mode == 2 {
        store(sa[4096 + tid], load(a[0]));
    }
    matrix_mma_wait(acc, 0);
    let s = simd_id();
    for j in 0..4 {
        matrix_store(acc[j], out[s * 1024 + 16 * j], 64);
    }
}

/// `out = A·B` with B `[64, 64]` (K × N) stored as a `[K, N]` tile (`matrix_mma_tiles_kn`):
/// element `(k, n)` at `4096·(n / 64) + swizzled(k, n mod 64)`; A 64 × 64 as usual.
#[kernel]
fn kn_product(a: Tensor<bf16>, b: Tensor<bf16>, mut out: Tensor<f32>) {
    let sa = threadgroup_array::<bf16>(64 * 64);
    let sb = threadgroup_array::<bf16>(64 * 64);
    let tid = thread_id();
    stage_tile(sa, 0, a, 64, tid, 128);
    // b is row-major [K, N]: a 64 × 64 [K, N] tile is one block, its rows along K.
    stage_tile(sb, 0, b, 64, tid, 128);
    barrier();
    let acc = [matrix_acc(); 4];
    for j in 0..4 {
        matrix_fill(acc[j], 0.0);
    }
    matrix_mma_tiles_kn(acc, sa[0], sb[0]);
    let s = simd_id();
    for j in 0..4 {
        matrix_store(acc[j], out[s * 1024 + 16 * j], 64);
    }
}

/// Tile B as `[K, N]` with accumulators not four at a time.
#[kernel]
fn kn_three_accumulators(mut out: Tensor<f32>) {
    let sa = threadgroup_array::<bf16>(4096);
    let acc = [matrix_acc(); 3];
    matrix_mma_tiles_kn(acc, sa[0], sa[0]);
    matrix_store(acc[0], out[0], 16);
}

/// A tile index that depends on the simdgroup.
#[kernel]
fn per_simdgroup_tile(mut out: Tensor<f32>) {
    let sa = threadgroup_array::<bf16>(2048);
    let acc = [matrix_acc(); 1];
    matrix_fill(acc[0], 0.0);
    matrix_mma_tiles(acc, sa[(simd_id() % 2) * 512], sa[0]);
    matrix_store(acc[0], out[0], 16);
}

/// `out = A·B` with A in registers: each simdgroup loads its 16 rows of the row-major
/// `16·S × 64` matrix `a` into four A operands; B `64 × 64` stored swizzled from `b`, as
/// `[N, K]` rows (`kn` 0, a synchronous product) or as a `[K, N]` tile (`kn` 1,
/// asynchronous then waited for); with `kn` 2 as 1, but operand `pa[2]` is reloaded
/// before the wait.
#[kernel]
fn register_product(a: Tensor<bf16>, b: Tensor<bf16>, mut out: Tensor<f32>, kn: u32) {
    let sb = threadgroup_array::<bf16>(64 * 64);
    let tid = thread_id();
    stage_tile(sb, 0, b, 64, tid, group_size());
    barrier();
    let s = simd_id();
    let pa = [matrix_a::<bf16>(); 4];
    for i in 0..4 {
        matrix_load(pa[i], a[s * 1024 + 16 * i], 64);
    }
    let acc = [matrix_acc(); 4];
    for j in 0..4 {
        matrix_fill(acc[j], 0.0);
    }
    if kn == 0 {
        matrix_mma_tiles(acc, pa, sb[0]);
    } else {
        matrix_mma_tiles_kn_async(acc, pa, sb[0]);
        if kn == 2 {
            matrix_load(pa[2], a[0], 64);
        }
        matrix_mma_wait(acc, 0);
    }
    for j in 0..4 {
        matrix_store(acc[j], out[s * 1024 + 16 * j], 64);
    }
}

/// xorshift values in `[-2, 2)` on a grid of 1/16.
fn values(len: usize, seed: u64) -> Vec<f64> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            -2.0 + (x % 64) as f64 / 16.0
        })
        .collect()
}

fn contexts() -> Vec<Context> {
    let mut v = vec![Context::cpu()];
    if let Ok(c) = Context::by_name("metal-emu") {
        v.push(c);
    }
    if let Ok(c) = Context::cuda(0) {
        v.push(c);
    }
    v
}

/// Launches `tiles_product` (bf16) with `threads` threads and tile A at `a_at`.
fn run(ctx: &Context, threads: u32, a_at: u32, seed: u64) -> Result<(Vec<f64>, Vec<f64>), String> {
    let rows = 16 * (threads as usize / 32).max(1);
    let (a, b, c) = (
        values(rows * 64, seed),
        values(48 * 64, seed + 1),
        values(rows * 48, seed + 2),
    );
    let tc = ctx
        .tensor(&c.iter().map(|&y| y as f32).collect::<Vec<_>>(), &[c.len()])
        .unwrap();
    let out = ctx.zeros(DType::F32, &[rows * 48]).unwrap();
    let k = tiles_product::ir(tessera_ir::Scalar::BF16).unwrap();
    ctx.launch_ir(&k)
        .arg("a", &bf16_tensor(ctx, &a))
        .arg("b", &bf16_tensor(ctx, &b))
        .arg("c", &tc)
        .arg("out", &out)
        .scalar("a_at", a_at)
        .grid([1, 1, 1])
        .group_size(threads)
        .run()
        .map_err(|e| e.to_string())?;
    let mut want = c.clone();
    for r in 0..rows {
        for col in 0..48 {
            want[r * 48 + col] += (0..64)
                .map(|k| a[r * 64 + k] * b[col * 64 + k])
                .sum::<f64>();
        }
    }
    Ok((out.to_f64_vec().unwrap(), want))
}

#[test]
fn the_tile_product_matches_the_math_on_one_and_two_warpgroups() {
    for ctx in contexts() {
        for (threads, a_at, seed) in [(128, 0, 3), (256, 512, 11), (128, 512, 29)] {
            let (got, want) = run(&ctx, threads, a_at, seed).unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "out[{i}] on {} ({threads} threads)", ctx.info().name);
            }
        }
    }
}

#[test]
fn a_group_of_partial_warpgroups_is_refused() {
    let e = run(&Context::cpu(), 64, 0, 1).unwrap_err();
    assert!(e.contains("multiple of 128"), "{e}");
}

#[test]
fn a_tile_off_a_1024_byte_boundary_is_an_error() {
    let e = run(&Context::cpu(), 128, 256, 1).unwrap_err();
    assert!(e.contains("not a multiple of 512"), "{e}");
}

#[test]
fn a_tile_index_that_differs_between_simdgroups_is_refused_before_it_runs() {
    let ctx = Context::cpu();
    let out = ctx.zeros(DType::F32, &[256]).unwrap();
    let k = per_simdgroup_tile::ir().unwrap();
    let e = ctx
        .launch_ir(&k)
        .arg("out", &out)
        .grid([1, 1, 1])
        .group_size(128)
        .run()
        .unwrap_err()
        .to_string();
    assert!(e.contains("threadgroup collective"), "{e}");
}

/// Runs `async_product` in `mode` on `ctx`: A·Aᵀ (64 × 64) or the error.
fn run_async(ctx: &Context, mode: u32) -> Result<(Vec<f64>, Vec<f64>), String> {
    let a = values(64 * 64, 41);
    let ta = bf16_tensor(ctx, &a);
    let out = ctx.zeros(DType::F32, &[64 * 64]).unwrap();
    let k = async_product::ir().unwrap();
    ctx.launch_ir(&k)
        .arg("a", &ta)
        .arg("out", &out)
        .scalar("mode", mode)
        .grid([1, 1, 1])
        .group_size(128)
        .run()
        .map_err(|e| e.to_string())?;
    let mut want = vec![0.0; 64 * 64];
    for r in 0..64 {
        for c in 0..64 {
            want[r * 64 + c] = (0..64).map(|k| a[r * 64 + k] * a[c * 64 + k]).sum();
        }
    }
    Ok((out.to_f64_vec().unwrap(), want))
}

#[test]
fn an_asynchronous_product_waited_for_matches_the_math() {
    for ctx in contexts() {
        let (got, want) = run_async(&ctx, 0).unwrap();
        assert_eq!(got, want, "on {}", ctx.info().name);
    }
}

#[test]
fn touching_an_asynchronous_product_before_its_wait_is_reported() {
    let ctx = Context::cpu();
    for (mode, says) in [
        (1, "writes element"),
        (2, "uses accumulator `acc[1]`"),
        (3, "the kernel ends"),
    ] {
        let e = run_async(&ctx, mode).unwrap_err();
        assert!(
            e.contains(says) && e.contains("matrix_mma_wait"),
            "mode {mode}: {e}"
        );
    }
}

#[test]
fn a_wait_that_leaves_one_product_in_flight_retires_the_older_one() {
    let a = values(2 * 64 * 64, 57);
    let mut want = vec![0.0; 64 * 64];
    for h in 0..2 {
        for r in 0..64 {
            for c in 0..64 {
                want[r * 64 + c] += (0..64)
                    .map(|k| a[h * 4096 + r * 64 + k] * a[h * 4096 + c * 64 + k])
                    .sum::<f64>();
            }
        }
    }
    let k = chained_products::ir().unwrap();
    for ctx in contexts() {
        for mode in [0u32, 1, 2] {
            let ta = bf16_tensor(&ctx, &a);
            let out = ctx.zeros(DType::F32, &[64 * 64]).unwrap();
            let r = ctx
                .launch_ir(&k)
                .arg("a", &ta)
                .arg("out", &out)
                .scalar("mode", mode)
                .grid([1, 1, 1])
                .group_size(128)
                .run();
            let name = &ctx.info().name;
            if mode == 2 && name.starts_with("cpu") {
                let e = r.unwrap_err().to_string();
                assert!(
                    e.contains("writes element") && e.contains("in flight"),
                    "{e}"
                );
                continue;
            }
            if mode == 2 {
                continue; // a race on a GPU: only the CPU can report it
            }
            r.unwrap();
            assert_eq!(out.to_f64_vec().unwrap(), want, "mode {mode} on {name}");
        }
    }
}

#[test]
fn a_k_by_n_tile_b_matches_the_math() {
    let (a, b) = (values(64 * 64, 71), values(64 * 64, 73));
    let mut want = vec![0.0; 64 * 64];
    for r in 0..64 {
        for c in 0..64 {
            want[r * 64 + c] = (0..64).map(|k| a[r * 64 + k] * b[k * 64 + c]).sum();
        }
    }
    let k = kn_product::ir().unwrap();
    for ctx in contexts() {
        let out = ctx.zeros(DType::F32, &[64 * 64]).unwrap();
        ctx.launch_ir(&k)
            .arg("a", &bf16_tensor(&ctx, &a))
            .arg("b", &bf16_tensor(&ctx, &b))
            .arg("out", &out)
            .grid([1, 1, 1])
            .group_size(128)
            .run()
            .unwrap();
        assert_eq!(out.to_f64_vec().unwrap(), want, "on {}", ctx.info().name);
    }
}

#[test]
fn a_k_by_n_tile_b_takes_accumulators_four_at_a_time() {
    let e = kn_three_accumulators::ir().unwrap_err().to_string();
    assert!(e.contains("four at a time"), "{e}");
}

/// Launches `register_product` with `threads` threads: `A·B` or the error.
fn run_registers(
    ctx: &Context,
    threads: u32,
    kn: u32,
    seed: u64,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let rows = threads as usize / 2;
    let (a, b) = (values(rows * 64, seed), values(64 * 64, seed + 1));
    let out = ctx.zeros(DType::F32, &[rows * 64]).unwrap();
    let k = register_product::ir().unwrap();
    ctx.launch_ir(&k)
        .arg("a", &bf16_tensor(ctx, &a))
        .arg("b", &bf16_tensor(ctx, &b))
        .arg("out", &out)
        .scalar("kn", kn)
        .grid([1, 1, 1])
        .group_size(threads)
        .run()
        .map_err(|e| e.to_string())?;
    let mut want = vec![0.0; rows * 64];
    for r in 0..rows {
        for c in 0..64 {
            // B's rows are output columns, or (`[K, N]`) its columns are.
            let bkc = |k: usize| {
                if kn == 0 {
                    b[c * 64 + k]
                } else {
                    b[k * 64 + c]
                }
            };
            want[r * 64 + c] = (0..64).map(|k| a[r * 64 + k] * bkc(k)).sum();
        }
    }
    Ok((out.to_f64_vec().unwrap(), want))
}

#[test]
fn operand_a_in_registers_matches_the_math() {
    for ctx in contexts() {
        for (threads, kn, seed) in [(128, 0, 81), (256, 0, 83), (128, 1, 85), (256, 1, 87)] {
            let (got, want) = run_registers(&ctx, threads, kn, seed).unwrap();
            assert_eq!(
                got,
                want,
                "{threads} threads, kn {kn} on {}",
                ctx.info().name
            );
        }
    }
}

#[test]
fn writing_an_operand_in_registers_before_the_wait_is_reported() {
    let e = run_registers(&Context::cpu(), 128, 2, 89).unwrap_err();
    assert!(
        e.contains("writes operand `pa[2]`") && e.contains("matrix_mma_wait"),
        "{e}"
    );
}
