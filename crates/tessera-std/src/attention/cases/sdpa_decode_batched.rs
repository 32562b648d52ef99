//! Cases of `sdpa_decode_batched`: per-sequence lengths over a batch of caches, a
//! rejection per invariant, and batched decode shapes.

use super::*;

fn batched_case(
    dt: DType,
    lens: &'static [u32],
    hq: usize,
    hkv: usize,
    stride: usize,
    d: usize,
) -> Case {
    let b = lens.len();
    correctness(
        "sdpa_decode_batched",
        dt,
        format!("B={b} lens={lens:?} stride={stride} hq={hq} hkv={hkv} d={d}"),
        move |ctx, rng| {
            let t = qkv(ctx, rng, dt, &[b, hq, d], &[b, hkv, stride, d])?;
            let kv_lens = ctx.tensor(lens, &[b]).map_err(err)?;
            let ws = workspace(ctx, &t.q, &t.k, None).map_err(err)?;
            sdpa_decode_batched(
                ctx,
                &t.q,
                &t.k,
                &t.v,
                &kv_lens,
                &t.out,
                &DecodeOptions::default(),
                &ws,
            )
            .map_err(err)?;
            let rows: Vec<(usize, usize)> = lens
                .iter()
                .enumerate()
                .map(|(i, &n)| (i, (n as usize).min(stride)))
                .collect();
            let want = reference::decode(
                &t.qv,
                &t.kv,
                &t.vv,
                &rows,
                hq,
                hkv,
                stride,
                d,
                scale_of(d),
                0,
                0,
                None,
            );
            Ok((t.out.to_f64_vec().map_err(err)?, want))
        },
    )
}

fn batched_bad(
    ctx: &Context,
    lens_dt: DType,
    lens_n: usize,
    k_batch: usize,
) -> Result<(Tensor, Refused), String> {
    let q = zeros(ctx, DType::F16, &[3, 4, 128])?;
    let k = zeros(ctx, DType::F16, &[k_batch, 2, 16, 128])?;
    let v = zeros(ctx, DType::F16, &[k_batch, 2, 16, 128])?;
    let lens = zeros(ctx, lens_dt, &[lens_n])?;
    let out = zeros(ctx, DType::F16, &[3, 4, 128])?;
    let c = ctx.clone();
    Ok((
        out.clone(),
        Box::new(move || {
            let ws = workspace(&c, &q, &k, None)?;
            sdpa_decode_batched(&c, &q, &k, &v, &lens, &out, &DecodeOptions::default(), &ws)
        }),
    ))
}

