//! Cases of `sdpa_prefill_paged_quant` and its int4 form: chunks of new tokens over a
//! prefix in shuffled pages of random codes and scales (NaN scales in every slot no
//! sequence fills), against the f64 reference that dequantizes each code exactly with the
//! format's own decode, rounds each value to f32 and then to q's dtype (the op's
//! definition: the value the float cache of q's dtype would hold) and attends as the
//! float paged prefill's reference does.
//! int8, e4m3 and int4 (groups of 32 and 64), f16 and bf16 queries, NHD and HND, block
//! and CSR tables, pages of 1, 5 and 16, head dims 64 to 256, GQA 1 and 4, causal and
//! full, a batch with a zero-length chunk and odd prefixes, a prefix past one key block
//! of either kernel; NaN K and V scales (the rows
//! that see them NaN, the others untouched); a rejection per invariant; the quantized
//! specialisations; bench shapes beside `sdpa_prefill_paged`'s.

use super::super::kv_quant::{KvFormat, KvScales};
use super::super::paged::{KvLayout, PageTable, PagedKv};
use super::super::paged_rows::{PAGED_ANY, PAGED_POW2};
use super::super::prefill::prefill_mma_quant_constexprs;
use super::super::prefill_paged::{
    prefill_paged_table_kernel, PagedPrefillWorkspace, PagedQueries,
};
use super::super::prefill_paged_quant::sdpa_prefill_paged_quant;
use super::kv_quant::{dequantize, nan_marked, random_codes};
use super::sdpa_decode_paged::{build, Form, Paged};
use super::sdpa_prefill_paged::{declared_reference_over, offsets, paged_prefill_reference};
use super::*;
use crate::decl::RefArgs;
use crate::elementwise::reference::cast;
use crate::testing::rejection_of;
use DType::{I32, U8};

const OP: &str = "sdpa_prefill_paged_quant";
const OP_INT4: &str = "sdpa_prefill_paged_quant_int4";

/// The declared op whose cases a call over `format` belongs to.
fn op_for(format: KvFormat) -> &'static str {
    match format {
        KvFormat::Int4 { .. } => OP_INT4,
        _ => OP,
    }
}

/// One case: `(layout, form)`, sequences of `(prefix, new tokens)`, `[hq, hkv, page, d]`,
/// causal.
#[derive(Clone, Copy)]
struct QuantCase {
    layout: KvLayout,
    form: Form,
    seqs: &'static [(usize, usize)],
    dims: [usize; 4],
    causal: bool,
}

/// The quantized pools of `p` (codes, scales, and the values the op reads in q's dtype
/// `dt`, for K then V).
type Pools = [(Tensor, Tensor, Vec<f64>); 2];

fn quantized_pools(
    (ctx, rng): (&Context, &mut CaseRng),
    (dt, format): (DType, KvFormat),
    p: &Paged,
) -> Result<Pools, String> {
    let shape = p.k.shape().to_vec();
    let (kc, ks, k) = scaled_pool((ctx, rng), format, &p.kv, &shape)?;
    let (vc, vs, v) = scaled_pool((ctx, rng), format, &p.vv, &shape)?;
    Ok([(kc, ks, cast(dt, &k)), (vc, vs, cast(dt, &v))])
}

/// A quantized pool for the float pool `values` of shape `shape`: random codes and per row
/// (int4: per group) a scale of `amax / format.max()` for a random amax in `[0.25, 1)`,
/// as an append of values within ±1 gives; NaN where `values` marks a slot no sequence
/// fills. Returns the codes, the scales and the exactly dequantized values.
fn scaled_pool(
    (ctx, rng): (&Context, &mut CaseRng),
    format: KvFormat,
    values: &[f64],
    shape: &[usize],
) -> Result<(Tensor, Tensor, Vec<f64>), String> {
    let d = shape[shape.len() - 1];
    let mut code_shape = shape.to_vec();
    code_shape[shape.len() - 1] = format.row_bytes(d);
    let group = format.group(d as u32) as usize;
    let codes = random_codes(rng, values.len() / d * format.row_bytes(d));
    let scales: Vec<f64> = (0..values.len() / group)
        .map(|g| {
            if values[g / (d / group) * d].is_nan() {
                f64::NAN
            } else {
                f64::from(rng.uniform(0.25, 1.0) as f32 / format.max())
            }
        })
        .collect();
    let (c, cv) = upload(ctx, U8, &codes, &code_shape)?;
    let (s, sv) = upload(ctx, F32, &scales, &format.scale_shape(&code_shape))?;
    Ok((c, s, dequantize(format, &cv, &sv)))
}

