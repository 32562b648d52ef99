//! Cases of `rope`: both layouts, partial rotation, Llama-3 and YaRN scaling over every
//! float dtype; a rejection per invariant of the op and of its frequency table; bench
//! shapes.

use super::*;

fn rope_case(
    dt: DType,
    name: &'static str,
    c: RopeConfig,
    d: usize,
    tokens: usize,
    heads: usize,
) -> Case {
    Case {
        op: "rope",
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: format!("{name} tokens={tokens} heads={heads} d={d}"),
        run: Box::new(move |ctx, rng| {
            let table = RopeTable::new(ctx, c).map_err(err)?;
            let (x, xv) = random_tensor(ctx, rng, dt, &[tokens, heads, d], -2.0, 2.0)?;
            let (pos, pv) = positions(ctx, rng, tokens)?;
            let out = ctx.full_nan(dt, &[tokens, heads, d]).map_err(err)?;
            rope(ctx, &x, &pos, &table, &out).map_err(err)?;
            let want = reference::rope(&xv, &pv, heads, d, &c);
            compare(
                &out.to_f64_vec().map_err(err)?,
                &want,
                accuracy("rope", dt)?,
            )
        }),
    }
}

/// A rope call with the given x/positions/out shapes and dtypes.
fn rope_bad(
    ctx: &Context,
    x: (DType, &[usize]),
    pos: (DType, &[usize]),
    out: (DType, &[usize]),
    c: RopeConfig,
) -> Result<(Tensor, Refused), String> {
    let x = zeros(ctx, x.0, x.1)?;
    let p = zeros(ctx, pos.0, pos.1)?;
    let o = zeros(ctx, out.0, out.1)?;
    let table = RopeTable::new(ctx, c).map_err(err)?;
    let cx = ctx.clone();
    Ok((o.clone(), Box::new(move || rope(&cx, &x, &p, &table, &o))))
}

fn table_reject(what: &str, reason: &'static str, c: fn() -> RopeConfig) -> Case {
    rejection("rope", what, reason, move |ctx| {
        // Nothing exists to be written: the table itself is refused.
        let out = zeros(ctx, DType::F32, &[1])?;
        let cx = ctx.clone();
        Ok((out, Box::new(move || RopeTable::new(&cx, c()).map(|_| ()))))
    })
}

