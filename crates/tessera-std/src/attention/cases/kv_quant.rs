//! Cases of the quantized paged cache: `kv_quant_append` against a host quantizer written
//! from the format's definition (f32 amax, f32 `x / scale`, ties to even, saturating;
//! zero and non-finite rows), the whole pools compared so a row in the wrong slot or a
//! skipped token's slot overwritten fails; `sdpa_decode_paged_quant` over random codes and
//! scales (the f64 reference dequantizes each code exactly, then attends in f64), with
//! NaN scales in every slot no sequence fills; int8 and e4m3, NHD and HND, pages of 1, 16
//! and 5, GQA, head dims 64/128/256, window, sinks and sink logit. A rejection per
//! invariant; bench pairs of bf16 and quantized paged decode at 32k keys.

use super::sdpa_decode_paged::{build, Form};
use super::*;
use crate::attention::decode_mma::mma_block_keys;
use crate::attention::kv_quant::{kv_quant_append, kv_quant_append_kernel, KvFormat, KvScales};
use crate::attention::kv_quant_decode::{
    sdpa_decode_paged_quant, sdpa_decode_quant_partial_kernel, sdpa_multi_query_paged_quant,
};
use crate::attention::paged::{sdpa_decode_paged, KvLayout, PagedKv, PagedWorkspace};
use crate::attention::paged_append::SlotCheck;
use crate::attention::paged_reference::{block_table_seqs, csr_seqs, paged_decode, PagedProblem};
use crate::attention::paged_rows::{PAGED_ANY, PAGED_POW2};
use crate::attention::paged_table::{paged_lengths_kernel, paged_pages_kernel};
use crate::decl::RefArgs;
use crate::quant::fp8_format::Fp8Format;
use crate::quant::fp8_reference;
use tessera_ir::{Literal, Specialization};
use DType::{I32, U8};

pub(crate) const APPEND: &str = "kv_quant_append";
pub(crate) const DECODE: &str = "sdpa_decode_paged_quant";
pub(crate) const MQ: &str = "sdpa_multi_query_paged_quant";