/// Runs case `c` over `format` with q of `dt`; `nan` sets the K scales of the first
/// sequence's last token and the V scales of its fourth new token to NaN in every KV head
/// (causal: its first three queries see neither). Returns (output, reference), NaNs
/// marked.
fn run_case(
    (ctx, rng): (&Context, &mut CaseRng),
    (dt, format): (DType, KvFormat),
    c: QuantCase,
    nan: bool,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let [hq, hkv, page, d] = c.dims;
    let lens: Vec<usize> = c.seqs.iter().map(|&(p, n)| p + n).collect();
    let p = build((ctx, rng), (dt, c.layout, c.form), (&lens, None), c.dims, 2)?;
    let [(kc, mut ks, mut kdq), (vc, mut vs, mut vdq)] =
        quantized_pools((ctx, rng), (dt, format), &p)?;
    if nan {
        let (prefix, new) = c.seqs[0];
        let groups = d / format.group(d as u32) as usize;
        let nan_rows = |pos: usize| {
            let (pg, slot) = (p.seqs[0].0[pos / page], pos % page);
            (0..hkv).map(move |h| match c.layout {
                KvLayout::Nhd => (pg * page + slot) * hkv + h,
                KvLayout::Hnd => (pg * hkv + h) * page + slot,
            })
        };
        for (pos, codes, scales, values) in [
            (prefix + new - 1, &kc, &mut ks, &mut kdq),
            (prefix + 3, &vc, &mut vs, &mut vdq),
        ] {
            let mut sv = scales.to_f64_vec().map_err(err)?;
            for row in nan_rows(pos) {
                sv[row * groups..(row + 1) * groups].fill(f64::NAN);
            }
            *scales = upload(ctx, F32, &sv, scales.shape())?.0;
            *values = cast(
                dt,
                &dequantize(format, &codes.to_f64_vec().map_err(err)?, &sv),
            );
        }
    }
    let cu_q = offsets(c.seqs.iter().map(|s| s.1));
    let total_q = cu_q[cu_q.len() - 1];
    let (q, qv) = random_tensor(ctx, rng, dt, &[total_q, hq, d], -1.0, 1.0)?;
    let out = ctx.full_nan(dt, &[total_q, hq, d]).map_err(err)?;
    let cu: Vec<f64> = cu_q.iter().map(|&x| x as f64).collect();
    let (cu_t, _) = upload(ctx, I32, &cu, &[cu.len()])?;
    let queries = PagedQueries {
        cu_seqlens_q: &cu_t,
        max_seqlen_q: c.seqs.iter().map(|s| s.1).max().unwrap_or(1).max(1),
    };
    let kv = PagedKv {
        k_cache: &kc,
        v_cache: &vc,
        ..p.cache()
    };
    let scales = KvScales {
        k_scale: &ks,
        v_scale: &vs,
        format,
    };
    let ws = PagedPrefillWorkspace::new(ctx, c.seqs.len(), p.entries).map_err(err)?;
    sdpa_prefill_paged_quant(ctx, &q, &kv, &scales, &queries, &out, c.causal, None, &ws)
        .map_err(err)?;
    let want = paged_prefill_reference(
        (&qv, &kdq, &vdq),
        &p.seqs,
        &cu_q,
        c.layout,
        c.dims,
        scale_of(d),
        c.causal,
    );
    let got = out.to_f64_vec().map_err(err)?;
    Ok((nan_marked(&got), nan_marked(&want)))
}

fn quant_case(dt: DType, format: KvFormat, c: QuantCase) -> Case {
    let [hq, hkv, page, d] = c.dims;
    let name = format!(
        "{format:?} (prefix, new)={:?} {:?} {:?} hq={hq} hkv={hkv} page={page} d={d} causal={}",
        c.seqs, c.layout, c.form, c.causal
    );
    correctness(op_for(format), dt, name, move |ctx, rng| {
        run_case((ctx, rng), (dt, format), c, false)
    })
}

