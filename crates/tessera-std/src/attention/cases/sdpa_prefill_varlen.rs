//! Cases of `sdpa_prefill_varlen`: packed batches of 1 to 4 sequences with odd lengths,
//! empty and one-token sequences, fewer and more queries than keys, causal and full, GQA,
//! every float dtype and head_dim, i32 and u32 offsets; a rejection per invariant of the
//! offsets (checked on the device) and of the call; the packed specialisations.

use super::super::prefill_varlen::{sdpa_prefill_varlen, Packed, VarlenWorkspace};
use super::sdpa_prefill::prefill_kernel_uses;
use super::*;
use crate::decl::RefArgs;
use crate::testing::{rejection_of, zeros};
use rayon::prelude::*;

const OP: &str = "sdpa_prefill_varlen";

/// `[0, l_0, l_0 + l_1, …]`: the offsets of sequences of lengths `lens`.
fn offsets(lens: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut cu = vec![0];
    for l in lens {
        cu.push(cu[cu.len() - 1] + l);
    }
    cu
}

/// The f64 reference of a packed prefill, from the definition: sequence `b`'s query `i`
/// (of `lq`) attends to its own keys (of `lk`) `j ≤ i + lk − lq` when causal, else all
/// `lk`; head h reads KV head `h / (hq / hkv)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn varlen_reference(
    (q, k, v): (&[f64], &[f64], &[f64]),
    cu_q: &[usize],
    cu_k: &[usize],
    [hq, hkv, d]: [usize; 3],
    scale: f64,
    causal: bool,
) -> Vec<f64> {
    // Each sequence's KV heads as `[lk, d]` slabs; its query rows in parallel.
    let slab = |src: &[f64], b: usize, kvh: usize| -> Vec<f64> {
        (cu_k[b]..cu_k[b + 1])
            .flat_map(|j| src[(j * hkv + kvh) * d..(j * hkv + kvh + 1) * d].to_vec())
            .collect()
    };
    let mut out = Vec::with_capacity(q.len());
    for b in 0..cu_q.len() - 1 {
        let (q0, lq, lk) = (cu_q[b], cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]);
        let ks: Vec<Vec<f64>> = (0..hkv).map(|h| slab(k, b, h)).collect();
        let vs: Vec<Vec<f64>> = (0..hkv).map(|h| slab(v, b, h)).collect();
        let rows: Vec<Vec<f64>> = (0..lq)
            .into_par_iter()
            .map(|i| {
                let seen = if causal {
                    (i + lk + 1).saturating_sub(lq)
                } else {
                    lk
                };
                let positions: Vec<usize> = (0..seen).collect();
                let mut row = Vec::with_capacity(hq * d);
                for h in 0..hq {
                    let kvh = h / (hq / hkv);
                    let at = ((q0 + i) * hq + h) * d;
                    let qv = &q[at..at + d];
                    row.extend(reference::attend(
                        qv, &ks[kvh], &vs[kvh], &positions, scale, None,
                    ));
                }
                row
            })
            .collect();
        out.extend(rows.concat());
    }
    out
}

/// The declared op's reference: the offsets from its parameters.
pub(crate) fn declared_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let (qs, ks) = (r.shape("q")?, r.shape("k")?);
    let list = |n| r.params.opt_usize_list(n).map(Option::unwrap_or_default);
    let d = qs[2];
    let scale = r
        .params
        .opt_f64("scale")?
        .unwrap_or(1.0 / (d as f64).sqrt());
    Ok(vec![varlen_reference(
        (r.data("q")?, r.data("k")?, r.data("v")?),
        &list("cu_seqlens_q")?,
        &list("cu_seqlens_k")?,
        [qs[1], ks[1], d],
        scale,
        r.params.bool("causal")?,
    )])
}

