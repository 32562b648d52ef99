//! Cases of the int4 quantized cache (`kv_quant_int4`'s layout): `kv_quant_append`
//! against the host quantizer (f32 group amax, f32 `x / scale`, ties to even, saturating at
//! ±7, codes packed low nibble first; zero, NaN and inf rows); decode and multi-query
//! attention over random packed codes and group scales against f64 attention over the
//! codes dequantized from their definition; groups of 32, 64 and head_dim, NHD and HND,
//! pages of 1, 5 and 16, GQA, head dims 64/128/256, window, sinks and sink logit, NaN
//! scales. A rejection per int4 invariant: head_dim outside the int4 dims, a group that is
//! too small or does not divide head_dim, pools of the wrong width, scales without their
//! groups.

use super::kv_quant::{
    append_case, append_rejection_as, decode_case, nan_scale_case, quant_rejection_as, query_case,
};
use super::sdpa_decode_paged::Form;
use super::*;
use crate::attention::kv_quant::{kv_quant_append_kernel, KvFormat};
use crate::attention::kv_quant_decode::sdpa_decode_quant_partial_kernel;
use crate::attention::kv_quant_int4::INT4_HEAD_DIMS;
use crate::attention::paged::KvLayout;
use crate::attention::paged_rows::{PAGED_ANY, PAGED_POW2};
use tessera_ir::{Literal, Specialization};
use DType::{I32, U8};

const G32: KvFormat = KvFormat::Int4 { group: 32 };
const G64: KvFormat = KvFormat::Int4 { group: 64 };

/// Int4 appends: every dtype, both layouts, groups of 32, 64 and the whole row, zero, NaN
/// and inf rows; then the rejections.
pub(crate) fn append_cases() -> Vec<Case> {
    use KvLayout::{Hnd, Nhd};
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(append_case(dt, G32, Nhd, [20, 3, 16, 2, 128], dt == F32));
        v.push(append_case(dt, G64, Hnd, [11, 4, 5, 4, 64], dt != F32));
    }
    let row = KvFormat::Int4 { group: 256 };
    v.push(append_case(BF16, row, Nhd, [7, 9, 1, 1, 256], true));
    v.push(append_case(F16, G32, Hnd, [5, 2, 16, 2, 512], true));
    v.extend(append_rejections());
    v
}

/// A valid int4 append (group 32): k, v, slot_mapping, k_cache, v_cache, k_scale, v_scale.
const APPEND_GOOD: [Spec; 7] = [
    (F32, &[3, 2, 64]),
    (F32, &[3, 2, 64]),
    (I32, &[3]),
    (U8, &[4, 4, 2, 32]),
    (U8, &[4, 4, 2, 32]),
    (F32, &[4, 4, 2, 2]),
    (F32, &[4, 4, 2, 2]),
];

fn append_rejections() -> Vec<Case> {
    vec![
        append_rejection_as(
            G32,
            "pools a byte an element",
            "an int4 cache row is head_dim / 2 = 32 bytes (two codes a byte), but `k_cache`'s last dim is 64",
            [
                (F32, &[3, 2, 64]),
                (F32, &[3, 2, 64]),
                (I32, &[3]),
                (U8, &[4, 4, 2, 64]),
                (U8, &[4, 4, 2, 64]),
                (F32, &[4, 4, 2, 4]),
                (F32, &[4, 4, 2, 4]),
            ],
            None,
        ),
        append_rejection_as(
            G32,
            "k_scale without its groups",
            "`k_scale` must have shape [4, 4, 2, 2]",
            replaced(APPEND_GOOD, 5, (F32, &[4, 4, 2])),
            None,
        ),
        append_rejection_as(
            KvFormat::Int4 { group: 16 },
            "group of 16",
            "the int4 group must be a power of two of at least 32 that divides head_dim 64, got 16",
            APPEND_GOOD,
            None,
        ),
        append_rejection_as(
            KvFormat::Int4 { group: 128 },
            "group past head_dim",
            "the int4 group must be a power of two of at least 32 that divides head_dim 64, got 128",
            APPEND_GOOD,
            None,
        ),
        append_rejection_as(
            G32,
            "head_dim 96",
            "`k_cache`'s last dim 48 makes head_dim 96, expected one of [64, 128, 256, 512]",
            [
                (F32, &[3, 2, 96]),
                (F32, &[3, 2, 96]),
                (I32, &[3]),
                (U8, &[4, 4, 2, 48]),
                (U8, &[4, 4, 2, 48]),
                (F32, &[4, 4, 2, 3]),
                (F32, &[4, 4, 2, 3]),
            ],
            None,
        ),
        append_rejection_as(
            G32,
            "slot past the cache",
            "`slot_mapping` is bad at token 1: slot 16 must be −1 or one of the cache's 0..16 slots",
            APPEND_GOOD,
            Some(&[3, 16, -1]),
        ),
    ]
}