/// NaN K and V scales in the first sequence's chunk (causal): the rows that see them are
/// NaN, the rows before them match the reference.
fn nan_case(dt: DType, format: KvFormat) -> Case {
    let c = QuantCase {
        layout: KvLayout::Nhd,
        form: Form::Blocks,
        seqs: &[(6, 9), (3, 2)],
        dims: [4, 2, 5, 64],
        causal: true,
    };
    let name = format!("{format:?} NaN K and V scales reach only the rows that see them");
    correctness(op_for(format), dt, name, move |ctx, rng| {
        let (got, want) = run_case((ctx, rng), (dt, format), c, true)?;
        // Sequence 0's first query sees the NaN key, so the case is not vacuous.
        if want.iter().filter(|&&x| x == -1.0e9).count() == 0 {
            return Err("the reference holds no NaN row".into());
        }
        Ok((got, want))
    })
}

/// One sequence, no prefix.
const FRESH: &[(usize, usize)] = &[(0, 23)];
/// A prefix of several pages, a one-token chunk, a fresh prompt.
const CHUNKS: &[(usize, usize)] = &[(40, 17), (5, 1), (0, 9)];
/// One-token chunks and a sequence with no new tokens.
const SMALL: &[(usize, usize)] = &[(3, 4), (6, 0), (7, 1)];
/// Odd prefixes around a zero-length chunk, more than one query block.
const ODD: &[(usize, usize)] = &[(13, 5), (0, 0), (29, 70)];
/// Past one block of the tile-product kernel (128 keys), a chunk over a long prefix.
const LONG: &[(usize, usize)] = &[(150, 21), (0, 3)];
/// A short chunk over a prefix, for the wide heads.
const WIDE: &[(usize, usize)] = &[(20, 7)];

fn formats() -> [KvFormat; 4] {
    [
        KvFormat::Int8,
        KvFormat::E4m3,
        KvFormat::Int4 { group: 32 },
        KvFormat::Int4 { group: 64 },
    ]
}

pub(crate) fn quant_prefill_cases() -> Vec<Case> {
    use Form::{Blocks, Csr};
    use KvLayout::{Hnd, Nhd};
    let case = |layout, form, seqs, dims, causal| QuantCase {
        layout,
        form,
        seqs,
        dims,
        causal,
    };
    let mut v = Vec::new();
    for (i, format) in formats().into_iter().enumerate() {
        let shapes = [
            case(Nhd, Blocks, FRESH, [4, 2, 16, 64], true),
            case(Hnd, Blocks, CHUNKS, [4, 1, 16, 128], true),
            case(Nhd, Csr, CHUNKS, [2, 2, 5, 64], false),
            case(Hnd, Csr, SMALL, [4, 1, 1, 64], true),
            case(Nhd, Blocks, ODD, [8, 2, 5, 128], true),
            case(Hnd, Blocks, WIDE, [2, 1, 16, 256], false),
            case(Nhd, Csr, LONG, [4, 1, 16, 128], true),
        ];
        for (j, c) in shapes.into_iter().enumerate() {
            // Both query dtypes over every format, alternating.
            let dt = if (i + j) % 2 == 0 { BF16 } else { F16 };
            v.push(quant_case(dt, format, c));
        }
        if format.group(96) == 96 {
            // The byte formats also take the head dims that are not powers of two.
            for (dt, d) in [(BF16, 96), (F16, 192)] {
                v.push(quant_case(
                    dt,
                    format,
                    case(Nhd, Csr, WIDE, [2, 2, 16, d], true),
                ));
            }
        }
    }
    v
}

pub(crate) fn quant_prefill_int8_cases() -> Vec<Case> {
    let mut v = cases_of(OP);
    v.push(nan_case(BF16, KvFormat::Int8));
    v.push(nan_case(F16, KvFormat::E4m3));
    v.extend(rejections(KvFormat::Int8));
    v
}

pub(crate) fn quant_prefill_int4_cases() -> Vec<Case> {
    let mut v = cases_of(OP_INT4);
    v.push(nan_case(F16, KvFormat::Int4 { group: 32 }));
    v.extend(rejections(KvFormat::Int4 { group: 32 }));
    v
}

fn cases_of(op: &str) -> Vec<Case> {
    quant_prefill_cases()
        .into_iter()
        .filter(|c| c.op == op)
        .collect()
}

