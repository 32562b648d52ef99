//! Row operations on accumulator fragments and fragment arrays, written in the DSL: one
//! step of an online softmax (scores summed from two accumulators, masked, row max with a lazy margin, rescale factor,
//! `exp2` weights, row sums, weights converted to an A operand for `P·V`, outputs held in a
//! fragment array and normalised by a row division) against an f64 reference written
//! from the math, on the CPU and under the Metal emulator (and on CUDA where a GPU is
//! present), for f16 and bf16; a constant index past a fragment array's end is a build
//! error.

use tessera_ir::half::{bf16, f16};
use tessera_ir::Scalar;
use tessera_macros::kernel;
use tessera_runtime::{Context, DType};

/// Row vectors observed per simdgroup (each stored as a 16×16 tile, a row's value in
/// every column).
const OBSERVED: usize = 6;

/// One online-softmax step per simdgroup `q` (two per threadgroup): the previous block's
/// 16×16 scores `prev` give the old max and sum; the new 16×32 scores `2s` (`s` added to
/// itself as two accumulators) are masked
/// (`c − r ≥ diag − 16t` or `c ≥ cap − 16t` in tile `t`), weighted against the raised max
/// and multiplied into `v` (32 keys × 32 dims) on top of the rescaled old outputs `o_in`;
/// `out` gets the normalised outputs (the second column tile doubled, by a constant
/// index), `rows_out` the row vectors `rv`.
#[kernel(group_size = 64)]
fn softmax_step<T>(
    s: Tensor<f32>,
    prev: Tensor<f32>,
    o_in: Tensor<f32>,
    v: Tensor<T>,
    mut out: Tensor<f32>,
    mut rows_out: Tensor<f32>,
    diag: i32,
    cap: i32,
    margin: f32,
) {
    let q = group_id_x() * 2 + simd_id();
    let tile = matrix_acc();
    let old = matrix_acc();
    matrix_load(old, prev[q * 256], 16);
    // rv: 0 new scores' max, 1 raised max, 2 rescale factor, 3 running sum, 4 old max +
    // raised max, 5 max(old max, new max).
    let rv = [matrix_rows(); 6];
    let m_old = matrix_rows();
    let l = matrix_rows();
    matrix_fill(m_old, neg_infinity());
    matrix_row_max(m_old, old);
    matrix_row_exp2_sub(old, m_old);
    matrix_fill(l, 0.0);
    matrix_row_sum(l, old);
    let sc = [matrix_acc(); 2];
    matrix_fill(rv[0], neg_infinity());
    for t in 0..2 {
        // The scores are `s` twice over: two partial sums added.
        matrix_load(sc[t], s[q * 512 + t * 16], 32);
        matrix_load(tile, s[q * 512 + t * 16], 32);
        matrix_add(sc[t], sc[t], tile);
        let shift = (16 * t).cast::<i32>();
        matrix_mask(sc[t], diag - shift, cap - shift, neg_infinity());
        matrix_row_max(rv[0], sc[t]);
    }
    matrix_rows_raise(rv[1], m_old, rv[0], margin);
    matrix_rows_exp2_diff(rv[2], m_old, rv[1]);
    matrix_rows_mul(l, l, rv[2]);
    for t in 0..2 {
        matrix_row_exp2_sub(sc[t], rv[1]);
        matrix_row_sum(l, sc[t]);
    }
    matrix_rows_add(rv[3], l, l);
    matrix_rows_add(rv[4], m_old, rv[1]);
    matrix_rows_max(rv[5], m_old, rv[0]);
    let o = [matrix_acc(); 2];
    for f in 0..2 {
        matrix_load(o[f], o_in[q * 512 + f * 16], 32);
        matrix_row_scale(o[f], rv[2]);
    }
    let fp = matrix_a::<T>();
    let fv = matrix_b::<T>();
    for t in 0..2 {
        matrix_convert(fp, sc[t]);
        for f in 0..2 {
            matrix_load(fv, v[q * 1024 + t * 512 + f * 16], 32);
            matrix_mma(o[f], fp, fv, o[f]);
        }
    }
    let inv = matrix_rows();
    let one = matrix_rows();
    matrix_fill(one, 1.0);
    matrix_rows_div(inv, one, l);
    matrix_scale(o[1], 2.0);
    for f in 0..2 {
        matrix_row_scale(o[f], inv);
        matrix_store(o[f], out[q * 512 + f * 16], 32);
    }
    for k in 0..6 {
        matrix_fill(tile, 1.0);
        matrix_row_scale(tile, rv[k]);
        matrix_store(tile, rows_out[(q * 6 + k) * 256], 16);
    }
}

