//! Cases of `paged_kv_append_ragged`: ragged batches of 1 and 4 sequences (one adding no
//! token, a padding row past the last), each with a random length before the append and
//! its own shuffled pages, the table's unused entries out of range (never read), NHD and
//! HND pages of 1, 16 and 5, with and without a fused RoPE. The whole caches are compared
//! with an f64 reference that places each token from the definition (position = length +
//! index, page from the table); a rotated call also bit for bit with `rope` followed by
//! `paged_kv_append` at the slots the host computes. A rejection per invariant, the
//! device-side checks' included.

use super::*;
use crate::attention::paged::KvLayout;
use crate::attention::paged_append::{paged_kv_append, SlotCheck};
use crate::attention::paged_append_ragged::{
    paged_kv_append_ragged, paged_kv_append_ragged_kernel, ragged_slots_check_kernel,
};
use crate::attention::paged_reference::paged_append;
use crate::decl::RefArgs;
use crate::rope::{rope, RopeConfig, RopeLayout, RopeScaling, RopeTable};
use crate::Outcome;
use tessera_ir::{Literal, Specialization};
use DType::I32;

const OP: &str = "paged_kv_append_ragged";

/// Each token's (slot, position) from the definition, `None` for padding rows: sequence
/// b's i-th new token is at position `lens[b] + i`, in page `table[b][pos / page]`.
pub(crate) fn ragged_slots(
    cu: &[usize],
    lens: &[usize],
    table: &[f64],
    page: usize,
    tokens: usize,
) -> Vec<Option<(usize, u32)>> {
    let max_blocks = table.len() / lens.len().max(1);
    let mut out = vec![None; tokens];
    for b in 0..lens.len() {
        for (i, t) in (cu[b]..cu[b + 1]).enumerate() {
            let pos = lens[b] + i;
            let p = table[b * max_blocks + pos / page] as usize;
            out[t] = Some((p * page + pos % page, pos as u32));
        }
    }
    out
}

/// A random batch: `new[b]` tokens appended to sequence b (one padding row after them),
/// lengths before the append below 40, each sequence's pages distinct and shuffled,
/// unused table entries −1 or past the pool. Returns (cu, lens, table, max_blocks, blocks).
fn random_batch(
    rng: &mut CaseRng,
    new: &[usize],
    page: usize,
) -> (Vec<usize>, Vec<usize>, Vec<f64>, usize, usize) {
    let lens: Vec<usize> = new.iter().map(|_| rng.int(0, 40) as usize).collect();
    let need: Vec<usize> = lens
        .iter()
        .zip(new)
        .map(|(l, n)| (l + n).div_ceil(page))
        .collect();
    let max_blocks = need.iter().max().copied().unwrap_or(0) + 1;
    let blocks = need.iter().sum::<usize>() + 2;
    let mut free: Vec<usize> = (0..blocks).collect();
    let mut table = Vec::new();
    for &n in &need {
        for j in 0..max_blocks {
            if j < n {
                let i = rng.int(0, free.len() as u32) as usize;
                table.push(free.swap_remove(i) as f64);
            } else {
                table.push(if j % 2 == 0 {
                    -1.0
                } else {
                    (blocks + j) as f64
                });
            }
        }
    }
    let mut cu = vec![0];
    for n in new {
        cu.push(cu.last().copied().unwrap_or(0) + n);
    }
    (cu, lens, table, max_blocks, blocks)
}

