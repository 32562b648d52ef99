//! Matrix fragments in CUDA C: per-thread registers in the layout of PTX
//! `mma.sync.aligned.m16n8k16` (lane `l`, group `g = l / 4`, thread-in-group `t = l % 4`).
//! A 16×16 operand A is four packed 16-bit pairs (rows `g`, `g + 8`; columns `2t`, `2t + 8`),
//! B is two 16×8 halves of two pairs each (rows `2t`, `2t + 8`; column `g`), an
//! accumulator two 16×8 halves of four f32. A multiply-accumulate is two `mma.sync`
//! instructions, one per half of B and D. A row vector is two f32 per lane, rows `g` and
//! `g + 8`, which the four lanes of a group share: a row op reduces an accumulator's row
//! over its lane's four elements and the group's lanes (two butterflies). The accumulator
//! layout of one 16×8 half is the A layout of one 16×8 column half of K, so an
//! accumulator becomes an A operand in registers, pair by pair.
//! An A or B operand in threadgroup memory is
//! loaded with one `ldmatrix.x4` when its rows are 16-byte aligned; an accumulator moves
//! in 8-byte column pairs when its index and stride are even; anything else is an
//! element gather.

use super::dialect::Cuda;
use crate::c_family::{Emitter, Fragments, Mem, Space, TileForm, TileSource};
use tessera_ir::{FragRole, RowMap, RowReduce, RowsOp, Scalar};

/// The lane decomposition every fragment op starts from.
const LANE: &str =
    "const unsigned int ts_l = threadIdx.x & 31u, ts_g = ts_l >> 2, ts_t = ts_l & 3u;";

impl Cuda {
    /// Fragment `f`'s name, role and element type.
    fn frag_decl(e: &Emitter<Cuda>, f: usize) -> (String, FragRole, Scalar) {
        let d = &e.k.body.frags[f];
        (e.names.frags[f].clone(), d.role, d.elem)
    }

    /// Declares every fragment's registers.
    pub(super) fn frag_decls(e: &Emitter<Cuda>) -> Vec<String> {
        e.k.body
            .frags
            .iter()
            .zip(&e.names.frags)
            .map(|(f, n)| match f.role {
                FragRole::Acc => format!("float {n}[8]; // {} accumulator 16x16", f.name),
                FragRole::Rows => format!(
                    "float {n}[2]; // {} rows ts_g and ts_g + 8 of 16x16",
                    f.name
                ),
                r => format!(
                    "unsigned int {n}[4]; // {} {} operand 16x16",
                    f.name,
                    r.name()
                ),
            })
            .collect()
    }

    /// The address of element `(row, col)` of a tile access, as C.
    fn elem_at(index: &str, stride: &str, transpose: bool, row: &str, col: &str) -> String {
        if transpose {
            format!("{index} + ({col}) * {stride} + ({row})")
        } else {
            format!("{index} + ({row}) * {stride} + ({col})")
        }
    }

    /// Opens `if (aligned) { ldmatrix … ` for an operand in threadgroup memory: one
    /// `ldmatrix.x4` reads the four 8×8 quarters of the 16×16 operand, lane `8j + rr`
    /// giving the address of row `rr` of quarter `j` (register `j` of the fragment). The
    /// quarter rows are the memory rows, so the operand's pair dimension decides `.trans`:
    /// pairs run along memory rows for A and for transposed B (plain), across them
    /// otherwise (`.trans`). The instruction needs 16-byte aligned rows; the caller emits
    /// the element gather as the `else` branch for an index or stride that is not a
    /// multiple of 8 (both are simdgroup-uniform, so the branch is too).
    fn ldmatrix(
        e: &mut Emitter<Cuda>,
        n: &str,
        m: &str,
        index: &str,
        stride: &str,
        role: FragRole,
        transpose: bool,
    ) {
        // The quarter rows are memory rows: fragment rows unless the access is transposed.
        let (row, col) = if transpose {
            ("8u * (ts_j & 1u)", "ts_rr + 8u * (ts_j >> 1)")
        } else {
            ("ts_rr + 8u * (ts_j & 1u)", "8u * (ts_j >> 1)")
        };
        let at = Self::elem_at(index, stride, transpose, row, col);
        let trans = if (role == FragRole::A) == transpose {
            ".trans"
        } else {
            ""
        };
        e.line(&format!("if (((({index}) | ({stride})) & 7u) == 0u) {{"));
        e.line("  const unsigned int ts_j = ts_l >> 3, ts_rr = ts_l & 7u;");
        e.line(&format!(
            "  unsigned int ts_sa; asm(\"{{ .reg .u64 ts_p; cvta.to.shared.u64 ts_p, %1; \
             cvt.u32.u64 %0, ts_p; }}\" : \"=r\"(ts_sa) : \"l\"((unsigned long long)&{m}[{at}]));"
        ));
        e.line(&format!(
            "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4{trans}.shared.b16 {{%0,%1,%2,%3}}, [%4];\" \
             : \"=r\"({n}[0]), \"=r\"({n}[1]), \"=r\"({n}[2]), \"=r\"({n}[3]) : \"r\"(ts_sa) : \"memory\");"
        ));
    }

