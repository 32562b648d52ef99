//! Cases of `embedding`: i32 and u32 ids into tables of every float dtype, rows of odd
//! widths and one element, repeated ids; out-of-range ids (past the end, negative) refused
//! before anything is written; specialisations and benches.

use super::*;
use crate::elementwise::embedding::{
    embedding, embedding_check_kernel, embedding_kernel, EmbeddingCheck, ID_DTYPES, OP,
};
use crate::elementwise::gated::row_vec_width;
use tessera_runtime::{Context, Tensor};

/// Ids in `0..vocab` as `dtype`, and their values.
fn ids(
    ctx: &Context,
    rng: &mut crate::testing::CaseRng,
    dtype: DType,
    tokens: usize,
    vocab: usize,
) -> Result<(Tensor, Vec<f64>), String> {
    let v: Vec<f64> = (0..tokens)
        .map(|_| rng.int(0, vocab as u32) as f64)
        .collect();
    upload(ctx, dtype, &v, &[tokens])
}

fn correctness(table_dtype: DType, id_dtype: DType, tokens: usize, vocab: usize, d: usize) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(table_dtype),
        name: format!("ids {id_dtype} tokens={tokens} vocab={vocab} d={d}"),
        run: Box::new(move |ctx, rng| {
            let (id, idv) = ids(ctx, rng, id_dtype, tokens, vocab)?;
            let (table, tv) = random_tensor(ctx, rng, table_dtype, &[vocab, d], -2.0, 2.0)?;
            let out = ctx.full_nan(table_dtype, &[tokens, d]).map_err(err)?;
            let check = EmbeddingCheck::new(ctx).map_err(err)?;
            embedding(ctx, &id, &table, &out, &check).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            compare(
                &got,
                &reference::embedding(&idv, &tv, d),
                accuracy(OP, table_dtype)?,
            )
        }),
    }
}

/// One `EmbeddingCheck` through a good call, a refused one and a good one again: each
/// call finds the word as the one before left it.
fn reused_check(dtype: DType) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: "one check through good, refused, good".to_string(),
        run: Box::new(move |ctx, rng| {
            let (vocab, d, tokens) = (40, 24, 9);
            let (table, tv) = random_tensor(ctx, rng, dtype, &[vocab, d], -2.0, 2.0)?;
            let check = EmbeddingCheck::new(ctx).map_err(err)?;
            let mut outcomes = Vec::new();
            for round in 0..2 {
                let (id, idv) = ids(ctx, rng, DType::I32, tokens, vocab)?;
                let out = ctx.full_nan(dtype, &[tokens, d]).map_err(err)?;
                embedding(ctx, &id, &table, &out, &check).map_err(err)?;
                let got = out.to_f64_vec().map_err(err)?;
                let exact = accuracy(OP, dtype)?;
                outcomes.push(compare(&got, &reference::embedding(&idv, &tv, d), exact)?);
                if round == 0 {
                    let bad = ctx.tensor(&[3i32, 40], &[2]).map_err(err)?;
                    let out = ctx.full_nan(dtype, &[2, d]).map_err(err)?;
                    match embedding(ctx, &bad, &table, &out, &check) {
                        Err(e) if e.to_string().contains("token 1 has id 40") => {}
                        other => return Err(format!("id 40 of 40 rows: {other:?}")),
                    }
                }
            }
            let second = outcomes.pop().unwrap_or_default();
            let first = outcomes.pop().unwrap_or_default();
            Ok(crate::testing::merge(first, second))
        }),
    }
}

/// The refused call of a `[10, 24]` f16 table with these ids: `out` must stay untouched.
fn refused_gather(ctx: &Context, ids: Tensor) -> Result<(Tensor, Refused), String> {
    let table = zeros(ctx, DType::F16, &[10, 24])?;
    let out = ctx.full_nan(DType::F16, &[ids.len(), 24]).map_err(err)?;
    let check = EmbeddingCheck::new(ctx).map_err(err)?;
    let (c, o) = (ctx.clone(), out.clone());
    Ok((
        out,
        Box::new(move || embedding(&c, &ids, &table, &o, &check)),
    ))
}

