//! Matrix fragments and fragment arrays as `#[func]` arguments: a kernel whose loads,
//! products, row reductions and stores of its fragments run in functions gives, bit for
//! bit, what the same kernel written inline gives, and both match an f64 reference
//! written from the math, on the CPU and under the Metal emulator (and on CUDA where a
//! GPU is present), for f16 and bf16; so does a warpgroup tile product
//! (`matrix_mma_tiles`) on an accumulator array and threadgroup tiles a function takes. A fragment argument of the wrong role, length or
//! element type is a build error that names the argument.

use tessera_ir::half::{bf16, f16};
use tessera_ir::Scalar;
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

/// Loads each accumulator of `acc` from `src[base + 16j]` (row stride `stride`).
#[func]
fn load_tiles(acc: [MatrixAcc], src: Mem<f32>, base: u32, stride: u32) {
    for j in 0..acc.len() {
        matrix_load(acc[j], src[base + 16 * j], stride);
    }
}

/// `acc[j] += a · B_j` for the 16×16 column tiles `B_j` of `b` from `b[base]` (row stride
/// 16 · the number of tiles), each loaded into `fb`.
#[func]
fn mma_tiles<T>(acc: [MatrixAcc], a: MatrixA<T>, fb: MatrixB<T>, b: Mem<T>, base: u32) {
    for j in 0..acc.len() {
        matrix_load(fb, b[base + 16 * j], 16 * acc.len());
        matrix_mma(acc[j], a, fb, acc[j]);
    }
}

/// `acc = c + a · b` for threadgroup `g`'s block: a function passing its fragment
/// arguments on to others.
#[func]
fn load_and_multiply<T>(
    acc: [MatrixAcc],
    fa: MatrixA<T>,
    fb: MatrixB<T>,
    a: Mem<T>,
    b: Mem<T>,
    c: Mem<f32>,
    g: u32,
) {
    load_tiles(acc, c, g * 512, 16 * acc.len());
    matrix_load(fa, a[g * 256], 16);
    mma_tiles(acc, fa, fb, b, g * 512);
}

/// The row max and row sum of two accumulators side by side.
#[func]
fn row_stats(mx: MatrixRows, sum: MatrixRows, acc: [MatrixAcc; 2]) {
    matrix_fill(mx, f32::NEG_INFINITY);
    matrix_fill(sum, 0.0);
    for j in 0..2 {
        matrix_row_max(mx, acc[j]);
        matrix_row_sum(sum, acc[j]);
    }
}

/// Stores row vector `r` as a 16×16 tile at `out[base]` (each row's value in every
/// column), through accumulator `t`.
#[func]
fn store_rows(r: MatrixRows, t: MatrixAcc, mut out: Mem<f32>, base: u32) {
    matrix_fill(t, 1.0);
    matrix_row_scale(t, r);
    matrix_store(t, out[base], 16);
}

/// Per threadgroup `g` (one simdgroup): `out = c + a · b` for 16×16 `a`, 16×32 `b` and
/// `c`, stored doubled in its first column tile; `rows_out` the row max and row sum of
/// `c + a · b` (before the doubling), each as a 16×16 tile. Through the functions above,
/// one of them calling two others.
#[kernel(group_size = 32)]
fn with_funcs<T>(
    a: Tensor<T>,
    b: Tensor<T>,
    c: Tensor<f32>,
    mut out: Tensor<f32>,
    mut rows_out: Tensor<f32>,
) {
    let g = group_id_x();
    let acc = [matrix_acc(); 2];
    let fa = matrix_a::<T>();
    let fb = matrix_b::<T>();
    let mx = matrix_rows();
    let sum = matrix_rows();
    let tile = matrix_acc();
    load_and_multiply(acc, fa, fb, a, b, c, g);
    row_stats(mx, sum, acc);
    matrix_scale(acc[0], 2.0);
    for j in 0..2 {
        matrix_store(acc[j], out[g * 512 + 16 * j], 32);
    }
    store_rows(mx, tile, rows_out, g * 512);
    store_rows(sum, tile, rows_out, g * 512 + 256);
}

