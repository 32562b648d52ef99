//! Registered RoPE cases: both layouts, partial rotation, Llama-3 and YaRN scaling over
//! every float dtype; the fused q/k norm + RoPE; a rejection per invariant; the kernels to
//! compile and the benchmark shapes.

use super::kernels::{norm_rope_kernel, rope_kernel};
use super::ops::{qk_norm_rope, rope};
use super::reference;
use super::table::{RopeConfig, RopeLayout, RopeScaling, RopeTable};
use crate::error::OpError;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{compare, expect_rejection, random_tensor, tolerance, CaseRng};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

const EPS: f32 = 1e-6;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn llama3() -> RopeScaling {
    RopeScaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position: 8192.0,
    }
}

fn yarn() -> RopeScaling {
    RopeScaling::Yarn {
        factor: 4.0,
        original_max_position: 32768.0,
        beta_fast: 32.0,
        beta_slow: 1.0,
    }
}

fn cfg(layout: RopeLayout, theta: f64, rot_dim: usize, scaling: RopeScaling) -> RopeConfig {
    RopeConfig {
        layout,
        theta,
        rot_dim,
        scaling,
    }
}

/// The configurations the cases cover: (name, config, head_dim).
fn configs() -> Vec<(&'static str, RopeConfig, usize)> {
    vec![
        (
            "neox",
            cfg(RopeLayout::NeoX, 10000.0, 64, RopeScaling::None),
            64,
        ),
        (
            "interleaved",
            cfg(RopeLayout::Interleaved, 10000.0, 128, RopeScaling::None),
            128,
        ),
        (
            "neox partial 32/96",
            cfg(RopeLayout::NeoX, 10000.0, 32, RopeScaling::None),
            96,
        ),
        (
            "llama3 scaled",
            cfg(RopeLayout::NeoX, 500000.0, 128, llama3()),
            128,
        ),
        ("yarn", cfg(RopeLayout::NeoX, 1000000.0, 128, yarn()), 128),
        (
            "yarn interleaved",
            cfg(RopeLayout::Interleaved, 10000.0, 64, yarn()),
            64,
        ),
    ]
}

/// Positions across a long context: a few small, most anywhere below 2²⁰, so an angle
/// formed from one rounded f32 product (off by up to ~0.03 rad there) fails.
fn positions(
    ctx: &Context,
    rng: &mut CaseRng,
    tokens: usize,
) -> Result<(Tensor, Vec<u32>), String> {
    let p: Vec<u32> = (0..tokens)
        .map(|t| {
            if t % 4 == 0 {
                rng.int(0, 300)
            } else {
                rng.int(0, 1 << 20)
            }
        })
        .collect();
    Ok((ctx.tensor(&p, &[tokens]).map_err(err)?, p))
}

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
            compare(&out.to_f64_vec().map_err(err)?, &want, tolerance(dt))
        }),
    }
}

fn qk_case(
    dt: DType,
    name: &'static str,
    c: RopeConfig,
    d: usize,
    tokens: usize,
    hq: usize,
    hk: usize,
) -> Case {
    Case {
        op: "qk_norm_rope",
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: format!("{name} tokens={tokens} hq={hq} hk={hk} d={d}"),
        run: Box::new(move |ctx, rng| {
            let table = RopeTable::new(ctx, c).map_err(err)?;
            let (q, qv) = random_tensor(ctx, rng, dt, &[tokens, hq, d], -2.0, 2.0)?;
            let (k, kv) = random_tensor(ctx, rng, dt, &[tokens, hk, d], -2.0, 2.0)?;
            let (qw, qwv) = random_tensor(ctx, rng, dt, &[d], 0.5, 1.5)?;
            let (kw, kwv) = random_tensor(ctx, rng, dt, &[d], 0.5, 1.5)?;
            let (pos, pv) = positions(ctx, rng, tokens)?;
            let qo = ctx.full_nan(dt, &[tokens, hq, d]).map_err(err)?;
            let ko = ctx.full_nan(dt, &[tokens, hk, d]).map_err(err)?;
            qk_norm_rope(ctx, &q, &k, &qw, &kw, &pos, &table, &qo, &ko, EPS).map_err(err)?;
            let mut got = qo.to_f64_vec().map_err(err)?;
            got.extend(ko.to_f64_vec().map_err(err)?);
            let mut want = reference::norm_rope(&qv, &qwv, &pv, hq, d, EPS as f64, &c);
            want.extend(reference::norm_rope(&kv, &kwv, &pv, hk, d, EPS as f64, &c));
            compare(&got, &want, tolerance(dt))
        }),
    }
}

type Refused = Box<dyn FnOnce() -> Result<(), OpError>>;
type BadCall = fn(&Context) -> Result<(Tensor, Refused), String>;