fn ragged_case(
    dt: DType,
    layout: KvLayout,
    new: &'static [usize],
    [page, hkv, d]: [usize; 3],
    rope_on: bool,
) -> Case {
    let rotation = if rope_on { "rope " } else { "" };
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: format!("{rotation}{layout:?} new={new:?} page={page} hkv={hkv} d={d}"),
        run: Box::new(move |ctx, rng| {
            let (cu, lens, table, max_blocks, blocks) = random_batch(rng, new, page);
            let batch = new.len();
            let tokens = cu[batch] + 1;
            let shape = match layout {
                KvLayout::Nhd => [blocks, page, hkv, d],
                KvLayout::Hnd => [blocks, hkv, page, d],
            };
            let (kc, kcv) = random_tensor(ctx, rng, dt, &shape, -1.0, 1.0)?;
            let (vc, vcv) = random_tensor(ctx, rng, dt, &shape, -1.0, 1.0)?;
            let (k, kv) = random_tensor(ctx, rng, dt, &[tokens, hkv, d], -2.0, 2.0)?;
            let (v, vv) = random_tensor(ctx, rng, dt, &[tokens, hkv, d], -2.0, 2.0)?;
            let as_f64 = |x: &[usize]| x.iter().map(|&u| u as f64).collect::<Vec<_>>();
            let (cu_t, _) = upload(ctx, I32, &as_f64(&cu), &[batch + 1])?;
            let (lens_t, _) = upload(ctx, I32, &as_f64(&lens), &[batch])?;
            let (table_t, _) = upload(ctx, I32, &table, &[batch, max_blocks])?;
            let config = RopeConfig {
                layout: if d % 3 == 0 {
                    RopeLayout::Interleaved
                } else {
                    RopeLayout::NeoX
                },
                theta: 10000.0,
                rot_dim: if d % 3 == 0 { d / 2 } else { d },
                scaling: RopeScaling::None,
            };
            let table_r = RopeTable::new(ctx, config).map_err(err)?;
            let rope_table = rope_on.then_some(&table_r);
            let check = SlotCheck::new(ctx).map_err(err)?;
            paged_kv_append_ragged(
                ctx,
                (&k, &v),
                (&cu_t, &table_t, &lens_t),
                (&kc, &vc),
                layout,
                rope_table,
                &check,
            )
            .map_err(err)?;
            let got = [kc.to_f64_vec().map_err(err)?, vc.to_f64_vec().map_err(err)?].concat();
            let placed = ragged_slots(&cu, &lens, &table, page, tokens);
            let slots: Vec<f64> = placed
                .iter()
                .map(|p| p.map_or(-1.0, |(s, _)| s as f64))
                .collect();
            let positions: Vec<u32> = placed.iter().map(|p| p.map_or(0, |(_, pos)| pos)).collect();
            let keys = if rope_on {
                crate::rope::reference::rope(&kv, &positions, hkv, d, &config)
            } else {
                kv.clone()
            };
            let (wk, wv) = paged_append((&kcv, &vcv), (&keys, &vv, &slots), layout, [page, hkv, d]);
            let want = [wk, wv].concat();
            if !rope_on {
                return compare(&got, &want, accuracy(OP, dt)?);
            }
            // Bit for bit the two-step path: rope at the positions, then the slot append.
            let (kc2, _) = upload(ctx, dt, &kcv, &shape)?;
            let (vc2, _) = upload(ctx, dt, &vcv, &shape)?;
            let pos_t = ctx.tensor(&positions, &[tokens]).map_err(err)?;
            let (sm, _) = upload(ctx, I32, &slots, &[tokens])?;
            let rotated = ctx.full_nan(dt, &[tokens, hkv, d]).map_err(err)?;
            rope(ctx, &k, &pos_t, &table_r, &rotated).map_err(err)?;
            paged_kv_append(ctx, &rotated, &v, &sm, &kc2, &vc2, layout, None, &check)
                .map_err(err)?;
            let two_step = [
                kc2.to_f64_vec().map_err(err)?,
                vc2.to_f64_vec().map_err(err)?,
            ]
            .concat();
            if let Some(i) = got
                .iter()
                .zip(&two_step)
                .position(|(a, b)| a.to_bits() != b.to_bits())
            {
                return Err(format!(
                    "element {i} is {} fused but {} through rope then paged_kv_append",
                    got[i], two_step[i]
                ));
            }
            compare(&got, &want, accuracy("rope", dt)?)
        }),
    }
}