/// [`with_funcs`] written inline.
#[kernel(group_size = 32)]
fn inline<T>(
    a: Tensor<T>,
    b: Tensor<T>,
    c: Tensor<f32>,
    mut out: Tensor<f32>,
    mut rows_out: Tensor<f32>,
) {
    let g = group_id_x();
    let acc = [matrix_acc(); 2];
    let fa = matrix_a::<T>();
    let fb = matrix_b::<T>();
    let mx = matrix_rows();
    let sum = matrix_rows();
    let tile = matrix_acc();
    for j in 0..2 {
        matrix_load(acc[j], c[g * 512 + 16 * j], 32);
    }
    matrix_load(fa, a[g * 256], 16);
    for j in 0..2 {
        matrix_load(fb, b[g * 512 + 16 * j], 32);
        matrix_mma(acc[j], fa, fb, acc[j]);
    }
    matrix_fill(mx, f32::NEG_INFINITY);
    matrix_fill(sum, 0.0);
    for j in 0..2 {
        matrix_row_max(mx, acc[j]);
        matrix_row_sum(sum, acc[j]);
    }
    matrix_scale(acc[0], 2.0);
    for j in 0..2 {
        matrix_store(acc[j], out[g * 512 + 16 * j], 32);
    }
    matrix_fill(tile, 1.0);
    matrix_row_scale(tile, mx);
    matrix_store(tile, rows_out[g * 512], 16);
    matrix_fill(tile, 1.0);
    matrix_row_scale(tile, sum);
    matrix_store(tile, rows_out[g * 512 + 256], 16);
}

/// `acc += A·Bᵀ` on the threadgroup's swizzled tiles `sa[a_at]` and `sb[0]`.
#[func]
fn tile_product<T>(acc: [MatrixAcc], sa: Mem<T>, a_at: u32, sb: Mem<T>) {
    matrix_mma_tiles(acc, sa[a_at], sb[0]);
}

/// `out = c + A·Bᵀ` for A `64 × 64` (a simdgroup's 16 rows each) and B `32 × 64`, through
/// [`tile_product`] on two accumulators a simdgroup, stored by [`store_tiles`]; 128
/// threads.
#[kernel(group_size = 128)]
fn tile_product_via_func<T>(a: Tensor<T>, b: Tensor<T>, c: Tensor<f32>, mut out: Tensor<f32>) {
    let sa = threadgroup_array::<T>(64 * 64);
    let sb = threadgroup_array::<T>(32 * 64);
    let tid = thread_id();
    for e in range(tid, 64 * 64, 128) {
        let r = e / 64;
        let col = e % 64;
        store(
            sa[r * 64 + (((col >> 3) ^ (r & 7)) << 3) + (col & 7)],
            load(a[e]),
        );
        if e < 32 * 64 {
            store(
                sb[r * 64 + (((col >> 3) ^ (r & 7)) << 3) + (col & 7)],
                load(b[e]),
            );
        }
    }
    barrier();
    let acc = [matrix_acc(); 2];
    let s = simd_id();
    load_tiles(acc, c, s * 512, 32);
    tile_product(acc, sa, 0, sb);
    store_tiles(acc, out, s * 512, 32);
}

/// Stores each accumulator of `acc` at `dst[base + 16j]` (row stride `stride`).
#[func]
fn store_tiles(acc: [MatrixAcc], mut dst: Mem<f32>, base: u32, stride: u32) {
    for j in 0..acc.len() {
        matrix_store(acc[j], dst[base + 16 * j], stride);
    }
}

/// A row vector where an accumulator array is declared.
#[kernel(group_size = 32)]
fn wrong_role(c: Tensor<f32>, mut out: Tensor<f32>) {
    let acc = [matrix_acc(); 2];
    let mx = matrix_rows();
    let sum = matrix_acc();
    load_tiles(acc, c, 0, 32);
    row_stats(mx, sum, acc);
    matrix_store(acc[0], out[0], 32);
}

/// Three accumulators where two are declared.
#[kernel(group_size = 32)]
fn wrong_length(c: Tensor<f32>, mut out: Tensor<f32>) {
    let acc = [matrix_acc(); 3];
    let mx = matrix_rows();
    let sum = matrix_rows();
    load_tiles(acc, c, 0, 48);
    row_stats(mx, sum, acc);
    matrix_store(acc[0], out[0], 48);
}

/// A bf16 B operand beside an f16 A operand (`T` is bound by the first).
#[kernel(group_size = 32)]
fn wrong_dtype(a: Tensor<f16>, b: Tensor<f16>, mut out: Tensor<f32>) {
    let acc = [matrix_acc(); 1];
    let fa = matrix_a::<f16>();
    let fb = matrix_b::<bf16>();
    matrix_fill(acc[0], 0.0);
    matrix_load(fa, a[0], 16);
    mma_tiles(acc, fa, fb, b, 0);
    matrix_store(acc[0], out[0], 16);
}