/// A constant index one past the end of a fragment array.
#[kernel]
fn past_the_end(mut out: Tensor<f32>) {
    let o = [matrix_acc(); 2];
    matrix_fill(o[2], 0.0);
    matrix_store(o[0], out[0], 16);
}

/// xorshift values in `[lo, hi)` on a grid of 1/16.
fn values(len: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let steps = ((hi - lo) * 16.0) as u64;
            lo + (x % steps) as f64 / 16.0
        })
        .collect()
}

/// What the kernel computes, from the math, for simdgroup blocks of `s`, `prev`, `o_in`,
/// `v` (f64, `v` already in T): `(out, rows)`, and per output element the size of one
/// rounding step of the weights in T times the values it multiplies (the tolerance).
#[allow(clippy::too_many_arguments)]
fn reference(
    s: &[f64],
    prev: &[f64],
    o_in: &[f64],
    v: &[f64],
    (diag, cap, margin): (i64, i64, f64),
    round: fn(f64) -> f64,
    eps: f64,
    groups: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; groups * 512];
    let mut tol = vec![0.0; groups * 512];
    let mut rows = vec![0.0; groups * OBSERVED * 256];
    for q in 0..groups {
        for r in 0..16 {
            let pr = &prev[q * 256 + r * 16..q * 256 + r * 16 + 16];
            let m_old = pr.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let l_old: f64 = pr.iter().map(|&x| (x - m_old).exp2()).sum();
            let score = |c: usize| {
                let x = 2.0 * s[q * 512 + r * 32 + c];
                let cc = c as i64 % 16;
                let shift = 16 * (c as i64 / 16);
                if cc - r as i64 >= diag - shift || cc >= cap - shift {
                    f64::NEG_INFINITY
                } else {
                    x
                }
            };
            let mx = (0..32).map(score).fold(f64::NEG_INFINITY, f64::max);
            let mn = if mx > m_old + margin { mx } else { m_old };
            let fr = if m_old == mn {
                1.0
            } else {
                (m_old - mn).exp2()
            };
            let p: Vec<f64> = (0..32)
                .map(|c| {
                    let x = score(c);
                    if x == f64::NEG_INFINITY {
                        0.0
                    } else {
                        (x - mn).exp2()
                    }
                })
                .collect();
            let l = l_old * fr + p.iter().sum::<f64>();
            for d in 0..32 {
                let scale = if d >= 16 { 2.0 } else { 1.0 };
                let mut acc = o_in[q * 512 + r * 32 + d] * fr;
                let mut spread = 0.0;
                for (k, &pk) in p.iter().enumerate() {
                    let vk = v[q * 1024 + k * 32 + d];
                    acc += round(pk) * vk;
                    spread += pk * vk.abs();
                }
                out[q * 512 + r * 32 + d] = acc * scale / l;
                tol[q * 512 + r * 32 + d] = 2.0 * eps * spread * scale / l;
            }
            let observed = [mx, mn, fr, 2.0 * l, m_old + mn, m_old.max(mx)];
            for (k, x) in observed.into_iter().enumerate() {
                for c in 0..16 {
                    rows[((q * OBSERVED + k) * 16 + r) * 16 + c] = x;
                }
            }
        }
    }
    (out, tol, rows)
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

