//! Cases of the fused RoPE on K in `paged_kv_append` and `kv_quant_append`: random rows
//! at random positions (some past 2^19) into random NHD/HND caches, NeoX and interleaved,
//! full and partial rot_dim, a YaRN table. Each fused call must write exactly the bytes
//! `rope` followed by the unfused append writes (the same rotation, bit for bit), and
//! land within the rope tolerance of an f64 reference (the rope family's, then the
//! paged write); the quantized form within a code's half step of it. A rejection per
//! invariant the rotation adds.

use super::kv_quant::dequantize;
use super::*;
use crate::attention::kv_quant::{kv_quant_append, KvFormat, KvScales};
use crate::attention::paged::KvLayout;
use crate::attention::paged_append::{paged_kv_append, SlotCheck};
use crate::attention::paged_append_rope::KeyRope;
use crate::attention::paged_reference::paged_append;
use crate::registry::Outcome;
use crate::rope::{rope, RopeConfig, RopeLayout, RopeScaling, RopeTable};
use crate::testing::zeros;
use DType::I32;

const OP: &str = "paged_kv_append";
const QUANT_OP: &str = "kv_quant_append";

/// The tables the cases rotate with: `(name, config)` for head_dim `d`.
fn tables(d: usize) -> [(&'static str, RopeConfig); 3] {
    let plain = |layout, rot_dim, theta| RopeConfig {
        layout,
        theta,
        rot_dim,
        scaling: RopeScaling::None,
    };
    [
        ("neox", plain(RopeLayout::NeoX, d, 10000.0)),
        (
            "interleaved partial",
            plain(RopeLayout::Interleaved, d / 2, 1.0e6),
        ),
        (
            "neox yarn partial",
            RopeConfig {
                scaling: RopeScaling::Yarn {
                    factor: 4.0,
                    original_max_position: 4096.0,
                    beta_fast: 32.0,
                    beta_slow: 1.0,
                },
                ..plain(RopeLayout::NeoX, d - 4, 500000.0)
            },
        ),
    ]
}

/// Random appends: `tokens` rows, every third padding (−1), the rest at distinct slots of
/// `blocks · page`; positions, a few small and the rest up to 2^20.
struct Rows {
    k: Tensor,
    v: Tensor,
    kv: Vec<f64>,
    vv: Vec<f64>,
    slot_mapping: Tensor,
    slots: Vec<f64>,
    positions: Tensor,
    pv: Vec<u32>,
}

fn random_rows(
    ctx: &Context,
    rng: &mut CaseRng,
    dt: DType,
    [tokens, slots, hkv, d]: [usize; 4],
) -> Result<Rows, String> {
    let (k, kv) = random_tensor(ctx, rng, dt, &[tokens, hkv, d], -2.0, 2.0)?;
    let (v, vv) = random_tensor(ctx, rng, dt, &[tokens, hkv, d], -2.0, 2.0)?;
    let mut free: Vec<usize> = (0..slots).collect();
    let slot_values: Vec<f64> = (0..tokens)
        .map(|t| {
            if t % 3 == 2 {
                return -1.0;
            }
            let i = rng.int(0, free.len() as u32) as usize;
            free.swap_remove(i) as f64
        })
        .collect();
    let (slot_mapping, _) = upload(ctx, I32, &slot_values, &[tokens])?;
    let pv: Vec<u32> = (0..tokens)
        .map(|t| {
            if t % 4 == 0 {
                rng.int(0, 64)
            } else {
                rng.int(0, 1 << 20)
            }
        })
        .collect();
    let positions = ctx.tensor(&pv, &[tokens]).map_err(err)?;
    Ok(Rows {
        k,
        v,
        kv,
        vv,
        slot_mapping,
        slots: slot_values,
        positions,
        pv,
    })
}

fn pages(layout: KvLayout, [blocks, page, hkv, d]: [usize; 4]) -> [usize; 4] {
    match layout {
        KvLayout::Nhd => [blocks, page, hkv, d],
        KvLayout::Hnd => [blocks, hkv, page, d],
    }
}

/// The same values in two tensors: one for the fused call, one for the two-step path.
fn twin(ctx: &Context, dt: DType, values: &[f64], shape: &[usize]) -> Result<[Tensor; 2], String> {
    Ok([
        upload(ctx, dt, values, shape)?.0,
        upload(ctx, dt, values, shape)?.0,
    ])
}

/// `Err` naming the first element where the fused and two-step results differ.
fn same(what: &str, fused: &[f64], two_step: &[f64]) -> Result<(), String> {
    match fused
        .iter()
        .zip(two_step)
        .position(|(a, b)| a.to_bits() != b.to_bits())
    {
        None if fused.len() == two_step.len() => Ok(()),
        None => Err(format!(
            "{what}: {} elements fused, {} in two steps",
            fused.len(),
            two_step.len()
        )),
        Some(i) => Err(format!(
            "{what}: element {i} is {} fused but {} through rope then the append",
            fused[i], two_step[i]
        )),
    }
}

fn float_case(dt: DType, layout: KvLayout, table_at: usize, dims: [usize; 5]) -> Case {
    let [tokens, blocks, page, hkv, d] = dims;
    let (table_name, config) = tables(d)[table_at];
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: format!(
            "rope {table_name} {layout:?} tokens={tokens} blocks={blocks} page={page} hkv={hkv} d={d}"
        ),
        run: Box::new(move |ctx, rng| {
            let shape = pages(layout, [blocks, page, hkv, d]);
            let cache_values: Vec<f64> = (0..2 * shape.iter().product::<usize>())
                .map(|_| rng.uniform(-1.0, 1.0))
                .collect();
            let (kvals, vvals) = cache_values.split_at(cache_values.len() / 2);
            let [kc, kc2] = twin(ctx, dt, kvals, &shape)?;
            let [vc, vc2] = twin(ctx, dt, vvals, &shape)?;
            let r = random_rows(ctx, rng, dt, [tokens, blocks * page, hkv, d])?;
            let table = RopeTable::new(ctx, config).map_err(err)?;
            let check = SlotCheck::new(ctx).map_err(err)?;
            let rope_k = KeyRope {
                positions: &r.positions,
                table: &table,
            };
            paged_kv_append(ctx, &r.k, &r.v, &r.slot_mapping, &kc, &vc, layout, Some(rope_k), &check)
                .map_err(err)?;
            let rotated = ctx.full_nan(dt, &[tokens, hkv, d]).map_err(err)?;
            rope(ctx, &r.k, &r.positions, &table, &rotated).map_err(err)?;
            paged_kv_append(ctx, &rotated, &r.v, &r.slot_mapping, &kc2, &vc2, layout, None, &check)
                .map_err(err)?;
            let got = [kc.to_f64_vec().map_err(err)?, vc.to_f64_vec().map_err(err)?].concat();
            let two_step = [kc2.to_f64_vec().map_err(err)?, vc2.to_f64_vec().map_err(err)?].concat();
            same("the caches", &got, &two_step)?;
            let (kstored, vstored) = (
                upload(ctx, dt, kvals, &shape)?.1,
                upload(ctx, dt, vvals, &shape)?.1,
            );
            let kr = crate::rope::reference::rope(&r.kv, &r.pv, hkv, d, &config);
            let (wk, wv) = paged_append((&kstored, &vstored), (&kr, &r.vv, &r.slots), layout, [page, hkv, d]);
            compare(&got, &[wk, wv].concat(), accuracy("rope", dt)?)
        }),
    }
}

