//! Cases of `sdpa_prefill_paged`: chunks of new tokens over a prefix in shuffled pages
//! (NaN in every slot no sequence fills, garbage in every table entry none uses), batches
//! of 1 and 3, prefixes of none and of several pages, one-token chunks, pages of 1, 16
//! and 5 tokens, NHD and HND, vLLM block tables and FlashInfer CSR tables, causal and
//! full, GQA, every float dtype; a rejection per invariant of the tables and offsets
//! (checked on the device) and of the call; the paged specialisations; a bench shape.

use super::super::paged::{KvLayout, PageTable, PagedKv};
use super::super::paged_rows::{PAGED_ANY, PAGED_POW2};
use super::super::prefill::prefill_mma_constexprs;
use super::super::prefill_paged::{
    prefill_paged_table_kernel, sdpa_prefill_paged, PagedPrefillWorkspace, PagedQueries,
};
use super::sdpa_decode_paged::{build, Form};
use super::sdpa_prefill_varlen::varlen_reference;
use super::*;
use crate::decl::RefArgs;
use crate::testing::rejection_of;
use DType::I32;

const OP: &str = "sdpa_prefill_paged";

/// Each sequence's first `len` tokens gathered from its pages into one token-major
/// `[Σ len, n_kv_heads, head_dim]` slab, as the layouts define a page, and the offsets of
/// each sequence's keys in it.
fn gather(
    pool: &[f64],
    seqs: &[(Vec<usize>, usize)],
    layout: KvLayout,
    [page, hkv, d]: [usize; 3],
) -> (Vec<f64>, Vec<usize>) {
    let mut rows = Vec::new();
    let mut cu = vec![0];
    for (pages, len) in seqs {
        for pos in 0..*len {
            let (p, slot) = (pages[pos / page], pos % page);
            for h in 0..hkv {
                let at = match layout {
                    KvLayout::Nhd => ((p * page + slot) * hkv + h) * d,
                    KvLayout::Hnd => ((p * hkv + h) * page + slot) * d,
                };
                rows.extend_from_slice(&pool[at..at + d]);
            }
        }
        cu.push(cu[cu.len() - 1] + len);
    }
    (rows, cu)
}

/// `[0, l_0, l_0 + l_1, …]`.
pub(super) fn offsets(lens: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut cu = vec![0];
    for l in lens {
        cu.push(cu[cu.len() - 1] + l);
    }
    cu
}

/// The f64 reference: each sequence's keys gathered from its pages, then the packed
/// prefill's reference (its `lq` queries are its last tokens: bottom-right causal).
#[allow(clippy::too_many_arguments)]
pub(super) fn paged_prefill_reference(
    (q, k, v): (&[f64], &[f64], &[f64]),
    seqs: &[(Vec<usize>, usize)],
    cu_q: &[usize],
    layout: KvLayout,
    [hq, hkv, page, d]: [usize; 4],
    scale: f64,
    causal: bool,
) -> Vec<f64> {
    let (ks, cu_k) = gather(k, seqs, layout, [page, hkv, d]);
    let (vs, _) = gather(v, seqs, layout, [page, hkv, d]);
    varlen_reference((q, &ks, &vs), cu_q, &cu_k, [hq, hkv, d], scale, causal)
}

/// One case: sequences of `(prefix, new tokens)`, `[hq, hkv, page, d]`.
#[derive(Clone, Copy)]
struct PrefillCase {
    layout: KvLayout,
    form: Form,
    seqs: &'static [(usize, usize)],
    dims: [usize; 4],
    causal: bool,
}

fn prefill_case(dt: DType, c: PrefillCase) -> Case {
    let [hq, hkv, page, d] = c.dims;
    let name = format!(
        "(prefix, new)={:?} {:?} {:?} hq={hq} hkv={hkv} page={page} d={d} causal={}",
        c.seqs, c.layout, c.form, c.causal
    );
    correctness(OP, dt, name, move |ctx, rng| {
        let lens: Vec<usize> = c.seqs.iter().map(|&(p, n)| p + n).collect();
        let t = build((ctx, rng), (dt, c.layout, c.form), (&lens, None), c.dims, 2)?;
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
        let ws = PagedPrefillWorkspace::new(ctx, c.seqs.len(), t.entries).map_err(err)?;
        sdpa_prefill_paged(ctx, &q, &t.cache(), &queries, &out, c.causal, None, &ws)
            .map_err(err)?;
        let want = paged_prefill_reference(
            (&qv, &t.kv, &t.vv),
            &t.seqs,
            &cu_q,
            c.layout,
            c.dims,
            scale_of(d),
            c.causal,
        );
        Ok((out.to_f64_vec().map_err(err)?, want))
    })
}

