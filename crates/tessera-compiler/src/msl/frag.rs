//! Matrix fragments in MSL: a 16×16 fragment is a 2×2 array of `simdgroup_matrix<T, 8, 8>`
//! (block `(i, j)` at index `2i + j`); loads and stores move each 8×8 block with
//! `simdgroup_load` / `simdgroup_store` (the transposed load with Metal's own flag), and a
//! multiply-accumulate is eight `simdgroup_multiply_accumulate`. A row vector is a
//! `tsr_rows` and the row ops are helpers on the lane's `thread_elements()` (see
//! [`Helper::SgRows`]); an accumulator becomes an A operand block by block
//! (`tsr_sg_convert`, the layout unchanged).

use super::dialect::Msl;
use super::helpers::Helper;
use super::source::MslBuiltin;
use super::types::scalar;
use crate::c_family::{Emitter, Fragments, Mem, TileForm, TileSource};
use tessera_ir::{FragRole, RowMap, RowReduce, RowsOp, Scalar};

impl Msl {
    /// Declares every fragment at the top of the body.
    pub(super) fn frag_decls(e: &mut Emitter<Msl>) {
        for (f, name) in e.k.body.frags.clone().iter().zip(e.names.frags.clone()) {
            if f.role == FragRole::Rows {
                e.d.helpers.insert(Helper::SgRows);
                e.line(&format!("tsr_rows {name};"));
                continue;
            }
            let elem = scalar(f.elem);
            e.line(&format!("simdgroup_matrix<{elem}, 8, 8> {name}[4];"));
        }
    }
}

impl Fragments for Msl {
    fn frag_row_reduce(e: &mut Emitter<Msl>, op: RowReduce, rows: usize, f: usize) {
        let (r, n) = (e.names.frags[rows].clone(), e.names.frags[f].clone());
        e.d.helpers.insert(Helper::SgRows);
        let sum = op == RowReduce::Sum;
        e.line(&format!("tsr_row_reduce({r}, {n}, {sum});"));
    }

    fn frag_row_map(e: &mut Emitter<Msl>, op: RowMap, f: usize, rows: usize) {
        let (n, r) = (e.names.frags[f].clone(), e.names.frags[rows].clone());
        e.d.helpers.insert(Helper::SgRows);
        let exp2_sub = op == RowMap::Exp2Sub;
        e.line(&format!("tsr_row_map({n}, {r}, {exp2_sub});"));
    }

    fn frag_mask(e: &mut Emitter<Msl>, f: usize, diag: &str, cap: &str, value: &str) {
        let n = e.names.frags[f].clone();
        e.d.helpers.insert(Helper::SgRows);
        let lane = e.d.builtin(MslBuiltin::ThreadIndexInSimdgroup);
        e.line(&format!(
            "tsr_frag_mask({n}, {diag}, {cap}, {value}, ushort({lane}));"
        ));
    }

    fn frag_rows(e: &mut Emitter<Msl>, op: RowsOp, d: usize, a: usize, b: usize) {
        let fr = &e.names.frags;
        let (dn, an, bn) = (fr[d].clone(), fr[a].clone(), fr[b].clone());
        let v = match op {
            RowsOp::Add => "tsr_a + tsr_b",
            RowsOp::Mul => "tsr_a * tsr_b",
            RowsOp::Div => "tsr_a / tsr_b",
            RowsOp::Exp2Diff => "(tsr_a == tsr_b ? 1.0f : exp2(tsr_a - tsr_b))",
        };
        e.line(&format!(
            "for (int tsr_i = 0; tsr_i < TSR_ROWS; ++tsr_i) {{ float tsr_a = {an}.v[tsr_i], \
             tsr_b = {bn}.v[tsr_i]; {dn}.v[tsr_i] = {v}; }}"
        ));
    }

    fn frag_rows_raise(e: &mut Emitter<Msl>, d: usize, a: usize, b: usize, margin: &str) {
        let fr = &e.names.frags;
        let (dn, an, bn) = (fr[d].clone(), fr[a].clone(), fr[b].clone());
        e.line(&format!(
            "for (int tsr_i = 0; tsr_i < TSR_ROWS; ++tsr_i) {{ float tsr_a = {an}.v[tsr_i], \
             tsr_b = {bn}.v[tsr_i]; {dn}.v[tsr_i] = tsr_b > tsr_a + ({margin}) ? tsr_b : tsr_a; }}"
        ));
    }

