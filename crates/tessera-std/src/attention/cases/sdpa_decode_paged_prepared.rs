//! Cases of a page table prepared once for several layers (`PagedWorkspace::prepare`):
//! two layers' pools read through one table reduced once, for decode and causal
//! multi-query, against the reference; and a refusal for each way a prepared table can
//! fail a call (other pools, batch, query rows, workspace, or a table reduced since).

use super::sdpa_decode_paged::{build, Form, Paged};
use super::*;
use crate::attention::paged::{
    sdpa_decode_paged, sdpa_multi_query_paged, KvLayout, PageTable, PagedKv, PagedWorkspace,
};
use crate::attention::paged_reference::{paged_decode, PagedProblem};
use crate::error::runtime;
use crate::testing::{rejection_of, Refused};

const OP: &str = "sdpa_decode_paged";

/// A second layer's pools for `p`'s table: random values where its sequences' tokens are,
/// NaN in every other slot (as `build` fills the first layer's).
fn second_layer(
    ctx: &Context,
    rng: &mut CaseRng,
    p: &Paged,
    dt: DType,
) -> Result<[(Tensor, Vec<f64>); 2], String> {
    let shape = p.k.shape().to_vec();
    let mut pool = || {
        let vals: Vec<f64> =
            p.kv.iter()
                .map(|x| {
                    if x.is_nan() {
                        f64::NAN
                    } else {
                        rng.uniform(-1.0, 1.0)
                    }
                })
                .collect();
        upload(ctx, dt, &vals, &shape)
    };
    Ok([pool()?, pool()?])
}

/// Two layers over one prepared table: each layer's output against the reference of
/// its own pools; `nq` query rows a sequence (1: decode, else causal multi-query).
fn two_layers_case(dt: DType, (layout, form): (KvLayout, Form), nq: usize) -> Case {
    let (lens, dims): (&[usize], _) = (&[45, 0, 19], [8, 2, 16, 64]);
    let name = format!("prepared table, two layers: {layout:?} {form:?} n_query={nq}");
    correctness(OP, dt, name, move |ctx, rng| {
        let q_rows = (nq > 1).then_some(nq);
        let lens: &[usize] = if nq > 1 { &[45, 7, 19] } else { lens };
        let p = build((ctx, rng), (dt, layout, form), (lens, q_rows), dims, 2)?;
        let [(k2, k2v), (v2, v2v)] = second_layer(ctx, rng, &p, dt)?;
        let ws = p.workspace(ctx).map_err(err)?;
        let pages = ws.prepare(ctx, &p.cache(), nq, true).map_err(err)?;
        let out2 = ctx.full_nan(dt, p.q.shape()).map_err(err)?;
        let opts = DecodeOptions::default();
        for (k, v, out) in [(&p.k, &p.v, &p.out), (&k2, &v2, &out2)] {
            let kv = PagedKv {
                k_cache: k,
                v_cache: v,
                layout,
                table: PageTable::Prepared(&pages),
            };
            if nq > 1 {
                sdpa_multi_query_paged(ctx, &p.q, &kv, out, true, &opts, &ws).map_err(err)?;
            } else {
                sdpa_decode_paged(ctx, &p.q, &kv, out, &opts, &ws).map_err(err)?;
            }
        }
        let [hq, hkv, page, d] = dims;
        let reference = |k: &[f64], v: &[f64]| {
            paged_decode(&PagedProblem {
                q: &p.qv,
                k,
                v,
                layout,
                dims: [lens.len(), hq, hkv, page, d],
                seqs: p.seqs.clone(),
                scale: scale_of(d),
                window: 0,
                n_sink: 0,
                sinks: None,
                n_query: nq,
                causal: true,
            })
        };
        let mut got = p.out.to_f64_vec().map_err(err)?;
        got.extend(out2.to_f64_vec().map_err(err)?);
        let mut want = reference(&p.kv, &p.vv);
        want.extend(reference(&k2v, &v2v));
        Ok((got, want))
    })
}