/// One sequence, no prefix.
const FRESH: &[(usize, usize)] = &[(0, 23)];
/// A prefix of several pages, a one-token chunk, a fresh prompt.
const CHUNKS: &[(usize, usize)] = &[(40, 17), (5, 1), (0, 9)];
/// One-token chunks and a sequence with no new tokens.
const SMALL: &[(usize, usize)] = &[(3, 4), (6, 0), (7, 1)];
/// Several query tiles of the fragment kernel over a long prefix.
const TILES: &[(usize, usize)] = &[(70, 70), (0, 1), (130, 33)];

pub(crate) fn prefill_paged_cases() -> Vec<Case> {
    use Form::{Blocks, Csr};
    use KvLayout::{Hnd, Nhd};
    let case = |layout, form, seqs, dims, causal| PrefillCase {
        layout,
        form,
        seqs,
        dims,
        causal,
    };
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for c in [
            case(Nhd, Blocks, FRESH, [4, 2, 16, 64], true),
            case(Hnd, Blocks, CHUNKS, [4, 1, 16, 128], true),
            case(Nhd, Csr, CHUNKS, [2, 2, 5, 64], false),
            case(Hnd, Csr, SMALL, [4, 2, 1, 96], true),
            case(Nhd, Blocks, SMALL, [2, 1, 5, 64], false),
        ] {
            v.push(prefill_case(dt, c));
        }
    }
    for dt in [F16, BF16] {
        v.push(prefill_case(
            dt,
            case(Nhd, Blocks, TILES, [4, 2, 16, 128], true),
        ));
        v.push(prefill_case(
            dt,
            case(Hnd, Csr, TILES, [2, 1, 5, 256], true),
        ));
        v.push(prefill_case(
            dt,
            case(Hnd, Blocks, CHUNKS, [2, 2, 16, 192], false),
        ));
    }
    v.extend(rejections());
    v
}

/// f32 q `[6, 2, 64]` in two sequences of `cu_q` (i32), NHD pools of 3 pages of 4 tokens,
/// a block table `[2, 2]` and `seq_lens`, `max_q`, a workspace for `ws` (batch, entries):
/// must be refused for `reason` with out untouched.
fn table_rejection(
    (what, reason): (&str, &'static str),
    (cu_q, table, seq_lens): (&'static [f64], &'static [f64], &'static [f64]),
    max_q: usize,
    ws: (usize, usize),
) -> Case {
    rejection_of(OP, what, reason, move |ctx, _| {
        let [q, out] = zeros_of(ctx, [(F32, &[6, 2, 64]), (F32, &[6, 2, 64])])?;
        let [kc, vc] = zeros_of(ctx, [(F32, &[3, 4, 1, 64]), (F32, &[3, 4, 1, 64])])?;
        let (cu, _) = upload(ctx, I32, cu_q, &[cu_q.len()])?;
        let (bt, _) = upload(ctx, I32, table, &[2, table.len() / 2])?;
        let (sl, _) = upload(ctx, I32, seq_lens, &[seq_lens.len()])?;
        let ws = PagedPrefillWorkspace::new(ctx, ws.0, ws.1).map_err(err)?;
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
                    max_seqlen_q: max_q,
                };
                sdpa_prefill_paged(&c, &q, &kv, &queries, &out, true, None, &ws)
            }),
        ))
    })
}