/// A quantized call over zero tensors of `specs` (q, k_cache, v_cache, k_scale, v_scale,
/// out) in `format`: two sequences of 4 and 2 queries over NHD pools of 3 pages of 4
/// tokens and 2 KV heads, named by the block table `[2, 2]` `table`; must be refused for
/// `reason`, out untouched.
fn quant_rejection(
    format: KvFormat,
    (what, reason): (&str, &'static str),
    specs: [Spec; 6],
    table: &'static [f64],
) -> Case {
    rejection_of(op_for(format), what, reason, move |ctx, _| {
        let [q, kc, vc, ks, vs, out] = zeros_of(ctx, specs)?;
        let (cu, _) = upload(ctx, I32, &[0.0, 4.0, 6.0], &[3])?;
        let (bt, _) = upload(ctx, I32, table, &[2, 2])?;
        let (sl, _) = upload(ctx, I32, &[6.0, 2.0], &[2])?;
        let ws = PagedPrefillWorkspace::new(ctx, 2, 4).map_err(err)?;
        let (c, untouched) = (ctx.clone(), out.clone());
        Ok((
            untouched,
            Box::new(move || {
                let kv = PagedKv {
                    k_cache: &kc,
                    v_cache: &vc,
                    layout: KvLayout::Nhd,
                    table: PageTable::Blocks {
                        block_table: &bt,
                        seq_lens: &sl,
                    },
                };
                let queries = PagedQueries {
                    cu_seqlens_q: &cu,
                    max_seqlen_q: 4,
                };
                let scales = KvScales {
                    k_scale: &ks,
                    v_scale: &vs,
                    format,
                };
                sdpa_prefill_paged_quant(&c, &q, &kv, &scales, &queries, &out, true, None, &ws)
            }),
        ))
    })
}

/// The good call's tensors for `format` at head_dim 64: q, the pools, the scales, out.
fn good_specs(format: KvFormat) -> [Spec; 6] {
    const Q: &[usize] = &[6, 2, 64];
    match format {
        KvFormat::Int4 { .. } => [
            (BF16, Q),
            (U8, &[3, 4, 2, 32]),
            (U8, &[3, 4, 2, 32]),
            (F32, &[3, 4, 2, 2]),
            (F32, &[3, 4, 2, 2]),
            (BF16, Q),
        ],
        _ => [
            (BF16, Q),
            (U8, &[3, 4, 2, 64]),
            (U8, &[3, 4, 2, 64]),
            (F32, &[3, 4, 2]),
            (F32, &[3, 4, 2]),
            (BF16, Q),
        ],
    }
}

fn rejections(format: KvFormat) -> Vec<Case> {
    const TABLE: &[f64] = &[0.0, 1.0, 2.0, 0.0];
    let good = good_specs(format);
    let reject = |what, reason, specs| quant_rejection(format, (what, reason), specs, TABLE);
    let mut v = vec![
        reject(
            "float pools",
            "`k_cache` must be u8",
            replaced(replaced(good, 1, (BF16, good[1].1)), 2, (BF16, good[2].1)),
        ),
        reject(
            "f32 queries",
            "`q` must be one of f16, bf16",
            replaced(replaced(good, 0, (F32, good[0].1)), 5, (F32, good[5].1)),
        ),
        reject(
            "out of another dtype",
            "`out` must be bf16",
            replaced(good, 5, (F16, good[5].1)),
        ),
        reject(
            "f16 scales",
            "`k_scale` must be f32",
            replaced(good, 3, (F16, good[3].1)),
        ),
        reject(
            "a scale pool of another shape",
            "`v_scale` must have shape",
            replaced(good, 4, (F32, &[3, 4, 1])),
        ),
        reject(
            "q heads not a multiple of kv heads",
            "must be a multiple of n_kv_heads",
            replaced(
                replaced(good, 0, (BF16, &[6, 3, 64])),
                5,
                (BF16, &[6, 3, 64]),
            ),
        ),
        quant_rejection(
            format,
            (
                "a page id outside the pool",
                "`block_table`[1, 0] = 3 is not a page of the cache (0..3)",
            ),
            good,
            &[0.0, 1.0, 3.0, 0.0],
        ),
    ];
    match format {
        KvFormat::Int4 { .. } => {
            v.push(rejection_of(
                OP_INT4,
                "group not dividing head_dim",
                "the int4 group must be a power of two of at least 32 that divides head_dim 64",
                |ctx, _| group_rejection(ctx, 128),
            ));
            v.push(rejection_of(
                OP_INT4,
                "group below 32",
                "the int4 group must be a power of two of at least 32",
                |ctx, _| group_rejection(ctx, 16),
            ));
            v.push(reject(
                "a pool row of another width",
                "k_cache's last dim (bytes a row) is 32 but q says 64",
                replaced(
                    replaced(good, 0, (BF16, &[6, 2, 128])),
                    5,
                    (BF16, &[6, 2, 128]),
                ),
            ));
        }
        _ => {
            v.push(reject(
                "head_dim 80",
                "head_dim 80 is not supported",
                [
                    (BF16, &[6, 2, 80]),
                    (U8, &[3, 4, 2, 80]),
                    (U8, &[3, 4, 2, 80]),
                    (F32, &[3, 4, 2]),
                    (F32, &[3, 4, 2]),
                    (BF16, &[6, 2, 80]),
                ],
            ));
            v.push(reject(
                "a pool row of another width",
                "k_cache's last dim (bytes a row) is 64 but q says 128",
                replaced(
                    replaced(good, 0, (BF16, &[6, 2, 128])),
                    5,
                    (BF16, &[6, 2, 128]),
                ),
            ));
        }
    }
    v
}

/// An int4 call with `group` over the good int4 tensors at head_dim 64: refused.
fn group_rejection(ctx: &Context, group: u32) -> Result<(Tensor, crate::testing::Refused), String> {
    let [q, kc, vc, ks, vs, out] = zeros_of(ctx, good_specs(KvFormat::Int4 { group: 32 }))?;
    let (cu, _) = upload(ctx, I32, &[0.0, 4.0, 6.0], &[3])?;
    let (bt, _) = upload(ctx, I32, &[0.0, 1.0, 2.0, 0.0], &[2, 2])?;
    let (sl, _) = upload(ctx, I32, &[6.0, 2.0], &[2])?;
    let ws = PagedPrefillWorkspace::new(ctx, 2, 4).map_err(err)?;
    let (c, untouched) = (ctx.clone(), out.clone());
    Ok((
        untouched,
        Box::new(move || {
            let kv = PagedKv {
                k_cache: &kc,
                v_cache: &vc,
                layout: KvLayout::Nhd,
                table: PageTable::Blocks {
                    block_table: &bt,
                    seq_lens: &sl,
                },
            };
            let queries = PagedQueries {
                cu_seqlens_q: &cu,
                max_seqlen_q: 4,
            };
            let scales = KvScales {
                k_scale: &ks,
                v_scale: &vs,
                format: KvFormat::Int4 { group },
            };
            sdpa_prefill_paged_quant(&c, &q, &kv, &scales, &queries, &out, true, None, &ws)
        }),
    ))
}

/// The format a declared call names: int4 where it takes a group, else its `kv_format`.
fn declared_format(r: &RefArgs) -> Result<KvFormat, OpError> {
    match r.params.opt_u32("group")? {
        Some(group) => Ok(KvFormat::Int4 { group }),
        None => KvFormat::parse(OP, r.params.choice("kv_format")?),
    }
}

/// The declared call's reference: the pools dequantized exactly and rounded to f32, then
/// to q's dtype, then the float paged prefill's reference.
pub(crate) fn quant_prefill_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let format = declared_format(r)?;
    let dt = r.input("q")?.dtype;
    let k = dequantize(format, r.data("k_cache")?, r.data("k_scale")?);
    let v = dequantize(format, r.data("v_cache")?, r.data("v_scale")?);
    declared_reference_over(r, (&cast(dt, &k), &cast(dt, &v)))
}