/// How a rejection case misuses a prepared table.
#[derive(Clone, Copy)]
enum Misuse {
    /// Pools with one page more than those it was prepared for.
    OtherPools,
    /// Multi-query rows where it was prepared for decode.
    OtherRows,
    /// Passed with a workspace that did not prepare it.
    OtherWorkspace,
    /// The workspace reduced a table (a call given the block table) since.
    Stale,
}

/// A decode call with a table prepared on a random problem, misused as `m`: refused for
/// `reason`, its output untouched.
fn misuse_case(what: &str, reason: &'static str, m: Misuse) -> Case {
    rejection_of(OP, what, reason, move |ctx, rng| {
        let dims = [4, 2, 8, 64];
        let mode = (F32, KvLayout::Nhd, Form::Blocks);
        let q_rows = matches!(m, Misuse::OtherRows).then_some(2);
        let p = build((ctx, rng), mode, (&[20, 9], q_rows), dims, 2)?;
        let ws = p.workspace(ctx).map_err(err)?;
        let pages = ws.prepare(ctx, &p.cache(), 1, false).map_err(err)?;
        let other_ws = p.workspace(ctx).map_err(err)?;
        let mut pool = p.k.shape().to_vec();
        pool[0] += 1;
        let bigger = ctx.zeros(F32, &pool).map_err(err)?;
        let (c, untouched) = (ctx.clone(), p.out.clone());
        let call: Refused = Box::new(move || {
            let o = DecodeOptions::default();
            let prepared = PagedKv {
                table: PageTable::Prepared(&pages),
                ..p.cache()
            };
            match m {
                Misuse::OtherPools => {
                    let kv = PagedKv {
                        k_cache: &bigger,
                        v_cache: &bigger,
                        ..prepared
                    };
                    sdpa_decode_paged(&c, &p.q, &kv, &p.out, &o, &ws)
                }
                Misuse::OtherRows => {
                    sdpa_multi_query_paged(&c, &p.q, &prepared, &p.out, true, &o, &ws)
                }
                Misuse::OtherWorkspace => {
                    sdpa_decode_paged(&c, &p.q, &prepared, &p.out, &o, &other_ws)
                }
                Misuse::Stale => {
                    let scratch = c.zeros(F32, p.q.shape()).map_err(runtime(OP))?;
                    sdpa_decode_paged(&c, &p.q, &p.cache(), &scratch, &o, &ws)?;
                    sdpa_decode_paged(&c, &p.q, &prepared, &p.out, &o, &ws)
                }
            }
        });
        Ok((untouched, call))
    })
}

/// Reducing a table on a workspace too small for it is refused before anything runs.
fn small_workspace_case() -> Case {
    rejection_of(
        OP,
        "preparing on a workspace with fewer rows than the table's sequences",
        "the workspace holds",
        move |ctx, rng| {
            let mode = (F32, KvLayout::Hnd, Form::Csr);
            let p = build((ctx, rng), mode, (&[20, 9, 4], None), [4, 2, 8, 64], 2)?;
            let ws = PagedWorkspace::new(ctx, 2, 4, 64, p.entries, p.capacity).map_err(err)?;
            let (c, untouched) = (ctx.clone(), p.out.clone());
            let call: Refused = Box::new(move || ws.prepare(&c, &p.cache(), 1, false).map(|_| ()));
            Ok((untouched, call))
        },
    )
}

pub(crate) fn prepared_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(two_layers_case(dt, (KvLayout::Nhd, Form::Blocks), 1));
        v.push(two_layers_case(dt, (KvLayout::Hnd, Form::Csr), 3));
    }
    v.push(misuse_case(
        "prepared table over pools of another page count",
        "was prepared for 2 sequences over pools of",
        Misuse::OtherPools,
    ));
    v.push(misuse_case(
        "prepared table for decode, called for multi-query",
        "prepared for 1 query rows",
        Misuse::OtherRows,
    ));
    v.push(misuse_case(
        "prepared table with another workspace",
        "prepared on another workspace",
        Misuse::OtherWorkspace,
    ));
    v.push(misuse_case(
        "prepared table after the workspace reduced another",
        "reduced another table since",
        Misuse::Stale,
    ));
    v.push(small_workspace_case());
    v
}