/// The CSR form with `indptr` and `last_page_len` over `indices` [0, 1, 2]: refused.
fn csr_rejection(
    (what, reason): (&str, &'static str),
    (indptr, last): (&'static [f64], &'static [f64]),
) -> Case {
    rejection_of(OP, what, reason, move |ctx, _| {
        let [q, out] = zeros_of(ctx, [(F32, &[6, 2, 64]), (F32, &[6, 2, 64])])?;
        let [kc, vc] = zeros_of(ctx, [(F32, &[3, 4, 1, 64]), (F32, &[3, 4, 1, 64])])?;
        let (cu, _) = upload(ctx, I32, &[0.0, 4.0, 6.0], &[3])?;
        let (ip, _) = upload(ctx, I32, indptr, &[3])?;
        let (ix, _) = upload(ctx, I32, &[0.0, 1.0, 2.0], &[3])?;
        let (lp, _) = upload(ctx, I32, last, &[2])?;
        let ws = PagedPrefillWorkspace::new(ctx, 2, 3).map_err(err)?;
        let (c, untouched) = (ctx.clone(), out.clone());
        Ok((
            untouched,
            Box::new(move || {
                let kv = PagedKv {
                    k_cache: &kc,
                    v_cache: &vc,
                    layout: KvLayout::Nhd,
                    table: PageTable::Csr {
                        indptr: &ip,
                        indices: &ix,
                        last_page_len: &lp,
                    },
                };
                let queries = PagedQueries {
                    cu_seqlens_q: &cu,
                    max_seqlen_q: 4,
                };
                sdpa_prefill_paged(&c, &q, &kv, &queries, &out, false, None, &ws)
            }),
        ))
    })
}

fn rejections() -> Vec<Case> {
    const CU: &[f64] = &[0.0, 4.0, 6.0];
    const TABLE: &[f64] = &[0.0, 1.0, 2.0, 0.0];
    vec![
        table_rejection(
            (
                "seq_len below its query count",
                "sequence 1 holds fewer tokens than its new queries (offsets 4, 6)",
            ),
            (CU, TABLE, &[6.0, 1.0]),
            4,
            (2, 4),
        ),
        table_rejection(
            (
                "a page id outside the pool",
                "`block_table`[1, 0] = 3 is not a page of the cache (0..3)",
            ),
            (CU, &[0.0, 1.0, 3.0, 0.0], &[6.0, 2.0]),
            4,
            (2, 4),
        ),
        table_rejection(
            (
                "a negative page id",
                "`block_table`[0, 1] = -1 is not a page of the cache",
            ),
            (CU, &[0.0, -1.0, 2.0, 0.0], &[6.0, 2.0]),
            4,
            (2, 4),
        ),
        table_rejection(
            (
                "a table too short for seq_len",
                "sequence 0 has seq_len 9, more than its block-table row holds (2 pages of 4 = 8 tokens)",
            ),
            (CU, TABLE, &[9.0, 2.0]),
            4,
            (2, 4),
        ),
        table_rejection(
            (
                "a negative seq_len",
                "`seq_lens` holds a negative length: sequence 1 has -2",
            ),
            (CU, TABLE, &[6.0, -2.0]),
            4,
            (2, 4),
        ),
        table_rejection(
            (
                "q offsets fall",
                "`cu_seqlens_q` is bad at sequence 0 (offsets 0, 7)",
            ),
            (&[0.0, 7.0, 6.0], TABLE, &[6.0, 2.0]),
            6,
            (2, 4),
        ),
        table_rejection(
            (
                "a sequence longer than max_seqlen_q",
                "sequence 0 (offsets 0, 4) holds more queries than max_seqlen_q = 3",
            ),
            (CU, TABLE, &[6.0, 2.0]),
            3,
            (2, 4),
        ),
        table_rejection(
            ("max_seqlen_q 0", "max_seqlen_q = 0 must be in 1..=6"),
            (CU, TABLE, &[6.0, 2.0]),
            0,
            (2, 4),
        ),
        table_rejection(
            (
                "a block table of another batch",
                "`block_table` must have shape [3, 2]",
            ),
            (&[0.0, 2.0, 4.0, 6.0], TABLE, &[2.0, 2.0, 2.0]),
            2,
            (3, 4),
        ),
        table_rejection(
            (
                "workspace too small",
                "the workspace holds 1 sequences and 4 table entries, this call needs 2 and 4",
            ),
            (CU, TABLE, &[6.0, 2.0]),
            4,
            (1, 4),
        ),
        csr_rejection(
            (
                "CSR row pointers fall",
                "`indptr` must rise within `indices` (0 ≤ indptr[b] ≤ indptr[b + 1] ≤ 3): sequence 1 has indptr[1] = 3, indptr[2] = 2",
            ),
            (&[0.0, 3.0, 2.0], &[4.0, 2.0]),
        ),
        csr_rejection(
            (
                "CSR last page longer than a page",
                "sequence 1 has last_page_len 5, more than its pages hold",
            ),
            (&[0.0, 2.0, 3.0], &[4.0, 5.0]),
        ),
    ]
}

/// The reference of a declared call: the offsets from its parameter, the sequences its
/// table names.
pub(crate) fn declared_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    declared_reference_over(r, (r.data("k_cache")?, r.data("v_cache")?))
}

/// The reference of a declared call whose pools hold the values `k` and `v` (element
/// order of a float pool of the call's layout and q's head_dim).
pub(super) fn declared_reference_over(
    r: &RefArgs,
    (k, v): (&[f64], &[f64]),
) -> Result<Vec<Vec<f64>>, OpError> {
    use crate::attention::paged_reference::{block_table_seqs, csr_seqs};
    let (qs, ks) = (r.shape("q")?, r.shape("k_cache")?);
    let hnd = r.params.choice("layout")? == "hnd";
    let (page, hkv) = if hnd { (ks[2], ks[1]) } else { (ks[1], ks[2]) };
    let seqs = match (r.optional("block_table"), r.optional("seq_lens")) {
        (Some(t), Some(n)) => block_table_seqs(t, n, page),
        _ => csr_seqs(
            r.data("indptr")?,
            r.data("indices")?,
            r.data("last_page_len")?,
            page,
        ),
    };
    let cu_q = r.params.opt_usize_list("cu_seqlens_q")?.unwrap_or_default();
    let d = qs[2];
    let scale = r
        .params
        .opt_f64("scale")?
        .unwrap_or(1.0 / (d as f64).sqrt());
    Ok(vec![paged_prefill_reference(
        (r.data("q")?, k, v),
        &seqs,
        &cu_q,
        if hnd { KvLayout::Hnd } else { KvLayout::Nhd },
        [qs[1], hkv, page, d],
        scale,
        r.params.bool("causal")?,
    )])
}