/// Int4 decode: every q dtype over groups of 32 and 64, head_dim 256 and 512, GQA of 1,
/// 4 and 8, window,
/// sinks and sink logit over pages of 16, a group of the whole row over pages of 5 and a
/// long sequence (several chunks), a NaN scale; then the rejections.
pub(crate) fn decode_cases() -> Vec<Case> {
    use Form::{Blocks, Csr};
    use KvLayout::{Hnd, Nhd};
    let none = (0, 0, false);
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        let lens = &[37, 1, 50];
        v.push(decode_case(
            dt,
            G32,
            (Nhd, Blocks),
            lens,
            [8, 2, 16, 128],
            none,
        ));
        let lens = &[20, 0, 33];
        v.push(decode_case(dt, G64, (Hnd, Csr), lens, [4, 4, 1, 64], none));
    }
    v.push(decode_case(
        BF16,
        G32,
        (Nhd, Csr),
        &[45],
        [4, 1, 16, 256],
        none,
    ));
    for dt in [F16, BF16] {
        let dims = [8, 2, 16, 64];
        v.push(decode_case(
            dt,
            G32,
            (Hnd, Blocks),
            &[70, 9],
            dims,
            (20, 3, true),
        ));
    }
    let row = KvFormat::Int4 { group: 128 };
    v.push(decode_case(
        F32,
        row,
        (Nhd, Blocks),
        &[23, 600],
        [2, 2, 5, 128],
        none,
    ));
    // head_dim 512 (32 lanes a row), and a GQA group of 8.
    let lens = &[19, 40];
    v.push(decode_case(
        F16,
        G64,
        (Nhd, Blocks),
        lens,
        [4, 2, 16, 512],
        none,
    ));
    let lens = &[31, 66];
    v.push(decode_case(
        BF16,
        G64,
        (Hnd, Csr),
        lens,
        [8, 1, 16, 128],
        none,
    ));
    v.push(nan_scale_case(BF16, G32));
    v.extend(decode_rejections());
    v
}

/// Int4 multi-query: causal blocks of 4 over groups of 32, of 2 over HND pages of 1, and
/// full blocks of 8 with window, sinks and sink logit over pages of 5.
pub(crate) fn mq_cases() -> Vec<Case> {
    use Form::{Blocks, Csr};
    use KvLayout::{Hnd, Nhd};
    let none = (0, 0, false);
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        let rows = (&[37, 4, 50][..], Some((4, true)));
        v.push(query_case(
            dt,
            G32,
            (Nhd, Blocks),
            rows,
            [8, 2, 16, 128],
            none,
        ));
    }
    let rows = (&[20, 0, 33][..], Some((2, true)));
    v.push(query_case(BF16, G64, (Hnd, Csr), rows, [4, 4, 1, 64], none));
    let rows = (&[70, 9][..], Some((8, false)));
    v.push(query_case(
        F16,
        G32,
        (Hnd, Blocks),
        rows,
        [8, 2, 5, 64],
        (20, 3, true),
    ));
    v.push(quant_rejection_as(
        true,
        G32,
        "k_scale without its groups",
        "`k_scale` must have shape [4, 4, 2, 2]",
        [
            (F16, &[1, 2, 4, 64]),
            (U8, &[4, 4, 2, 32]),
            (U8, &[4, 4, 2, 32]),
            (F32, &[4, 4, 2]),
            (F32, &[4, 4, 2, 2]),
            (F16, &[1, 2, 4, 64]),
        ],
    ));
    v
}