fn quant_case(
    dt: DType,
    format: KvFormat,
    layout: KvLayout,
    table_at: usize,
    dims: [usize; 5],
) -> Case {
    let [tokens, blocks, page, hkv, d] = dims;
    let (table_name, config) = tables(d)[table_at];
    Case {
        op: QUANT_OP,
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: format!(
            "rope {table_name} {format:?} {layout:?} tokens={tokens} blocks={blocks} page={page} hkv={hkv} d={d}"
        ),
        run: Box::new(move |ctx, rng| {
            let shape = pages(layout, [blocks, page, hkv, format.row_bytes(d)]);
            let sshape = format.scale_shape(&shape);
            let n: usize = shape.iter().product();
            let elements = blocks * page * hkv * d;
            let codes: Vec<u8> = (0..n).map(|_| rng.int(0, 127) as u8).collect();
            let pool = || -> Result<Tensor, String> {
                let t = zeros(ctx, DType::U8, &shape)?;
                t.write_bytes(&codes).map_err(err)?;
                Ok(t)
            };
            let (kc, vc, kc2, vc2) = (pool()?, pool()?, pool()?, pool()?);
            let scale_pool = || zeros(ctx, F32, &sshape);
            let (ks, vs, ks2, vs2) = (scale_pool()?, scale_pool()?, scale_pool()?, scale_pool()?);
            let r = random_rows(ctx, rng, dt, [tokens, blocks * page, hkv, d])?;
            let table = RopeTable::new(ctx, config).map_err(err)?;
            let check = SlotCheck::new(ctx).map_err(err)?;
            let rope_k = KeyRope {
                positions: &r.positions,
                table: &table,
            };
            let scales = KvScales { k_scale: &ks, v_scale: &vs, format };
            kv_quant_append(ctx, &r.k, &r.v, &r.slot_mapping, (&kc, &vc), &scales, layout, Some(rope_k), &check)
                .map_err(err)?;
            let rotated = ctx.full_nan(dt, &[tokens, hkv, d]).map_err(err)?;
            rope(ctx, &r.k, &r.positions, &table, &rotated).map_err(err)?;
            let scales2 = KvScales { k_scale: &ks2, v_scale: &vs2, format };
            kv_quant_append(ctx, &rotated, &r.v, &r.slot_mapping, (&kc2, &vc2), &scales2, layout, None, &check)
                .map_err(err)?;
            let mut checked = 0;
            for (what, a, b) in [("k codes", &kc, &kc2), ("v codes", &vc, &vc2), ("k scales", &ks, &ks2), ("v scales", &vs, &vs2)] {
                let (x, y) = (a.to_bytes().map_err(err)?, b.to_bytes().map_err(err)?);
                if x != y {
                    let i = x.iter().zip(&y).position(|(p, q)| p != q).unwrap_or(0);
                    return Err(format!("{what}: byte {i} is {} fused but {} through rope then the append", x[i], y[i]));
                }
                checked += x.len();
            }
            // Against the f64 rotation: each written key element within half a code step of
            // its row's (int4: group's) scale (int8, int4), or 2^-4 of itself plus half the
            // smallest subnormal step (e4m3), plus the rounding of the rotated key to k's
            // dtype.
            let kcodes = kc.to_f64_vec().map_err(err)?;
            let kscales = ks.to_f64_vec().map_err(err)?;
            let got = dequantize(format, &kcodes, &kscales);
            let kr = crate::rope::reference::rope(&r.kv, &r.pv, hkv, d, &config);
            let nan_pool = vec![f64::NAN; elements];
            let (want, _) = paged_append((&nan_pool, &nan_pool), (&kr, &r.vv, &r.slots), layout, [page, hkv, d]);
            let unit = match dt {
                F32 => 2f64.powi(-22),
                F16 => 2f64.powi(-10),
                _ => 2f64.powi(-7),
            };
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                if w.is_nan() {
                    continue;
                }
                let s = kscales[i / format.group(d as u32) as usize];
                let step = match format {
                    KvFormat::Int8 | KvFormat::Int4 { .. } => 0.5 * s,
                    KvFormat::E4m3 => w.abs() * 2f64.powi(-4) + s * 2f64.powi(-10),
                };
                let bound = step * 1.001 + (w.abs() + s) * unit;
                if (g - w).abs() > bound || g.is_nan() {
                    return Err(format!("key element {i}: {g} dequantized, {w} rotated in f64 (bound {bound})"));
                }
                checked += 1;
            }
            Ok(Outcome { checked, ..Outcome::default() })
        }),
    }
}

