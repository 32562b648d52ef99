//! Registered attention cases: correctness over every float dtype and the supported head
//! dims (small shapes, so the CPU run stays quick), a rejection for every invariant of
//! every op, the specialisations `tessera compile` builds, and Llama-3 / Qwen3 benchmark
//! shapes.

use super::decode::{
    sdpa_decode, sdpa_decode_batched, sdpa_decode_split, sdpa_decode_strided, DecodeOptions,
};
use super::decode_combine::{sdpa_decode_combine_kernel, COMBINE_SLICES};
use super::decode_kernels::{sdpa_decode_kernel, sdpa_decode_partial_kernel};
use super::decode_mma::{sdpa_decode_mma_kernel, MMA_HEAD_DIMS};
use super::multi_query::sdpa_multi_query;
use super::plan::{geometry, DecodeWorkspace, DECODE_HEAD_DIMS};
use super::prefill::{prefill_constexprs, sdpa_prefill, sdpa_prefill_kernel, PREFILL_HEAD_DIMS};
use super::prefill_mma::sdpa_prefill_mma_kernel;
use super::reference;
use crate::error::OpError;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{compare, expect_rejection, random_tensor, tolerance, upload, CaseRng};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Random q `[rows, hq, d]`, k and v `[caches, hkv, stride, d]`, a NaN-poisoned out.
struct Qkv {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    qv: Vec<f64>,
    kv: Vec<f64>,
    vv: Vec<f64>,
}

fn qkv(
    ctx: &Context,
    rng: &mut CaseRng,
    dt: DType,
    q_shape: &[usize],
    kv_shape: &[usize],
) -> Result<Qkv, String> {
    let (q, qv) = random_tensor(ctx, rng, dt, q_shape, -1.0, 1.0)?;
    let (k, kv) = random_tensor(ctx, rng, dt, kv_shape, -1.0, 1.0)?;
    let (v, vv) = random_tensor(ctx, rng, dt, kv_shape, -1.0, 1.0)?;
    let out = ctx.full_nan(dt, q_shape).map_err(err)?;
    Ok(Qkv {
        q,
        k,
        v,
        out,
        qv,
        kv,
        vv,
    })
}

fn scale_of(d: usize) -> f64 {
    1.0 / (d as f64).sqrt()
}

fn correctness(
    op: &'static str,
    dt: DType,
    name: String,
    run: impl Fn(&Context, &mut CaseRng) -> Result<(Vec<f64>, Vec<f64>), String> + Send + Sync + 'static,
) -> Case {
    Case {
        op,
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name,
        run: Box::new(move |ctx, rng| {
            let (got, want) = run(ctx, rng)?;
            compare(&got, &want, tolerance(dt))
        }),
    }
}

/// A call that must be refused: builds its tensors and returns the output and the call.
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

/// Zero tensors of the given shapes (f32 unless said otherwise).
fn zeros(ctx: &Context, dt: DType, shape: &[usize]) -> Result<Tensor, String> {
    ctx.zeros(dt, shape).map_err(err)
}

// ── sdpa_decode ─────────────────────────────────────────────────────────────

/// Runs `sdpa_decode` on `t` (q `[hq, d]`, k and v `[hkv, n, d]`): (got, the f64 reference).
fn decode_vs_reference(
    ctx: &Context,
    t: &Qkv,
    hq: usize,
    hkv: usize,
    n: usize,
    d: usize,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    sdpa_decode(ctx, &t.q, &t.k, &t.v, &t.out, None).map_err(err)?;
    Ok((
        t.out.to_f64_vec().map_err(err)?,
        plain_decode_reference(t, hq, hkv, n, d),
    ))
}

/// The f64 reference of a plain decode over all `n` keys of `t` (no window, no sinks).
fn plain_decode_reference(t: &Qkv, hq: usize, hkv: usize, n: usize, d: usize) -> Vec<f64> {
    reference::decode(
        &t.qv,
        &t.kv,
        &t.vv,
        &[(0, n)],
        hq,
        hkv,
        n,
        d,
        scale_of(d),
        0,
        0,
        None,
    )
}

fn decode_case(dt: DType, hq: usize, hkv: usize, n: usize, d: usize) -> Case {
    correctness(
        "sdpa_decode",
        dt,
        format!("hq={hq} hkv={hkv} n_kv={n} d={d}"),
        move |ctx, rng| {
            let t = qkv(ctx, rng, dt, &[hq, d], &[hkv, n, d])?;
            decode_vs_reference(ctx, &t, hq, hkv, n, d)
        },
    )
}

/// Scores that jump late in the cache: the keys at `n/2` and `n − 3` are the first KV
/// head's query 0 times 3 and 6, so their scores pass the running max by far more than the
/// fragment kernel's rescale margin, after it has settled on the early keys' max.
fn decode_rising_case(dt: DType, hq: usize, hkv: usize, n: usize, d: usize) -> Case {
    correctness(
        "sdpa_decode",
        dt,
        format!("hq={hq} hkv={hkv} n_kv={n} d={d} rising scores"),
        move |ctx, rng| {
            let mut t = qkv(ctx, rng, dt, &[hq, d], &[hkv, n, d])?;
            let mut kv = t.kv.clone();
            for (j, c) in [(n / 2, 3.0), (n - 3, 6.0)] {
                for e in 0..d {
                    kv[j * d + e] = t.qv[e] * c;
                }
            }
            (t.k, t.kv) = upload(ctx, dt, &kv, &[hkv, n, d])?;
            decode_vs_reference(ctx, &t, hq, hkv, n, d)
        },
    )
}