/// A value where a fragment array is declared.
#[kernel(group_size = 32)]
fn value_for_fragments(c: Tensor<f32>, mut out: Tensor<f32>) {
    let x = load(c[0]);
    load_tiles(x, c, 0, 32);
    store(out[0], x);
}

/// A fragment array where a value is declared.
#[kernel(group_size = 32)]
fn fragments_for_a_value(c: Tensor<f32>, mut out: Tensor<f32>) {
    let acc = [matrix_acc(); 2];
    load_tiles(acc, c, acc, 32);
    matrix_store(acc[0], out[0], 32);
}

/// xorshift values in `[lo, hi)` on a grid of 1/8 (exact in f16 and bf16 for |x| < 16).
fn values(len: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut x = seed | 1;
    let steps = ((hi - lo) * 8.0) as u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            lo + (x % steps) as f64 / 8.0
        })
        .collect()
}

/// `(out, rows)` from the math for `groups` blocks: `c + a·b` (first column tile
/// doubled), then per row the max and the sum of `c + a·b`, each spread over 16 columns.
fn reference(a: &[f64], b: &[f64], c: &[f64], groups: usize) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; groups * 512];
    let mut rows = vec![0.0; groups * 512];
    for g in 0..groups {
        for r in 0..16 {
            let mut row = [0.0; 32];
            for (col, x) in row.iter_mut().enumerate() {
                *x = c[g * 512 + r * 32 + col]
                    + (0..16)
                        .map(|k| a[g * 256 + r * 16 + k] * b[g * 512 + k * 32 + col])
                        .sum::<f64>();
                let scale = if col < 16 { 2.0 } else { 1.0 };
                out[g * 512 + r * 32 + col] = *x * scale;
            }
            let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().sum();
            for col in 0..16 {
                rows[g * 512 + r * 16 + col] = mx;
                rows[g * 512 + 256 + r * 16 + col] = sum;
            }
        }
    }
    (out, rows)
}

fn contexts() -> Vec<Context> {
    let mut v = vec![Context::cpu()];
    // The Metal emulator needs g++; CI has it.
    if let Ok(c) = Context::by_name("metal-emu") {
        v.push(c);
    }
    if let Ok(c) = Context::cuda(0) {
        v.push(c);
    }
    v
}

fn half_tensor(ctx: &Context, t: Scalar, x: &[f64]) -> Tensor {
    if t == Scalar::BF16 {
        let h: Vec<bf16> = x.iter().map(|&v| bf16::from_f64(v)).collect();
        ctx.tensor(&h, &[x.len()]).unwrap()
    } else {
        let h: Vec<f16> = x.iter().map(|&v| f16::from_f64(v)).collect();
        ctx.tensor(&h, &[x.len()]).unwrap()
    }
}

/// Runs `k` and returns (out, rows).
fn run(
    ctx: &Context,
    k: &tessera_ir::Kernel,
    ins: (&Tensor, &Tensor, &Tensor),
    groups: usize,
) -> (Vec<f64>, Vec<f64>) {
    let out = ctx.zeros(DType::F32, &[groups * 512]).unwrap();
    let rows = ctx.zeros(DType::F32, &[groups * 512]).unwrap();
    ctx.launch_ir(k)
        .arg("a", ins.0)
        .arg("b", ins.1)
        .arg("c", ins.2)
        .arg("out", &out)
        .arg("rows_out", &rows)
        .grid([groups as u32, 1, 1])
        .group_size(32)
        .run()
        .unwrap();
    (out.to_f64_vec().unwrap(), rows.to_f64_vec().unwrap())
}