/// The paged specialisations of the two prefill kernels (power-of-two pages and others),
/// and the table kernel for either offset dtype; the paged decode's table kernels and the
/// blind-row kernel are listed by their own ops.
pub(crate) fn prefill_paged_uses() -> Vec<KernelUse> {
    let use_of = |def, dt, consts: &[u32]| KernelUse {
        def,
        spec: Specialization::new(
            vec![dt, U32],
            consts.iter().map(|&c| Literal::U32(c)).collect(),
        ),
    };
    let mut v = Vec::new();
    for paged in [PAGED_POW2, PAGED_ANY] {
        for d in PREFILL_HEAD_DIMS {
            for dt in FLOAT_DTYPES {
                v.push(use_of(
                    &sdpa_prefill_kernel::DEF,
                    dt,
                    &prefill_constexprs(d, 1, paged),
                ));
            }
            for dt in [F16, BF16] {
                // The codes and scales are stand-ins of q's dtype.
                let consts = prefill_mma_constexprs(d, 1, paged).map(Literal::U32);
                v.push(KernelUse {
                    def: &sdpa_prefill_mma_kernel::DEF,
                    spec: Specialization::new(vec![dt, U32, dt, dt], consts.to_vec()),
                });
                if d % 64 == 0 {
                    v.push(KernelUse {
                        def: &sdpa_prefill_tiles_kernel::DEF,
                        spec: Specialization::new(vec![dt, U32, dt, dt], consts.to_vec()),
                    });
                }
            }
        }
    }
    for off in [I32, U32] {
        v.push(kernel_use(&prefill_paged_table_kernel::DEF, off, &[]));
    }
    v
}

/// Chunked prefill at Llama-3-8B's heads: 8 sequences, each a 1024-token prefix in pages
/// of 16 and a 512-token chunk (bf16, causal); and a small one for a CPU run.
pub(crate) fn prefill_paged_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for (batch, prefix, chunk, hq, hkv, d, quick) in [
        (2usize, 32usize, 16usize, 4usize, 2usize, 64usize, true),
        (8, 1024, 512, 32, 8, 128, false),
    ] {
        let dt = BF16;
        let page = 16;
        let es = dt.size_bytes();
        let len = prefix + chunk;
        let total_q = batch * chunk;
        // Causal: each query sees its prefix and the chunk's keys up to it.
        let pairs = batch * (chunk * prefix + chunk * (chunk + 1) / 2);
        v.push(BenchCase {
            op: OP,
            kernel: "sdpa_prefill_tiles_kernel",
            dtype: dt,
            shape: format!(
                "B={batch} prefix={prefix} chunk={chunk} page={page} NHD hq={hq} hkv={hkv} d={d} causal"
            ),
            bytes: ((2 * total_q * hq * d + 2 * batch * len * hkv * d) * es) as u64,
            flops: (4 * pairs * hq * d) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let lens = vec![len; batch];
                let dims = [hq, hkv, page, d];
                let t = build(
                    (ctx, rng),
                    (dt, KvLayout::Nhd, Form::Blocks),
                    (&lens, None),
                    dims,
                    1,
                )?;
                let cu_q = offsets(std::iter::repeat_n(chunk, batch));
                let (q, qv) = random_tensor(ctx, rng, dt, &[total_q, hq, d], -1.0, 1.0)?;
                let out = ctx.zeros(dt, &[total_q, hq, d]).map_err(err)?;
                let want = paged_prefill_reference(
                    (&qv, &t.kv, &t.vv),
                    &t.seqs,
                    &cu_q,
                    KvLayout::Nhd,
                    dims,
                    scale_of(d),
                    true,
                );
                let cu: Vec<f64> = cu_q.iter().map(|&x| x as f64).collect();
                let (cu_t, _) = upload(ctx, I32, &cu, &[cu.len()])?;
                let ws = PagedPrefillWorkspace::new(ctx, batch, t.entries).map_err(err)?;
                let (c, output) = (ctx.clone(), out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        let queries = PagedQueries {
                            cu_seqlens_q: &cu_t,
                            max_seqlen_q: chunk,
                        };
                        sdpa_prefill_paged(&c, &q, &t.cache(), &queries, &out, true, None, &ws)
                            .map_err(err)
                    }),
                    output,
                    reference: want,
                })
            }),
        });
    }
    v
}