    /// An accumulator load or store: registers `2p` and `2p + 1` hold adjacent columns of
    /// one row, so with an even index and stride (and no transpose) each pair moves as one
    /// access (8 bytes; 4 in f16/bf16 memory `elem`, widened on load and rounded to
    /// nearest even on store); otherwise element by element.
    #[allow(clippy::too_many_arguments)]
    fn acc_access(
        e: &mut Emitter<Cuda>,
        n: &str,
        m: &str,
        elem: Scalar,
        index: &str,
        stride: &str,
        transpose: bool,
        store: bool,
    ) {
        const ROW: &str = "ts_g + 8u * ((ts_i >> 1) & 1)";
        const PAIR_COL: &str = "8u * (ts_i >> 2) + 2u * ts_t";
        // (type, narrowing, widening) of 16-bit memory.
        let half = match elem {
            Scalar::F16 => Some(("ts_f16", "ts_f16_from_f32", "ts_f16_to_f32")),
            Scalar::BF16 => Some(("ts_bf16", "ts_bf16_from_f32", "ts_bf16_to_f32")),
            _ => None,
        };
        if !transpose {
            e.line(&format!("if (((({index}) | ({stride})) & 1u) == 0u) {{"));
            e.line("  struct __attribute__((aligned(8))) ts_pair { float e0, e1; };");
            e.line("  #pragma unroll");
            e.line("  for (int ts_i = 0; ts_i < 8; ts_i += 2) {");
            e.line(&format!(
                "    const unsigned int ts_r = {ROW}, ts_c = {PAIR_COL};"
            ));
            let at = Self::elem_at(index, stride, false, "ts_r", "ts_c");
            let line = match (store, half) {
                (true, Some((_, narrow, _))) => format!(
                    "    *reinterpret_cast<unsigned int*>(&{m}[{at}]) = \
                     (unsigned int){narrow}({n}[ts_i]).bits | ((unsigned int){narrow}({n}[ts_i + 1]).bits << 16);"
                ),
                (false, Some((ty, _, widen))) => format!(
                    "    const unsigned int ts_w = *reinterpret_cast<const unsigned int*>(&{m}[{at}]); \
                     {n}[ts_i] = {widen}({ty}{{(unsigned short)(ts_w & 0xffffu)}}); \
                     {n}[ts_i + 1] = {widen}({ty}{{(unsigned short)(ts_w >> 16)}});"
                ),
                (true, None) => format!(
                    "    *reinterpret_cast<ts_pair*>(&{m}[{at}]) = ts_pair{{{n}[ts_i], {n}[ts_i + 1]}};"
                ),
                (false, None) => format!(
                    "    const ts_pair ts_p = *reinterpret_cast<const ts_pair*>(&{m}[{at}]); \
                     {n}[ts_i] = ts_p.e0; {n}[ts_i + 1] = ts_p.e1;"
                ),
            };
            e.line(&line);
            e.line("  }");
            e.line("} else {");
        }
        e.line("#pragma unroll");
        e.line("for (int ts_i = 0; ts_i < 8; ++ts_i) {");
        e.line(&format!(
            "  const unsigned int ts_r = {ROW}, ts_c = {PAIR_COL} + (ts_i & 1);"
        ));
        let at = Self::elem_at(index, stride, transpose, "ts_r", "ts_c");
        let line = match (store, half) {
            (true, Some((_, narrow, _))) => format!("  {m}[{at}] = {narrow}({n}[ts_i]);"),
            (false, Some((_, _, widen))) => format!("  {n}[ts_i] = {widen}({m}[{at}]);"),
            (true, None) => format!("  {m}[{at}] = {n}[ts_i];"),
            (false, None) => format!("  {n}[ts_i] = {m}[{at}];"),
        };
        e.line(&line);
        e.line("}");
        if !transpose {
            e.line("}");
        }
    }
}

