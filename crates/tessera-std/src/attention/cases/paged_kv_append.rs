//! Cases of `paged_kv_append`: random rows into random caches at shuffled, distinct slots
//! with padding (−1) tokens, NHD and HND pages of 1, 16 and 5 tokens, head dims that take
//! 16-byte runs and one that does not; the whole caches are compared, so a row written to
//! the wrong slot or a slot overwritten by a skipped token fails. A rejection per
//! invariant, the device-side slot check's included. The fused-RoPE cases are in
//! `paged_kv_append_rope`.

use super::*;
use crate::attention::paged::KvLayout;
use crate::attention::paged_append::{
    paged_kv_append, paged_kv_append_kernel, paged_slots_check_kernel, SlotCheck,
};
use crate::attention::paged_reference::paged_append;
use crate::decl::RefArgs;
use tessera_ir::{Literal, Specialization};
use DType::I32;

const OP: &str = "paged_kv_append";

/// `tokens` rows into `blocks` pages of `page` slots (`[hkv, d]`), every third token
/// padding.
fn append_case(dt: DType, layout: KvLayout, [tokens, blocks, page, hkv, d]: [usize; 5]) -> Case {
    let name = format!("{layout:?} tokens={tokens} blocks={blocks} page={page} hkv={hkv} d={d}");
    correctness(OP, dt, name, move |ctx, rng| {
        let shape = match layout {
            KvLayout::Nhd => [blocks, page, hkv, d],
            KvLayout::Hnd => [blocks, hkv, page, d],
        };
        let (kc, kcv) = random_tensor(ctx, rng, dt, &shape, -1.0, 1.0)?;
        let (vc, vcv) = random_tensor(ctx, rng, dt, &shape, -1.0, 1.0)?;
        let (k, kv) = random_tensor(ctx, rng, dt, &[tokens, hkv, d], -2.0, 2.0)?;
        let (v, vv) = random_tensor(ctx, rng, dt, &[tokens, hkv, d], -2.0, 2.0)?;
        let mut free: Vec<usize> = (0..blocks * page).collect();
        let slots: Vec<f64> = (0..tokens)
            .map(|t| {
                if t % 3 == 2 {
                    return -1.0;
                }
                let i = rng.int(0, free.len() as u32) as usize;
                free.swap_remove(i) as f64
            })
            .collect();
        let (sm, _) = upload(ctx, I32, &slots, &[tokens])?;
        let check = SlotCheck::new(ctx).map_err(err)?;
        paged_kv_append(ctx, &k, &v, &sm, &kc, &vc, layout, None, &check).map_err(err)?;
        let (wk, wv) = paged_append((&kcv, &vcv), (&kv, &vv, &slots), layout, [page, hkv, d]);
        let mut got = kc.to_f64_vec().map_err(err)?;
        got.extend(vc.to_f64_vec().map_err(err)?);
        Ok((got, [wk, wv].concat()))
    })
}

/// A call of 3 tokens (`[2, 64]` rows, f32) into NHD caches `[4, 4, 2, 64]` at `slots`,
/// which must be refused for `reason` with k_cache untouched.
fn slot_rejection(what: &str, reason: &'static str, slots: &'static [i32]) -> Case {
    rejection(OP, what, reason, move |ctx| {
        let [k, v, kc, vc] = zeros_of(
            ctx,
            [
                (F32, &[3, 2, 64]),
                (F32, &[3, 2, 64]),
                (F32, &[4, 4, 2, 64]),
                (F32, &[4, 4, 2, 64]),
            ],
        )?;
        let sm = ctx.tensor(slots, &[3]).map_err(err)?;
        let check = SlotCheck::new(ctx).map_err(err)?;
        let (c, untouched) = (ctx.clone(), kc.clone());
        Ok((
            untouched,
            Box::new(move || {
                paged_kv_append(&c, &k, &v, &sm, &kc, &vc, KvLayout::Nhd, None, &check)
            }),
        ))
    })
}

/// A call on zero tensors of `specs` (k, v, slot_mapping, k_cache, v_cache) in `layout`.
fn shape_rejection(what: &str, reason: &'static str, specs: [Spec; 5], layout: KvLayout) -> Case {
    rejection(OP, what, reason, move |ctx| {
        let [k, v, sm, kc, vc] = zeros_of(ctx, specs)?;
        let check = SlotCheck::new(ctx).map_err(err)?;
        let (c, untouched) = (ctx.clone(), kc.clone());
        Ok((
            untouched,
            Box::new(move || paged_kv_append(&c, &k, &v, &sm, &kc, &vc, layout, None, &check)),
        ))
    })
}

const GOOD: [Spec; 5] = [
    (F32, &[3, 2, 64]),
    (F32, &[3, 2, 64]),
    (I32, &[3]),
    (F32, &[4, 4, 2, 64]),
    (F32, &[4, 4, 2, 64]),
];