/// A call of 4 tokens (`[2, 64]` rows, f32) of a batch of 2 into NHD caches
/// `[4, 4, 2, 64]` (a table of 2 pages a sequence), refused for `reason`, k_cache
/// untouched.
/// Random small tables (3 sequences, pages of 2, rows of 3 pages drawn from a pool of 6,
/// so pages are often handed out twice): the op must refuse exactly the batches in which
/// two tokens land in one slot, naming the first such token, as a brute-force check over
/// every pair of tokens finds it, and take every other batch.
fn shared_slots_against_every_pair() -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(F32),
        name: "random tables: shared slots against every token pair".into(),
        run: Box::new(|ctx, rng| {
            let (page, rows, pool) = (2usize, 3usize, 6usize);
            let mut checked = 0;
            for _trial in 0..40 {
                let lens: Vec<usize> = (0..3).map(|_| rng.int(0, 3) as usize).collect();
                let counts: Vec<usize> = lens
                    .iter()
                    .map(|&l| rng.int(0, (page * rows - l) as u32 + 1) as usize)
                    .collect();
                let mut cu = vec![0usize];
                for c in &counts {
                    cu.push(cu.last().copied().unwrap_or(0) + c);
                }
                let tokens = cu[3].max(1);
                let table: Vec<i32> = (0..3 * rows)
                    .map(|_| rng.int(0, pool as u32) as i32)
                    .collect();
                // Brute force: the first token whose slot an earlier token takes.
                let slot = |t: usize| -> usize {
                    let b = (0..3).find(|&b| cu[b] <= t && t < cu[b + 1]).unwrap_or(0);
                    let pos = lens[b] + t - cu[b];
                    table[b * rows + pos / page] as usize * page + pos % page
                };
                let want = (0..cu[3]).find(|&t| (0..t).any(|u| slot(u) == slot(t)));
                let z = |shape: &[usize]| ctx.zeros(F32, shape).map_err(err);
                let (k, v) = (z(&[tokens, 1, 64])?, z(&[tokens, 1, 64])?);
                let (kc, vc) = (z(&[pool, page, 1, 64])?, z(&[pool, page, 1, 64])?);
                let cu_i: Vec<i32> = cu.iter().map(|&x| x as i32).collect();
                let lens_i: Vec<i32> = lens.iter().map(|&x| x as i32).collect();
                let cu_t = ctx.tensor(&cu_i, &[4]).map_err(err)?;
                let lens_t = ctx.tensor(&lens_i, &[3]).map_err(err)?;
                let table_t = ctx.tensor(&table, &[3, rows]).map_err(err)?;
                let check = SlotCheck::new(ctx).map_err(err)?;
                let got = paged_kv_append_ragged(
                    ctx,
                    (&k, &v),
                    (&cu_t, &table_t, &lens_t),
                    (&kc, &vc),
                    KvLayout::Nhd,
                    None,
                    &check,
                );
                match (want, got) {
                    (None, Ok(())) => {}
                    (Some(t), Err(e)) if e.to_string().contains(&format!("token {t} (")) => {}
                    (want, got) => {
                        return Err(format!(
                            "cu {cu:?} lens {lens:?} table {table:?}: the first shared slot is \
                             {want:?} by brute force, the op says {got:?}"
                        ))
                    }
                }
                checked += 1;
            }
            Ok(Outcome {
                checked,
                ..Outcome::default()
            })
        }),
    }
}

fn addressing_rejection(
    what: &str,
    reason: &'static str,
    cu: &'static [i32],
    lens: &'static [i32],
    table: &'static [i32],
) -> Case {
    rejection(OP, what, reason, move |ctx| {
        let [k, v, kc, vc] = zeros_of(
            ctx,
            [
                (F32, &[4, 2, 64]),
                (F32, &[4, 2, 64]),
                (F32, &[4, 4, 2, 64]),
                (F32, &[4, 4, 2, 64]),
            ],
        )?;
        let cu_t = ctx.tensor(cu, &[cu.len()]).map_err(err)?;
        let lens_t = ctx.tensor(lens, &[lens.len()]).map_err(err)?;
        let table_t = ctx
            .tensor(table, &[lens.len(), table.len() / lens.len().max(1)])
            .map_err(err)?;
        let check = SlotCheck::new(ctx).map_err(err)?;
        let (c, untouched) = (ctx.clone(), kc.clone());
        Ok((
            untouched,
            Box::new(move || {
                paged_kv_append_ragged(
                    &c,
                    (&k, &v),
                    (&cu_t, &table_t, &lens_t),
                    (&kc, &vc),
                    KvLayout::Nhd,
                    None,
                    &check,
                )
            }),
        ))
    })
}