/// A fused call of 3 tokens (`[2, 64]` rows, f32, NHD `[4, 4, 2, 64]` caches, slots 0..3)
/// with positions of `positions` and a NeoX table of `rot_dim`, refused for `reason`
/// with k_cache untouched.
fn rope_rejection(what: &str, reason: &'static str, positions: Spec, rot_dim: usize) -> Case {
    rejection(OP, what, reason, move |ctx| {
        let [k, v, kc, vc, pos] = zeros_of(
            ctx,
            [
                (F32, &[3, 2, 64]),
                (F32, &[3, 2, 64]),
                (F32, &[4, 4, 2, 64]),
                (F32, &[4, 4, 2, 64]),
                positions,
            ],
        )?;
        let sm = ctx.tensor(&[0i32, 1, 2], &[3]).map_err(err)?;
        let table = RopeTable::new(
            ctx,
            RopeConfig {
                layout: RopeLayout::NeoX,
                theta: 10000.0,
                rot_dim,
                scaling: RopeScaling::None,
            },
        )
        .map_err(err)?;
        let check = SlotCheck::new(ctx).map_err(err)?;
        let (c, untouched) = (ctx.clone(), kc.clone());
        Ok((
            untouched,
            Box::new(move || {
                let r = KeyRope {
                    positions: &pos,
                    table: &table,
                };
                paged_kv_append(&c, &k, &v, &sm, &kc, &vc, KvLayout::Nhd, Some(r), &check)
            }),
        ))
    })
}

