//! Matrix fragments in CUDA C: per-thread registers in the layout of PTX
//! `mma.sync.aligned.m16n8k16` (lane `l`, group `g = l / 4`, thread-in-group `t = l % 4`).
//! A 16×16 operand A is four packed 16-bit pairs (rows `g`, `g + 8`; columns `2t`, `2t + 8`),
//! B is two 16×8 halves of two pairs each (rows `2t`, `2t + 8`; column `g`), an
//! accumulator two 16×8 halves of four f32. A multiply-accumulate is two `mma.sync`
//! instructions, one per half of B and D. An A or B operand in threadgroup memory is
//! loaded with one `ldmatrix.x4` when its rows are 16-byte aligned; an accumulator moves
//! in 8-byte column pairs when its index and stride are even; anything else is an
//! element gather.

use super::{Emitter, R};
use tessera_ir::{FragRole, MemRef, Scalar, ValueId};

/// The lane decomposition every fragment op starts from.
const LANE: &str =
    "const unsigned int ts_l = threadIdx.x & 31u, ts_g = ts_l >> 2, ts_t = ts_l & 3u;";

impl Emitter<'_> {
    fn frag_decl(&self, f: u32) -> R<(String, FragRole, Scalar)> {
        let d = self
            .body
            .frags
            .get(f as usize)
            .ok_or_else(|| self.malformed(format!("matrix fragment {f} is not declared")))?;
        Ok((self.frag_names[f as usize].clone(), d.role, d.elem))
    }

    /// Declares every fragment's registers.
    pub(super) fn frag_decls(&self) -> Vec<String> {
        self.body
            .frags
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let n = &self.frag_names[i];
                match f.role {
                    FragRole::Acc => format!("float {n}[8]; // {} accumulator 16x16", f.name),
                    r => format!(
                        "unsigned int {n}[4]; // {} {} operand 16x16",
                        f.name,
                        r.name()
                    ),
                }
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

    pub(super) fn frag_fill(&mut self, f: u32, value: ValueId) -> R<()> {
        let (n, role, elem) = self.frag_decl(f)?;
        let v = self.name(value)?.to_string();
        match role {
            FragRole::Acc => self.line(&format!(
                "for (int ts_i = 0; ts_i < 8; ++ts_i) {n}[ts_i] = {v};"
            )),
            _ => {
                let conv = match elem {
                    Scalar::BF16 => "ts_bf16_from_f32",
                    _ => "ts_f16_from_f32",
                };
                self.line(&format!(
                    "{{ const unsigned int ts_h = {conv}({v}).bits; \
                     for (int ts_i = 0; ts_i < 4; ++ts_i) {n}[ts_i] = ts_h | (ts_h << 16); }}"
                ));
            }
        }
        Ok(())
    }

    pub(super) fn frag_load(
        &mut self,
        f: u32,
        mem: MemRef,
        index: ValueId,
        stride: ValueId,
        transpose: bool,
    ) -> R<()> {
        let (n, role, _) = self.frag_decl(f)?;
        let (m, elem) = self.mem(mem)?;
        let (i, s) = (
            self.name(index)?.to_string(),
            self.name(stride)?.to_string(),
        );
        self.line("{");
        self.depth += 1;
        self.line(LANE);
        let ldmatrix = matches!(mem, MemRef::Shared(_)) && role != FragRole::Acc;
        if ldmatrix {
            self.ldmatrix(&n, &m, &i, &s, role, transpose);
            self.line("} else {");
        }
        match role {
            FragRole::A => {
                self.line("#pragma unroll");
                self.line("for (int ts_i = 0; ts_i < 4; ++ts_i) {");
                self.line("  const unsigned int ts_r = ts_g + 8u * (ts_i & 1), ts_c = 2u * ts_t + 8u * (ts_i >> 1);");
                let lo = Self::elem_at(&i, &s, transpose, "ts_r", "ts_c");
                let hi = Self::elem_at(&i, &s, transpose, "ts_r", "ts_c + 1u");
                self.line(&format!(
                    "  {n}[ts_i] = (unsigned int){m}[{lo}].bits | ((unsigned int){m}[{hi}].bits << 16);"
                ));
                self.line("}");
            }
            FragRole::B => {
                self.line("#pragma unroll");
                self.line("for (int ts_i = 0; ts_i < 4; ++ts_i) {");
                self.line("  const unsigned int ts_k = 2u * ts_t + 8u * (ts_i & 1), ts_n = 8u * (ts_i >> 1) + ts_g;");
                let lo = Self::elem_at(&i, &s, transpose, "ts_k", "ts_n");
                let hi = Self::elem_at(&i, &s, transpose, "ts_k + 1u", "ts_n");
                self.line(&format!(
                    "  {n}[ts_i] = (unsigned int){m}[{lo}].bits | ((unsigned int){m}[{hi}].bits << 16);"
                ));
                self.line("}");
            }
            FragRole::Acc => self.acc_access(&n, &m, elem, &i, &s, transpose, false),
        }
        if ldmatrix {
            self.line("}");
        }
        self.depth -= 1;
        self.line("}");
        Ok(())
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
        &mut self,
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
        self.line(&format!("if (((({index}) | ({stride})) & 7u) == 0u) {{"));
        self.line("  const unsigned int ts_j = ts_l >> 3, ts_rr = ts_l & 7u;");
        self.line(&format!(
            "  unsigned int ts_sa; asm(\"{{ .reg .u64 ts_p; cvta.to.shared.u64 ts_p, %1; \
             cvt.u32.u64 %0, ts_p; }}\" : \"=r\"(ts_sa) : \"l\"((unsigned long long)&{m}[{at}]));"
        ));
        self.line(&format!(
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
        &mut self,
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
            self.line(&format!("if (((({index}) | ({stride})) & 1u) == 0u) {{"));
            self.line("  struct __attribute__((aligned(8))) ts_pair { float e0, e1; };");
            self.line("  #pragma unroll");
            self.line("  for (int ts_i = 0; ts_i < 8; ts_i += 2) {");
            self.line(&format!(
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
            self.line(&line);
            self.line("  }");
            self.line("} else {");
        }
        self.line("#pragma unroll");
        self.line("for (int ts_i = 0; ts_i < 8; ++ts_i) {");
        self.line(&format!(
            "  const unsigned int ts_r = {ROW}, ts_c = {PAIR_COL} + (ts_i & 1);"
        ));
        let at = Self::elem_at(index, stride, transpose, "ts_r", "ts_c");
        let line = match (store, half) {
            (true, Some((_, narrow, _))) => format!("  {m}[{at}] = {narrow}({n}[ts_i]);"),
            (false, Some((_, _, widen))) => format!("  {n}[ts_i] = {widen}({m}[{at}]);"),
            (true, None) => format!("  {m}[{at}] = {n}[ts_i];"),
            (false, None) => format!("  {n}[ts_i] = {m}[{at}];"),
        };
        self.line(&line);
        self.line("}");
        if !transpose {
            self.line("}");
        }
    }

    pub(super) fn frag_store(
        &mut self,
        f: u32,
        mem: MemRef,
        index: ValueId,
        stride: ValueId,
    ) -> R<()> {
        let (n, role, _) = self.frag_decl(f)?;
        if role != FragRole::Acc {
            return Err(self.malformed("only accumulator fragments are stored"));
        }
        let (m, elem) = self.mem(mem)?;
        let (i, s) = (
            self.name(index)?.to_string(),
            self.name(stride)?.to_string(),
        );
        self.line("{");
        self.depth += 1;
        self.line(LANE);
        self.acc_access(&n, &m, elem, &i, &s, false, true);
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    pub(super) fn frag_scale(&mut self, f: u32, value: ValueId) -> R<()> {
        let (n, role, _) = self.frag_decl(f)?;
        if role != FragRole::Acc {
            return Err(self.malformed("only accumulator fragments are scaled"));
        }
        let v = self.name(value)?.to_string();
        self.line(&format!(
            "for (int ts_i = 0; ts_i < 8; ++ts_i) {n}[ts_i] *= {v};"
        ));
        Ok(())
    }

    pub(super) fn frag_mma(&mut self, d: u32, a: u32, b: u32, c: u32) -> R<()> {
        let (dn, _, _) = self.frag_decl(d)?;
        let (an, _, elem) = self.frag_decl(a)?;
        let (bn, _, _) = self.frag_decl(b)?;
        let (cn, _, _) = self.frag_decl(c)?;
        let ty = match elem {
            Scalar::BF16 => "bf16",
            _ => "f16",
        };
        for h in 0..2 {
            let o = 4 * h;
            self.line(&format!(
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
        Ok(())
    }
}