/// A call on zero tensors of `specs` (k, v, cu_seqlens, block_table, seq_lens, k_cache,
/// v_cache), with a table of `rot_dim` when given.
fn shape_rejection(
    what: &str,
    reason: &'static str,
    specs: [Spec; 7],
    rot_dim: Option<usize>,
) -> Case {
    rejection(OP, what, reason, move |ctx| {
        let [k, v, cu, table, lens, kc, vc] = zeros_of(ctx, specs)?;
        let rope_table = match rot_dim {
            Some(rot_dim) => Some(
                RopeTable::new(
                    ctx,
                    RopeConfig {
                        layout: RopeLayout::NeoX,
                        theta: 10000.0,
                        rot_dim,
                        scaling: RopeScaling::None,
                    },
                )
                .map_err(err)?,
            ),
            None => None,
        };
        let check = SlotCheck::new(ctx).map_err(err)?;
        let (c, untouched) = (ctx.clone(), kc.clone());
        Ok((
            untouched,
            Box::new(move || {
                paged_kv_append_ragged(
                    &c,
                    (&k, &v),
                    (&cu, &table, &lens),
                    (&kc, &vc),
                    KvLayout::Nhd,
                    rope_table.as_ref(),
                    &check,
                )
            }),
        ))
    })
}

const GOOD: [Spec; 7] = [
    (F32, &[4, 2, 64]),
    (F32, &[4, 2, 64]),
    (I32, &[3]),
    (I32, &[2, 2]),
    (I32, &[2]),
    (F32, &[4, 4, 2, 64]),
    (F32, &[4, 4, 2, 64]),
];

pub(crate) fn ragged_cases() -> Vec<Case> {
    use KvLayout::{Hnd, Nhd};
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(ragged_case(dt, Nhd, &[9], [16, 2, 128], false));
        v.push(ragged_case(dt, Hnd, &[3, 0, 17, 1], [16, 4, 64], false));
        v.push(ragged_case(dt, Nhd, &[2, 5, 0, 4], [1, 1, 256], false));
        v.push(ragged_case(dt, Hnd, &[6, 0, 11], [5, 2, 36], false));
        v.push(ragged_case(dt, Nhd, &[3, 0, 17, 1], [5, 2, 128], true));
        v.push(ragged_case(dt, Hnd, &[1, 1, 1], [16, 2, 36], true));
    }
    v.push(ragged_case(F32, Hnd, &[12], [1, 2, 64], true));
    v.push(shared_slots_against_every_pair());
    // A table of 2 pages of 4 a sequence; pool pages 0..4.
    v.extend([
        addressing_rejection(
            "cu_seqlens decreasing",
            "`cu_seqlens` is bad at entry 2 (1): it must never decrease and stay within 0..=4",
            &[0, 2, 1],
            &[0, 0],
            &[0, 1, 2, 3],
        ),
        addressing_rejection(
            "cu_seqlens past tokens",
            "`cu_seqlens` is bad at entry 2 (5)",
            &[0, 2, 5],
            &[0, 0],
            &[0, 1, 2, 3],
        ),
        addressing_rejection("cu_seqlens negative", "`cu_seqlens` is bad at entry 0 (-1)", &[-1, 2, 4], &[0, 0], &[0, 1, 2, 3]),
        addressing_rejection(
            "negative length",
            "`seq_lens` is bad at sequence 1: its length before the append is -3",
            &[0, 2, 4],
            &[0, -3],
            &[0, 1, 2, 3],
        ),
        addressing_rejection(
            "position past the table",
            "token 3 (sequence 1, position 8) is past its block table: it needs page 2 of a row of 2",
            &[0, 2, 4],
            &[0, 7],
            &[0, 1, 2, 3],
        ),
        addressing_rejection(
            "page past the pool",
            "token 1 (sequence 0, position 4): `block_table` [0, 1] = 4 is not a page of the pool's 0..4",
            &[0, 2, 4],
            &[3, 0],
            &[0, 4, 2, 3],
        ),
        addressing_rejection(
            "one page in two sequences",
            "token 2 (sequence 1, position 0) lands in slot 4, which token 0 takes too",
            &[0, 2, 4],
            &[4, 0],
            &[0, 1, 1, 3],
        ),
        addressing_rejection(
            "page −1",
            "token 2 (sequence 1, position 0): `block_table` [1, 0] = -1 is not a page",
            &[0, 2, 4],
            &[0, 0],
            &[0, 1, -1, 3],
        ),
    ]);
    let table = [
        (
            "cu_seqlens not i32",
            "`cu_seqlens` must be i32",
            replaced(GOOD, 2, (U32, &[3])),
            None,
        ),
        (
            "cu_seqlens not batch + 1",
            "`cu_seqlens` must have shape [3]",
            replaced(GOOD, 2, (I32, &[2])),
            None,
        ),
        (
            "seq_lens of another batch",
            "`seq_lens` must have shape [2]",
            replaced(GOOD, 4, (I32, &[3])),
            None,
        ),
        (
            "block_table 1-D",
            "`block_table` must be [batch, max_blocks]",
            replaced(GOOD, 3, (I32, &[4])),
            None,
        ),
        (
            "block_table empty",
            "`block_table` must not be empty",
            replaced(GOOD, 3, (I32, &[2, 0])),
            None,
        ),
        (
            "v shape != k shape",
            "`v` must have shape [4, 2, 64]",
            replaced(GOOD, 1, (F32, &[4, 2, 32])),
            None,
        ),
        (
            "cache dtype",
            "`k_cache` must be f32",
            replaced(GOOD, 5, (F16, &[4, 4, 2, 64])),
            None,
        ),
        (
            "rot_dim past head_dim",
            "the RoPE table rotates rot_dim = 66 dims but head_dim is 64",
            GOOD,
            Some(66),
        ),
    ];
    for (what, reason, specs, rot_dim) in table {
        v.push(shape_rejection(what, reason, specs, rot_dim));
    }
    v
}