/// The declared op whose cases a call of Rust op `op` over `format` belongs to: the
/// `_int4` declaration for int4 (its pools and scales have their own shapes), else `op`.
pub(crate) fn op_for(op: &'static str, format: KvFormat) -> &'static str {
    match (format, op) {
        (KvFormat::Int4 { .. }, APPEND) => "kv_quant_append_int4",
        (KvFormat::Int4 { .. }, DECODE) => "sdpa_decode_paged_quant_int4",
        (KvFormat::Int4 { .. }, MQ) => "sdpa_multi_query_paged_quant_int4",
        _ => op,
    }
}

/// The value of code byte `code` before its scale, from the format's definition (int4:
/// the value of its low nibble).
pub(crate) fn code_value(format: KvFormat, code: f64) -> f64 {
    let byte = code as u8;
    match format {
        KvFormat::Int8 => f64::from(byte as i8),
        KvFormat::E4m3 => fp8_reference::decode(Fp8Format::E4m3, byte),
        // The nibble's two's-complement value: shift it to the top, then back signed.
        KvFormat::Int4 { .. } => f64::from(((byte << 4) as i8) >> 4),
    }
}

/// Element `i`'s code value of a pool of `codes` bytes: its byte's, or for int4 the
/// nibble `i % 2` (low first) of byte `i / 2`.
fn element_code(format: KvFormat, codes: &[f64], i: usize) -> f64 {
    match format {
        KvFormat::Int4 { .. } => {
            let byte = codes[i / 2] as u8;
            code_value(format, f64::from(byte >> (4 * (i % 2))))
        }
        _ => code_value(format, codes[i]),
    }
}

/// Each element's value (`code · its scale`) of a pool of `codes` bytes and `scales`
/// (one a row, for int4 one a group: element `i`'s is `scales[i / group]` either way).
pub(crate) fn dequantize(format: KvFormat, codes: &[f64], scales: &[f64]) -> Vec<f64> {
    let n = match format {
        KvFormat::Int4 { .. } => codes.len() * 2,
        _ => codes.len(),
    };
    let group = n / scales.len().max(1);
    (0..n)
        .map(|i| element_code(format, codes, i) * scales[i / group])
        .collect()
}

/// One row's (code bytes, scales) as the format defines them, in f32 arithmetic: one
/// scale, or for int4 one a group with the codes packed two a byte, low nibble first.
fn quantize_row(format: KvFormat, row: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let xs: Vec<f32> = row.iter().map(|&x| x as f32).collect();
    let group = format.group(xs.len() as u32) as usize;
    let groups = xs.len() / group;
    let bytes = format.row_bytes(xs.len());
    if xs.iter().any(|x| !x.is_finite()) {
        return (vec![0.0; bytes], vec![f64::NAN; groups]);
    }
    let mut scales = Vec::new();
    let mut codes: Vec<u8> = Vec::new();
    for chunk in xs.chunks(group) {
        let amax = chunk.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let s = amax / format.max();
        scales.push(f64::from(s));
        for &x in chunk {
            let y = x / s;
            codes.push(match format {
                _ if s <= 0.0 => 0,
                KvFormat::Int8 => y.clamp(-127.0, 127.0).round_ties_even() as i8 as u8,
                KvFormat::E4m3 => fp8_reference::encode(Fp8Format::E4m3, f64::from(y)),
                KvFormat::Int4 { .. } => (y.clamp(-7.0, 7.0).round_ties_even() as i8 as u8) & 15,
            });
        }
    }
    let codes = match format {
        KvFormat::Int4 { .. } => codes
            .chunks(2)
            .map(|p| f64::from(p[0] | (p[1] << 4)))
            .collect(),
        _ => codes.into_iter().map(f64::from).collect(),
    };
    (codes, scales)
}

/// The pools (codes, scales, for K then V) after writing rows `k`/`v` `[tokens, hkv, d]`
/// at `slots` (−1 skips) into pools `pools` in `layout` of pages of `page`.
pub(crate) fn append_reference_pools(
    format: KvFormat,
    pools: [&[f64]; 4],
    (k, v, slots): (&[f64], &[f64], &[f64]),
    layout: KvLayout,
    [page, hkv, d]: [usize; 3],
) -> [Vec<f64>; 4] {
    let [mut kc, mut ks, mut vc, mut vs] = pools.map(<[f64]>::to_vec);
    let (bytes, groups) = (format.row_bytes(d), d / format.group(d as u32) as usize);
    for (t, &slot) in slots.iter().enumerate() {
        if slot < 0.0 {
            continue;
        }
        let su = slot as usize;
        let (p, off) = (su / page, su % page);
        for h in 0..hkv {
            let dst = match layout {
                KvLayout::Nhd => su * hkv + h,
                KvLayout::Hnd => (p * hkv + h) * page + off,
            };
            let src = (t * hkv + h) * d;
            for (rows, codes, scales) in [(k, &mut kc, &mut ks), (v, &mut vc, &mut vs)] {
                let (c, s) = quantize_row(format, &rows[src..src + d]);
                codes[dst * bytes..(dst + 1) * bytes].copy_from_slice(&c);
                scales[dst * groups..(dst + 1) * groups].copy_from_slice(&s);
            }
        }
    }
    [kc, ks, vc, vs]
}

/// `values` with each NaN replaced by a value no code or scale of these cases takes, so
/// the comparison (which refuses a NaN reference) still checks where the NaNs are.
pub(crate) fn nan_marked(values: &[f64]) -> Vec<f64> {
    values
        .iter()
        .map(|&x| if x.is_nan() { -1.0e9 } else { x })
        .collect()
}

/// Random code bytes, never e4m3's NaN codes.
pub(crate) fn random_codes(rng: &mut CaseRng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let b = rng.int(0, 256);
            f64::from(if b & 0x7F == 0x7F { b ^ 1 } else { b })
        })
        .collect()
}

/// `tokens` rows into `blocks` pages of `page` slots (`[hkv, d]`), every third token
/// padding; with `specials`, token 0's rows are zero and token 1's K row holds a NaN and
/// its V row an inf.
pub(crate) fn append_case(
    dt: DType,
    format: KvFormat,
    layout: KvLayout,
    [tokens, blocks, page, hkv, d]: [usize; 5],
    specials: bool,
) -> Case {
    let name = format!(
        "{format:?} {layout:?} tokens={tokens} blocks={blocks} page={page} hkv={hkv} d={d}{}",
        if specials { " zero/NaN/inf rows" } else { "" }
    );
    correctness(op_for(APPEND, format), dt, name, move |ctx, rng| {
        let bytes = format.row_bytes(d);
        let shape = match layout {
            KvLayout::Nhd => vec![blocks, page, hkv, bytes],
            KvLayout::Hnd => vec![blocks, hkv, page, bytes],
        };
        let n: usize = shape.iter().product();
        let sshape = format.scale_shape(&shape);
        let (kc, kcv) = upload(ctx, U8, &random_codes(rng, n), &shape)?;
        let (vc, vcv) = upload(ctx, U8, &random_codes(rng, n), &shape)?;
        let (ks, ksv) = random_tensor(ctx, rng, F32, &sshape, 0.0, 1.0)?;
        let (vs, vsv) = random_tensor(ctx, rng, F32, &sshape, 0.0, 1.0)?;
        let mut kvals: Vec<f64> = (0..tokens * hkv * d)
            .map(|_| rng.uniform(-3.0, 3.0))
            .collect();
        let mut vvals: Vec<f64> = (0..tokens * hkv * d)
            .map(|_| rng.uniform(-3.0, 3.0))
            .collect();
        if specials {
            kvals[..hkv * d].fill(0.0);
            vvals[..hkv * d].fill(0.0);
            kvals[hkv * d + 3] = f64::NAN;
            vvals[hkv * d + 5] = f64::INFINITY;
        }
        let (k, kv) = upload(ctx, dt, &kvals, &[tokens, hkv, d])?;
        let (v, vv) = upload(ctx, dt, &vvals, &[tokens, hkv, d])?;
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
        let scales = KvScales {
            k_scale: &ks,
            v_scale: &vs,
            format,
        };
        kv_quant_append(ctx, &k, &v, &sm, (&kc, &vc), &scales, layout, None, &check)
            .map_err(err)?;
        let want = append_reference_pools(
            format,
            [&kcv, &ksv, &vcv, &vsv],
            (&kv, &vv, &slots),
            layout,
            [page, hkv, d],
        );
        let mut got = Vec::new();
        for t in [&kc, &ks, &vc, &vs] {
            got.extend(t.to_f64_vec().map_err(err)?);
        }
        Ok((nan_marked(&got), nan_marked(&want.concat())))
    })
}