/// Offsets on the device in `dt` (i32 or u32); values that do not fit become an error.
fn upload_offsets(ctx: &Context, dt: DType, cu: &[i64]) -> Result<Tensor, String> {
    match dt {
        DType::I32 => {
            let v: Result<Vec<i32>, _> = cu.iter().map(|&x| i32::try_from(x)).collect();
            ctx.tensor(&v.map_err(err)?, &[cu.len()]).map_err(err)
        }
        _ => {
            let v: Result<Vec<u32>, _> = cu.iter().map(|&x| u32::try_from(x)).collect();
            ctx.tensor(&v.map_err(err)?, &[cu.len()]).map_err(err)
        }
    }
}

/// A packed batch of sequences of `(queries, keys)` lengths `lens`, random q/k/v of `dt`,
/// offsets in `off`, against the reference; `max_q` above the longest by `spare`.
fn varlen_case(
    (dt, off): (DType, DType),
    lens: &'static [(usize, usize)],
    [hq, hkv, d]: [usize; 3],
    causal: bool,
    spare: usize,
) -> Case {
    let name = format!("lens={lens:?} hq={hq} hkv={hkv} d={d} causal={causal} {off} offsets");
    correctness(OP, dt, name, move |ctx, rng| {
        let cu_q = offsets(lens.iter().map(|l| l.0));
        let cu_k = offsets(lens.iter().map(|l| l.1));
        let (tq, tk) = (cu_q[lens.len()], cu_k[lens.len()]);
        let t = qkv(ctx, rng, dt, &[tq, hq, d], &[tk, hkv, d])?;
        let wide = |cu: &[usize]| cu.iter().map(|&x| x as i64).collect::<Vec<_>>();
        let seqs_q = upload_offsets(ctx, off, &wide(&cu_q))?;
        let seqs_k = upload_offsets(ctx, off, &wide(&cu_k))?;
        let longest = lens.iter().map(|l| l.0).max().unwrap_or(0);
        let packed = Packed {
            cu_seqlens_q: &seqs_q,
            cu_seqlens_k: &seqs_k,
            max_seqlen_q: (longest + spare).min(tq),
        };
        let ws = VarlenWorkspace::new(ctx, lens.len()).map_err(err)?;
        sdpa_prefill_varlen(ctx, &t.q, &t.k, &t.v, &packed, &t.out, causal, None, &ws)
            .map_err(err)?;
        let want = varlen_reference(
            (&t.qv, &t.kv, &t.vv),
            &cu_q,
            &cu_k,
            [hq, hkv, d],
            scale_of(d),
            causal,
        );
        Ok((t.out.to_f64_vec().map_err(err)?, want))
    })
}

/// Mixed batches: an empty sequence, one-token ones, more keys than queries (a prefix),
/// more queries than keys (causal: the first rows see nothing), keys but no queries.
const MIXED: &[(usize, usize)] = &[(5, 9), (0, 4), (1, 1), (19, 19), (6, 2)];
const ONE: &[(usize, usize)] = &[(23, 23)];
const PREFIX: &[(usize, usize)] = &[(3, 40), (17, 17), (1, 0)];
/// Several query tiles of the fragment kernel, ragged against them.
const TILES: &[(usize, usize)] = &[(70, 130), (1, 45), (64, 64), (33, 20)];

pub(crate) fn varlen_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(varlen_case((dt, DType::I32), MIXED, [4, 2, 64], true, 0));
        v.push(varlen_case((dt, DType::U32), MIXED, [2, 2, 128], false, 3));
        v.push(varlen_case((dt, DType::I32), ONE, [4, 1, 64], true, 0));
        v.push(varlen_case((dt, DType::U32), PREFIX, [2, 1, 256], true, 0));
    }
    for dt in [F16, BF16] {
        v.push(varlen_case((dt, DType::I32), TILES, [4, 2, 128], true, 0));
        v.push(varlen_case((dt, DType::U32), TILES, [2, 1, 64], false, 0));
        v.push(varlen_case((dt, DType::I32), TILES, [2, 2, 256], true, 5));
        v.push(varlen_case((dt, DType::I32), MIXED, [2, 1, 192], true, 0));
        v.push(varlen_case((dt, DType::U32), PREFIX, [4, 2, 96], false, 0));
    }
    v.push(varlen_case((F32, DType::I32), TILES, [2, 1, 96], true, 0));
    v.extend(varlen_rejections());
    v
}