/// The C expression of accumulator register `i`'s row and column.
const ACC_ROW: &str = "(ts_g + 8u * ((ts_i >> 1) & 1))";
const ACC_COL: &str = "(8u * (ts_i >> 2) + 2u * ts_t + (ts_i & 1))";

impl Fragments for Cuda {
    fn frag_row_reduce(e: &mut Emitter<Cuda>, op: RowReduce, rows: usize, f: usize) {
        let (r, n) = (e.names.frags[rows].clone(), e.names.frags[f].clone());
        let join = |a: &str, b: &str| match op {
            RowReduce::Max => format!("fmaxf({a}, {b})"),
            RowReduce::Sum => format!("({a} + {b})"),
        };
        e.line("{");
        e.depth += 1;
        for h in 0..2 {
            // Row `g + 8h`: registers 2h, 2h + 1 (columns 0–7) and 2h + 4, 2h + 5 (8–15).
            let (a, b, c, d) = (2 * h, 2 * h + 1, 2 * h + 4, 2 * h + 5);
            let x = join(
                &join(&format!("{n}[{a}]"), &format!("{n}[{b}]")),
                &join(&format!("{n}[{c}]"), &format!("{n}[{d}]")),
            );
            e.line(&format!("float ts_x{h} = {x};"));
            for m in [1, 2] {
                let y = join(
                    &format!("ts_x{h}"),
                    &format!("__shfl_xor_sync(0xffffffffu, ts_x{h}, {m})"),
                );
                e.line(&format!("ts_x{h} = {y};"));
            }
            let y = join(&format!("{r}[{h}]"), &format!("ts_x{h}"));
            e.line(&format!("{r}[{h}] = {y};"));
        }
        e.depth -= 1;
        e.line("}");
    }

    fn frag_row_map(e: &mut Emitter<Cuda>, op: RowMap, f: usize, rows: usize) {
        let (n, r) = (e.names.frags[f].clone(), e.names.frags[rows].clone());
        let m = format!("{r}[(ts_i >> 1) & 1]");
        let x = format!("{n}[ts_i]");
        let y = match op {
            RowMap::Scale => format!("{x} * {m}"),
            RowMap::Exp2Sub => {
                format!("({x} == __int_as_float(0xff800000) ? 0.0f : exp2f({x} - {m}))")
            }
        };
        e.line(&format!(
            "#pragma unroll
for (int ts_i = 0; ts_i < 8; ++ts_i) {x} = {y};"
        ));
    }

    fn frag_mask(e: &mut Emitter<Cuda>, f: usize, diag: &str, cap: &str, value: &str) {
        let n = e.names.frags[f].clone();
        e.line("{");
        e.depth += 1;
        e.line(LANE);
        e.line("#pragma unroll");
        e.line("for (int ts_i = 0; ts_i < 8; ++ts_i) {");
        e.line(&format!(
            "  const int ts_r = (int){ACC_ROW}, ts_c = (int){ACC_COL};"
        ));
        e.line(&format!(
            "  if (ts_c - ts_r >= ({diag}) || ts_c >= ({cap})) {n}[ts_i] = {value};"
        ));
        e.line("}");
        e.depth -= 1;
        e.line("}");
    }