/// A valid int4 decode (group 32): q, k_cache, v_cache, k_scale, v_scale, out.
const DECODE_GOOD: [Spec; 6] = [
    (BF16, &[1, 4, 64]),
    (U8, &[4, 4, 2, 32]),
    (U8, &[4, 4, 2, 32]),
    (F32, &[4, 4, 2, 2]),
    (F32, &[4, 4, 2, 2]),
    (BF16, &[1, 4, 64]),
];

fn decode_rejections() -> Vec<Case> {
    let wide = replaced(
        replaced(
            replaced(
                replaced(DECODE_GOOD, 1, (U8, &[4, 4, 2, 64])),
                2,
                (U8, &[4, 4, 2, 64]),
            ),
            3,
            (F32, &[4, 4, 2, 4]),
        ),
        4,
        (F32, &[4, 4, 2, 4]),
    );
    let table: [(KvFormat, &str, &'static str, [Spec; 6]); 5] = [
        (
            G32,
            "pools a byte an element",
            "k_cache's last dim (bytes a row) is 64 but q says 32",
            wide,
        ),
        (
            G64,
            "scales of another group",
            "`k_scale` must have shape [4, 4, 2, 1]",
            DECODE_GOOD,
        ),
        (
            KvFormat::Int4 { group: 128 },
            "group past head_dim",
            "the int4 group must be a power of two of at least 32 that divides head_dim 64, got 128",
            DECODE_GOOD,
        ),
        (
            KvFormat::Int4 { group: 48 },
            "group not a power of two",
            "the int4 group must be a power of two of at least 32 that divides head_dim 64, got 48",
            DECODE_GOOD,
        ),
        (
            G32,
            "head_dim 96",
            "`k_cache`'s last dim 48 makes head_dim 96, expected one of [64, 128, 256, 512]",
            [
                (BF16, &[1, 4, 96]),
                (U8, &[4, 4, 2, 48]),
                (U8, &[4, 4, 2, 48]),
                (F32, &[4, 4, 2, 3]),
                (F32, &[4, 4, 2, 3]),
                (BF16, &[1, 4, 96]),
            ],
        ),
    ];
    table
        .into_iter()
        .map(|(format, what, reason, specs)| quant_rejection_as(false, format, what, reason, specs))
        .collect()
}

/// The int4 partial kernel for every float q, int4 head_dim, GQA of 1/4/8, page kind and
/// group of 32, 64 and the row.
pub(crate) fn decode_uses() -> Vec<KernelUse> {
    let mut v: Vec<KernelUse> = Vec::new();
    for paged in [PAGED_POW2, PAGED_ANY] {
        for dt in FLOAT_DTYPES {
            for d in INT4_HEAD_DIMS.map(|d| d as u32) {
                for gqa in [1, 4, 8] {
                    for group in [32, 64, d] {
                        let g = geometry(U8, d, gqa);
                        let format = KvFormat::Int4 { group };
                        let c = [
                            d,
                            g.epl,
                            g.hpt,
                            g.sgs,
                            g.lg,
                            g.unroll,
                            paged,
                            format.code(),
                            group,
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
    v
}

/// The int4 append kernel for every float dtype, int4 head_dim (64 to 256), group of 32
/// and 64, layout, unrotated and K rotated NeoX over all of head_dim.
pub(crate) fn append_uses() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for d in [64, 128, 256] {
            for group in [32, 64] {
                let code = KvFormat::Int4 { group }.code();
                for hnd in [0, 1] {
                    for (rot_dim, neox) in [(0, 0), (d, 1)] {
                        let c = [d, code, group, hnd, rot_dim, neox].map(Literal::U32);
                        v.push(KernelUse {
                            def: &kv_quant_append_kernel::DEF,
                            spec: Specialization::new(vec![dt], c.to_vec()),
                        });
                    }
                }
            }
        }
    }
    v
}

/// What the declared int4 decode and multi-query calls launch: the int4 partial kernel,
/// the table kernels, the combine.
pub(crate) fn declared_uses() -> Vec<KernelUse> {
    let mut v = decode_uses();
    v.extend(super::kv_quant::table_uses());
    v.extend(combine_uses());
    v
}