/// The fused-RoPE cases of `paged_kv_append`: every dtype, both layouts, pages of 1, 16
/// and 5, each table; and the rejections the rotation adds.
pub(crate) fn rope_cases() -> Vec<Case> {
    use KvLayout::{Hnd, Nhd};
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(float_case(dt, Nhd, 0, [20, 3, 16, 2, 128]));
        v.push(float_case(dt, Hnd, 1, [11, 6, 5, 2, 36]));
        v.push(float_case(dt, Nhd, 2, [7, 9, 1, 1, 64]));
    }
    v.push(float_case(F32, Hnd, 2, [13, 2, 16, 4, 256]));
    v.extend([
        rope_rejection(
            "positions not u32",
            "`positions` must be u32",
            (I32, &[3]),
            64,
        ),
        rope_rejection(
            "positions of another length",
            "`positions` must have shape [3]",
            (U32, &[2]),
            64,
        ),
        rope_rejection(
            "rot_dim past head_dim",
            "the RoPE table rotates rot_dim = 66 dims but head_dim is 64",
            (U32, &[3]),
            66,
        ),
    ]);
    v
}

/// The fused-RoPE cases of `kv_quant_append`: every format (int4 in groups of 32), every
/// dtype, both layouts.
pub(crate) fn quant_rope_cases() -> Vec<Case> {
    use KvLayout::{Hnd, Nhd};
    let mut v = Vec::new();
    let int4 = KvFormat::Int4 { group: 32 };
    for format in [KvFormat::Int8, KvFormat::E4m3, int4] {
        for dt in FLOAT_DTYPES {
            v.push(quant_case(dt, format, Nhd, 0, [20, 3, 16, 2, 128]));
            v.push(quant_case(dt, format, Hnd, 1, [11, 4, 5, 4, 64]));
        }
        v.push(quant_case(BF16, format, Nhd, 2, [7, 9, 1, 1, 256]));
    }
    v
}