/// Quantized pools for a paged build: random codes, and per row a random scale in
/// `[lo, hi)` (int4: per group), NaN where `values` (the float pool `build` made, of
/// shape `shape`) marks a slot no sequence fills. Returns the tensors and the dequantized
/// pool.
pub(crate) fn quantized_pool(
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
                rng.uniform(0.001, 0.02)
            }
        })
        .collect();
    let (c, cv) = upload(ctx, U8, &codes, &code_shape)?;
    let (s, sv) = upload(ctx, F32, &scales, &format.scale_shape(&code_shape))?;
    Ok((c, s, dequantize(format, &cv, &sv)))
}

/// One quantized decode case: `layout`, `form`, sequences of `lens`, `[hq, hkv, page,
/// d]`, and `(window, n_sink, sink logit)`.
pub(crate) fn decode_case(
    dt: DType,
    format: KvFormat,
    (layout, form): (KvLayout, Form),
    lens: &'static [usize],
    dims: [usize; 4],
    (window, n_sink, logit): (u32, u32, bool),
) -> Case {
    query_case(
        dt,
        format,
        (layout, form),
        (lens, None),
        dims,
        (window, n_sink, logit),
    )
}

/// A quantized decode case, or with `mq = Some((n_query, causal))` a multi-query one
/// (`sdpa_multi_query_paged_quant`, q `[batch, n_query, heads, d]`).
pub(crate) fn query_case(
    dt: DType,
    format: KvFormat,
    (layout, form): (KvLayout, Form),
    (lens, mq): (&'static [usize], Option<(usize, bool)>),
    dims: [usize; 4],
    (window, n_sink, logit): (u32, u32, bool),
) -> Case {
    let [hq, hkv, page, d] = dims;
    let queries = match mq {
        Some((n, causal)) => format!(" n_query={n} causal={causal}"),
        None => String::new(),
    };
    let name = format!(
        "{format:?} {layout:?} {form:?} page={page} lens={lens:?}{queries} hq={hq} hkv={hkv} d={d} window={window} sinks={n_sink}{}",
        if logit { " +sink_logit" } else { "" }
    );
    let op = op_for(if mq.is_some() { MQ } else { DECODE }, format);
    correctness(op, dt, name, move |ctx, rng| {
        let q_rows = mq.map(|(n, _)| n);
        let p = build((ctx, rng), (dt, layout, form), (lens, q_rows), dims, 3)?;
        let shape = p.k.shape().to_vec();
        let (kc, ks, kdq) = quantized_pool((ctx, rng), format, &p.kv, &shape)?;
        let (vc, vs, vdq) = quantized_pool((ctx, rng), format, &p.vv, &shape)?;
        let (sinks, sv) = random_tensor(ctx, rng, dt, &[hq], -1.0, 2.0)?;
        let opts = DecodeOptions {
            window,
            n_sink,
            sink_logits: logit.then_some(&sinks),
            ..DecodeOptions::default()
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
        let ws = p.workspace(ctx).map_err(err)?;
        match mq {
            Some((_, causal)) => {
                sdpa_multi_query_paged_quant(ctx, &p.q, &kv, &scales, &p.out, causal, &opts, &ws)
            }
            None => sdpa_decode_paged_quant(ctx, &p.q, &kv, &scales, &p.out, &opts, &ws),
        }
        .map_err(err)?;
        let want = paged_decode(&PagedProblem {
            q: &p.qv,
            k: &kdq,
            v: &vdq,
            layout,
            dims: [lens.len(), hq, hkv, page, d],
            seqs: p.seqs.clone(),
            scale: scale_of(d),
            window: window as usize,
            n_sink: n_sink as usize,
            sinks: logit.then_some(&sv[..]),
            n_query: mq.map_or(1, |(n, _)| n),
            causal: mq.is_some_and(|(_, c)| c),
        });
        Ok((p.out.to_f64_vec().map_err(err)?, want))
    })
}

/// A decode over one sequence of 3 tokens whose K pool's row 1 has scale NaN (a row that
/// held NaN when appended): every output is NaN, never a finite value.
pub(crate) fn nan_scale_case(dt: DType, format: KvFormat) -> Case {
    correctness(
        op_for(DECODE, format),
        dt,
        format!("{format:?} a NaN scale makes the output NaN"),
        move |ctx, rng| {
            let dims = [4, 2, 16, 64];
            let p = build(
                (ctx, rng),
                (dt, KvLayout::Nhd, Form::Blocks),
                (&[3], None),
                dims,
                1,
            )?;
            let shape = p.k.shape().to_vec();
            let (kc, _, _) = quantized_pool((ctx, rng), format, &p.kv, &shape)?;
            let (vc, vs, _) = quantized_pool((ctx, rng), format, &p.vv, &shape)?;
            let page = p.seqs[0].0[0];
            let sshape = format.scale_shape(kc.shape());
            // Scales a row: 1, or int4's groups.
            let groups: usize = sshape[3..].iter().product();
            let mut ksv = vec![0.01; sshape.iter().product()];
            for h in 0..2 {
                let row = (page * 16 + 1) * 2 + h;
                ksv[row * groups..(row + 1) * groups].fill(f64::NAN);
            }
            let (ks, _) = upload(ctx, F32, &ksv, &sshape)?;
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
            let ws = p.workspace(ctx).map_err(err)?;
            let o = DecodeOptions::default();
            sdpa_decode_paged_quant(ctx, &p.q, &kv, &scales, &p.out, &o, &ws).map_err(err)?;
            let got = p.out.to_f64_vec().map_err(err)?;
            Ok((nan_marked(&got), vec![-1.0e9; got.len()]))
        },
    )
}

pub(crate) fn append_cases() -> Vec<Case> {
    use KvLayout::{Hnd, Nhd};
    let mut v = Vec::new();
    for format in [KvFormat::Int8, KvFormat::E4m3] {
        for dt in FLOAT_DTYPES {
            v.push(append_case(dt, format, Nhd, [20, 3, 16, 2, 128], dt == F32));
            v.push(append_case(dt, format, Hnd, [11, 4, 5, 4, 64], dt != F32));
        }
        v.push(append_case(BF16, format, Nhd, [7, 9, 1, 1, 256], true));
        v.push(append_case(F16, format, Hnd, [5, 2, 16, 2, 36], false));
    }
    v.extend(append_rejections());
    v
}

const APPEND_GOOD: [Spec; 7] = [
    (F32, &[3, 2, 64]),
    (F32, &[3, 2, 64]),
    (I32, &[3]),
    (U8, &[4, 4, 2, 64]),
    (U8, &[4, 4, 2, 64]),
    (F32, &[4, 4, 2]),
    (F32, &[4, 4, 2]),
];

/// An append over zero tensors of `specs` (k, v, slot_mapping, k_cache, v_cache, k_scale,
/// v_scale) at `slots` (when given), which must be refused for `reason`, k_cache untouched.
fn append_rejection(
    what: &str,
    reason: &'static str,
    specs: [Spec; 7],
    slots: Option<&'static [i32]>,
) -> Case {
    append_rejection_as(KvFormat::Int8, what, reason, specs, slots)
}

/// [`append_rejection`] of an append in `format`.
pub(crate) fn append_rejection_as(
    format: KvFormat,
    what: &str,
    reason: &'static str,
    specs: [Spec; 7],
    slots: Option<&'static [i32]>,
) -> Case {
    rejection(op_for(APPEND, format), what, reason, move |ctx| {
        let [k, v, sm, kc, vc, ks, vs] = zeros_of(ctx, specs)?;
        let sm = match slots {
            Some(s) => ctx.tensor(s, &[s.len()]).map_err(err)?,
            None => sm,
        };
        let check = SlotCheck::new(ctx).map_err(err)?;
        let (c, untouched) = (ctx.clone(), kc.clone());
        Ok((
            untouched,
            Box::new(move || {
                let scales = KvScales {
                    k_scale: &ks,
                    v_scale: &vs,
                    format,
                };
                kv_quant_append(
                    &c,
                    &k,
                    &v,
                    &sm,
                    (&kc, &vc),
                    &scales,
                    KvLayout::Nhd,
                    None,
                    &check,
                )
            }),
        ))
    })
}

fn append_rejections() -> Vec<Case> {
    vec![
        append_rejection(
            "slot past the cache",
            "`slot_mapping` is bad at token 1: slot 16 must be −1 or one of the cache's 0..16 slots",
            APPEND_GOOD,
            Some(&[3, 16, -1]),
        ),
        append_rejection(
            "two tokens in one slot",
            "`slot_mapping` is bad at token 2: slot 5",
            APPEND_GOOD,
            Some(&[5, -1, 5]),
        ),
        append_rejection(
            "float cache",
            "`k_cache` must be u8",
            replaced(APPEND_GOOD, 3, (F32, &[4, 4, 2, 64])),
            None,
        ),
        append_rejection(
            "k_scale with head_dim",
            "`k_scale` must have shape [4, 4, 2]",
            replaced(APPEND_GOOD, 5, (F32, &[4, 4, 2, 64])),
            None,
        ),
        append_rejection(
            "v_scale not f32",
            "`v_scale` must be f32",
            replaced(APPEND_GOOD, 6, (F16, &[4, 4, 2])),
            None,
        ),
        append_rejection(
            "k not float",
            "`k` must be one of",
            replaced(APPEND_GOOD, 0, (U8, &[3, 2, 64])),
            None,
        ),
    ]
}

pub(crate) fn decode_cases() -> Vec<Case> {
    use Form::{Blocks, Csr};
    use KvLayout::{Hnd, Nhd};
    let mut v = Vec::new();
    for format in [KvFormat::Int8, KvFormat::E4m3] {
        for dt in FLOAT_DTYPES {
            v.push(decode_case(
                dt,
                format,
                (Nhd, Blocks),
                &[37, 1, 50],
                [8, 2, 16, 128],
                (0, 0, false),
            ));
            v.push(decode_case(
                dt,
                format,
                (Hnd, Csr),
                &[20, 0, 33],
                [4, 4, 1, 64],
                (0, 0, false),
            ));
        }
        v.push(decode_case(
            BF16,
            format,
            (Nhd, Csr),
            &[45],
            [4, 1, 16, 256],
            (0, 0, false),
        ));
        // f16 on CUDA cores, bf16 on fragments: window, sinks and the sink logit; pages
        // of 5 and a sequence long enough for several chunks.
        for dt in [F16, BF16] {
            v.push(decode_case(
                dt,
                format,
                (Hnd, Blocks),
                &[70, 9],
                [8, 2, 16, 64],
                (20, 3, true),
            ));
        }
        for dt in [F32, BF16] {
            v.push(decode_case(
                dt,
                format,
                (Nhd, Blocks),
                &[23, 600],
                [2, 2, 5, 128],
                (0, 0, false),
            ));
        }
        v.push(nan_scale_case(BF16, format));
    }
    v.extend(decode_rejections());
    v
}

/// `sdpa_multi_query_paged_quant`: speculative blocks of 2 to 8 queries per sequence,
/// causal and full, over both formats, layouts and table forms.
pub(crate) fn mq_cases() -> Vec<Case> {
    use Form::{Blocks, Csr};
    use KvLayout::{Hnd, Nhd};
    let mut v = Vec::new();
    for format in [KvFormat::Int8, KvFormat::E4m3] {
        for dt in FLOAT_DTYPES {
            v.push(query_case(
                dt,
                format,
                (Nhd, Blocks),
                (&[37, 4, 50], Some((4, true))),
                [8, 2, 16, 128],
                (0, 0, false),
            ));
        }
        v.push(query_case(
            BF16,
            format,
            (Hnd, Csr),
            (&[20, 0, 33], Some((2, true))),
            [4, 4, 1, 64],
            (0, 0, false),
        ));
        for dt in [F16, BF16] {
            v.push(query_case(
                dt,
                format,
                (Hnd, Blocks),
                (&[70, 9], Some((8, false))),
                [8, 2, 5, 64],
                (20, 3, true),
            ));
        }
    }
    v.extend(mq_rejections());
    v
}

/// A call over 1 sequence of 5 tokens (a 2-page block table) and zero tensors of `specs`
/// (q, k_cache, v_cache, k_scale, v_scale, out), refused for `reason` with out untouched:
/// a decode (q `[1, 4, 64]`, e4m3 pages) when `mq` is false, else a causal multi-query
/// call of its last 2 tokens (q `[1, 2, 4, 64]`, int8 pages).
fn quant_rejection(mq: bool, what: &str, reason: &'static str, specs: [Spec; 6]) -> Case {
    let format = if mq { KvFormat::Int8 } else { KvFormat::E4m3 };
    quant_rejection_as(mq, format, what, reason, specs)
}

/// [`quant_rejection`] over pages in `format`.
pub(crate) fn quant_rejection_as(
    mq: bool,
    format: KvFormat,
    what: &str,
    reason: &'static str,
    specs: [Spec; 6],
) -> Case {
    let op = op_for(if mq { MQ } else { DECODE }, format);
    rejection(op, what, reason, move |ctx| {
        let [q, kc, vc, ks, vs, out] = zeros_of(ctx, specs)?;
        let bt = ctx.tensor(&[0i32, 1], &[1, 2]).map_err(err)?;
        let sl = ctx.tensor(&[5i32], &[1]).map_err(err)?;
        let rows = if mq { 2 } else { 1 };
        let ws = PagedWorkspace::new(ctx, rows, 4, 64, 2, 8).map_err(err)?;
        let (c, untouched) = (ctx.clone(), out.clone());
        Ok((
            untouched,
            Box::new(move || {
                let kv = PagedKv {
                    k_cache: &kc,
                    v_cache: &vc,
                    layout: KvLayout::Nhd,
                    table: crate::attention::PageTable::Blocks {
                        block_table: &bt,
                        seq_lens: &sl,
                    },
                };
                let scales = KvScales {
                    k_scale: &ks,
                    v_scale: &vs,
                    format,
                };
                let o = DecodeOptions::default();
                if mq {
                    sdpa_multi_query_paged_quant(&c, &q, &kv, &scales, &out, true, &o, &ws)
                } else {
                    sdpa_decode_paged_quant(&c, &q, &kv, &scales, &out, &o, &ws)
                }
            }),
        ))
    })
}

const MQ_GOOD: [Spec; 6] = [
    (F16, &[1, 2, 4, 64]),
    (U8, &[4, 4, 2, 64]),
    (U8, &[4, 4, 2, 64]),
    (F32, &[4, 4, 2]),
    (F32, &[4, 4, 2]),
    (F16, &[1, 2, 4, 64]),
];

fn mq_rejections() -> Vec<Case> {
    vec![
        quant_rejection(
            true,
            "k_scale with head_dim",
            "`k_scale` must have shape [4, 4, 2]",
            replaced(MQ_GOOD, 3, (F32, &[4, 4, 2, 64])),
        ),
        quant_rejection(
            true,
            "f16 value cache",
            "`v_cache` must be u8",
            replaced(MQ_GOOD, 2, (F16, &[4, 4, 2, 64])),
        ),
    ]
}

const DECODE_GOOD: [Spec; 6] = [
    (BF16, &[1, 4, 64]),
    (U8, &[4, 4, 2, 64]),
    (U8, &[4, 4, 2, 64]),
    (F32, &[4, 4, 2]),
    (F32, &[4, 4, 2]),
    (BF16, &[1, 4, 64]),
];

fn decode_rejections() -> Vec<Case> {
    let table = [
        (
            "bf16 cache",
            "`k_cache` must be u8",
            replaced(DECODE_GOOD, 1, (BF16, &[4, 4, 2, 64])),
        ),
        (
            "k_scale of the wrong shape",
            "`k_scale` must have shape [4, 4, 2]",
            replaced(DECODE_GOOD, 3, (F32, &[4, 4])),
        ),
        (
            "v_scale not f32",
            "`v_scale` must be f32",
            replaced(DECODE_GOOD, 4, (BF16, &[4, 4, 2])),
        ),
        (
            "out dtype",
            "`out` must be bf16",
            replaced(DECODE_GOOD, 5, (F32, &[1, 4, 64])),
        ),
        (
            "q not float",
            "`q` must be one of",
            replaced(DECODE_GOOD, 0, (U8, &[1, 4, 64])),
        ),
        (
            "v_cache shape",
            "`v_cache` must have shape [4, 4, 2, 64]",
            replaced(DECODE_GOOD, 2, (U8, &[4, 4, 1, 64])),
        ),
    ];
    let mut v: Vec<Case> = table
        .into_iter()
        .map(|(what, reason, specs)| quant_rejection(false, what, reason, specs))
        .collect();
    v.push(rejection(
        DECODE,
        "page id past the pool",
        "`block_table`[0, 1] = 9 is not a page of the cache (0..4)",
        |ctx| {
            let [q, kc, vc, ks, vs, out] = zeros_of(ctx, DECODE_GOOD)?;
            let bt = ctx.tensor(&[0i32, 9], &[1, 2]).map_err(err)?;
            let sl = ctx.tensor(&[5i32], &[1]).map_err(err)?;
            let ws = PagedWorkspace::new(ctx, 1, 4, 64, 2, 8).map_err(err)?;
            let (c, untouched) = (ctx.clone(), out.clone());
            Ok((
                untouched,
                Box::new(move || {
                    let kv = PagedKv {
                        k_cache: &kc,
                        v_cache: &vc,
                        layout: KvLayout::Nhd,
                        table: crate::attention::PageTable::Blocks {
                            block_table: &bt,
                            seq_lens: &sl,
                        },
                    };
                    let scales = KvScales {
                        k_scale: &ks,
                        v_scale: &vs,
                        format: KvFormat::Int8,
                    };
                    let o = DecodeOptions::default();
                    sdpa_decode_paged_quant(&c, &q, &kv, &scales, &out, &o, &ws)
                }),
            ))
        },
    ));
    v
}

/// The format a declared call names: int4 where it takes a group, else its `kv_format`.
fn declared_format(r: &RefArgs) -> Result<KvFormat, OpError> {
    match r.params.opt_u32("group")? {
        Some(group) => Ok(KvFormat::Int4 { group }),
        None => KvFormat::parse(DECODE, r.params.choice("kv_format")?),
    }
}

/// The declared append's reference: the pools and scales with the rows written.
pub(crate) fn append_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let ks = r.shape("k_cache")?;
    let hnd = r.params.choice("layout")? == "hnd";
    let (page, hkv) = if hnd { (ks[2], ks[1]) } else { (ks[1], ks[2]) };
    let layout = if hnd { KvLayout::Hnd } else { KvLayout::Nhd };
    let pools = append_reference_pools(
        declared_format(r)?,
        [
            r.data("k_cache")?,
            r.data("k_scale")?,
            r.data("v_cache")?,
            r.data("v_scale")?,
        ],
        (r.data("k")?, r.data("v")?, r.data("slot_mapping")?),
        layout,
        [page, hkv, r.shape("k")?[2]],
    );
    Ok(pools.into())
}

/// The declared decode's reference: the pools dequantized, then paged decode in f64.
pub(crate) fn decode_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let format = declared_format(r)?;
    let qs = r.shape("q")?;
    let ks = r.shape("k_cache")?;
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
    let k = dequantize(format, r.data("k_cache")?, r.data("k_scale")?);
    let v = dequantize(format, r.data("v_cache")?, r.data("v_scale")?);
    let p = r.params;
    // Multi-query: q [batch, n_query, heads, d].
    let (n_query, causal) = match qs.len() {
        4 => (qs[1], p.bool("causal")?),
        _ => (1, false),
    };
    let (hq, d) = (qs[qs.len() - 2], qs[qs.len() - 1]);
    Ok(vec![paged_decode(&PagedProblem {
        q: r.data("q")?,
        k: &k,
        v: &v,
        layout: if hnd { KvLayout::Hnd } else { KvLayout::Nhd },
        dims: [qs[0], hq, hkv, page, d],
        seqs,
        scale: p.opt_f64("scale")?.unwrap_or(1.0 / (d as f64).sqrt()),
        window: p.opt_uint("window")?.unwrap_or(0) as usize,
        n_sink: p.opt_uint("n_sink")?.unwrap_or(0) as usize,
        sinks: r.optional("sink_logits"),
        n_query,
        causal,
    })])
}