/// Rejections every single-sequence decode entry point shares (`f` adapts the call).
type DecodeFn = fn(&Context, &Tensor, &Tensor, &Tensor, &Tensor) -> Result<(), OpError>;

macro_rules! decode_rejections {
    ($op:expr, $f:expr) => {{
        const F: DecodeFn = $f;
        vec![
            reject(
                $op,
                "integer dtype",
                "`q` must be one of f32, f16, bf16",
                |ctx| {
                    let q = zeros(ctx, DType::U32, &[4, 64])?;
                    let k = zeros(ctx, DType::U32, &[2, 8, 64])?;
                    let (v, out) = (k.clone(), zeros(ctx, DType::U32, &[4, 64])?);
                    let c = ctx.clone();
                    Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
                },
            ),
            reject($op, "k dtype != q dtype", "`k` must be f32", |ctx| {
                let q = zeros(ctx, DType::F32, &[4, 64])?;
                let k = zeros(ctx, DType::F16, &[2, 8, 64])?;
                let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
                let out = zeros(ctx, DType::F32, &[4, 64])?;
                let c = ctx.clone();
                Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
            }),
            reject(
                $op,
                "v shape != k shape",
                "`v` must have shape [2, 8, 64]",
                |ctx| {
                    let q = zeros(ctx, DType::F32, &[4, 64])?;
                    let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
                    let v = zeros(ctx, DType::F32, &[2, 9, 64])?;
                    let out = zeros(ctx, DType::F32, &[4, 64])?;
                    let c = ctx.clone();
                    Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
                },
            ),
            reject(
                $op,
                "out shape != q shape",
                "`out` must have shape [4, 64]",
                |ctx| {
                    let q = zeros(ctx, DType::F32, &[4, 64])?;
                    let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
                    let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
                    let out = zeros(ctx, DType::F32, &[2, 64])?;
                    let c = ctx.clone();
                    Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
                },
            ),
            reject(
                $op,
                "head_dim 80 unsupported",
                "head_dim 80 is not supported",
                |ctx| {
                    let q = zeros(ctx, DType::F32, &[4, 80])?;
                    let k = zeros(ctx, DType::F32, &[2, 8, 80])?;
                    let v = zeros(ctx, DType::F32, &[2, 8, 80])?;
                    let out = zeros(ctx, DType::F32, &[4, 80])?;
                    let c = ctx.clone();
                    Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
                },
            ),
            reject(
                $op,
                "k head_dim != q head_dim",
                "k's head_dim is 128 but q says 64",
                |ctx| {
                    let q = zeros(ctx, DType::F32, &[4, 64])?;
                    let k = zeros(ctx, DType::F32, &[2, 8, 128])?;
                    let v = zeros(ctx, DType::F32, &[2, 8, 128])?;
                    let out = zeros(ctx, DType::F32, &[4, 64])?;
                    let c = ctx.clone();
                    Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
                },
            ),
            reject(
                $op,
                "q heads not a multiple of kv heads",
                "must be a multiple of n_kv_heads = 3",
                |ctx| {
                    let q = zeros(ctx, DType::F32, &[4, 64])?;
                    let k = zeros(ctx, DType::F32, &[3, 8, 64])?;
                    let v = zeros(ctx, DType::F32, &[3, 8, 64])?;
                    let out = zeros(ctx, DType::F32, &[4, 64])?;
                    let c = ctx.clone();
                    Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
                },
            ),
            reject($op, "q is 1-D", "`q` must be 2-D", |ctx| {
                let q = zeros(ctx, DType::F32, &[64])?;
                let k = zeros(ctx, DType::F32, &[1, 8, 64])?;
                let v = zeros(ctx, DType::F32, &[1, 8, 64])?;
                let out = zeros(ctx, DType::F32, &[64])?;
                let c = ctx.clone();
                Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
            }),
            reject($op, "empty cache", "must not be empty", |ctx| {
                let q = zeros(ctx, DType::F32, &[4, 64])?;
                let k = zeros(ctx, DType::F32, &[2, 0, 64])?;
                let v = zeros(ctx, DType::F32, &[2, 0, 64])?;
                let out = zeros(ctx, DType::F32, &[4, 64])?;
                let c = ctx.clone();
                Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
            }),
            reject($op, "out aliases q", "`out` aliases `q`", |ctx| {
                let q = zeros(ctx, DType::F32, &[4, 64])?;
                let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
                let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
                let c = ctx.clone();
                let out = q.clone();
                Ok((q.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
            }),
        ]
    }};
}

pub(super) fn decode_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (hq, hkv, n, d) in [
            (4, 2, 37, 64),
            (3, 1, 29, 96),
            (8, 2, 70, 128),
            (2, 2, 21, 192),
            (4, 1, 45, 256),
        ] {
            v.push(decode_case(dt, hq, hkv, n, d));
        }
    }
    // Long enough that the shape picks split-KV.
    v.push(decode_case(DType::F16, 4, 1, 700, 128));
    v.push(decode_case(DType::BF16, 8, 2, 1500, 64));
    // GQA groups of 16 (one fragment block) and 20 (a full and a partial block).
    v.push(decode_case(DType::F16, 32, 2, 150, 64));
    v.push(decode_case(DType::BF16, 40, 2, 300, 128));
    v.push(decode_case(DType::F16, 20, 1, 90, 256));
    for dt in [DType::F16, DType::BF16] {
        v.push(decode_rising_case(dt, 8, 2, 400, 128));
    }
    v.extend(decode_rejections!("sdpa_decode", |c, q, k, v, o| {
        sdpa_decode(c, q, k, v, o, None)
    }));
    v.push(reject(
        "sdpa_decode",
        "scale is NaN",
        "`scale` must be finite",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || sdpa_decode(&c, &q, &k, &v, &out, Some(f32::NAN))),
            ))
        },
    ));
    v
}