pub(crate) fn rope_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (name, c, d) in configs() {
            v.push(rope_case(dt, name, c, d, 5, 3));
        }
        // A prompt's token count: heads in groups of 8, the last group partial.
        for (name, c, d) in configs().into_iter().take(2) {
            v.push(rope_case(dt, name, c, d, 70, 11));
        }
    }
    const F: DType = DType::F16;
    v.push(rejection(
        "rope",
        "positions not u32",
        "`positions` must be u32",
        |ctx| {
            rope_bad(
                ctx,
                (F, &[4, 2, 64]),
                (DType::I32, &[4]),
                (F, &[4, 2, 64]),
                neox64(),
            )
        },
    ));
    v.push(rejection(
        "rope",
        "positions length != tokens",
        "`positions` must have shape [4]",
        |ctx| {
            rope_bad(
                ctx,
                (F, &[4, 2, 64]),
                (DType::U32, &[3]),
                (F, &[4, 2, 64]),
                neox64(),
            )
        },
    ));
    v.push(rejection(
        "rope",
        "out shape",
        "`out` must have shape [4, 2, 64]",
        |ctx| {
            rope_bad(
                ctx,
                (F, &[4, 2, 64]),
                (DType::U32, &[4]),
                (F, &[4, 128]),
                neox64(),
            )
        },
    ));
    v.push(rejection("rope", "out dtype", "`out` must be f16", |ctx| {
        rope_bad(
            ctx,
            (F, &[4, 2, 64]),
            (DType::U32, &[4]),
            (DType::F32, &[4, 2, 64]),
            neox64(),
        )
    }));
    v.push(rejection(
        "rope",
        "x is 2-D",
        "`x` must be a non-empty [tokens, heads, head_dim]",
        |ctx| {
            rope_bad(
                ctx,
                (F, &[4, 64]),
                (DType::U32, &[4]),
                (F, &[4, 64]),
                neox64(),
            )
        },
    ));
    v.push(rejection(
        "rope",
        "rot_dim above head_dim",
        "rot_dim = 128 dims but head_dim is 64",
        |ctx| {
            rope_bad(
                ctx,
                (F, &[4, 2, 64]),
                (DType::U32, &[4]),
                (F, &[4, 2, 64]),
                cfg(RopeLayout::NeoX, 10000.0, 128, RopeScaling::None),
            )
        },
    ));
    v.push(rejection(
        "rope",
        "integer x",
        "`x` must be one of f32, f16, bf16",
        |ctx| {
            rope_bad(
                ctx,
                (DType::U32, &[4, 2, 64]),
                (DType::U32, &[4]),
                (DType::U32, &[4, 2, 64]),
                neox64(),
            )
        },
    ));
    v.push(rejection("rope", "in place", "`out` aliases `x`", |ctx| {
        let x = zeros(ctx, F, &[4, 2, 64])?;
        let p = zeros(ctx, DType::U32, &[4])?;
        let table = RopeTable::new(ctx, neox64()).map_err(err)?;
        let (cx, o) = (ctx.clone(), x.clone());
        Ok((x.clone(), Box::new(move || rope(&cx, &x, &p, &table, &o))))
    }));
    v.push(table_reject(
        "odd rot_dim",
        "rot_dim = 33 must be even",
        || cfg(RopeLayout::NeoX, 10000.0, 33, RopeScaling::None),
    ));
    v.push(table_reject(
        "theta not above 1",
        "theta = 1 must be finite and above 1",
        || cfg(RopeLayout::NeoX, 1.0, 64, RopeScaling::None),
    ));
    v.push(table_reject(
        "llama3 factor below 1",
        "is out of range",
        || {
            cfg(
                RopeLayout::NeoX,
                500000.0,
                64,
                RopeScaling::Llama3 {
                    factor: 0.5,
                    low_freq_factor: 1.0,
                    high_freq_factor: 4.0,
                    original_max_position: 8192.0,
                },
            )
        },
    ));
    v.push(table_reject(
        "yarn beta_fast <= beta_slow",
        "is out of range",
        || {
            cfg(
                RopeLayout::NeoX,
                10000.0,
                64,
                RopeScaling::Yarn {
                    factor: 4.0,
                    original_max_position: 4096.0,
                    beta_fast: 1.0,
                    beta_slow: 32.0,
                },
            )
        },
    ));
    v
}

pub(crate) fn rope_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (tokens, heads, quick) in [(4usize, 8usize, true), (4096, 32, false), (1, 64, false)] {
            let d = 128;
            let c = cfg(RopeLayout::NeoX, 500000.0, 128, llama3());
            v.push(BenchCase {
                op: "rope",
                kernel: "rope_kernel",
                dtype: dt,
                shape: format!("tokens={tokens} heads={heads} d={d} llama3"),
                bytes: (2 * tokens * heads * d * dt.size_bytes() + 4 * tokens) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let table = RopeTable::new(ctx, c).map_err(err)?;
                    let (x, xv) = random_tensor(ctx, rng, dt, &[tokens, heads, d], -2.0, 2.0)?;
                    let (pos, pv) = bench_positions(ctx, rng, tokens)?;
                    let out = ctx.full_nan(dt, &[tokens, heads, d]).map_err(err)?;
                    let (cx, o) = (ctx.clone(), out.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || rope(&cx, &x, &pos, &table, &o).map_err(err)),
                        output: out,
                        reference: reference::rope(&xv, &pv, heads, d, &c),
                    })
                }),
            });
        }
    }
    v
}