pub(crate) fn append_uses() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for d in [64, 128, 256] {
            for format in [KvFormat::Int8, KvFormat::E4m3] {
                let group = format.group(d);
                for hnd in [0, 1] {
                    // Unrotated, and K rotated NeoX over all of head_dim.
                    for (rot_dim, neox) in [(0, 0), (d, 1)] {
                        let c = [d, format.code(), group, hnd, rot_dim, neox].map(Literal::U32);
                        v.push(KernelUse {
                            def: &kv_quant_append_kernel::DEF,
                            spec: Specialization::new(vec![dt], c.to_vec()),
                        });
                    }
                }
            }
        }
    }
    v.extend(super::kv_quant_int4::append_uses());
    v
}

/// The quantized partial kernel for every float q, decode head_dim, GQA of 1/4/8, page
/// kind and format; the table kernels; the combine.
pub(crate) fn decode_uses() -> Vec<KernelUse> {
    let mut v: Vec<KernelUse> = Vec::new();
    for paged in [PAGED_POW2, PAGED_ANY] {
        for dt in FLOAT_DTYPES {
            for d in DECODE_HEAD_DIMS {
                for gqa in [1, 4, 8] {
                    for format in [KvFormat::Int8, KvFormat::E4m3] {
                        let g = geometry(U8, d, gqa);
                        let c = [
                            d,
                            g.epl,
                            g.hpt,
                            g.sgs,
                            g.lg,
                            g.unroll,
                            paged,
                            format.code(),
                            d,
                        ];
                        let spec = Specialization::new(vec![dt], c.map(Literal::U32).to_vec());
                        if !v.iter().any(|u| u.spec == spec) {
                            v.push(KernelUse {
                                def: &sdpa_decode_quant_partial_kernel::DEF,
                                spec,
                            });
                        }
                    }
                }
            }
        }
    }
    // bf16 queries take the fragment kernel at its head dims, in the blocks of a small
    // (Metal) and a large (CUDA) threadgroup memory.
    for paged in [PAGED_POW2, PAGED_ANY] {
        for d in MMA_HEAD_DIMS {
            for format in [KvFormat::Int8, KvFormat::E4m3] {
                for direct in [0, 1] {
                    let mut blocks = vec![
                        mma_block_keys(d, true, 32 * 1024),
                        mma_block_keys(d, true, 227 * 1024),
                    ];
                    blocks.dedup();
                    for bk in blocks {
                        let c = [d, 1, 16, direct, paged, 1 + format.code(), bk];
                        v.push(mma_kernel_use(BF16, U8, &c));
                    }
                }
            }
        }
    }
    v.extend(table_uses());
    v.extend(combine_uses());
    v
}

