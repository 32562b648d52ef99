//! Cases of `sdpa_decode`: GQA over every float dtype and head dim, rising logits, a
//! rejection per invariant, its specialisations and the Llama-3 / Qwen3 decode shapes.

use super::*;

/// Runs `sdpa_decode` on `t` (q `[hq, d]`, k and v `[hkv, n, d]`): (got, the f64 reference).
fn decode_vs_reference(
    ctx: &Context,
    t: &Qkv,
    [hq, hkv, n, d]: [usize; 4],
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let ws = workspace(ctx, &t.q, &t.k, None).map_err(err)?;
    sdpa_decode(ctx, &t.q, &t.k, &t.v, &t.out, None, &ws).map_err(err)?;
    let want = decode_reference(t, &[(0, n)], [hq, hkv, n, d], Visibility::default(), None);
    Ok((t.out.to_f64_vec().map_err(err)?, want))
}

fn decode_case(dt: DType, [hq, hkv, n, d]: [usize; 4]) -> Case {
    let name = format!("hq={hq} hkv={hkv} n_kv={n} d={d}");
    correctness("sdpa_decode", dt, name, move |ctx, rng| {
        let t = qkv(ctx, rng, dt, &[hq, d], &[hkv, n, d])?;
        decode_vs_reference(ctx, &t, [hq, hkv, n, d])
    })
}

/// Scores that jump late in the cache: the keys at `n/2` and `n − 3` are the first KV
/// head's query 0 times 3 and 6, so their scores pass the running max by far more than the
/// fragment kernel's rescale margin, after it has settled on the early keys' max.
fn decode_rising_case(dt: DType, [hq, hkv, n, d]: [usize; 4]) -> Case {
    let name = format!("hq={hq} hkv={hkv} n_kv={n} d={d} rising scores");
    correctness("sdpa_decode", dt, name, move |ctx, rng| {
        let mut t = qkv(ctx, rng, dt, &[hq, d], &[hkv, n, d])?;
        let mut kv = t.kv.clone();
        for (j, c) in [(n / 2, 3.0), (n - 3, 6.0)] {
            for e in 0..d {
                kv[j * d + e] = t.qv[e] * c;
            }
        }
        (t.k, t.kv) = upload(ctx, dt, &kv, &[hkv, n, d])?;
        decode_vs_reference(ctx, &t, [hq, hkv, n, d])
    })
}

pub(crate) fn decode_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for shape in [
            [4, 2, 37, 64],
            [3, 1, 29, 96],
            [8, 2, 70, 128],
            [2, 2, 21, 192],
            [4, 1, 45, 256],
        ] {
            v.push(decode_case(dt, shape));
        }
    }
    // Long enough that the shape picks split-KV.
    v.push(decode_case(F16, [4, 1, 700, 128]));
    v.push(decode_case(BF16, [8, 2, 1500, 64]));
    // GQA groups of 16 (one fragment block) and 20 (a full and a partial block).
    v.push(decode_case(F16, [32, 2, 150, 64]));
    v.push(decode_case(BF16, [40, 2, 300, 128]));
    v.push(decode_case(F16, [20, 1, 90, 256]));
    for dt in [F16, BF16] {
        v.push(decode_rising_case(dt, [8, 2, 400, 128]));
    }
    v.extend(decode_rejections("sdpa_decode", |c, q, k, v, o| {
        sdpa_decode(c, q, k, v, o, None, &workspace(c, q, k, None)?)
    }));
    v.push(rejection_over(
        "sdpa_decode",
        ("scale is NaN", "`scale` must be finite"),
        DECODE_GOOD,
        |c, [q, k, v, out]| {
            sdpa_decode(c, q, k, v, out, Some(f32::NAN), &workspace(c, q, k, None)?)
        },
    ));
    v
}

pub(crate) fn decode_uses() -> Vec<KernelUse> {
    let mut v = decode_kernel_uses(false);
    v.extend(decode_kernel_uses(true));
    v.extend(mma_uses());
    v.extend(combine_uses());
    v
}

/// Decode over a full cache of `n` keys: reads K and V once, q, writes out.
fn decode_bench(
    kernel: &'static str,
    dt: DType,
    [hq, hkv, n, d]: [usize; 4],
    quick: bool,
) -> BenchCase {
    let es = dt.size_bytes();
    BenchCase {
        op: "sdpa_decode",
        kernel,
        dtype: dt,
        shape: format!("hq={hq} hkv={hkv} n_kv={n} d={d}"),
        bytes: ((2 * hkv * n * d + 2 * hq * d) * es) as u64,
        flops: (4 * hq * n * d) as u64,
        quick,
        prepare: Box::new(move |ctx, rng| {
            let shapes = (dt, &[hq, d][..], &[hkv, n, d][..]);
            let reference = (&[(0, n)][..], [hq, hkv, n, d], 1);
            decode_bench_prepare((ctx, rng), shapes, reference, move |c, t, _, ws| {
                sdpa_decode(c, &t.q, &t.k, &t.v, &t.out, None, ws)
            })
        }),
    }
}

pub(crate) fn decode_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        let kernel = if dt == F32 {
            "sdpa_decode_kernel"
        } else {
            "sdpa_decode_mma_kernel"
        };
        v.push(decode_bench(kernel, dt, [8, 2, 256, 128], true));
    }
    for dt in [F16, BF16] {
        // Llama-3 8B: 32 q heads, 8 kv heads; 70B: 64/8; Qwen3: 32/4 and 64/4.
        for (hq, hkv, n) in [
            (32, 8, 1024),
            (32, 8, 4096),
            (32, 8, 8192),
            (32, 8, 32768),
            (32, 8, 131072),
            (64, 8, 32768),
            (32, 4, 32768),
            (64, 4, 131072),
        ] {
            v.push(decode_bench(
                "sdpa_decode_mma_kernel",
                dt,
                [hq, hkv, n, 128],
                false,
            ));
        }
    }
    v.push(decode_bench(
        "sdpa_decode_mma_kernel",
        F16,
        [16, 2, 32768, 256],
        false,
    ));
    v
}