/// The declared (functional) form's reference: the input caches with the rows written,
/// K rotated when the declaration asks.
pub(crate) fn ragged_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let ks = r.shape("k_cache")?;
    let hnd = r.params.choice("layout")? == "hnd";
    let (page, hkv) = if hnd { (ks[2], ks[1]) } else { (ks[1], ks[2]) };
    let layout = if hnd { KvLayout::Hnd } else { KvLayout::Nhd };
    let d = ks[3];
    let tokens = r.shape("k")?[0];
    let cu: Vec<usize> = r.data("cu_seqlens")?.iter().map(|&c| c as usize).collect();
    let lens: Vec<usize> = r.data("seq_lens")?.iter().map(|&c| c as usize).collect();
    let placed = ragged_slots(&cu, &lens, r.data("block_table")?, page, tokens);
    let slots: Vec<f64> = placed
        .iter()
        .map(|p| p.map_or(-1.0, |(s, _)| s as f64))
        .collect();
    let positions: Vec<u32> = placed.iter().map(|p| p.map_or(0, |(_, pos)| pos)).collect();
    let keys = match super::super::decl::declared_rope(OP, r.params, d)? {
        Some(config) => crate::rope::reference::rope(r.data("k")?, &positions, hkv, d, &config),
        None => r.data("k")?.to_vec(),
    };
    let (kc, vc) = paged_append(
        (r.data("k_cache")?, r.data("v_cache")?),
        (&keys, r.data("v")?, &slots),
        layout,
        [page, hkv, d],
    );
    Ok(vec![kc, vc])
}

pub(crate) fn ragged_uses() -> Vec<KernelUse> {
    let mut v = vec![KernelUse {
        def: &ragged_slots_check_kernel::DEF,
        spec: Specialization::new(vec![], vec![]),
    }];
    for dt in FLOAT_DTYPES {
        let mut widths = vec![16 / dt.size_bytes() as u32, 4, 1];
        widths.dedup();
        for vec in widths {
            for hnd in [0, 1] {
                for (rot_dim, neox) in [(0, 0), (128, 1), (64, 0)] {
                    let c = [vec, hnd, rot_dim, neox].map(Literal::U32);
                    v.push(KernelUse {
                        def: &paged_kv_append_ragged_kernel::DEF,
                        spec: Specialization::new(vec![dt], c.to_vec()),
                    });
                }
            }
        }
    }
    v
}