// ── sdpa_decode_strided (window, sinks, sink logit) ─────────────────────────

/// Which keys a decode case shows beyond the lengths: a window, sinks, and random sink
/// logits.
#[derive(Clone, Copy, Default)]
struct Visibility {
    window: usize,
    n_sink: usize,
    logit: bool,
}

/// Runs `op` on `t` with `vis` as its decode options (random sink logits when
/// `vis.logit`): (got, the f64 reference over `rows`, each (cache, visible length)).
fn visible_vs_reference(
    ctx: &Context,
    rng: &mut CaseRng,
    t: &Qkv,
    rows: &[(usize, usize)],
    [hq, hkv, stride, d]: [usize; 4],
    vis: Visibility,
    op: impl FnOnce(&DecodeOptions) -> Result<(), OpError>,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let (sinks, sv) = random_tensor(ctx, rng, t.q.dtype(), &[hq], -1.0, 2.0)?;
    let opts = DecodeOptions {
        window: vis.window as u32,
        n_sink: vis.n_sink as u32,
        sink_logits: vis.logit.then_some(&sinks),
        ..DecodeOptions::default()
    };
    op(&opts).map_err(err)?;
    let want = reference::decode(
        &t.qv,
        &t.kv,
        &t.vv,
        rows,
        hq,
        hkv,
        stride,
        d,
        scale_of(d),
        vis.window,
        vis.n_sink,
        vis.logit.then_some(&sv[..]),
    );
    Ok((t.out.to_f64_vec().map_err(err)?, want))
}

#[allow(clippy::too_many_arguments)]
fn strided_case(
    dt: DType,
    hq: usize,
    hkv: usize,
    stride: usize,
    len: usize,
    d: usize,
    window: usize,
    n_sink: usize,
    logit: bool,
) -> Case {
    let name = format!(
        "hq={hq} hkv={hkv} len={len}/{stride} d={d} window={window} sinks={n_sink}{}",
        if logit { " +sink_logit" } else { "" }
    );
    correctness("sdpa_decode_strided", dt, name, move |ctx, rng| {
        let t = qkv(ctx, rng, dt, &[hq, d], &[hkv, stride, d])?;
        let vis = Visibility {
            window,
            n_sink,
            logit,
        };
        visible_vs_reference(ctx, rng, &t, &[(0, len)], [hq, hkv, stride, d], vis, |o| {
            sdpa_decode_strided(ctx, &t.q, &t.k, &t.v, &t.out, len, o)
        })
    })
}

pub(super) fn strided_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(strided_case(dt, 4, 2, 64, 50, 64, 0, 0, false));
        v.push(strided_case(dt, 4, 1, 80, 77, 128, 16, 4, false));
        v.push(strided_case(dt, 2, 2, 40, 33, 256, 8, 0, true));
        v.push(strided_case(dt, 2, 1, 24, 19, 512, 7, 2, true));
    }
    v.push(strided_case(DType::F32, 8, 2, 96, 90, 128, 0, 3, true));
    v.extend(decode_rejections!(
        "sdpa_decode_strided",
        |c, q, k, v, o| { sdpa_decode_strided(c, q, k, v, o, 4, &DecodeOptions::default()) }
    ));
    v.push(reject(
        "sdpa_decode_strided",
        "kv_len above kv_stride",
        "kv_len = 9 must be in 1..=8",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    sdpa_decode_strided(&c, &q, &k, &v, &out, 9, &DecodeOptions::default())
                }),
            ))
        },
    ));
    v.push(reject(
        "sdpa_decode_strided",
        "kv_len zero",
        "kv_len = 0 must be in 1..=8",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    sdpa_decode_strided(&c, &q, &k, &v, &out, 0, &DecodeOptions::default())
                }),
            ))
        },
    ));
    v.push(reject(
        "sdpa_decode_strided",
        "sink logits shape",
        "`sink_logits` must have shape [4]",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let s = zeros(ctx, DType::F32, &[2])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let o = DecodeOptions {
                        sink_logits: Some(&s),
                        ..DecodeOptions::default()
                    };
                    sdpa_decode_strided(&c, &q, &k, &v, &out, 8, &o)
                }),
            ))
        },
    ));
    v.push(reject(
        "sdpa_decode_strided",
        "sink logits dtype",
        "`sink_logits` must be f32",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let s = zeros(ctx, DType::BF16, &[4])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let o = DecodeOptions {
                        sink_logits: Some(&s),
                        ..DecodeOptions::default()
                    };
                    sdpa_decode_strided(&c, &q, &k, &v, &out, 8, &o)
                }),
            ))
        },
    ));
    v
}

// ── sdpa_decode_split ───────────────────────────────────────────────────────

#[allow(clippy::too_many_arguments)]
fn split_case(
    dt: DType,
    hq: usize,
    hkv: usize,
    stride: usize,
    len: usize,
    d: usize,
    splits: u32,
    window: usize,
    n_sink: usize,
) -> Case {
    let name = format!(
        "hq={hq} hkv={hkv} len={len}/{stride} d={d} splits={splits} window={window} sinks={n_sink}"
    );
    correctness("sdpa_decode_split", dt, name, move |ctx, rng| {
        let t = qkv(ctx, rng, dt, &[hq, d], &[hkv, stride, d])?;
        let vis = Visibility {
            window,
            n_sink,
            logit: n_sink > 0,
        };
        visible_vs_reference(ctx, rng, &t, &[(0, len)], [hq, hkv, stride, d], vis, |o| {
            sdpa_decode_split(ctx, &t.q, &t.k, &t.v, &t.out, len, splits, o)
        })
    })
}

