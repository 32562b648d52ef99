//! Cases of `sdpa_multi_query_paged`: blocks of 2 to 16 new queries per sequence over
//! random, shuffled page tables (both table forms and layouts, NaN in every unused slot),
//! causal and full, with window and sinks; a rejection for a sequence shorter than its
//! queries and for q's shape.

use super::sdpa_decode_paged::{build, Form};
use super::*;
use crate::attention::paged::{sdpa_multi_query_paged, KvLayout, PagedWorkspace};
use crate::attention::paged_reference::{paged_decode, PagedProblem};

const OP: &str = "sdpa_multi_query_paged";

/// `nq` queries for each sequence of `lens` tokens, `[hq, hkv, page, d]`.
fn mq_case(
    dt: DType,
    (layout, form, causal): (KvLayout, Form, bool),
    (lens, nq): (&'static [usize], usize),
    dims: [usize; 4],
    vis: Visibility,
) -> Case {
    let [hq, hkv, page, d] = dims;
    let name = format!(
        "{layout:?} {form:?} page={page} lens={lens:?} n_query={nq} causal={causal} hq={hq} hkv={hkv} d={d} window={} sinks={}{}",
        vis.window,
        vis.n_sink,
        if vis.logit { " +sink_logit" } else { "" },
    );
    correctness(OP, dt, name, move |ctx, rng| {
        let p = build((ctx, rng), (dt, layout, form), (lens, Some(nq)), dims, 2)?;
        let (sinks, sv) = random_tensor(ctx, rng, dt, &[hq], -1.0, 2.0)?;
        let opts = DecodeOptions {
            window: vis.window as u32,
            n_sink: vis.n_sink as u32,
            sink_logits: vis.logit.then_some(&sinks),
            ..DecodeOptions::default()
        };
        let ws = p.workspace(ctx).map_err(err)?;
        sdpa_multi_query_paged(ctx, &p.q, &p.cache(), &p.out, causal, &opts, &ws).map_err(err)?;
        let want = paged_decode(&PagedProblem {
            q: &p.qv,
            k: &p.kv,
            v: &p.vv,
            layout,
            dims: [lens.len(), hq, hkv, page, d],
            seqs: p.seqs.clone(),
            scale: scale_of(d),
            window: vis.window,
            n_sink: vis.n_sink,
            sinks: vis.logit.then_some(&sv[..]),
            n_query: nq,
            causal,
        });
        Ok((p.out.to_f64_vec().map_err(err)?, want))
    })
}

/// A call with q `q_shape` over NHD pages `[6, 4, 2, 64]` through a block table `[2, 3]`
/// with `seq_lens`, refused for `reason`.
fn mq_rejection(
    what: &str,
    reason: &'static str,
    q_shape: &'static [usize],
    seq_lens: &'static [i32],
) -> Case {
    rejection(OP, what, reason, move |ctx| {
        let [q, k, v, out] = zeros_of(
            ctx,
            [
                (F32, q_shape),
                (F32, &[6, 4, 2, 64]),
                (F32, &[6, 4, 2, 64]),
                (F32, q_shape),
            ],
        )?;
        let bt = ctx.tensor(&[0i32, 1, 2, 3, 4, 5], &[2, 3]).map_err(err)?;
        let sl = ctx.tensor(seq_lens, &[2]).map_err(err)?;
        let ws = PagedWorkspace::new(ctx, 8, 4, 64, 6, 12).map_err(err)?;
        let (c, untouched) = (ctx.clone(), out.clone());
        Ok((
            untouched,
            Box::new(move || {
                let kv = crate::attention::PagedKv {
                    k_cache: &k,
                    v_cache: &v,
                    layout: KvLayout::Nhd,
                    table: crate::attention::PageTable::Blocks {
                        block_table: &bt,
                        seq_lens: &sl,
                    },
                };
                let o = DecodeOptions::default();
                sdpa_multi_query_paged(&c, &q, &kv, &out, true, &o, &ws)
            }),
        ))
    })
}

pub(crate) fn mq_paged_cases() -> Vec<Case> {
    use Form::{Blocks, Csr};
    use KvLayout::{Hnd, Nhd};
    let none = Visibility::default();
    let vis = Visibility {
        window: 12,
        n_sink: 2,
        logit: true,
    };
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(mq_case(
            dt,
            (Nhd, Blocks, true),
            (&[40, 4, 0], 4),
            [8, 2, 16, 128],
            none,
        ));
        v.push(mq_case(
            dt,
            (Hnd, Csr, true),
            (&[70, 33], 16),
            [4, 1, 8, 64],
            vis,
        ));
        v.push(mq_case(
            dt,
            (Nhd, Csr, false),
            (&[25], 2),
            [4, 2, 1, 96],
            none,
        ));
        v.push(mq_case(
            dt,
            (Hnd, Blocks, true),
            (&[130, 9], 3),
            [4, 4, 32, 256],
            none,
        ));
    }
    v.extend([
        mq_rejection(
            "sequence shorter than its queries",
            "sequence 1 holds fewer tokens than its 4 new queries",
            &[2, 4, 4, 64],
            &[9, 3],
        ),
        mq_rejection("q 3-D", "`q` must be 4-D", &[2, 4, 64], &[9, 3]),
        mq_rejection(
            "negative seq_len",
            "`seq_lens` holds a negative length: sequence 0 has -1",
            &[2, 2, 4, 64],
            &[-1, 3],
        ),
    ]);
    v
}