fn reject(op: &'static str, what: &str, reason: &'static str, f: BadCall) -> Case {
    Case {
        op,
        kind: CaseKind::Rejection,
        dtype: None,
        name: what.to_string(),
        run: Box::new(move |ctx, _rng| {
            let (out, call) = f(ctx)?;
            expect_rejection(&out, reason, call)
        }),
    }
}

fn z(ctx: &Context, dt: DType, shape: &[usize]) -> Result<Tensor, String> {
    ctx.zeros(dt, shape).map_err(err)
}

fn neox64() -> RopeConfig {
    cfg(RopeLayout::NeoX, 10000.0, 64, RopeScaling::None)
}

/// A rope call with the given x/positions/out shapes and dtypes.
fn rope_bad(
    ctx: &Context,
    x: (DType, &[usize]),
    pos: (DType, &[usize]),
    out: (DType, &[usize]),
    c: RopeConfig,
) -> Result<(Tensor, Refused), String> {
    let x = z(ctx, x.0, x.1)?;
    let p = z(ctx, pos.0, pos.1)?;
    let o = z(ctx, out.0, out.1)?;
    let table = RopeTable::new(ctx, c).map_err(err)?;
    let cx = ctx.clone();
    Ok((o.clone(), Box::new(move || rope(&cx, &x, &p, &table, &o))))
}

fn table_reject(what: &str, reason: &'static str, c: fn() -> RopeConfig) -> Case {
    Case {
        op: "rope",
        kind: CaseKind::Rejection,
        dtype: None,
        name: what.to_string(),
        run: Box::new(move |ctx, _rng| {
            // Nothing exists to be written: the table itself is refused.
            let out = z(ctx, DType::F32, &[1])?;
            expect_rejection(&out, reason, || RopeTable::new(ctx, c()).map(|_| ()))
        }),
    }
}