pub(super) fn split_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(split_case(dt, 8, 2, 300, 290, 128, 3, 0, 0));
        v.push(split_case(dt, 2, 1, 200, 200, 64, 5, 40, 3));
        // More splits than one combine step folds (128 per thread slice), most of them
        // empty, with sinks.
        v.push(split_case(dt, 4, 2, 700, 650, 128, 300, 0, 2));
    }
    // More chunks than keys: empty chunks must combine to nothing.
    v.push(split_case(DType::F32, 4, 4, 30, 20, 256, 8, 0, 0));
    v.extend(decode_rejections!("sdpa_decode_split", |c, q, k, v, o| {
        sdpa_decode_split(c, q, k, v, o, 8, 2, &DecodeOptions::default())
    }));
    v.push(reject(
        "sdpa_decode_split",
        "zero splits",
        "`splits` must be in 1..=1024, got 0",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    sdpa_decode_split(&c, &q, &k, &v, &out, 8, 0, &DecodeOptions::default())
                }),
            ))
        },
    ));
    v.push(reject(
        "sdpa_decode_split",
        "too many splits",
        "`splits` must be in 1..=1024, got 5000",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    sdpa_decode_split(&c, &q, &k, &v, &out, 8, 5000, &DecodeOptions::default())
                }),
            ))
        },
    ));
    v.push(reject(
        "sdpa_decode_split",
        "workspace too small",
        "the workspace holds 4 partial outputs",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let ws = DecodeWorkspace::new(ctx, 1, 4, 64, 1).map_err(err)?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let o = DecodeOptions {
                        workspace: Some(&ws),
                        ..DecodeOptions::default()
                    };
                    sdpa_decode_split(&c, &q, &k, &v, &out, 8, 4, &o)
                }),
            ))
        },
    ));
    v
}

// ── sdpa_decode_batched ─────────────────────────────────────────────────────

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
            sdpa_decode_batched(
                ctx,
                &t.q,
                &t.k,
                &t.v,
                &kv_lens,
                &t.out,
                &DecodeOptions::default(),
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
            sdpa_decode_batched(&c, &q, &k, &v, &lens, &out, &DecodeOptions::default())
        }),
    ))
}

pub(super) fn batched_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(batched_case(dt, &[5, 40, 17], 4, 2, 40, 128));
        v.push(batched_case(dt, &[1, 33], 2, 1, 48, 64));
    }
    // A length of 0 gives zeros; one above the cache depth is clamped to it.
    v.push(batched_case(DType::F32, &[0, 9, 99], 4, 4, 32, 256));
    v.push(reject(
        "sdpa_decode_batched",
        "kv_lens not u32",
        "`kv_lens` must be u32",
        |ctx| batched_bad(ctx, DType::I32, 3, 3),
    ));
    v.push(reject(
        "sdpa_decode_batched",
        "kv_lens length != batch",
        "`kv_lens` must have shape [3]",
        |ctx| batched_bad(ctx, DType::U32, 2, 3),
    ));
    v.push(reject(
        "sdpa_decode_batched",
        "cache batch != q batch",
        "k's batch is 2 but q says 3",
        |ctx| batched_bad(ctx, DType::U32, 3, 2),
    ));
    v.push(reject(
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
                    sdpa_decode_batched(&c, &q, &k, &v, &lens, &out, &DecodeOptions::default())
                }),
            ))
        },
    ));
    v.push(reject(
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
                    sdpa_decode_batched(&c, &q, &k, &v, &lens, &out, &DecodeOptions::default())
                }),
            ))
        },
    ));
    v.push(reject(
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
                    sdpa_decode_batched(&c, &q, &k, &v, &lens, &out, &DecodeOptions::default())
                }),
            ))
        },
    ));
    v.push(reject(
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
                    sdpa_decode_batched(&c, &q, &k, &v, &lens, &out, &DecodeOptions::default())
                }),
            ))
        },
    ));
    v
}

// ── sdpa_multi_query ────────────────────────────────────────────────────────

/// Multi-query attention over `[n_query, base_kv, kv_stride, hq, hkv, d]` with the
/// visibility `vis` (a window, sinks with their logits) and optionally a forced split count.
fn mq_case(
    dt: DType,
    [nq, base, stride, hq, hkv, d]: [usize; 6],
    causal: bool,
    vis: Visibility,
    splits: Option<u32>,
) -> Case {
    let forced = splits.map(|s| format!(" splits={s}")).unwrap_or_default();
    correctness(
        "sdpa_multi_query",
        dt,
        format!(
            "n_query={nq} base={base} stride={stride} hq={hq} hkv={hkv} d={d} causal={causal} \
             window={} sinks={}{forced}",
            vis.window, vis.n_sink
        ),
        move |ctx, rng| {
            let t = qkv(ctx, rng, dt, &[nq, hq, d], &[hkv, stride, d])?;
            let rows: Vec<(usize, usize)> = (0..nq)
                .map(|r| (0, if causal { base + r + 1 } else { base + nq }))
                .collect();
            visible_vs_reference(ctx, rng, &t, &rows, [hq, hkv, stride, d], vis, |o| {
                let o = DecodeOptions { splits, ..*o };
                sdpa_multi_query(ctx, &t.q, &t.k, &t.v, &t.out, base, causal, &o)
            })
        },
    )
}