/// The fragment and tile-product kernels over quantized pages of `formats` at the head
/// dims each takes (tile products: multiples of 64), for f16 and bf16 q and both page
/// kinds; the table kernel.
fn uses_of(formats: &[KvFormat]) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for paged in [PAGED_POW2, PAGED_ANY] {
        for &format in formats {
            for d in PREFILL_HEAD_DIMS {
                let int4 = matches!(format, KvFormat::Int4 { .. });
                if int4 && (d % format.group(d) != 0 || !d.is_power_of_two()) {
                    continue;
                }
                for dt in [F16, BF16] {
                    let c = prefill_mma_quant_constexprs(d, paged, format).map(Literal::U32);
                    v.push(KernelUse {
                        def: &sdpa_prefill_mma_kernel::DEF,
                        spec: Specialization::new(vec![dt, U32, U8, F32], c.to_vec()),
                    });
                    if d % 64 == 0 {
                        v.push(KernelUse {
                            def: &sdpa_prefill_tiles_kernel::DEF,
                            spec: Specialization::new(vec![dt, U32, U8, F32], c.to_vec()),
                        });
                    }
                }
            }
        }
    }
    for off in [I32, U32] {
        v.push(kernel_use(&prefill_paged_table_kernel::DEF, off, &[]));
    }
    v
}