/// The form a recorded graph runs (`in_graph` 1, no check before the gather): good rows
/// are gathered, a row whose id is out of range comes out NaN, and `take_error` names
/// the first such token once, then finds nothing.
fn graph_form(dtype: DType) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: "graph form: bad ids give NaN rows and a later error".to_string(),
        run: Box::new(move |ctx, rng| {
            let (vocab, d) = (12, 40);
            let (table, tv) = random_tensor(ctx, rng, dtype, &[vocab, d], -2.0, 2.0)?;
            let idv = [3i32, 12, 0, -4, 11];
            let id = ctx.tensor(&idv, &[idv.len()]).map_err(err)?;
            let out = ctx.full_nan(dtype, &[idv.len(), d]).map_err(err)?;
            let check = EmbeddingCheck::new(ctx).map_err(err)?;
            let vec = row_vec_width(dtype, d);
            let total = (idv.len() * d) as u32 / vec;
            embedding_kernel::launch(
                ctx,
                embedding_kernel::Args {
                    ids: &id,
                    table: &table,
                    out: &out,
                    first_bad: &check.first_bad,
                    vocab: vocab as u32,
                    row_vecs: d as u32 / vec,
                    total,
                    in_graph: 1,
                },
                embedding_kernel::Consts { vec },
            )
            .grid([total.div_ceil(64), 1, 1])
            .group_size(64)
            .run()
            .map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            for (t, &i) in idv.iter().enumerate() {
                let row = &got[t * d..(t + 1) * d];
                let bad = i < 0 || i as usize >= vocab;
                if bad && !row.iter().all(|x| x.is_nan()) {
                    return Err(format!("token {t} (id {i}) is not all NaN: {row:?}"));
                }
                if !bad && row.iter().zip(&tv[i as usize * d..]).any(|(g, w)| g != w) {
                    return Err(format!("token {t} (id {i}) is not table row {i}"));
                }
            }
            match check.take_error() {
                Err(e) if e.to_string().contains("token 1's row was written as NaN") => {}
                other => return Err(format!("first take_error: {other:?}")),
            }
            check
                .take_error()
                .map_err(|e| format!("second take_error: {e}"))?;
            let good: Vec<bool> = idv
                .iter()
                .map(|&i| i >= 0 && (i as usize) < vocab)
                .collect();
            Ok(crate::registry::Outcome {
                checked: good.iter().filter(|g| **g).count() * d,
                ..Default::default()
            })
        }),
    }
}

pub(crate) fn embedding_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for table in FLOAT_DTYPES {
        for id in ID_DTYPES {
            for (tokens, vocab, d) in [
                (1, 1, 1),
                (5, 3, 7),
                (9, 50, 64),
                (17, 1000, 37),
                (4, 300, 4104),
            ] {
                v.push(correctness(table, id, tokens, vocab, d));
            }
        }
        v.push(reused_check(table));
        v.push(graph_form(table));
    }
    v.push(rejection(OP, "id = vocab", "token 3 has id 10", |ctx| {
        refused_gather(
            ctx,
            ctx.tensor(&[1i32, 2, 9, 10, 0, 11], &[6]).map_err(err)?,
        )
    }));
    v.push(rejection(
        OP,
        "negative i32 id",
        "token 1 has id -1",
        |ctx| refused_gather(ctx, ctx.tensor(&[4i32, -1, 3], &[3]).map_err(err)?),
    ));
    v.push(rejection(
        OP,
        "u32 id past 2^31",
        "token 0 has id 4294967295",
        |ctx| refused_gather(ctx, ctx.tensor(&[u32::MAX, 2], &[2]).map_err(err)?),
    ));
    v.push(rejection(
        OP,
        "table not 2-D",
        "`table` must be [vocab, d]",
        |ctx| {
            let table = zeros(ctx, DType::F32, &[10])?;
            let out = ctx.full_nan(DType::F32, &[2, 1]).map_err(err)?;
            let ids = ctx.tensor(&[1i32, 2], &[2]).map_err(err)?;
            let check = EmbeddingCheck::new(ctx).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || embedding(&c, &ids, &table, &o, &check)) as Refused,
            ))
        },
    ));
    v
}

pub(crate) fn embedding_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for id in ID_DTYPES {
        v.push(KernelUse {
            def: &embedding_check_kernel::DEF,
            spec: Specialization::new(vec![id], vec![]),
        });
        for table in FLOAT_DTYPES {
            let mut w = row_vec_width(table, 1 << 12);
            while w >= 1 {
                v.push(KernelUse {
                    def: &embedding_kernel::DEF,
                    spec: Specialization::new(vec![table, id], vec![Literal::U32(w)]),
                });
                w /= 2;
            }
        }
    }
    v
}

/// A prompt of 8192 tokens from a 152k-row table of d = 4096 (Qwen-sized): 64 MiB of bf16
/// gathered; the bytes count the rows read and written (and the ids).
pub(crate) fn embedding_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in [DType::BF16, DType::F32] {
        for (tokens, vocab, d, quick) in [(64, 1000, 256, true), (8192, 151_936, 4096, false)] {
            v.push(BenchCase {
                op: OP,
                kernel: "embedding_kernel",
                dtype,
                shape: format!("tokens={tokens} vocab={vocab} d={d}"),
                bytes: (2 * tokens * d * dtype.size_bytes() + 4 * tokens) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (id, idv) = ids(ctx, rng, DType::I32, tokens, vocab)?;
                    let (table, tv) = random_tensor(ctx, rng, dtype, &[vocab, d], -2.0, 2.0)?;
                    let out = ctx.full_nan(dtype, &[tokens, d]).map_err(err)?;
                    let check = EmbeddingCheck::new(ctx).map_err(err)?;
                    let (c, o) = (ctx.clone(), out.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            embedding(&c, &id, &table, &o, &check).map_err(err)
                        }),
                        output: out,
                        reference: reference::embedding(&idv, &tv, d),
                    })
                }),
            });
        }
    }
    v
}