    fn frag_add(e: &mut Emitter<Msl>, d: usize, a: usize, b: usize) {
        let fr = &e.names.frags;
        let (dn, an, bn) = (fr[d].clone(), fr[a].clone(), fr[b].clone());
        e.d.helpers.insert(Helper::SgRows);
        e.line(&format!("tsr_frag_add({dn}, {an}, {bn});"));
    }

    fn frag_convert(e: &mut Emitter<Msl>, dst: usize, src: usize) {
        let (dn, sn) = (e.names.frags[dst].clone(), e.names.frags[src].clone());
        let t = scalar(e.k.body.frags[dst].elem);
        e.d.helpers.insert(Helper::SgConvert);
        e.line(&format!(
            "for (uint tsr_b = 0; tsr_b < 4; ++tsr_b) {dn}[tsr_b] = tsr_sg_convert<{t}>({sn}[tsr_b]);"
        ));
    }

    fn frag_fill(e: &mut Emitter<Msl>, f: usize, v: &str) {
        let n = &e.names.frags[f];
        if e.k.body.frags[f].role == FragRole::Rows {
            let text =
                format!("for (int tsr_i = 0; tsr_i < TSR_ROWS; ++tsr_i) {n}.v[tsr_i] = {v};");
            e.line(&text);
            return;
        }
        let elem = scalar(e.k.body.frags[f].elem);
        let text = format!(
            "for (uint tsr_b = 0; tsr_b < 4; ++tsr_b) {n}[tsr_b] = \
             make_filled_simdgroup_matrix<{elem}, 8, 8>({elem}({v}));"
        );
        e.line(&text);
    }

    fn frag_load(e: &mut Emitter<Msl>, f: usize, m: &Mem, i: &str, s: &str, transpose: bool) {
        let n = e.names.frags[f].clone();
        let name = &m.name;
        // An f32 accumulator from f16/bf16 memory: each block loads as the memory's type
        // and widens.
        let frag_elem = e.k.body.frags[f].elem;
        let widen = (m.elem != frag_elem).then(|| (scalar(m.elem), scalar(frag_elem)));
        if widen.is_some() {
            e.d.helpers.insert(Helper::SgConvert);
        }
        for bi in 0..2 {
            for bj in 0..2 {
                let (r0, c0, b) = (8 * bi, 8 * bj, 2 * bi + bj);
                let at = if transpose {
                    format!("{i} + {c0}u * {s} + {r0}u], ulong({s}), ulong2(0, 0), true")
                } else {
                    format!("{i} + {r0}u * {s} + {c0}u], ulong({s})")
                };
                e.line(&match widen {
                    Some((t, to)) => format!(
                        "{{ simdgroup_matrix<{t}, 8, 8> tsr_w; simdgroup_load(tsr_w, &{name}[{at}); \
                         {n}[{b}] = tsr_sg_convert<{to}>(tsr_w); }}"
                    ),
                    None => format!("simdgroup_load({n}[{b}], &{name}[{at});"),
                });
            }
        }
    }

    fn frag_store(e: &mut Emitter<Msl>, f: usize, m: &Mem, i: &str, s: &str) {
        let n = e.names.frags[f].clone();
        // Into f16/bf16 memory the f32 accumulator is rounded block by block.
        let round = matches!(m.elem, Scalar::F16 | Scalar::BF16).then(|| scalar(m.elem));
        if round.is_some() {
            e.d.helpers.insert(Helper::SgConvert);
        }
        for bi in 0..2 {
            for bj in 0..2 {
                let (r0, c0) = (8 * bi, 8 * bj);
                let b = 2 * bi + bj;
                let block = match round {
                    Some(t) => format!("tsr_sg_convert<{t}>({n}[{b}])"),
                    None => format!("{n}[{b}]"),
                };
                e.line(&format!(
                    "simdgroup_store({block}, &{}[{i} + {r0}u * {s} + {c0}u], ulong({s}));",
                    m.name
                ));
            }
        }
    }

    fn frag_scale(e: &mut Emitter<Msl>, f: usize, v: &str) {
        let n = e.names.frags[f].clone();
        e.d.helpers.insert(Helper::SgScale);
        e.line(&format!(
            "for (uint tsr_b = 0; tsr_b < 4; ++tsr_b) {n}[tsr_b] = tsr_sg_scale({n}[tsr_b], {v});"
        ));
    }