fn mq_bad(
    ctx: &Context,
    q_shape: &[usize],
    k_shape: &[usize],
    base: usize,
) -> Result<(Tensor, Refused), String> {
    let q = zeros(ctx, DType::BF16, q_shape)?;
    let k = zeros(ctx, DType::BF16, k_shape)?;
    let v = zeros(ctx, DType::BF16, k_shape)?;
    let out = zeros(ctx, DType::BF16, q_shape)?;
    let c = ctx.clone();
    Ok((
        out.clone(),
        Box::new(move || {
            sdpa_multi_query(&c, &q, &k, &v, &out, base, true, &DecodeOptions::default())
        }),
    ))
}

/// A multi-query call on zeros (bf16, 4 query heads) with sink logits of `sink` (dtype,
/// shape) and a forced split count, for the option rejections.
fn mq_with_options(
    ctx: &Context,
    sink: Option<(DType, &[usize])>,
    splits: Option<u32>,
) -> Result<(Tensor, Refused), String> {
    let q = zeros(ctx, DType::BF16, &[2, 4, 128])?;
    let k = zeros(ctx, DType::BF16, &[2, 16, 128])?;
    let v = zeros(ctx, DType::BF16, &[2, 16, 128])?;
    let out = zeros(ctx, DType::BF16, &[2, 4, 128])?;
    let sinks = sink.map(|(dt, shape)| zeros(ctx, dt, shape)).transpose()?;
    let c = ctx.clone();
    Ok((
        out.clone(),
        Box::new(move || {
            let o = DecodeOptions {
                sink_logits: sinks.as_ref(),
                splits,
                ..DecodeOptions::default()
            };
            sdpa_multi_query(&c, &q, &k, &v, &out, 0, true, &o)
        }),
    ))
}

pub(super) fn mq_cases() -> Vec<Case> {
    let mut v = Vec::new();
    let plain = Visibility::default();
    for dt in FLOAT_DTYPES {
        v.push(mq_case(dt, [5, 20, 32, 4, 2, 128], true, plain, None));
        v.push(mq_case(dt, [3, 9, 12, 2, 1, 256], false, plain, None));
        v.push(mq_case(dt, [4, 0, 6, 2, 2, 128], false, plain, None));
        // A sliding window with sinks and sink logits, per query row.
        let windowed = Visibility {
            window: 40,
            n_sink: 3,
            logit: true,
        };
        v.push(mq_case(dt, [6, 90, 100, 8, 2, 128], true, windowed, None));
    }
    // Query rows packed into one threadgroup's fragment rows (2-byte caches, no window):
    // whole groups and a partial last one, rows whose visible keys end inside a block or
    // a block apart (head_dim 256 walks 16-key blocks), 1 to 8 heads per group, full and
    // causal, and forced splits that leave some rows no key in some chunks.
    for dt in [DType::F16, DType::BF16] {
        v.push(mq_case(dt, [7, 45, 64, 8, 2, 128], true, plain, None));
        v.push(mq_case(dt, [20, 3, 40, 4, 4, 64], true, plain, None));
        v.push(mq_case(dt, [9, 30, 48, 4, 1, 256], true, plain, None));
        v.push(mq_case(dt, [6, 50, 60, 16, 8, 128], false, plain, None));
        v.push(mq_case(dt, [11, 97, 128, 8, 1, 128], true, plain, Some(9)));
        v.push(mq_case(dt, [16, 0, 16, 2, 2, 64], true, plain, Some(4)));
    }
    v.push(reject(
        "sdpa_multi_query",
        "block past the cache depth",
        "base_kv + n_query = 17 exceeds the cache depth kv_stride = 16",
        |ctx| mq_bad(ctx, &[5, 4, 128], &[2, 16, 128], 12),
    ));
    v.push(reject(
        "sdpa_multi_query",
        "q heads not a multiple of kv heads",
        "must be a multiple of n_kv_heads = 3",
        |ctx| mq_bad(ctx, &[2, 4, 128], &[3, 16, 128], 0),
    ));
    v.push(reject(
        "sdpa_multi_query",
        "head_dim unsupported",
        "head_dim 100 is not supported",
        |ctx| mq_bad(ctx, &[2, 4, 100], &[2, 16, 100], 0),
    ));
    v.push(reject(
        "sdpa_multi_query",
        "k head_dim != q head_dim",
        "k's head_dim is 64 but q says 128",
        |ctx| mq_bad(ctx, &[2, 4, 128], &[2, 16, 64], 0),
    ));
    v.push(reject(
        "sdpa_multi_query",
        "q is 2-D",
        "`q` must be 3-D",
        |ctx| mq_bad(ctx, &[4, 128], &[2, 16, 128], 0),
    ));
    v.push(reject(
        "sdpa_multi_query",
        "v shape != k shape",
        "`v` must have shape [2, 16, 128]",
        |ctx| {
            let q = zeros(ctx, DType::BF16, &[2, 4, 128])?;
            let k = zeros(ctx, DType::BF16, &[2, 16, 128])?;
            let v = zeros(ctx, DType::BF16, &[2, 8, 128])?;
            let out = zeros(ctx, DType::BF16, &[2, 4, 128])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    sdpa_multi_query(&c, &q, &k, &v, &out, 0, true, &DecodeOptions::default())
                }),
            ))
        },
    ));
    v.push(reject(
        "sdpa_multi_query",
        "sink logits shape",
        "`sink_logits` must have shape [4]",
        |ctx| mq_with_options(ctx, Some((DType::BF16, &[2])), None),
    ));
    v.push(reject(
        "sdpa_multi_query",
        "sink logits dtype",
        "`sink_logits` must be bf16",
        |ctx| mq_with_options(ctx, Some((DType::F16, &[4])), None),
    ));
    v.push(reject(
        "sdpa_multi_query",
        "zero splits",
        "`splits` must be in 1..=1024, got 0",
        |ctx| mq_with_options(ctx, None, Some(0)),
    ));
    v.push(reject(
        "sdpa_multi_query",
        "workspace for fewer query rows",
        "the workspace holds 8 partial outputs, this call needs 32",
        |ctx| {
            let q = zeros(ctx, DType::BF16, &[4, 4, 128])?;
            let k = zeros(ctx, DType::BF16, &[2, 16, 128])?;
            let v = zeros(ctx, DType::BF16, &[2, 16, 128])?;
            let out = zeros(ctx, DType::BF16, &[4, 4, 128])?;
            let ws = DecodeWorkspace::new(ctx, 1, 4, 128, 2).map_err(err)?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let o = DecodeOptions {
                        splits: Some(2),
                        workspace: Some(&ws),
                        ..DecodeOptions::default()
                    };
                    sdpa_multi_query(&c, &q, &k, &v, &out, 0, true, &o)
                }),
            ))
        },
    ));
    v.push(reject(
        "sdpa_multi_query",
        "v dtype",
        "`v` must be bf16",
        |ctx| {
            let q = zeros(ctx, DType::BF16, &[2, 4, 128])?;
            let k = zeros(ctx, DType::BF16, &[2, 16, 128])?;
            let v = zeros(ctx, DType::F16, &[2, 16, 128])?;
            let out = zeros(ctx, DType::BF16, &[2, 4, 128])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    sdpa_multi_query(&c, &q, &k, &v, &out, 0, true, &DecodeOptions::default())
                }),
            ))
        },
    ));
    v
}