pub(crate) fn batched_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(batched_case(dt, &[5, 40, 17], 4, 2, 40, 128));
        v.push(batched_case(dt, &[1, 33], 2, 1, 48, 64));
    }
    // A length of 0 gives zeros; one above the cache depth is clamped to it.
    v.push(batched_case(DType::F32, &[0, 9, 99], 4, 4, 32, 256));
    v.push(rejection(
        "sdpa_decode_batched",
        "kv_lens not u32",
        "`kv_lens` must be u32",
        |ctx| batched_bad(ctx, DType::I32, 3, 3),
    ));
    v.push(rejection(
        "sdpa_decode_batched",
        "kv_lens length != batch",
        "`kv_lens` must have shape [3]",
        |ctx| batched_bad(ctx, DType::U32, 2, 3),
    ));
    v.push(rejection(
        "sdpa_decode_batched",
        "cache batch != q batch",
        "k's batch is 2 but q says 3",
        |ctx| batched_bad(ctx, DType::U32, 3, 2),
    ));
    v.push(rejection(
        "sdpa_decode_batched",
        "q heads not a multiple of kv heads",
        "must be a multiple of n_kv_heads",
        |ctx| {
            let q = zeros(ctx, DType::F16, &[3, 5, 128])?;
            let k = zeros(ctx, DType::F16, &[3, 2, 16, 128])?;
            let v = zeros(ctx, DType::F16, &[3, 2, 16, 128])?;
            let lens = zeros(ctx, DType::U32, &[3])?;
            let out = zeros(ctx, DType::F16, &[3, 5, 128])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let ws = workspace(&c, &q, &k, None)?;
                    sdpa_decode_batched(&c, &q, &k, &v, &lens, &out, &DecodeOptions::default(), &ws)
                }),
            ))
        },
    ));
    v.push(rejection(
        "sdpa_decode_batched",
        "cache is 3-D",
        "`k` must be 4-D",
        |ctx| {
            let q = zeros(ctx, DType::F16, &[3, 4, 128])?;
            let k = zeros(ctx, DType::F16, &[2, 16, 128])?;
            let v = zeros(ctx, DType::F16, &[2, 16, 128])?;
            let lens = zeros(ctx, DType::U32, &[3])?;
            let out = zeros(ctx, DType::F16, &[3, 4, 128])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let ws = workspace(&c, &q, &k, None)?;
                    sdpa_decode_batched(&c, &q, &k, &v, &lens, &out, &DecodeOptions::default(), &ws)
                }),
            ))
        },
    ));
    v.push(rejection(
        "sdpa_decode_batched",
        "head_dim unsupported",
        "head_dim 48 is not supported",
        |ctx| {
            let q = zeros(ctx, DType::F16, &[3, 4, 48])?;
            let k = zeros(ctx, DType::F16, &[3, 2, 16, 48])?;
            let v = zeros(ctx, DType::F16, &[3, 2, 16, 48])?;
            let lens = zeros(ctx, DType::U32, &[3])?;
            let out = zeros(ctx, DType::F16, &[3, 4, 48])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let ws = workspace(&c, &q, &k, None)?;
                    sdpa_decode_batched(&c, &q, &k, &v, &lens, &out, &DecodeOptions::default(), &ws)
                }),
            ))
        },
    ));
    v.push(rejection(
        "sdpa_decode_batched",
        "out dtype",
        "`out` must be f16",
        |ctx| {
            let q = zeros(ctx, DType::F16, &[3, 4, 128])?;
            let k = zeros(ctx, DType::F16, &[3, 2, 16, 128])?;
            let v = zeros(ctx, DType::F16, &[3, 2, 16, 128])?;
            let lens = zeros(ctx, DType::U32, &[3])?;
            let out = zeros(ctx, DType::F32, &[3, 4, 128])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let ws = workspace(&c, &q, &k, None)?;
                    sdpa_decode_batched(&c, &q, &k, &v, &lens, &out, &DecodeOptions::default(), &ws)
                }),
            ))
        },
    ));
    v
}

pub(crate) fn batched_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for (dt, b, hq, hkv, stride, quick) in [
        (DType::F16, 2, 4, 2, 128, true),
        (DType::F16, 8, 32, 8, 4096, false),
        (DType::BF16, 32, 32, 8, 2048, false),
        (DType::BF16, 4, 64, 8, 16384, false),
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
                let t = qkv(ctx, rng, dt, &[b, hq, d], &[b, hkv, stride, d])?;
                let lens = vec![stride as u32; b];
                let (kv_lens, _) = upload(ctx, DType::U32, &vec![stride as f64; b], &[b])?;
                let rows: Vec<(usize, usize)> = lens
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| (i, n as usize))
                    .collect();
                let want = reference::decode(
                    &t.qv,
                    &t.kv,
                    &t.vv,
                    &rows,
                    hq,
                    hkv,
                    stride,
                    d,
                    scale_of(d),
                    0,
                    0,
                    None,
                );
                let ws = DecodeWorkspace::for_cache(ctx, b, hq, d, stride).map_err(err)?;
                let (c, out) = (ctx.clone(), t.out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        let o = DecodeOptions::default();
                        sdpa_decode_batched(&c, &t.q, &t.k, &t.v, &kv_lens, &t.out, &o, &ws)
                            .map_err(err)
                    }),
                    output: out,
                    reference: want,
                })
            }),
        });
    }
    v
}