#[test]
fn fragment_arguments_give_what_the_inline_kernel_gives() {
    let groups = 3;
    for ctx in contexts() {
        let name = ctx.info().name.clone();
        for (s, t) in [Scalar::F16, Scalar::BF16].into_iter().enumerate() {
            let seed = 11 + 5 * s as u64;
            let a = values(groups * 256, seed, -2.0, 2.0);
            let b = values(groups * 512, seed + 1, -2.0, 2.0);
            let c = values(groups * 512, seed + 2, -8.0, 8.0);
            let (ta, tb) = (half_tensor(&ctx, t, &a), half_tensor(&ctx, t, &b));
            let c32: Vec<f32> = c.iter().map(|&x| x as f32).collect();
            let tc = ctx.tensor(&c32, &[c.len()]).unwrap();
            let via_funcs = run(&ctx, &with_funcs::ir(t).unwrap(), (&ta, &tb, &tc), groups);
            let by_hand = run(&ctx, &inline::ir(t).unwrap(), (&ta, &tb, &tc), groups);
            for (i, (g, w)) in via_funcs.0.iter().zip(&by_hand.0).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits(),
                    "out[{i}] on {name} ({t}): {g} vs inline {w}"
                );
            }
            for (i, (g, w)) in via_funcs.1.iter().zip(&by_hand.1).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits(),
                    "rows[{i}] on {name} ({t}): {g} vs inline {w}"
                );
            }
            // Inputs on a grid of 1/8 and 1/64 products: every sum is exact in f32.
            let (want, want_rows) = reference(&a, &b, &c, groups);
            assert_eq!(via_funcs.0, want, "out on {name} ({t})");
            assert_eq!(via_funcs.1, want_rows, "rows on {name} ({t})");
        }
    }
}

fn build_error(k: Result<tessera_ir::Kernel, tessera_ir::IrError>) -> String {
    match k {
        Ok(_) => panic!("the kernel built"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_fragment_of_another_role_is_refused_by_name() {
    let e = build_error(wrong_role::ir());
    assert!(
        e.contains(
            "argument 1 of `row_stats`: `sum` is `MatrixRows`, given `sum` of type `MatrixAcc`"
        ),
        "{e}"
    );
}

#[test]
fn a_fragment_array_of_another_length_is_refused_by_name() {
    let e = build_error(wrong_length::ir());
    assert!(
        e.contains("argument 2 of `row_stats`: `acc` is `[MatrixAcc; 2]`, given `acc` of type `[MatrixAcc; 3]`"),
        "{e}"
    );
}

#[test]
fn a_fragment_of_another_dtype_is_refused_by_name() {
    let e = build_error(wrong_dtype::ir());
    assert!(
        e.contains(
            "argument 2 of `mma_tiles`: `fb` is `MatrixB<f16>`, given `fb` of type `MatrixB<bf16>`"
        ),
        "{e}"
    );
}

#[test]
fn a_fragment_array_for_a_value_is_refused_by_name() {
    let e = build_error(fragments_for_a_value::ir());
    assert!(
        e.contains(
            "argument 2 of `load_tiles` is a value, not matrix fragments; `acc` is a fragment array"
        ),
        "{e}"
    );
}

#[test]
fn a_value_for_a_fragment_array_is_refused_by_name() {
    let e = build_error(value_for_fragments::ir());
    assert!(e.contains("argument 0 of `load_tiles`"), "{e}");
    assert!(
        e.contains("`acc: [MatrixAcc; ?]`") || e.contains("fragment array `acc`"),
        "{e}"
    );
}

#[test]
fn a_tile_product_on_an_accumulator_array_argument_matches_the_math() {
    let (a, b, c) = (
        values(64 * 64, 5, -2.0, 2.0),
        values(32 * 64, 6, -2.0, 2.0),
        values(64 * 32, 7, -8.0, 8.0),
    );
    let mut want = c.clone();
    for r in 0..64 {
        for col in 0..32 {
            want[r * 32 + col] += (0..64)
                .map(|k| a[r * 64 + k] * b[col * 64 + k])
                .sum::<f64>();
        }
    }
    for ctx in contexts() {
        for t in [Scalar::F16, Scalar::BF16] {
            let c32: Vec<f32> = c.iter().map(|&x| x as f32).collect();
            let tc = ctx.tensor(&c32, &[c.len()]).unwrap();
            let out = ctx.zeros(DType::F32, &[64 * 32]).unwrap();
            ctx.launch_ir(&tile_product_via_func::ir(t).unwrap())
                .arg("a", &half_tensor(&ctx, t, &a))
                .arg("b", &half_tensor(&ctx, t, &b))
                .arg("c", &tc)
                .arg("out", &out)
                .grid([1, 1, 1])
                .group_size(128)
                .run()
                .unwrap();
            // Products on a grid of 1/64, sums of at most 64 of them plus c: exact in f32.
            let got = out.to_f64_vec().unwrap();
            assert_eq!(got, want, "on {} ({t})", ctx.info().name);
        }
    }
}