pub(crate) fn append_cases() -> Vec<Case> {
    use KvLayout::{Hnd, Nhd};
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(append_case(dt, Nhd, [20, 3, 16, 2, 128]));
        v.push(append_case(dt, Hnd, [20, 3, 16, 4, 64]));
        v.push(append_case(dt, Nhd, [7, 9, 1, 1, 256]));
        v.push(append_case(dt, Hnd, [11, 6, 5, 2, 36]));
    }
    v.extend([
        slot_rejection(
            "slot past the cache",
            "`slot_mapping` is bad at token 1: slot 16 must be −1 or one of the cache's 0..16 slots",
            &[3, 16, -1],
        ),
        slot_rejection(
            "slot below −1",
            "`slot_mapping` is bad at token 2: slot -2",
            &[3, -1, -2],
        ),
        slot_rejection(
            "two tokens in one slot",
            "`slot_mapping` is bad at token 2: slot 5",
            &[5, -1, 5],
        ),
    ]);
    let table = [
        (
            "slot_mapping not i32",
            "`slot_mapping` must be i32",
            replaced(GOOD, 2, (U32, &[3])),
            Nhd,
        ),
        (
            "slot_mapping of another length",
            "`slot_mapping` must have shape [3]",
            replaced(GOOD, 2, (I32, &[4])),
            Nhd,
        ),
        (
            "v shape != k shape",
            "`v` must have shape [3, 2, 64]",
            replaced(GOOD, 1, (F32, &[3, 2, 32])),
            Nhd,
        ),
        (
            "cache dtype",
            "`k_cache` must be f32",
            replaced(GOOD, 3, (F16, &[4, 4, 2, 64])),
            Nhd,
        ),
        (
            "cache heads != k heads (HND)",
            "the caches hold 4 KV heads of 64, `k` has 2 of 64",
            GOOD,
            Hnd,
        ),
        (
            "v_cache shape",
            "`v_cache` must have shape [4, 4, 2, 64]",
            replaced(GOOD, 4, (F32, &[4, 2, 2, 64])),
            Nhd,
        ),
        (
            "k 2-D",
            "`k` must be [tokens, n_kv_heads, head_dim]",
            [
                (F32, &[3, 128]),
                (F32, &[3, 128]),
                (I32, &[3]),
                (F32, &[4, 4, 2, 64]),
                (F32, &[4, 4, 2, 64]),
            ],
            Nhd,
        ),
    ];
    for (what, reason, specs, layout) in table {
        v.push(shape_rejection(what, reason, specs, layout));
    }
    v.push(rejection(
        OP,
        "k_cache is v_cache",
        "`out` aliases `v_cache`",
        |ctx| {
            let [k, v, sm, kc] = zeros_of(ctx, [GOOD[0], GOOD[1], GOOD[2], GOOD[3]])?;
            let check = SlotCheck::new(ctx).map_err(err)?;
            let (c, untouched) = (ctx.clone(), kc.clone());
            Ok((
                untouched,
                Box::new(move || {
                    paged_kv_append(&c, &k, &v, &sm, &kc, &kc, KvLayout::Nhd, None, &check)
                }),
            ))
        },
    ));
    v.extend(super::paged_kv_append_rope::rope_cases());
    v
}

/// The declared (functional) form's reference: the input caches with the rows written.
pub(crate) fn append_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let ks = r.shape("k_cache")?;
    let hnd = r.params.choice("layout")? == "hnd";
    let (page, hkv) = if hnd { (ks[2], ks[1]) } else { (ks[1], ks[2]) };
    let layout = if hnd { KvLayout::Hnd } else { KvLayout::Nhd };
    let keys = match (
        super::super::decl::declared_rope(OP, r.params, ks[3])?,
        r.optional("positions"),
    ) {
        (Some(config), Some(positions)) => {
            let positions: Vec<u32> = positions.iter().map(|&p| p as u32).collect();
            crate::rope::reference::rope(r.data("k")?, &positions, hkv, ks[3], &config)
        }
        _ => r.data("k")?.to_vec(),
    };
    let (kc, vc) = paged_append(
        (r.data("k_cache")?, r.data("v_cache")?),
        (&keys, r.data("v")?, r.data("slot_mapping")?),
        layout,
        [page, hkv, ks[3]],
    );
    Ok(vec![kc, vc])
}

pub(crate) fn append_uses() -> Vec<KernelUse> {
    let mut v = vec![KernelUse {
        def: &paged_slots_check_kernel::DEF,
        spec: Specialization::new(vec![], vec![]),
    }];
    for dt in FLOAT_DTYPES {
        let mut widths = vec![16 / dt.size_bytes() as u32, 4, 1];
        widths.dedup();
        for vec in widths {
            for hnd in [0, 1] {
                // Unrotated; K rotated NeoX over head_dim 128; interleaved over half of it.
                for (rot_dim, neox) in [(0, 0), (128, 1), (64, 0)] {
                    let c = [vec, hnd, rot_dim, neox].map(Literal::U32);
                    v.push(KernelUse {
                        def: &paged_kv_append_kernel::DEF,
                        spec: Specialization::new(vec![dt], c.to_vec()),
                    });
                }
            }
        }
    }
    v
}