/// q `[10, 2, 64]`, k and v `[12, 1, 64]` (f32 zeros) with offsets `cu_q` and `cu_k` in
/// `off`, `max_q` and a workspace for `ws_batch` sequences: must be refused for `reason`
/// with out untouched.
fn offsets_rejection(
    (what, reason): (&str, &'static str),
    (off, cu_q, cu_k): (DType, &'static [i64], &'static [i64]),
    max_q: usize,
    ws_batch: usize,
) -> Case {
    rejection_of(OP, what, reason, move |ctx, _| {
        let [q, k, v, out] = zeros_of(ctx, qkv_specs(&[10, 2, 64], &[12, 1, 64]))?;
        let seqs_q = upload_offsets(ctx, off, cu_q)?;
        let seqs_k = upload_offsets(ctx, off, cu_k)?;
        let ws = VarlenWorkspace::new(ctx, ws_batch).map_err(err)?;
        let (c, untouched) = (ctx.clone(), out.clone());
        Ok((
            untouched,
            Box::new(move || {
                let packed = Packed {
                    cu_seqlens_q: &seqs_q,
                    cu_seqlens_k: &seqs_k,
                    max_seqlen_q: max_q,
                };
                sdpa_prefill_varlen(&c, &q, &k, &v, &packed, &out, true, None, &ws)
            }),
        ))
    })
}

fn varlen_rejections() -> Vec<Case> {
    use DType::{I32, U32 as U};
    let mut v = vec![
        offsets_rejection(
            (
                "q offsets fall",
                "`cu_seqlens_q` is bad at sequence 1 (offsets 6, 4)",
            ),
            (I32, &[0, 6, 4, 10], &[0, 4, 8, 12]),
            6,
            3,
        ),
        offsets_rejection(
            (
                "q offsets end before total_q",
                "`cu_seqlens_q` is bad at sequence 1",
            ),
            (U, &[0, 3, 9], &[0, 4, 8]),
            6,
            2,
        ),
        offsets_rejection(
            (
                "q offsets start past 0",
                "`cu_seqlens_q` is bad at sequence 0",
            ),
            (I32, &[2, 5, 10], &[0, 4, 8]),
            6,
            2,
        ),
        offsets_rejection(
            (
                "negative k offset",
                "`cu_seqlens_k` is bad at sequence 0 (offsets 0, -3)",
            ),
            (I32, &[0, 5, 10], &[0, -3, 8]),
            5,
            2,
        ),
        offsets_rejection(
            (
                "k offsets past total_k",
                "`cu_seqlens_k` is bad at sequence 1",
            ),
            (U, &[0, 5, 10], &[0, 4, 13]),
            5,
            2,
        ),
        offsets_rejection(
            (
                "a sequence longer than max_seqlen_q",
                "sequence 1 (offsets 3, 10) holds more queries than max_seqlen_q = 6",
            ),
            (I32, &[0, 3, 10], &[0, 4, 12]),
            6,
            2,
        ),
        offsets_rejection(
            (
                "65536 sequences",
                "65536 sequences in one call; at most 65535 are taken",
            ),
            (I32, vec![0; 65537].leak(), vec![0; 65537].leak()),
            6,
            1,
        ),
        offsets_rejection(
            ("max_seqlen_q 0", "max_seqlen_q = 0 must be in 1..=10"),
            (I32, &[0, 5, 10], &[0, 4, 8]),
            0,
            2,
        ),
        offsets_rejection(
            (
                "k offsets another count",
                "`cu_seqlens_k` must have shape [3]",
            ),
            (I32, &[0, 5, 10], &[0, 12]),
            5,
            2,
        ),
        offsets_rejection(
            ("one offset", "must hold batch + 1 ≥ 2 offsets"),
            (U, &[10], &[12]),
            5,
            1,
        ),
        offsets_rejection(
            (
                "workspace too small",
                "the workspace holds 1 sequences, this call has 2",
            ),
            (I32, &[0, 5, 10], &[0, 4, 8]),
            5,
            1,
        ),
    ];
    v.push(rejection(
        OP,
        "f32 offsets",
        "`cu_seqlens_q` must be one of i32, u32",
        |ctx| {
            let [q, k, v, out] = zeros_of(ctx, qkv_specs(&[10, 2, 64], &[12, 1, 64]))?;
            let cu = zeros(ctx, F32, &[2])?;
            let ws = VarlenWorkspace::new(ctx, 1).map_err(err)?;
            let (c, untouched) = (ctx.clone(), out.clone());
            Ok((
                untouched,
                Box::new(move || {
                    let packed = Packed {
                        cu_seqlens_q: &cu,
                        cu_seqlens_k: &cu,
                        max_seqlen_q: 10,
                    };
                    sdpa_prefill_varlen(&c, &q, &k, &v, &packed, &out, false, None, &ws)
                }),
            ))
        },
    ));
    v
}

pub(crate) fn varlen_uses() -> Vec<KernelUse> {
    use super::super::prefill_varlen::{
        prefill_varlen_blind_rows_kernel, prefill_varlen_check_kernel,
    };
    let mut v = prefill_kernel_uses(true);
    for off in [DType::I32, DType::U32] {
        v.push(kernel_use(&prefill_varlen_check_kernel::DEF, off, &[]));
    }
    for dt in FLOAT_DTYPES {
        v.push(kernel_use(&prefill_varlen_blind_rows_kernel::DEF, dt, &[]));
    }
    v
}

/// A serving step's prefill batch: prompts of mixed lengths (a long one, a chunk, short
/// ones and a single token) at Llama-3-8B's heads, beside `sdpa_prefill`'s shapes; and a
/// small one for a CPU run.
pub(crate) fn varlen_benches() -> Vec<BenchCase> {
    const SMALL: &[usize] = &[40, 1, 17, 64];
    const MIXED: &[usize] = &[2048, 1024, 512, 300, 77, 1, 9, 130];
    let mut v = Vec::new();
    for (dt, lens, hq, hkv, d, quick) in [
        (F16, SMALL, 4, 2, 64, true),
        (BF16, MIXED, 32, 8, 128, false),
        (F16, MIXED, 32, 8, 128, false),
    ] {
        let es = dt.size_bytes();
        let total: usize = lens.iter().sum();
        let longest = lens.iter().copied().max().unwrap_or(1);
        // Causal: half of each sequence's score and PV products.
        let pairs: usize = lens.iter().map(|&n| n * n).sum();
        let kernel = if dt == F32 {
            "sdpa_prefill_kernel"
        } else {
            "sdpa_prefill_tiles_kernel"
        };
        v.push(BenchCase {
            op: OP,
            kernel,
            dtype: dt,
            shape: format!(
                "{} seqs, {total} tokens (longest {longest}) lens={} hq={hq} hkv={hkv} d={d} causal",
                lens.len(),
                lens.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(",")
            ),
            bytes: ((2 * total * hq * d + 2 * total * hkv * d) * es) as u64,
            flops: (2 * pairs * hq * d) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let cu = offsets(lens.iter().copied());
                let t = qkv(ctx, rng, dt, &[total, hq, d], &[total, hkv, d])?;
                let want = varlen_reference(
                    (&t.qv, &t.kv, &t.vv),
                    &cu,
                    &cu,
                    [hq, hkv, d],
                    scale_of(d),
                    true,
                );
                let wide: Vec<i64> = cu.iter().map(|&x| x as i64).collect();
                let seqs = upload_offsets(ctx, DType::I32, &wide)?;
                let ws = VarlenWorkspace::new(ctx, lens.len()).map_err(err)?;
                let (c, output) = (ctx.clone(), t.out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        let packed = Packed {
                            cu_seqlens_q: &seqs,
                            cu_seqlens_k: &seqs,
                            max_seqlen_q: longest,
                        };
                        sdpa_prefill_varlen(&c, &t.q, &t.k, &t.v, &packed, &t.out, true, None, &ws)
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