fn check(ctx: &Context, t: Scalar, params: (i64, i64, f64), seed: u64) {
    let groups = 4;
    let s = values(groups * 512, seed, -4.0, 4.0);
    let prev = values(groups * 256, seed + 1, -4.0, 4.0);
    let o_in = values(groups * 512, seed + 2, -1.0, 1.0);
    let v = values(groups * 1024, seed + 3, -2.0, 2.0);
    let (round, eps, vt): (fn(f64) -> f64, f64, _) = match t {
        Scalar::BF16 => (
            |x| bf16::from_f64(x).to_f64(),
            1.0 / 256.0,
            ctx.tensor(
                &v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>(),
                &[v.len()],
            )
            .unwrap(),
        ),
        _ => (
            |x| f16::from_f64(x).to_f64(),
            1.0 / 2048.0,
            ctx.tensor(
                &v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>(),
                &[v.len()],
            )
            .unwrap(),
        ),
    };
    let f32s = |x: &[f64]| {
        ctx.tensor(&x.iter().map(|&y| y as f32).collect::<Vec<_>>(), &[x.len()])
            .unwrap()
    };
    let (ts, tp, to) = (f32s(&s), f32s(&prev), f32s(&o_in));
    let out = ctx.zeros(DType::F32, &[groups * 512]).unwrap();
    let rows = ctx.zeros(DType::F32, &[groups * OBSERVED * 256]).unwrap();
    let k = softmax_step::ir(t).unwrap();
    let (diag, cap, margin) = params;
    ctx.launch_ir(&k)
        .arg("s", &ts)
        .arg("prev", &tp)
        .arg("o_in", &to)
        .arg("v", &vt)
        .arg("out", &out)
        .arg("rows_out", &rows)
        .scalar("diag", diag as i32)
        .scalar("cap", cap as i32)
        .scalar("margin", margin as f32)
        .grid([groups as u32 / 2, 1, 1])
        .group_size(64)
        .run()
        .unwrap();
    let (want, tol, want_rows) = reference(&s, &prev, &o_in, &v, params, round, eps, groups);
    let got = out.to_f64_vec().unwrap();
    let name = &ctx.info().name;
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let bound = tol[i] + 1e-5 * w.abs() + 1e-6;
        assert!(
            (g - w).abs() <= bound,
            "out[{i}] on {name} ({t}, {params:?}): got {g}, want {w} (±{bound})"
        );
    }
    let got_rows = rows.to_f64_vec().unwrap();
    for (i, (&g, &w)) in got_rows.iter().zip(&want_rows).enumerate() {
        let ok = if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= 1e-5 * w.abs() + 1e-6
        };
        assert!(
            ok,
            "rows[{i}] (vector {}) on {name} ({t}, {params:?}): got {g}, want {w}",
            i / 256 % OBSERVED
        );
    }
}

#[test]
fn an_online_softmax_step_on_fragments_matches_the_math() {
    // (diag, cap, margin): causal inside the block, a length cut, both, none; a max that
    // always moves and one that moves only past a margin; a diagonal that masks whole
    // rows of the first tile and every key of some rows.
    let cases = [
        (1, 32, 0.0),
        (40, 23, 0.0),
        (5, 20, 1.5),
        (100, 100, 3.0),
        (-3, 32, 0.0),
        (-20, 32, 0.5),
    ];
    for ctx in contexts() {
        for (i, &params) in cases.iter().enumerate() {
            for t in [Scalar::F16, Scalar::BF16] {
                check(&ctx, t, params, 17 + 4 * i as u64);
            }
        }
    }
}

#[test]
fn a_constant_index_past_a_fragment_array_is_a_build_error() {
    let e = past_the_end::ir().unwrap_err().to_string();
    assert!(e.contains("past its end") && e.contains('o'), "{e}");
}