// ── sdpa_prefill ────────────────────────────────────────────────────────────

#[allow(clippy::too_many_arguments)]
fn prefill_case(
    dt: DType,
    nq: usize,
    nkv: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    causal: bool,
) -> Case {
    correctness(
        "sdpa_prefill",
        dt,
        format!("n_q={nq} n_kv={nkv} hq={hq} hkv={hkv} d={d} causal={causal}"),
        move |ctx, rng| {
            let t = qkv(ctx, rng, dt, &[nq, hq, d], &[nkv, hkv, d])?;
            prefill_vs_reference(ctx, &t, [nq, nkv, hq, hkv, d], causal)
        },
    )
}

/// Scores that jump late: the first KV head's keys at `n_kv / 2` and `n_kv − 3` are the
/// last query row's first head times 3 and 6, so the rows that see them pass their running
/// max by far more than the fragment kernel's rescale margin.
fn prefill_rising_case(dt: DType, [nq, nkv, hq, hkv, d]: [usize; 5], causal: bool) -> Case {
    correctness(
        "sdpa_prefill",
        dt,
        format!("n_q={nq} n_kv={nkv} hq={hq} hkv={hkv} d={d} causal={causal} rising scores"),
        move |ctx, rng| {
            let mut t = qkv(ctx, rng, dt, &[nq, hq, d], &[nkv, hkv, d])?;
            let mut kv = t.kv.clone();
            let last = (nq - 1) * hq * d;
            for (j, c) in [(nkv / 2, 3.0), (nkv - 3, 6.0)] {
                for e in 0..d {
                    kv[j * hkv * d + e] = t.qv[last + e] * c;
                }
            }
            (t.k, t.kv) = upload(ctx, dt, &kv, &[nkv, hkv, d])?;
            prefill_vs_reference(ctx, &t, [nq, nkv, hq, hkv, d], causal)
        },
    )
}

fn prefill_vs_reference(
    ctx: &Context,
    t: &Qkv,
    [nq, nkv, hq, hkv, d]: [usize; 5],
    causal: bool,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    sdpa_prefill(ctx, &t.q, &t.k, &t.v, &t.out, causal, None).map_err(err)?;
    let want = reference::prefill(
        &t.qv,
        &t.kv,
        &t.vv,
        nq,
        nkv,
        hq,
        hkv,
        d,
        scale_of(d),
        causal,
    );
    Ok((t.out.to_f64_vec().map_err(err)?, want))
}

fn prefill_bad(
    ctx: &Context,
    q_shape: &[usize],
    k_shape: &[usize],
) -> Result<(Tensor, Refused), String> {
    let q = zeros(ctx, DType::F32, q_shape)?;
    let k = zeros(ctx, DType::F32, k_shape)?;
    let v = zeros(ctx, DType::F32, k_shape)?;
    let out = zeros(ctx, DType::F32, q_shape)?;
    let c = ctx.clone();
    Ok((
        out.clone(),
        Box::new(move || sdpa_prefill(&c, &q, &k, &v, &out, true, None)),
    ))
}

