//! Matrix fragments in MSL: a 16×16 fragment is a 2×2 array of `simdgroup_matrix<T, 8, 8>`
//! (block `(i, j)` at index `2i + j`); loads and stores move each 8×8 block with
//! `simdgroup_load` / `simdgroup_store` (the transposed load with Metal's own flag), and a
//! multiply-accumulate is eight `simdgroup_multiply_accumulate`.

use super::{Emitter, R};
use crate::msl::helpers::Helper;
use crate::msl::types::scalar;
use tessera_ir::{MemRef, Scalar, ValueId};

impl Emitter<'_> {
    fn frag_name(&self, f: u32) -> R<String> {
        self.frag_names
            .get(f as usize)
            .cloned()
            .ok_or_else(|| self.invalid(format!("matrix fragment {f} is not declared")))
    }

    /// Declares every fragment at the top of the body.
    pub(super) fn frag_decls(&mut self) {
        for i in 0..self.frag_names.len() {
            let elem = scalar(self.k.body.frags[i].elem);
            let text = format!("simdgroup_matrix<{elem}, 8, 8> {}[4];", self.frag_names[i]);
            self.line(&text);
        }
    }

    pub(super) fn frag_fill(&mut self, f: u32, value: ValueId) -> R<()> {
        let n = self.frag_name(f)?;
        let elem = scalar(self.k.body.frags[f as usize].elem);
        let v = self.val(value)?;
        self.line(&format!(
            "for (uint tsr_b = 0; tsr_b < 4; ++tsr_b) {n}[tsr_b] = \
             make_filled_simdgroup_matrix<{elem}, 8, 8>({elem}({v}));"
        ));
        Ok(())
    }

    fn frag_ptr(&self, mem: MemRef) -> R<String> {
        Ok(self.mem(mem)?.name.clone())
    }

    pub(super) fn frag_load(
        &mut self,
        f: u32,
        mem: MemRef,
        index: ValueId,
        stride: ValueId,
        transpose: bool,
    ) -> R<()> {
        let n = self.frag_name(f)?;
        let m = self.frag_ptr(mem)?;
        let (i, s) = (self.val(index)?, self.val(stride)?);
        // An f32 accumulator from f16/bf16 memory: each block loads as the memory's type
        // and widens.
        let mem_elem = self.mem(mem)?.elem;
        let frag_elem = self.k.body.frags[f as usize].elem;
        let widen = (mem_elem != frag_elem).then(|| (scalar(mem_elem), scalar(frag_elem)));
        if widen.is_some() {
            self.helpers.insert(Helper::SgConvert);
        }
        for bi in 0..2 {
            for bj in 0..2 {
                let (r0, c0, b) = (8 * bi, 8 * bj, 2 * bi + bj);
                let at = if transpose {
                    format!("{i} + {c0}u * {s} + {r0}u], ulong({s}), ulong2(0, 0), true")
                } else {
                    format!("{i} + {r0}u * {s} + {c0}u], ulong({s})")
                };
                self.line(&match widen {
                    Some((t, to)) => format!(
                        "{{ simdgroup_matrix<{t}, 8, 8> tsr_w; simdgroup_load(tsr_w, &{m}[{at}); \
                         {n}[{b}] = tsr_sg_convert<{to}>(tsr_w); }}"
                    ),
                    None => format!("simdgroup_load({n}[{b}], &{m}[{at});"),
                });
            }
        }
        Ok(())
    }

    pub(super) fn frag_store(
        &mut self,
        f: u32,
        mem: MemRef,
        index: ValueId,
        stride: ValueId,
    ) -> R<()> {
        let n = self.frag_name(f)?;
        let info = self.mem(mem)?;
        if !info.writable {
            return Err(self.invalid("a fragment store into read-only memory"));
        }
        // Into f16/bf16 memory the f32 accumulator is rounded block by block.
        let round = matches!(info.elem, Scalar::F16 | Scalar::BF16).then(|| scalar(info.elem));
        let m = self.frag_ptr(mem)?;
        let (i, s) = (self.val(index)?, self.val(stride)?);
        if round.is_some() {
            self.helpers.insert(Helper::SgConvert);
        }
        for bi in 0..2 {
            for bj in 0..2 {
                let (r0, c0) = (8 * bi, 8 * bj);
                let b = 2 * bi + bj;
                let block = match round {
                    Some(t) => format!("tsr_sg_convert<{t}>({n}[{b}])"),
                    None => format!("{n}[{b}]"),
                };
                self.line(&format!(
                    "simdgroup_store({block}, &{m}[{i} + {r0}u * {s} + {c0}u], ulong({s}));"
                ));
            }
        }
        Ok(())
    }

    pub(super) fn frag_scale(&mut self, f: u32, value: ValueId) -> R<()> {
        let n = self.frag_name(f)?;
        let v = self.val(value)?;
        self.helpers.insert(Helper::SgScale);
        self.line(&format!(
            "for (uint tsr_b = 0; tsr_b < 4; ++tsr_b) {n}[tsr_b] = tsr_sg_scale({n}[tsr_b], {v});"
        ));
        Ok(())
    }

    pub(super) fn frag_mma(&mut self, d: u32, a: u32, b: u32, c: u32) -> R<()> {
        let (dn, an, bn, cn) = (
            self.frag_name(d)?,
            self.frag_name(a)?,
            self.frag_name(b)?,
            self.frag_name(c)?,
        );
        for i in 0..2 {
            for j in 0..2 {
                let o = 2 * i + j;
                self.line(&format!(
                    "simdgroup_multiply_accumulate({dn}[{o}], {an}[{}], {bn}[{j}], {cn}[{o}]);",
                    2 * i
                ));
                self.line(&format!(
                    "simdgroup_multiply_accumulate({dn}[{o}], {an}[{}], {bn}[{}], {dn}[{o}]);",
                    2 * i + 1,
                    2 + j
                ));
            }
        }
        Ok(())
    }
}
