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
use super::paged_rows::CONTIGUOUS;
use super::plan::{auto_split_bound, geometry, DecodeWorkspace, DECODE_HEAD_DIMS};
use super::prefill::{prefill_constexprs, sdpa_prefill, sdpa_prefill_kernel, PREFILL_HEAD_DIMS};
use super::prefill_mma::sdpa_prefill_mma_kernel;
use super::prefill_tiles::sdpa_prefill_tiles_kernel;
use super::reference;
use crate::error::OpError;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{
    accuracy, compare, err, kernel_use, qkv, random_tensor, rejection, replaced, upload, zeros_of,
    CaseRng, Qkv, Spec,
};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};
use DType::{BF16, F16, F32, U32};

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

/// A rejection of an attention call over zero tensors of `specs`, its output last: `call`
/// gets the context and the tensors, and must be refused without writing the output.
fn rejection_over<const N: usize>(
    op: &'static str,
    (what, reason): (&str, &'static str),
    specs: [Spec; N],
    call: impl Fn(&Context, &[Tensor; N]) -> Result<(), OpError> + Copy + Send + Sync + 'static,
) -> Case {
    rejection(op, what, reason, move |ctx| {
        let t = zeros_of(ctx, specs)?;
        let (c, untouched) = (ctx.clone(), t[N - 1].clone());
        Ok((untouched, Box::new(move || call(&c, &t))))
    })
}

/// f32 q `q`, k and v `kv`, out of q's shape: a decode or prefill call's tensors.
const fn qkv_specs(q: &'static [usize], kv: &'static [usize]) -> [Spec; 4] {
    [(F32, q), (F32, kv), (F32, kv), (F32, q)]
}

/// The good single-sequence decode call: q [4, 64] over a cache [2, 8, 64].
const DECODE_GOOD: [Spec; 4] = qkv_specs(&[4, 64], &[2, 8, 64]);

/// Rejections every single-sequence decode entry point shares (`f` adapts the call).
fn decode_rejections(op: &'static str, f: DecodeFn) -> Vec<Case> {
    let call = move |c: &Context, [q, k, v, out]: &[Tensor; 4]| f(c, q, k, v, out);
    let table = [
        (
            "k dtype != q dtype",
            "`k` must be f32",
            replaced(DECODE_GOOD, 1, (F16, &[2, 8, 64])),
        ),
        (
            "v shape != k shape",
            "`v` must have shape [2, 8, 64]",
            replaced(DECODE_GOOD, 2, (F32, &[2, 9, 64])),
        ),
        (
            "out shape != q shape",
            "`out` must have shape [4, 64]",
            replaced(DECODE_GOOD, 3, (F32, &[2, 64])),
        ),
        (
            "head_dim 80 unsupported",
            "head_dim 80 is not supported",
            qkv_specs(&[4, 80], &[2, 8, 80]),
        ),
        (
            "k head_dim != q head_dim",
            "k's head_dim is 128 but q says 64",
            qkv_specs(&[4, 64], &[2, 8, 128]),
        ),
        (
            "q heads not a multiple of kv heads",
            "must be a multiple of n_kv_heads = 3",
            qkv_specs(&[4, 64], &[3, 8, 64]),
        ),
        ("q is 1-D", "`q` must be 2-D", qkv_specs(&[64], &[1, 8, 64])),
        (
            "empty cache",
            "must not be empty",
            qkv_specs(&[4, 64], &[2, 0, 64]),
        ),
    ];
    let mut v = vec![rejection(
        op,
        "integer dtype",
        "`q` must be one of f32, f16, bf16",
        move |ctx| {
            let [q, k, out] =
                zeros_of(ctx, [(U32, &[4, 64]), (U32, &[2, 8, 64]), (U32, &[4, 64])])?;
            let (v, c, untouched) = (k.clone(), ctx.clone(), out.clone());
            Ok((untouched, Box::new(move || f(&c, &q, &k, &v, &out))))
        },
    )];
    v.extend(table.map(|(what, reason, specs)| rejection_over(op, (what, reason), specs, call)));
    v.push(rejection(
        op,
        "out aliases q",
        "`out` aliases `q`",
        move |ctx| {
            let [q, k, v] = zeros_of(ctx, [DECODE_GOOD[0], DECODE_GOOD[1], DECODE_GOOD[2]])?;
            let (out, c, untouched) = (q.clone(), ctx.clone(), q.clone());
            Ok((untouched, Box::new(move || f(&c, &q, &k, &v, &out))))
        },
    ));
    v
}

/// The two sink-logit rejections: logits one per query head short (`[2]` for the 4 heads
/// of `good`'s q) and logits of `other`, a dtype not q's (`dtype_reason`). `call` gets
/// `[q, k, v, sink_logits, out]`.
fn sink_logit_rejections(
    op: &'static str,
    good: [Spec; 4],
    (other, dtype_reason): (DType, &'static str),
    call: fn(&Context, &[Tensor; 5]) -> Result<(), OpError>,
) -> [Case; 2] {
    let [q, k, v, out] = good;
    let short = ("sink logits shape", "`sink_logits` must have shape [4]");
    [
        rejection_over(op, short, [q, k, v, (q.0, &[2]), out], call),
        rejection_over(
            op,
            ("sink logits dtype", dtype_reason),
            [q, k, v, (other, &[4]), out],
            call,
        ),
    ]
}

/// A call on zero tensors of `specs` with a workspace of `[batch, hq, d, splits]` too small
/// for it (and `splits` forced where given), which must be refused for `reason`.
fn small_workspace_rejection(
    (op, what, reason): (&'static str, &str, &'static str),
    specs: [Spec; 4],
    [batch, hq, d, ws_splits]: [usize; 4],
    splits: Option<u32>,
    call: fn(&Context, &[Tensor; 4], &DecodeOptions, &DecodeWorkspace) -> Result<(), OpError>,
) -> Case {
    rejection(op, what, reason, move |ctx| {
        let t = zeros_of(ctx, specs)?;
        let ws = DecodeWorkspace::new(ctx, batch, hq, d, ws_splits).map_err(err)?;
        let (c, untouched) = (ctx.clone(), t[3].clone());
        Ok((
            untouched,
            Box::new(move || {
                let o = DecodeOptions {
                    splits,
                    ..DecodeOptions::default()
                };
                call(&c, &t, &o, &ws)
            }),
        ))
    })
}

/// The f64 reference of a decode of `t` over `rows` (each (cache, visible length)) with
/// the visibility `vis` and, where it has them, the sink logits `sinks`.
fn decode_reference(
    t: &Qkv,
    rows: &[(usize, usize)],
    [hq, hkv, stride, d]: [usize; 4],
    vis: Visibility,
    sinks: Option<&[f64]>,
) -> Vec<f64> {
    let (q, k, v) = (&t.qv, &t.kv, &t.vv);
    let scale = scale_of(d);
    reference::decode(
        q, k, v, rows, hq, hkv, stride, d, scale, vis.window, vis.n_sink, sinks,
    )
}

/// A decode-shaped bench's preparation: random q `q_shape` against k and v `kv_shape`, the
/// reference over `rows`, a workspace for `batch` query rows at eight splits per compute
/// unit, and `launch` with that workspace.
fn decode_bench_prepare(
    (ctx, rng): (&Context, &mut CaseRng),
    (dt, q_shape, kv_shape): (DType, &[usize], &[usize]),
    (rows, dims, batch): (&[(usize, usize)], [usize; 4], usize),
    launch: impl Fn(&Context, &Qkv, &DecodeOptions, &DecodeWorkspace) -> Result<(), OpError> + 'static,
) -> Result<PreparedBench, String> {
    let t = qkv(ctx, rng, dt, q_shape, kv_shape)?;
    let reference = decode_reference(&t, rows, dims, Visibility::default(), None);
    let splits = 8 * ctx.info().compute_units.max(1) as usize;
    let ws = DecodeWorkspace::new(ctx, batch, dims[0], dims[3], splits).map_err(err)?;
    let (c, output) = (ctx.clone(), t.out.clone());
    Ok(PreparedBench {
        launch: Box::new(move || launch(&c, &t, &DecodeOptions::default(), &ws).map_err(err)),
        output,
        reference,
    })
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
    let want = decode_reference(t, rows, [hq, hkv, stride, d], vis, vis.logit.then_some(&sv));
    Ok((t.out.to_f64_vec().map_err(err)?, want))
}

/// A single-sequence decode case: random q `[hq, d]` against k and v `[hkv, stride, d]`,
/// `call` over the first `len` keys with `vis` as its options, checked by the reference.
fn visible_case(
    (op, dt, name): (&'static str, DType, String),
    [hq, hkv, stride, len, d]: [usize; 5],
    vis: Visibility,
    call: impl Fn(&Context, &Qkv, &DecodeOptions) -> Result<(), OpError> + Send + Sync + 'static,
) -> Case {
    correctness(op, dt, name, move |ctx, rng| {
        let t = qkv(ctx, rng, dt, &[hq, d], &[hkv, stride, d])?;
        let dims = [hq, hkv, stride, d];
        visible_vs_reference(ctx, rng, &t, &[(0, len)], dims, vis, |o| call(ctx, &t, o))
    })
}

/// The decode specialisations: every head_dim × dtype at the Llama (4) and MHA (1) GQA
/// groups, and the Qwen3 group of 8.
fn decode_kernel_uses(partial: bool) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for d in DECODE_HEAD_DIMS {
            for gqa in [1, 4, 8] {
                let g = geometry(dt, d, gqa);
                let c = [d, g.epl, g.hpt, g.sgs, g.lg];
                if !partial {
                    v.push(kernel_use(&sdpa_decode_kernel::DEF, dt, &c));
                    continue;
                }
                for per_row in [0, 1] {
                    let c = [&c[..], &[per_row, g.unroll, CONTIGUOUS]].concat();
                    v.push(kernel_use(&sdpa_decode_partial_kernel::DEF, dt, &c));
                }
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
    for dt in [F16, BF16] {
        for d in MMA_HEAD_DIMS {
            for (per_row, hpr) in [(0, 16), (1, 16), (0, 1), (0, 2), (0, 4), (0, 8)] {
                for direct in [0, 1] {
                    let c = [d, per_row, hpr, direct, CONTIGUOUS, 0, 4096 / d];
                    v.push(mma_kernel_use(dt, dt, &c));
                }
            }
        }
    }
    v
}

/// The fragment kernel for queries of `dt` over a cache of `cache` (`dt`, or u8 codes)
/// with constants `c`.
pub(crate) fn mma_kernel_use(dt: DType, cache: DType, c: &[u32]) -> KernelUse {
    KernelUse {
        def: &sdpa_decode_mma_kernel::DEF,
        spec: Specialization::new(
            vec![dt, cache],
            c.iter().map(|&x| Literal::U32(x)).collect(),
        ),
    }
}

fn combine_uses() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for d in DECODE_HEAD_DIMS {
            for slices in COMBINE_SLICES {
                v.push(kernel_use(
                    &sdpa_decode_combine_kernel::DEF,
                    dt,
                    &[d, slices],
                ));
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

mod kv_quant;
mod kv_quant_int4;
mod paged_kv_append;
mod paged_kv_append_ragged;
mod paged_kv_append_rope;
mod sdpa_decode;
mod sdpa_decode_batched;
mod sdpa_decode_paged;
mod sdpa_decode_paged_prepared;
mod sdpa_decode_split;
mod sdpa_decode_strided;
mod sdpa_multi_query;
mod sdpa_multi_query_paged;
mod sdpa_prefill;
mod sdpa_prefill_paged;
mod sdpa_prefill_paged_quant;
mod sdpa_prefill_varlen;

pub(super) use kv_quant::{
    append_cases as quant_append_cases, append_reference as quant_append_reference,
    append_uses as quant_append_uses, decode_benches as quant_decode_benches,
    decode_cases as quant_decode_cases, decode_reference as quant_decode_reference,
    decode_uses as quant_decode_uses, mq_cases as quant_mq_cases,
};
pub(super) use kv_quant_int4::{
    append_cases as quant_int4_append_cases, append_uses as quant_int4_append_uses,
    declared_uses as quant_int4_decode_uses, decode_cases as quant_int4_decode_cases,
    mq_cases as quant_int4_mq_cases,
};
pub(super) use paged_kv_append::{append_cases, append_reference, append_uses};
pub(super) use paged_kv_append_ragged::{ragged_cases, ragged_reference, ragged_uses};
pub(super) use paged_kv_append_rope::quant_rope_cases;
pub(super) use sdpa_decode::{decode_benches, decode_cases, decode_uses};
pub(super) use sdpa_decode_batched::{batched_benches, batched_cases};
pub(super) use sdpa_decode_paged::{paged_benches, paged_cases, paged_reference, paged_uses};
pub(super) use sdpa_decode_split::{split_cases, split_uses};
pub(super) use sdpa_decode_strided::strided_cases;
pub(super) use sdpa_multi_query::{mq_benches, mq_cases};
pub(super) use sdpa_multi_query_paged::mq_paged_cases;
pub(super) use sdpa_prefill::{prefill_benches, prefill_cases, prefill_uses};
pub(super) use sdpa_prefill_paged::{
    declared_reference as prefill_paged_reference, prefill_paged_benches, prefill_paged_cases,
    prefill_paged_uses,
};
pub(super) use sdpa_prefill_paged_quant::{
    quant_prefill_int4_benches, quant_prefill_int4_cases, quant_prefill_int4_uses,
    quant_prefill_int8_benches, quant_prefill_int8_cases, quant_prefill_int8_uses,
    quant_prefill_reference,
};
pub(super) use sdpa_prefill_varlen::{
    declared_reference as varlen_reference, varlen_benches, varlen_cases, varlen_uses,
};