    fn frag_mma_wait(_e: &mut Emitter<Msl>, _accs: &[usize], _pending: u32) {}

    fn frag_mma_tiles(
        e: &mut Emitter<Msl>,
        accs: &[usize],
        a: TileSource<'_>,
        b: (&Mem, &str),
        form: TileForm,
    ) {
        // No warpgroup MMA on Metal: each simdgroup gathers its operands from the swizzled
        // tiles 16 columns of K at a time (A from its own fragments when it is in
        // registers) and multiplies on simdgroup matrices, at once (so its wait is nothing).
        e.d.helpers.insert(Helper::SgSwizzledLoad);
        let lane = e.d.builtin(MslBuiltin::ThreadIndexInSimdgroup);
        let sid = e.d.builtin(MslBuiltin::SimdgroupIndexInThreadgroup);
        let (mb, bi) = b;
        let t = scalar(mb.elem);
        let names: Vec<String> = accs.iter().map(|&f| e.names.frags[f].clone()).collect();
        // Mode 1: B rows are output columns ([N, K]); mode 2: B is [K, N] in 64-column blocks.
        let mode_b = if form.b_kn { 2 } else { 1 };
        // A tile is gathered in a loop over K; operands in registers unroll it, one
        // fragment per 16 columns.
        let steps: Vec<(String, String)> = match a {
            TileSource::Tile(..) => vec![("tsr_k".into(), "tsr_ta".into())],
            TileSource::Frags(fa) => (0..4)
                .map(|i| (format!("{}u", 16 * i), e.names.frags[fa[i]].clone()))
                .collect(),
        };
        for (k, an) in steps {
            if let TileSource::Tile(ma, ai) = a {
                e.line("for (uint tsr_k = 0; tsr_k < 64u; tsr_k += 16u) {");
                e.depth += 1;
                e.line(&format!("simdgroup_matrix<{t}, 8, 8> tsr_ta[4];"));
                for blk in 0..4 {
                    let (bi_, bj) = (blk / 2, blk % 2);
                    e.line(&format!(
                        "tsr_sg_load_swz<{t}>(tsr_ta[{blk}], &{}[{ai}], uint({sid}) * 16u + {}u, tsr_k + {}u, 0u, ushort({lane}));",
                        ma.name,
                        8 * bi_,
                        8 * bj
                    ));
                }
            } else {
                e.line("{");
                e.depth += 1;
            }
            e.line(&format!("simdgroup_matrix<{t}, 8, 8> tsr_tb[4];"));
            for (j, dn) in names.iter().enumerate() {
                for blk in 0..4 {
                    let (bi_, bj) = (blk / 2, blk % 2);
                    e.line(&format!(
                        "tsr_sg_load_swz<{t}>(tsr_tb[{blk}], &{}[{bi}], {k} + {}u, {}u, {mode_b}u, ushort({lane}));",
                        mb.name,
                        8 * bi_,
                        16 * j + 8 * bj
                    ));
                }
                mma_blocks(e, dn, &an, "tsr_tb", dn);
            }
            e.depth -= 1;
            e.line("}");
        }
    }

    fn frag_mma(e: &mut Emitter<Msl>, d: usize, a: usize, b: usize, c: usize) {
        let fr = &e.names.frags;
        let (dn, an, bn, cn) = (fr[d].clone(), fr[a].clone(), fr[b].clone(), fr[c].clone());
        mma_blocks(e, &dn, &an, &bn, &cn);
    }
}

/// `d = a·b + c` on 16×16 fragments held as 2×2 arrays of 8×8 simdgroup matrices.
fn mma_blocks(e: &mut Emitter<Msl>, dn: &str, an: &str, bn: &str, cn: &str) {
    for i in 0..2 {
        for j in 0..2 {
            let o = 2 * i + j;
            e.line(&format!(
                "simdgroup_multiply_accumulate({dn}[{o}], {an}[{}], {bn}[{j}], {cn}[{o}]);",
                2 * i
            ));
            e.line(&format!(
                "simdgroup_multiply_accumulate({dn}[{o}], {an}[{}], {bn}[{}], {dn}[{o}]);",
                2 * i + 1,
                2 + j
            ));
        }
    }
}