pub(crate) fn quant_prefill_int8_uses() -> Vec<KernelUse> {
    uses_of(&[KvFormat::Int8, KvFormat::E4m3])
}

pub(crate) fn quant_prefill_int4_uses() -> Vec<KernelUse> {
    uses_of(&[KvFormat::Int4 { group: 32 }, KvFormat::Int4 { group: 64 }])
}

/// Chunked prefill over a quantized cache at `sdpa_prefill_paged`'s bench shapes (8
/// sequences, each a 1024-token prefix in pages of 16 and a 512-token chunk, 32/8 heads of
/// 128, bf16, causal; and a small one for a CPU run), to set beside the bf16 cache's.
fn quant_benches(format: KvFormat) -> Vec<BenchCase> {
    let mut v = Vec::new();
    for (batch, prefix, chunk, hq, hkv, d, quick) in [
        (2usize, 32usize, 16usize, 4usize, 2usize, 64usize, true),
        (8, 1024, 512, 32, 8, 128, false),
    ] {
        let dt = BF16;
        let page = 16;
        let len = prefix + chunk;
        let total_q = batch * chunk;
        let pairs = batch * (chunk * prefix + chunk * (chunk + 1) / 2);
        let groups = d / format.group(d as u32) as usize;
        let row_bytes = format.row_bytes(d) + 4 * groups;
        let cache = match format {
            KvFormat::Int4 { group } => format!("Int4 group={group}"),
            f => format!("{f:?}"),
        };
        v.push(BenchCase {
            op: op_for(format),
            kernel: "sdpa_prefill_tiles_kernel",
            dtype: dt,
            shape: format!(
                "B={batch} prefix={prefix} chunk={chunk} page={page} NHD hq={hq} hkv={hkv} d={d} causal kv={cache}"
            ),
            bytes: (2 * total_q * hq * d * dt.size_bytes() + 2 * batch * len * hkv * row_bytes)
                as u64,
            flops: (4 * pairs * hq * d) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let lens = vec![len; batch];
                let dims = [hq, hkv, page, d];
                let mode = (dt, KvLayout::Nhd, Form::Blocks);
                let p = build((ctx, rng), mode, (&lens, None), dims, 1)?;
                let [(kc, ks, kdq), (vc, vs, vdq)] = quantized_pools((ctx, rng), (dt, format), &p)?;
                let cu_q = offsets(std::iter::repeat_n(chunk, batch));
                let (q, qv) = random_tensor(ctx, rng, dt, &[total_q, hq, d], -1.0, 1.0)?;
                let out = ctx.zeros(dt, &[total_q, hq, d]).map_err(err)?;
                let reference = paged_prefill_reference(
                    (&qv, &kdq, &vdq),
                    &p.seqs,
                    &cu_q,
                    KvLayout::Nhd,
                    dims,
                    scale_of(d),
                    true,
                );
                let cu: Vec<f64> = cu_q.iter().map(|&x| x as f64).collect();
                let (cu_t, _) = upload(ctx, I32, &cu, &[cu.len()])?;
                let ws = PagedPrefillWorkspace::new(ctx, batch, p.entries).map_err(err)?;
                let (c, output) = (ctx.clone(), out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        let queries = PagedQueries {
                            cu_seqlens_q: &cu_t,
                            max_seqlen_q: chunk,
                        };
                        let kv = PagedKv {
                            k_cache: &kc,
                            v_cache: &vc,
                            ..p.cache()
                        };
                        let scales = KvScales {
                            k_scale: &ks,
                            v_scale: &vs,
                            format,
                        };
                        sdpa_prefill_paged_quant(
                            &c, &q, &kv, &scales, &queries, &out, true, None, &ws,
                        )
                        .map_err(err)
                    }),
                    output,
                    reference,
                })
            }),
        });
    }
    v
}

pub(crate) fn quant_prefill_int8_benches() -> Vec<BenchCase> {
    let mut v = quant_benches(KvFormat::Int8);
    v.extend(
        quant_benches(KvFormat::E4m3)
            .into_iter()
            .filter(|b| !b.quick),
    );
    v
}

pub(crate) fn quant_prefill_int4_benches() -> Vec<BenchCase> {
    quant_benches(KvFormat::Int4 { group: 64 })
}