    fn frag_rows(e: &mut Emitter<Cuda>, op: RowsOp, d: usize, a: usize, b: usize) {
        let fr = &e.names.frags;
        let (dn, an, bn) = (fr[d].clone(), fr[a].clone(), fr[b].clone());
        for h in 0..2 {
            let (x, y) = (format!("{an}[{h}]"), format!("{bn}[{h}]"));
            let v = match op {
                RowsOp::Add => format!("{x} + {y}"),
                RowsOp::Mul => format!("{x} * {y}"),
                RowsOp::Div => format!("{x} / {y}"),
                RowsOp::Exp2Diff => format!("({x} == {y} ? 1.0f : exp2f({x} - {y}))"),
            };
            e.line(&format!("{dn}[{h}] = {v};"));
        }
    }

    fn frag_rows_raise(e: &mut Emitter<Cuda>, d: usize, a: usize, b: usize, margin: &str) {
        let fr = &e.names.frags;
        let (dn, an, bn) = (fr[d].clone(), fr[a].clone(), fr[b].clone());
        for h in 0..2 {
            e.line(&format!(
                "{dn}[{h}] = {bn}[{h}] > {an}[{h}] + ({margin}) ? {bn}[{h}] : {an}[{h}];"
            ));
        }
    }

    fn frag_add(e: &mut Emitter<Cuda>, d: usize, a: usize, b: usize) {
        let fr = &e.names.frags;
        let (dn, an, bn) = (fr[d].clone(), fr[a].clone(), fr[b].clone());
        e.line(&format!(
            "for (int ts_i = 0; ts_i < 8; ++ts_i) {dn}[ts_i] = {an}[ts_i] + {bn}[ts_i];"
        ));
    }

    fn frag_convert(e: &mut Emitter<Cuda>, dst: usize, src: usize) {
        let (dn, _, elem) = Self::frag_decl(e, dst);
        let sn = e.names.frags[src].clone();
        let conv = match elem {
            Scalar::BF16 => "ts_bf16_from_f32",
            _ => "ts_f16_from_f32",
        };
        // A register `i` holds row half `i & 1`, column half `i >> 1`: the accumulator
        // pair `4 (i >> 1) + 2 (i & 1)`, `+ 1`.
        for i in 0..4 {
            let k = 4 * (i >> 1) + 2 * (i & 1);
            e.line(&format!(
                "{dn}[{i}] = (unsigned int){conv}({sn}[{k}]).bits | ((unsigned int){conv}({sn}[{}]).bits << 16);",
                k + 1
            ));
        }
    }

    fn frag_fill(e: &mut Emitter<Cuda>, f: usize, v: &str) {
        let (n, role, elem) = Self::frag_decl(e, f);
        match role {
            FragRole::Acc => e.line(&format!(
                "for (int ts_i = 0; ts_i < 8; ++ts_i) {n}[ts_i] = {v};"
            )),
            FragRole::Rows => e.line(&format!("{n}[0] = {v}; {n}[1] = {v};")),
            _ => {
                let conv = match elem {
                    Scalar::BF16 => "ts_bf16_from_f32",
                    _ => "ts_f16_from_f32",
                };
                e.line(&format!(
                    "{{ const unsigned int ts_h = {conv}({v}).bits; \
                     for (int ts_i = 0; ts_i < 4; ++ts_i) {n}[ts_i] = ts_h | (ts_h << 16); }}"
                ));
            }
        }
    }

