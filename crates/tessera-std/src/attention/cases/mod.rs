//! Registered attention cases, one file per op, around the fixtures they share here:
//! random q/k/v, the decode rejections every decode-shaped op must give, the visibility
//! (window, sinks, sink logit) reference, and the decode kernels' specialisations. Shapes
//! are small so the CPU run stays quick; the benchmark shapes are Llama-3 / Qwen3's.

use super::decode::{
    sdpa_decode, sdpa_decode_batched, sdpa_decode_split, sdpa_decode_strided, DecodeOptions,
};
use super::decode_combine::{sdpa_decode_combine_kernel, COMBINE_SLICES};
use super::decode_kernels::{sdpa_decode_kernel, sdpa_decode_partial_kernel};
use super::decode_mma::{sdpa_decode_mma_kernel, MMA_HEAD_DIMS};
use super::multi_query::sdpa_multi_query;
use super::plan::{auto_split_bound, geometry, DecodeWorkspace, DECODE_HEAD_DIMS};
use super::prefill::{prefill_constexprs, sdpa_prefill, sdpa_prefill_kernel, PREFILL_HEAD_DIMS};
use super::prefill_mma::sdpa_prefill_mma_kernel;
use super::reference;
use crate::error::OpError;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{
    accuracy, compare, err, random_tensor, rejection, upload, zeros, CaseRng, Refused,
};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

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

/// Split scratch for calls of `q` and `k`'s shapes (q's leading dimensions are rows), made
/// outside the op call like an engine's: every split count the plan may pick over k's
/// cache depth, or `splits` when that is more.
fn workspace(
    ctx: &Context,
    q: &Tensor,
    k: &Tensor,
    splits: Option<u32>,
) -> Result<DecodeWorkspace, OpError> {
    let (qs, ks) = (q.shape(), k.shape());
    let back = |s: &[usize], i: usize| s.len().checked_sub(i).map_or(1, |j| s[j]);
    let rows: usize = qs[..qs.len().saturating_sub(2)].iter().product();
    let splits = auto_split_bound(back(ks, 2)).max(splits.unwrap_or(1) as usize);
    DecodeWorkspace::new(ctx, rows.max(1), back(qs, 2), back(qs, 1), splits)
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
            compare(&got, &want, accuracy(op, dt)?)
        }),
    }
}

/// Rejections every single-sequence decode entry point shares (`f` adapts the call).
macro_rules! decode_rejections {
    ($op:expr, $f:expr) => {{
        const F: DecodeFn = $f;
        vec![
            rejection(
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
            rejection($op, "k dtype != q dtype", "`k` must be f32", |ctx| {
                let q = zeros(ctx, DType::F32, &[4, 64])?;
                let k = zeros(ctx, DType::F16, &[2, 8, 64])?;
                let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
                let out = zeros(ctx, DType::F32, &[4, 64])?;
                let c = ctx.clone();
                Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
            }),
            rejection(
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
            rejection(
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
            rejection(
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
            rejection(
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
            rejection(
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
            rejection($op, "q is 1-D", "`q` must be 2-D", |ctx| {
                let q = zeros(ctx, DType::F32, &[64])?;
                let k = zeros(ctx, DType::F32, &[1, 8, 64])?;
                let v = zeros(ctx, DType::F32, &[1, 8, 64])?;
                let out = zeros(ctx, DType::F32, &[64])?;
                let c = ctx.clone();
                Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
            }),
            rejection($op, "empty cache", "must not be empty", |ctx| {
                let q = zeros(ctx, DType::F32, &[4, 64])?;
                let k = zeros(ctx, DType::F32, &[2, 0, 64])?;
                let v = zeros(ctx, DType::F32, &[2, 0, 64])?;
                let out = zeros(ctx, DType::F32, &[4, 64])?;
                let c = ctx.clone();
                Ok((out.clone(), Box::new(move || F(&c, &q, &k, &v, &out))))
            }),
            rejection($op, "out aliases q", "`out` aliases `q`", |ctx| {
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

pub(super) fn no_benches() -> Vec<BenchCase> {
    Vec::new()
}

/// A single-sequence decode entry point, adapted to one signature for the shared rejections.
type DecodeFn = fn(&Context, &Tensor, &Tensor, &Tensor, &Tensor) -> Result<(), OpError>;

mod sdpa_decode;
mod sdpa_decode_batched;
mod sdpa_decode_split;
mod sdpa_decode_strided;
mod sdpa_multi_query;
mod sdpa_prefill;

pub(super) use sdpa_decode::{decode_benches, decode_cases, decode_uses};
pub(super) use sdpa_decode_batched::{batched_benches, batched_cases};
pub(super) use sdpa_decode_split::{split_cases, split_uses};
pub(super) use sdpa_decode_strided::strided_cases;
pub(super) use sdpa_multi_query::{mq_benches, mq_cases};
pub(super) use sdpa_prefill::{prefill_benches, prefill_cases, prefill_uses};