pub(super) fn rope_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (name, c, d) in configs() {
            v.push(rope_case(dt, name, c, d, 5, 3));
        }
    }
    const F: DType = DType::F16;
    v.push(reject(
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
    v.push(reject(
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
    v.push(reject(
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
    v.push(reject("rope", "out dtype", "`out` must be f16", |ctx| {
        rope_bad(
            ctx,
            (F, &[4, 2, 64]),
            (DType::U32, &[4]),
            (DType::F32, &[4, 2, 64]),
            neox64(),
        )
    }));
    v.push(reject(
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
    v.push(reject(
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
    v.push(reject(
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
    v.push(reject("rope", "in place", "`out` aliases `x`", |ctx| {
        let x = z(ctx, F, &[4, 2, 64])?;
        let p = z(ctx, DType::U32, &[4])?;
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

/// A qk_norm_rope call with q `[2, 4, dq]`, k `[2, 2, dk]`, weights `[dw]`.
fn qk_bad(
    ctx: &Context,
    dq: usize,
    dk: usize,
    dw: usize,
    eps: f32,
) -> Result<(Tensor, Refused), String> {
    let q = z(ctx, DType::BF16, &[2, 4, dq])?;
    let k = z(ctx, DType::BF16, &[2, 2, dk])?;
    let qw = z(ctx, DType::BF16, &[dw])?;
    let kw = z(ctx, DType::BF16, &[dw])?;
    let p = z(ctx, DType::U32, &[2])?;
    let qo = z(ctx, DType::BF16, &[2, 4, dq])?;
    let ko = z(ctx, DType::BF16, &[2, 2, dk])?;
    let table =
        RopeTable::new(ctx, cfg(RopeLayout::NeoX, 10000.0, 32, RopeScaling::None)).map_err(err)?;
    let cx = ctx.clone();
    Ok((
        qo.clone(),
        Box::new(move || qk_norm_rope(&cx, &q, &k, &qw, &kw, &p, &table, &qo, &ko, eps)),
    ))
}

pub(super) fn qk_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(qk_case(
            dt,
            "neox",
            cfg(RopeLayout::NeoX, 1000000.0, 128, RopeScaling::None),
            128,
            3,
            4,
            2,
        ));
        v.push(qk_case(
            dt,
            "interleaved partial",
            cfg(RopeLayout::Interleaved, 10000.0, 32, RopeScaling::None),
            64,
            2,
            2,
            1,
        ));
        v.push(qk_case(
            dt,
            "yarn",
            cfg(RopeLayout::NeoX, 1000000.0, 256, yarn()),
            256,
            2,
            2,
            2,
        ));
    }
    v.push(reject(
        "qk_norm_rope",
        "head_dim not a multiple of 32",
        "head_dim 48 must be a multiple of 32",
        |ctx| qk_bad(ctx, 48, 48, 48, EPS),
    ));
    v.push(reject(
        "qk_norm_rope",
        "k head_dim != q head_dim",
        "`k` must share tokens and head_dim with `q`",
        |ctx| qk_bad(ctx, 64, 32, 64, EPS),
    ));
    v.push(reject(
        "qk_norm_rope",
        "norm weight length",
        "`the norm weight` must have shape [64]",
        |ctx| qk_bad(ctx, 64, 64, 32, EPS),
    ));
    v.push(reject(
        "qk_norm_rope",
        "eps is NaN",
        "`eps` must be finite",
        |ctx| qk_bad(ctx, 64, 64, 64, f32::NAN),
    ));
    v.push(reject(
        "qk_norm_rope",
        "q_out aliases k_out",
        "must be separate",
        |ctx| {
            let q = z(ctx, DType::F32, &[2, 2, 64])?;
            let k = z(ctx, DType::F32, &[2, 2, 64])?;
            let w = z(ctx, DType::F32, &[64])?;
            let p = z(ctx, DType::U32, &[2])?;
            let o = z(ctx, DType::F32, &[2, 2, 64])?;
            let table = RopeTable::new(ctx, neox64()).map_err(err)?;
            let (cx, o2) = (ctx.clone(), o.clone());
            Ok((
                o.clone(),
                Box::new(move || qk_norm_rope(&cx, &q, &k, &w, &w, &p, &table, &o, &o2, EPS)),
            ))
        },
    ));
    v.push(reject(
        "qk_norm_rope",
        "k dtype",
        "`k` must be f32",
        |ctx| {
            let q = z(ctx, DType::F32, &[2, 2, 64])?;
            let k = z(ctx, DType::F16, &[2, 2, 64])?;
            let w = z(ctx, DType::F32, &[64])?;
            let p = z(ctx, DType::U32, &[2])?;
            let (qo, ko) = (
                z(ctx, DType::F32, &[2, 2, 64])?,
                z(ctx, DType::F16, &[2, 2, 64])?,
            );
            let table = RopeTable::new(ctx, neox64()).map_err(err)?;
            let cx = ctx.clone();
            Ok((
                qo.clone(),
                Box::new(move || qk_norm_rope(&cx, &q, &k, &w, &w, &p, &table, &qo, &ko, EPS)),
            ))
        },
    ));
    v
}

pub(super) fn rope_uses() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (d, rot, neox) in [
            (64, 64, 1),
            (128, 128, 1),
            (128, 128, 0),
            (96, 32, 1),
            (256, 256, 1),
        ] {
            v.push(KernelUse {
                def: &rope_kernel::DEF,
                spec: Specialization::new(
                    vec![dt],
                    vec![Literal::U32(d), Literal::U32(rot), Literal::U32(neox)],
                ),
            });
            if d % 32 == 0 {
                v.push(KernelUse {
                    def: &norm_rope_kernel::DEF,
                    spec: Specialization::new(
                        vec![dt],
                        vec![Literal::U32(d), Literal::U32(rot), Literal::U32(neox)],
                    ),
                });
            }
        }
    }
    v
}

pub(super) fn rope_benches() -> Vec<BenchCase> {
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
                    let (pos, pv) = positions(ctx, rng, tokens)?;
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

pub(super) fn qk_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        // Qwen3: 32 q heads, 8 kv heads (here the q half), head_dim 128.
        for (tokens, quick) in [(4usize, true), (4096, false)] {
            let (h, d) = (32, 128);
            let c = cfg(RopeLayout::NeoX, 1000000.0, 128, RopeScaling::None);
            v.push(BenchCase {
                op: "qk_norm_rope",
                kernel: "norm_rope_kernel",
                dtype: dt,
                shape: format!("tokens={tokens} hq={h} hk=8 d={d}"),
                bytes: (2 * tokens * (h + 8) * d * dt.size_bytes()) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let table = RopeTable::new(ctx, c).map_err(err)?;
                    let (q, qv) = random_tensor(ctx, rng, dt, &[tokens, h, d], -2.0, 2.0)?;
                    let (k, _) = random_tensor(ctx, rng, dt, &[tokens, 8, d], -2.0, 2.0)?;
                    let (qw, qwv) = random_tensor(ctx, rng, dt, &[d], 0.5, 1.5)?;
                    let (kw, _) = random_tensor(ctx, rng, dt, &[d], 0.5, 1.5)?;
                    let (pos, pv) = positions(ctx, rng, tokens)?;
                    let qo = ctx.full_nan(dt, &[tokens, h, d]).map_err(err)?;
                    let ko = ctx.full_nan(dt, &[tokens, 8, d]).map_err(err)?;
                    let (cx, o) = (ctx.clone(), qo.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            qk_norm_rope(&cx, &q, &k, &qw, &kw, &pos, &table, &o, &ko, EPS)
                                .map_err(err)
                        }),
                        output: qo,
                        reference: reference::norm_rope(&qv, &qwv, &pv, h, d, EPS as f64, &c),
                    })
                }),
            });
        }
    }
    v
}
