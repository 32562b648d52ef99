//! Cases of `sdpa_decode_batched`: per-sequence lengths over a batch of caches, a
//! rejection per invariant, and batched decode shapes.

use super::*;

/// Each sequence's (cache, visible length): its length clamped to the cache depth.
fn batch_rows(lens: &[u32], stride: usize) -> Vec<(usize, usize)> {
    let visible = |(i, &n): (usize, &u32)| (i, (n as usize).min(stride));
    lens.iter().enumerate().map(visible).collect()
}

fn batched_case(dt: DType, lens: &'static [u32], [hq, hkv, stride, d]: [usize; 4]) -> Case {
    let b = lens.len();
    correctness(
        "sdpa_decode_batched",
        dt,
        format!("B={b} lens={lens:?} stride={stride} hq={hq} hkv={hkv} d={d}"),
        move |ctx, rng| {
            let t = qkv(ctx, rng, dt, &[b, hq, d], &[b, hkv, stride, d])?;
            let kv_lens = ctx.tensor(lens, &[b]).map_err(err)?;
            let o = DecodeOptions::default();
            let ws = workspace(ctx, &t.q, &t.k, None).map_err(err)?;
            sdpa_decode_batched(ctx, &t.q, &t.k, &t.v, &kv_lens, &t.out, &o, &ws).map_err(err)?;
            let rows = batch_rows(lens, stride);
            let want =
                decode_reference(&t, &rows, [hq, hkv, stride, d], Visibility::default(), None);
            Ok((t.out.to_f64_vec().map_err(err)?, want))
        },
    )
}

/// f16 q `q`, k and v `kv`, u32 kv_lens [3], out of q's shape.
const fn batched_specs(q: &'static [usize], kv: &'static [usize]) -> [Spec; 5] {
    [(F16, q), (F16, kv), (F16, kv), (U32, &[3]), (F16, q)]
}

pub(crate) fn batched_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(batched_case(dt, &[5, 40, 17], [4, 2, 40, 128]));
        v.push(batched_case(dt, &[1, 33], [2, 1, 48, 64]));
    }
    // A length of 0 gives zeros; one above the cache depth is clamped to it.
    v.push(batched_case(F32, &[0, 9, 99], [4, 4, 32, 256]));
    let good = batched_specs(&[3, 4, 128], &[3, 2, 16, 128]);
    let table = [
        (
            "kv_lens not u32",
            "`kv_lens` must be u32",
            replaced(good, 3, (DType::I32, &[3])),
        ),
        (
            "kv_lens length != batch",
            "`kv_lens` must have shape [3]",
            replaced(good, 3, (U32, &[2])),
        ),
        (
            "cache batch != q batch",
            "k's batch is 2 but q says 3",
            batched_specs(&[3, 4, 128], &[2, 2, 16, 128]),
        ),
        (
            "q heads not a multiple of kv heads",
            "must be a multiple of n_kv_heads",
            batched_specs(&[3, 5, 128], &[3, 2, 16, 128]),
        ),
        (
            "cache is 3-D",
            "`k` must be 4-D",
            batched_specs(&[3, 4, 128], &[2, 16, 128]),
        ),
        (
            "head_dim unsupported",
            "head_dim 48 is not supported",
            batched_specs(&[3, 4, 48], &[3, 2, 16, 48]),
        ),
        (
            "out dtype",
            "`out` must be f16",
            replaced(good, 4, (F32, &[3, 4, 128])),
        ),
    ];
    for (what, reason, specs) in table {
        v.push(rejection_over(
            "sdpa_decode_batched",
            (what, reason),
            specs,
            |c, [q, k, v, lens, out]| {
                let ws = workspace(c, q, k, None)?;
                sdpa_decode_batched(c, q, k, v, lens, out, &DecodeOptions::default(), &ws)
            },
        ));
    }
    v
}

pub(crate) fn batched_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for (dt, b, hq, hkv, stride, quick) in [
        (F16, 2, 4, 2, 128, true),
        (F16, 8, 32, 8, 4096, false),
        (BF16, 32, 32, 8, 2048, false),
        (BF16, 4, 64, 8, 16384, false),
    ] {
        let d = 128;
        let es = dt.size_bytes();
        v.push(BenchCase {
            op: "sdpa_decode_batched",
            kernel: "sdpa_decode_mma_kernel",
            dtype: dt,
            shape: format!("B={b} hq={hq} hkv={hkv} len={stride} d={d}"),
            bytes: ((2 * b * hkv * stride * d + 2 * b * hq * d) * es) as u64,
            flops: (4 * b * hq * stride * d) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let (kv_lens, _) = upload(ctx, U32, &vec![stride as f64; b], &[b])?;
                let rows = batch_rows(&vec![stride as u32; b], stride);
                let shapes = (dt, &[b, hq, d][..], &[b, hkv, stride, d][..]);
                let reference = (&rows[..], [hq, hkv, stride, d], b);
                decode_bench_prepare((ctx, rng), shapes, reference, move |c, t, o, ws| {
                    sdpa_decode_batched(c, &t.q, &t.k, &t.v, &kv_lens, &t.out, o, ws)
                })
            }),
        });
    }
    v
}