pub(super) fn prefill_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(prefill_case(dt, 19, 19, 4, 2, 64, true));
        v.push(prefill_case(dt, 7, 40, 2, 1, 128, true));
        v.push(prefill_case(dt, 9, 13, 2, 2, 256, false));
    }
    // The fragment kernel (f16/bf16): several query blocks, more keys than queries, key
    // counts off the block size, GQA 1 to 4, full and causal; head_dim 192 and 256 split
    // the head in two column parts.
    for dt in [DType::F16, DType::BF16] {
        v.push(prefill_case(dt, 130, 130, 4, 1, 128, true));
        v.push(prefill_case(dt, 70, 200, 2, 2, 64, true));
        v.push(prefill_case(dt, 65, 97, 4, 2, 128, false));
        v.push(prefill_case(dt, 1, 45, 2, 1, 64, false));
        v.push(prefill_rising_case(dt, [80, 150, 2, 1, 128], true));
        v.push(prefill_rising_case(dt, [33, 100, 2, 2, 64], false));
        v.push(prefill_case(dt, 70, 90, 4, 2, 256, true));
        v.push(prefill_case(dt, 33, 33, 2, 1, 192, false));
        v.push(prefill_case(dt, 40, 75, 2, 2, 96, true));
        v.push(prefill_rising_case(dt, [45, 120, 2, 1, 256], true));
    }
    v.push(prefill_case(DType::F16, 5, 5, 2, 1, 96, true));
    v.push(prefill_case(DType::F32, 3, 20, 1, 1, 192, true));
    v.push(reject(
        "sdpa_prefill",
        "fewer keys than queries",
        "n_kv = 4 must be at least n_q = 5",
        |ctx| prefill_bad(ctx, &[5, 2, 64], &[4, 2, 64]),
    ));
    v.push(reject(
        "sdpa_prefill",
        "head_dim 512 unsupported",
        "head_dim 512 is not supported",
        |ctx| prefill_bad(ctx, &[2, 2, 512], &[2, 2, 512]),
    ));
    v.push(reject(
        "sdpa_prefill",
        "q heads not a multiple of kv heads",
        "must be a multiple of n_kv_heads = 2",
        |ctx| prefill_bad(ctx, &[2, 3, 64], &[2, 2, 64]),
    ));
    v.push(reject(
        "sdpa_prefill",
        "k head_dim != q head_dim",
        "k's head_dim is 128 but q says 64",
        |ctx| prefill_bad(ctx, &[2, 2, 64], &[2, 2, 128]),
    ));
    v.push(reject(
        "sdpa_prefill",
        "empty prompt",
        "must not be empty",
        |ctx| prefill_bad(ctx, &[0, 2, 64], &[2, 2, 64]),
    ));
    v.push(reject(
        "sdpa_prefill",
        "q is 4-D",
        "`q` must be 3-D",
        |ctx| prefill_bad(ctx, &[1, 2, 2, 64], &[2, 2, 64]),
    ));
    v.push(reject(
        "sdpa_prefill",
        "out aliases k",
        "`out` aliases `k`",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[2, 2, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 2, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 2, 64])?;
            let c = ctx.clone();
            let out = k.clone();
            Ok((
                k.clone(),
                Box::new(move || sdpa_prefill(&c, &q, &k, &v, &out, true, None)),
            ))
        },
    ));
    v
}

// ── kernels to compile ──────────────────────────────────────────────────────

/// The decode specialisations: every head_dim × dtype at the Llama (4) and MHA (1) GQA
/// groups, and the Qwen3 group of 8.
fn decode_kernel_uses(partial: bool) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for d in DECODE_HEAD_DIMS {
            for gqa in [1, 4, 8] {
                let g = geometry(dt, d, gqa);
                let mut c = vec![
                    Literal::U32(d),
                    Literal::U32(g.epl),
                    Literal::U32(g.hpt),
                    Literal::U32(g.sgs),
                    Literal::U32(g.lg),
                ];
                let def = if partial {
                    for per_row in [0, 1] {
                        let mut c = c.clone();
                        c.push(Literal::U32(per_row));
                        c.push(Literal::U32(g.unroll));
                        v.push(KernelUse {
                            def: &sdpa_decode_partial_kernel::DEF,
                            spec: Specialization::new(vec![dt], c),
                        });
                    }
                    continue;
                } else {
                    &sdpa_decode_kernel::DEF
                };
                v.push(KernelUse {
                    def,
                    spec: Specialization::new(vec![dt], std::mem::take(&mut c)),
                });
            }
        }
    }
    v
}

/// The fragment kernel: every 2-byte dtype × its head dims, one query row per
/// threadgroup with and without per-row lengths, and query rows packed by GQA groups of
/// 1, 2, 4 and 8 heads.
fn mma_uses() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in [DType::F16, DType::BF16] {
        for d in MMA_HEAD_DIMS {
            for (per_row, hpr) in [(0, 16), (1, 16), (0, 1), (0, 2), (0, 4), (0, 8)] {
                for direct in [0, 1] {
                    v.push(KernelUse {
                        def: &sdpa_decode_mma_kernel::DEF,
                        spec: Specialization::new(
                            vec![dt],
                            vec![
                                Literal::U32(d),
                                Literal::U32(per_row),
                                Literal::U32(hpr),
                                Literal::U32(direct),
                            ],
                        ),
                    });
                }
            }
        }
    }
    v
}

fn combine_uses() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for d in DECODE_HEAD_DIMS {
            for slices in COMBINE_SLICES {
                v.push(KernelUse {
                    def: &sdpa_decode_combine_kernel::DEF,
                    spec: Specialization::new(
                        vec![dt],
                        vec![Literal::U32(d), Literal::U32(slices)],
                    ),
                });
            }
        }
    }
    v
}

pub(super) fn decode_uses() -> Vec<KernelUse> {
    let mut v = decode_kernel_uses(false);
    v.extend(decode_kernel_uses(true));
    v.extend(mma_uses());
    v.extend(combine_uses());
    v
}

pub(super) fn split_uses() -> Vec<KernelUse> {
    let mut v = decode_kernel_uses(true);
    v.extend(mma_uses());
    v.extend(combine_uses());
    v
}

pub(super) fn prefill_uses() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for d in PREFILL_HEAD_DIMS {
            let c = prefill_constexprs(d)
                .iter()
                .map(|&x| Literal::U32(x))
                .collect();
            v.push(KernelUse {
                def: &sdpa_prefill_kernel::DEF,
                spec: Specialization::new(vec![dt], c),
            });
        }
    }
    for dt in [DType::F16, DType::BF16] {
        for d in PREFILL_HEAD_DIMS {
            v.push(KernelUse {
                def: &sdpa_prefill_mma_kernel::DEF,
                spec: Specialization::new(vec![dt], vec![Literal::U32(d)]),
            });
        }
    }
    v
}

