//! Cases of `sdpa_prefill`: causal and full tiled prefill over every float dtype and head
//! dim, rising logits, a rejection per invariant, its specialisations and prefill shapes.

use super::*;
use crate::attention::prefill::prefill_mma_constexprs;

fn prefill_case(dt: DType, [nq, nkv, hq, hkv, d]: [usize; 5], causal: bool) -> Case {
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
    let want = prefill_reference(t, [nq, nkv, hq, hkv, d], causal);
    Ok((t.out.to_f64_vec().map_err(err)?, want))
}

/// The f64 reference of a prefill of `t`.
fn prefill_reference(t: &Qkv, [nq, nkv, hq, hkv, d]: [usize; 5], causal: bool) -> Vec<f64> {
    let (q, k, v) = (&t.qv, &t.kv, &t.vv);
    reference::prefill(q, k, v, nq, nkv, hq, hkv, d, scale_of(d), causal)
}

pub(crate) fn prefill_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(prefill_case(dt, [19, 19, 4, 2, 64], true));
        v.push(prefill_case(dt, [7, 40, 2, 1, 128], true));
        v.push(prefill_case(dt, [9, 13, 2, 2, 256], false));
    }
    // The fragment kernel (f16/bf16): several query blocks, more keys than queries, key
    // counts off the block size, GQA 1 to 4, full and causal; head_dim 192 and 256 split
    // the head in two column parts.
    for dt in [F16, BF16] {
        v.push(prefill_case(dt, [130, 130, 4, 1, 128], true));
        v.push(prefill_case(dt, [70, 200, 2, 2, 64], true));
        v.push(prefill_case(dt, [65, 97, 4, 2, 128], false));
        v.push(prefill_case(dt, [1, 45, 2, 1, 64], false));
        v.push(prefill_rising_case(dt, [80, 150, 2, 1, 128], true));
        v.push(prefill_rising_case(dt, [33, 100, 2, 2, 64], false));
        v.push(prefill_case(dt, [70, 90, 4, 2, 256], true));
        v.push(prefill_case(dt, [33, 33, 2, 1, 192], false));
        v.push(prefill_case(dt, [40, 75, 2, 2, 96], true));
        v.push(prefill_rising_case(dt, [45, 120, 2, 1, 256], true));
    }
    v.push(prefill_case(F16, [5, 5, 2, 1, 96], true));
    v.push(prefill_case(F32, [3, 20, 1, 1, 192], true));
    let table = [
        (
            "fewer keys than queries",
            "n_kv = 4 must be at least n_q = 5",
            qkv_specs(&[5, 2, 64], &[4, 2, 64]),
        ),
        (
            "head_dim 512 unsupported",
            "head_dim 512 is not supported",
            qkv_specs(&[2, 2, 512], &[2, 2, 512]),
        ),
        (
            "q heads not a multiple of kv heads",
            "must be a multiple of n_kv_heads = 2",
            qkv_specs(&[2, 3, 64], &[2, 2, 64]),
        ),
        (
            "k head_dim != q head_dim",
            "k's head_dim is 128 but q says 64",
            qkv_specs(&[2, 2, 64], &[2, 2, 128]),
        ),
        (
            "empty prompt",
            "must not be empty",
            qkv_specs(&[0, 2, 64], &[2, 2, 64]),
        ),
        (
            "q is 4-D",
            "`q` must be 3-D",
            qkv_specs(&[1, 2, 2, 64], &[2, 2, 64]),
        ),
    ];
    for (what, reason, specs) in table {
        v.push(rejection_over(
            "sdpa_prefill",
            (what, reason),
            specs,
            |c, [q, k, v, out]| sdpa_prefill(c, q, k, v, out, true, None),
        ));
    }
    v.push(rejection(
        "sdpa_prefill",
        "out aliases k",
        "`out` aliases `k`",
        |ctx| {
            let [q, k, v] = zeros_of(ctx, [(F32, &[2, 2, 64]); 3])?;
            let (c, out, untouched) = (ctx.clone(), k.clone(), k.clone());
            Ok((
                untouched,
                Box::new(move || sdpa_prefill(&c, &q, &k, &v, &out, true, None)),
            ))
        },
    ));
    v
}

pub(crate) fn prefill_uses() -> Vec<KernelUse> {
    prefill_kernel_uses(false)
}

/// The two prefill kernels at every dtype and head_dim: contiguous (the table a stand-in
/// of q's dtype, never read) or over packed sequences (`varlen`, the table u32).
pub(crate) fn prefill_kernel_uses(varlen: bool) -> Vec<KernelUse> {
    let use_of = |def, dt, consts: &[u32]| {
        let seqs = if varlen { U32 } else { dt };
        let consts = consts
            .iter()
            .map(|&c| tessera_runtime::Literal::U32(c))
            .collect();
        KernelUse {
            def,
            spec: tessera_ir::Specialization::new(vec![dt, seqs], consts),
        }
    };
    let flag = u32::from(varlen);
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for d in PREFILL_HEAD_DIMS {
            v.push(use_of(
                &sdpa_prefill_kernel::DEF,
                dt,
                &prefill_constexprs(d, flag, 0),
            ));
        }
    }
    for dt in [F16, BF16] {
        for d in PREFILL_HEAD_DIMS {
            // The f16/bf16 kernels' codes and scales are stand-ins of q's dtype.
            let seqs = if varlen { U32 } else { dt };
            let consts = prefill_mma_constexprs(d, flag, 0).map(tessera_runtime::Literal::U32);
            v.push(KernelUse {
                def: &sdpa_prefill_mma_kernel::DEF,
                spec: tessera_ir::Specialization::new(vec![dt, seqs, dt, dt], consts.to_vec()),
            });
            if d % 64 == 0 {
                v.push(KernelUse {
                    def: &sdpa_prefill_tiles_kernel::DEF,
                    spec: tessera_ir::Specialization::new(vec![dt, seqs, dt, dt], consts.to_vec()),
                });
            }
        }
    }
    v
}

pub(crate) fn prefill_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for (dt, n, hq, hkv, d, quick) in [
        (F16, 64, 4, 2, 64, true),
        (F16, 1024, 32, 8, 128, false),
        (BF16, 2048, 32, 8, 128, false),
        (BF16, 4096, 32, 8, 128, false),
        (BF16, 2048, 16, 16, 64, false),
        (BF16, 2048, 16, 2, 256, false),
    ] {
        let es = dt.size_bytes();
        v.push(BenchCase {
            op: "sdpa_prefill",
            kernel: "sdpa_prefill_tiles_kernel",
            dtype: dt,
            shape: format!("n={n} hq={hq} hkv={hkv} d={d} causal"),
            bytes: ((2 * n * hq * d + 2 * n * hkv * d) * es) as u64,
            // Causal: half of the n×n score and PV products.
            flops: (2 * n * n * hq * d) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let t = qkv(ctx, rng, dt, &[n, hq, d], &[n, hkv, d])?;
                let want = prefill_reference(&t, [n, n, hq, hkv, d], true);
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