    fn frag_load(e: &mut Emitter<Cuda>, f: usize, mem: &Mem, i: &str, s: &str, transpose: bool) {
        let (n, role, _) = Self::frag_decl(e, f);
        let (m, elem) = (mem.name.as_str(), mem.elem);
        e.line("{");
        e.depth += 1;
        e.line(LANE);
        let ldmatrix = mem.space == Space::Threadgroup && role != FragRole::Acc;
        if ldmatrix {
            Self::ldmatrix(e, &n, m, i, s, role, transpose);
            e.line("} else {");
        }
        match role {
            FragRole::A => {
                e.line("#pragma unroll");
                e.line("for (int ts_i = 0; ts_i < 4; ++ts_i) {");
                e.line("  const unsigned int ts_r = ts_g + 8u * (ts_i & 1), ts_c = 2u * ts_t + 8u * (ts_i >> 1);");
                let lo = Self::elem_at(i, s, transpose, "ts_r", "ts_c");
                let hi = Self::elem_at(i, s, transpose, "ts_r", "ts_c + 1u");
                e.line(&format!(
                    "  {n}[ts_i] = (unsigned int){m}[{lo}].bits | ((unsigned int){m}[{hi}].bits << 16);"
                ));
                e.line("}");
            }
            FragRole::B => {
                e.line("#pragma unroll");
                e.line("for (int ts_i = 0; ts_i < 4; ++ts_i) {");
                e.line("  const unsigned int ts_k = 2u * ts_t + 8u * (ts_i & 1), ts_n = 8u * (ts_i >> 1) + ts_g;");
                let lo = Self::elem_at(i, s, transpose, "ts_k", "ts_n");
                let hi = Self::elem_at(i, s, transpose, "ts_k + 1u", "ts_n");
                e.line(&format!(
                    "  {n}[ts_i] = (unsigned int){m}[{lo}].bits | ((unsigned int){m}[{hi}].bits << 16);"
                ));
                e.line("}");
            }
            FragRole::Acc => Self::acc_access(e, &n, m, elem, i, s, transpose, false),
            // Rejected by the verifier and the builder: row vectors never touch memory.
            FragRole::Rows => {}
        }
        if ldmatrix {
            e.line("}");
        }
        e.depth -= 1;
        e.line("}");
    }

    fn frag_store(e: &mut Emitter<Cuda>, f: usize, mem: &Mem, i: &str, s: &str) {
        let (n, _, _) = Self::frag_decl(e, f);
        e.line("{");
        e.depth += 1;
        e.line(LANE);
        Self::acc_access(e, &n, &mem.name, mem.elem, i, s, false, true);
        e.depth -= 1;
        e.line("}");
    }

    fn frag_mma(e: &mut Emitter<Cuda>, d: usize, a: usize, b: usize, c: usize) {
        let (dn, _, _) = Self::frag_decl(e, d);
        let (an, _, elem) = Self::frag_decl(e, a);
        let (bn, _, _) = Self::frag_decl(e, b);
        let (cn, _, _) = Self::frag_decl(e, c);
        let ty = match elem {
            Scalar::BF16 => "bf16",
            _ => "f16",
        };
        for h in 0..2 {
            let o = 4 * h;
            e.line(&format!(
                "asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32 \
                 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%10,%11,%12,%13}};\" \
                 : \"=f\"({dn}[{o}]), \"=f\"({dn}[{}]), \"=f\"({dn}[{}]), \"=f\"({dn}[{}]) \
                 : \"r\"({an}[0]), \"r\"({an}[1]), \"r\"({an}[2]), \"r\"({an}[3]), \
                 \"r\"({bn}[{}]), \"r\"({bn}[{}]), \
                 \"f\"({cn}[{o}]), \"f\"({cn}[{}]), \"f\"({cn}[{}]), \"f\"({cn}[{}]));",
                o + 1,
                o + 2,
                o + 3,
                2 * h,
                2 * h + 1,
                o + 1,
                o + 2,
                o + 3
            ));
        }
    }

    fn frag_mma_tiles(
        e: &mut Emitter<Cuda>,
        accs: &[usize],
        a: TileSource<'_>,
        b: (&Mem, &str),
        form: TileForm,
    ) {
        super::tiles::emit(e, accs, a, b, form);
    }

    fn frag_mma_wait(e: &mut Emitter<Cuda>, accs: &[usize], pending: u32) {
        super::tiles::emit_wait(e, accs, pending);
    }

    fn frag_tiles_before_barrier(e: &mut Emitter<Cuda>) {
        super::tiles::before_barrier(e);
    }

    fn frag_scale(e: &mut Emitter<Cuda>, f: usize, value: &str) {
        let n = &e.names.frags[f];
        let text = format!("for (int ts_i = 0; ts_i < 8; ++ts_i) {n}[ts_i] *= {value};");
        e.line(&text);
    }
}