// ── benchmarks ──────────────────────────────────────────────────────────────

/// Decode over a full cache of `n` keys: reads K and V once, q, writes out.
fn decode_bench(
    kernel: &'static str,
    dt: DType,
    hq: usize,
    hkv: usize,
    n: usize,
    d: usize,
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
            let t = qkv(ctx, rng, dt, &[hq, d], &[hkv, n, d])?;
            let want = plain_decode_reference(&t, hq, hkv, n, d);
            let splits = 8 * ctx.info().compute_units.max(1) as usize;
            let ws = DecodeWorkspace::new(ctx, 1, hq, d, splits).map_err(err)?;
            let (c, out) = (ctx.clone(), t.out.clone());
            Ok(PreparedBench {
                launch: Box::new(move || {
                    let o = DecodeOptions {
                        workspace: Some(&ws),
                        ..DecodeOptions::default()
                    };
                    sdpa_decode_strided(&c, &t.q, &t.k, &t.v, &t.out, n, &o).map_err(err)
                }),
                output: out,
                reference: want,
            })
        }),
    }
}

pub(super) fn decode_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        let kernel = if dt == DType::F32 {
            "sdpa_decode_kernel"
        } else {
            "sdpa_decode_mma_kernel"
        };
        v.push(decode_bench(kernel, dt, 8, 2, 256, 128, true));
    }
    for dt in [DType::F16, DType::BF16] {
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
                hq,
                hkv,
                n,
                128,
                false,
            ));
        }
    }
    v.push(decode_bench(
        "sdpa_decode_mma_kernel",
        DType::F16,
        16,
        2,
        32768,
        256,
        false,
    ));
    v
}

pub(super) fn batched_benches() -> Vec<BenchCase> {
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
                let splits = 8 * ctx.info().compute_units.max(1) as usize;
                let ws = DecodeWorkspace::new(ctx, b, hq, d, splits).map_err(err)?;
                let (c, out) = (ctx.clone(), t.out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        let o = DecodeOptions {
                            workspace: Some(&ws),
                            ..DecodeOptions::default()
                        };
                        sdpa_decode_batched(&c, &t.q, &t.k, &t.v, &kv_lens, &t.out, &o).map_err(err)
                    }),
                    output: out,
                    reference: want,
                })
            }),
        });
    }
    v
}

pub(super) fn mq_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for (dt, nq, base, hq, hkv, d, quick) in [
        (DType::F16, 4, 60, 4, 2, 128, true),
        (DType::BF16, 8, 4096, 32, 8, 128, false),
        (DType::BF16, 16, 32768, 32, 8, 128, false),
        (DType::F16, 8, 8192, 16, 4, 256, false),
    ] {
        let es = dt.size_bytes();
        let stride = base + nq;
        v.push(BenchCase {
            op: "sdpa_multi_query",
            kernel: if dt != DType::F32 && MMA_HEAD_DIMS.contains(&(d as u32)) {
                "sdpa_decode_mma_kernel"
            } else {
                "sdpa_decode_kernel"
            },
            dtype: dt,
            shape: format!("n_query={nq} base={base} hq={hq} hkv={hkv} d={d} causal"),
            bytes: ((2 * hkv * stride * d + 2 * nq * hq * d) * es) as u64,
            flops: (4 * nq * hq * stride * d) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let t = qkv(ctx, rng, dt, &[nq, hq, d], &[hkv, stride, d])?;
                let rows: Vec<(usize, usize)> = (0..nq).map(|r| (0, base + r + 1)).collect();
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
                let splits = 8 * ctx.info().compute_units.max(1) as usize;
                let ws = DecodeWorkspace::new(ctx, nq, hq, d, splits).map_err(err)?;
                let (c, out) = (ctx.clone(), t.out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        let o = DecodeOptions {
                            workspace: Some(&ws),
                            ..DecodeOptions::default()
                        };
                        sdpa_multi_query(&c, &t.q, &t.k, &t.v, &t.out, base, true, &o).map_err(err)
                    }),
                    output: out,
                    reference: want,
                })
            }),
        });
    }
    v
}

pub(super) fn prefill_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for (dt, n, hq, hkv, d, quick) in [
        (DType::F16, 64, 4, 2, 64, true),
        (DType::F16, 1024, 32, 8, 128, false),
        (DType::BF16, 2048, 32, 8, 128, false),
        (DType::BF16, 4096, 32, 8, 128, false),
        (DType::BF16, 2048, 16, 16, 64, false),
        (DType::BF16, 2048, 16, 2, 256, false),
    ] {
        let es = dt.size_bytes();
        v.push(BenchCase {
            op: "sdpa_prefill",
            kernel: "sdpa_prefill_mma_kernel",
            dtype: dt,
            shape: format!("n={n} hq={hq} hkv={hkv} d={d} causal"),
            bytes: ((2 * n * hq * d + 2 * n * hkv * d) * es) as u64,
            // Causal: half of the n×n score and PV products.
            flops: (2 * n * n * hq * d) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let t = qkv(ctx, rng, dt, &[n, hq, d], &[n, hkv, d])?;
                let want =
                    reference::prefill(&t.qv, &t.kv, &t.vv, n, n, hq, hkv, d, scale_of(d), true);
                let (c, out) = (ctx.clone(), t.out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        sdpa_prefill(&c, &t.q, &t.k, &t.v, &t.out, true, None).map_err(err)
                    }),
                    output: out,
                    reference: want,
                })
            }),
        });
    }
    v
}

pub(super) fn no_benches() -> Vec<BenchCase> {
    Vec::new()
}