/// The paged table kernels, for both table forms.
pub(crate) fn table_uses() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for csr in [0, 1] {
        for def in [&paged_lengths_kernel::DEF, &paged_pages_kernel::DEF] {
            v.push(KernelUse {
                def,
                spec: Specialization::new(vec![], vec![Literal::U32(csr)]),
            });
        }
    }
    v
}

/// Paged decode of `b` sequences of `n` keys (`hq`/`hkv` heads of `d`, NHD pages of
/// `page`) over a cache in `format`, or in q's dtype when `None`: the pair the quantized
/// cache is measured by.
fn quant_bench(
    dt: DType,
    format: Option<KvFormat>,
    b: usize,
    [hq, hkv, n, d]: [usize; 4],
    page: usize,
) -> BenchCase {
    let (row_bytes, kernel) = match format {
        None => (d * dt.size_bytes(), "sdpa_decode_mma_kernel"),
        Some(KvFormat::Int4 { .. }) => (d / 2, "sdpa_decode_quant_partial_kernel"),
        Some(_) if dt == BF16 => (d, "sdpa_decode_mma_kernel"),
        Some(_) => (d, "sdpa_decode_quant_partial_kernel"),
    };
    // Scales a row: one, or int4's groups.
    let scales_a_row = format.map_or(0, |f| d / f.group(d as u32) as usize);
    let scale_bytes = 2 * b * hkv * n * 4 * scales_a_row;
    let cache = match format {
        None => format!(" kv={dt} (sdpa_decode_paged)"),
        Some(KvFormat::Int4 { group }) => format!(" kv=Int4 group={group}"),
        Some(f) => format!(" kv={f:?}"),
    };
    BenchCase {
        op: DECODE,
        kernel,
        dtype: dt,
        shape: format!("B={b} hq={hq} hkv={hkv} len={n} d={d} page={page}{cache}"),
        bytes: (2 * b * hkv * n * row_bytes
            + scale_bytes
            + 2 * b * hq * d * dt.size_bytes()
            + 4 * b * n.div_ceil(page)) as u64,
        flops: (4 * b * hq * n * d) as u64,
        quick: false,
        prepare: Box::new(move |ctx, rng| {
            let lens = vec![n; b];
            let mode = (dt, KvLayout::Nhd, Form::Blocks);
            let p = build((ctx, rng), mode, (&lens, None), [hq, hkv, page, d], 1)?;
            let ws = p.workspace(ctx).map_err(err)?;
            let output = p.out.clone();
            let c = ctx.clone();
            let dims = [b, hq, hkv, page, d];
            let Some(format) = format else {
                let reference = paged_decode(&PagedProblem {
                    q: &p.qv,
                    k: &p.kv,
                    v: &p.vv,
                    layout: KvLayout::Nhd,
                    dims,
                    seqs: p.seqs.clone(),
                    scale: scale_of(d),
                    window: 0,
                    n_sink: 0,
                    sinks: None,
                    n_query: 1,
                    causal: false,
                });
                return Ok(PreparedBench {
                    launch: Box::new(move || {
                        let o = DecodeOptions::default();
                        sdpa_decode_paged(&c, &p.q, &p.cache(), &p.out, &o, &ws).map_err(err)
                    }),
                    output,
                    reference,
                });
            };
            let shape = p.k.shape().to_vec();
            let (kc, ks, kdq) = quantized_pool((ctx, rng), format, &p.kv, &shape)?;
            let (vc, vs, vdq) = quantized_pool((ctx, rng), format, &p.vv, &shape)?;
            let reference = paged_decode(&PagedProblem {
                q: &p.qv,
                k: &kdq,
                v: &vdq,
                layout: KvLayout::Nhd,
                dims,
                seqs: p.seqs.clone(),
                scale: scale_of(d),
                window: 0,
                n_sink: 0,
                sinks: None,
                n_query: 1,
                causal: false,
            });
            Ok(PreparedBench {
                launch: Box::new(move || {
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
                    let o = DecodeOptions::default();
                    sdpa_decode_paged_quant(&c, &p.q, &kv, &scales, &p.out, &o, &ws).map_err(err)
                }),
                output,
                reference,
            })
        }),
    }
}

/// bf16 and quantized paged decode side by side: 32k keys, 32/8 heads of 128, pages of
/// 16, batch 1, 4 and 8.
pub(crate) fn decode_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for b in [1, 4, 8] {
        let int4 = |group| Some(KvFormat::Int4 { group });
        for format in [
            None,
            Some(KvFormat::Int8),
            Some(KvFormat::E4m3),
            int4(32),
            int4(64),
        ] {
            v.push(quant_bench(BF16, format, b, [32, 8, 32768, 128], 16));
        }
    }
    v
}
