//! Simdgroup reductions, scans and shuffles, and threadgroup reductions, with the
//! check that every lane of the simdgroup (or thread of the threadgroup) takes part.

use super::group::Group;
use super::mask::Mask;
use super::scalar::with_binary;
use crate::error::{Result, Violation};
use tessera_ir::{BinaryOp, Inst, Literal, ReduceOp, Scalar, ShuffleKind, SimdOp, ValueId};

const SIMD: usize = 32;

/// The binary op a reduction folds with.
fn fold_op(op: SimdOp) -> BinaryOp {
    match op {
        SimdOp::Sum | SimdOp::PrefixSum | SimdOp::PrefixExclusiveSum => BinaryOp::Add,
        SimdOp::Prod => BinaryOp::Mul,
        SimdOp::Max => BinaryOp::Max,
        SimdOp::Min => BinaryOp::Min,
        SimdOp::And | SimdOp::All => BinaryOp::And,
        SimdOp::Or | SimdOp::Any => BinaryOp::Or,
        SimdOp::Xor => BinaryOp::Xor,
    }
}

impl Group<'_> {
    /// The simdgroups the mask touches; every one must be wholly active.
    pub(crate) fn active_simdgroups(&self, inst: &Inst, m: &Mask) -> Result<Vec<usize>> {
        let n = self.n;
        let groups = n.div_ceil(SIMD);
        if m.full {
            return Ok((0..groups).collect());
        }
        let mut counts = vec![0usize; groups];
        for &l in &m.lanes {
            counts[l as usize / SIMD] += 1;
        }
        let mut out = Vec::new();
        for (g, &c) in counts.iter().enumerate() {
            let size = SIMD.min(n - g * SIMD);
            if c == 0 {
                continue;
            }
            if c != size {
                let missing = (g * SIMD..g * SIMD + size)
                    .find(|l| m.lanes.binary_search(&(*l as u32)).is_err())
                    .unwrap_or(g * SIMD);
                return Err(self.fail(
                    inst,
                    missing as u32,
                    Violation::DivergentSimd {
                        simdgroup: g as u32,
                        active: c as u32,
                    },
                ));
            }
            out.push(g);
        }
        Ok(out)
    }

    /// The first poison tag among lanes `range` of slot `s`, or 0.
    fn first_tag(&self, s: usize, range: std::ops::Range<usize>) -> u32 {
        if !self.pflag[s] {
            return 0;
        }
        let n = self.n;
        self.ptag[s * n + range.start..s * n + range.end]
            .iter()
            .copied()
            .find(|&t| t != 0)
            .unwrap_or(0)
    }

    fn set_tags(&mut self, d: usize, range: std::ops::Range<usize>, tag: u32) {
        let n = self.n;
        self.ptag[d * n + range.start..d * n + range.end].fill(tag);
    }

    pub(crate) fn simd(&mut self, inst: &Inst, m: &Mask, op: SimdOp, v: ValueId) -> Result<()> {
        let groups = self.active_simdgroups(inst, m)?;
        let n = self.n;
        let vi = self.p.info(v);
        let (s, ty) = (vi.slot as usize, vi.elem);
        let d = self.p.info(inst.results[0]).slot as usize;
        let bop = fold_op(op);
        if !tessera_ir::verify::binary_defined(bop, ty) {
            return Err(self.fail(
                inst,
                m.first(),
                Violation::Unsupported {
                    message: format!("`{}` on {ty}", op.name()),
                },
            ));
        }
        let zero = Literal::zero(ty).to_bits();
        let any_poison = self.pflag[s];
        for &g in &groups {
            let (lo, hi) = (g * SIMD, (g * SIMD + SIMD).min(n));
            with_binary!(bop, ty, f => {
                let src = &self.regs[s * n + lo..s * n + hi];
                let mut out = [0u32; SIMD];
                match op {
                    SimdOp::PrefixSum => {
                        let mut acc = src[0];
                        out[0] = acc;
                        for (i, &x) in src.iter().enumerate().skip(1) {
                            acc = f(acc, x);
                            out[i] = acc;
                        }
                    }
                    SimdOp::PrefixExclusiveSum => {
                        let mut acc = zero;
                        for (i, &x) in src.iter().enumerate() {
                            out[i] = acc;
                            acc = if i == 0 { x } else { f(acc, x) };
                        }
                    }
                    _ => {
                        let r = src[1..].iter().fold(src[0], |a, &x| f(a, x));
                        out[..src.len()].fill(r);
                    }
                }
                self.regs[d * n + lo..d * n + hi].copy_from_slice(&out[..hi - lo]);
            });
            if any_poison {
                let t = self.first_tag(s, lo..hi);
                self.set_tags(d, lo..hi, t);
            }
        }
        self.pflag[d] = any_poison;
        Ok(())
    }

    pub(crate) fn shuffle(
        &mut self,
        inst: &Inst,
        m: &Mask,
        kind: ShuffleKind,
        value: ValueId,
        arg: ValueId,
    ) -> Result<()> {
        let groups = self.active_simdgroups(inst, m)?;
        self.check_clean(inst, m, arg, "a shuffle's lane argument")?;
        let n = self.n;
        let s = self.p.info(value).slot as usize;
        let a = self.p.info(arg).slot as usize;
        let d = self.p.info(inst.results[0]).slot as usize;
        let poisoned = self.pflag[s];
        for &g in &groups {
            let (lo, hi) = (g * SIMD, (g * SIMD + SIMD).min(n));
            let size = hi - lo;
            for l in lo..hi {
                let lane = l - lo;
                let x = self.regs[a * n + l] as usize;
                let src = match kind {
                    ShuffleKind::Index => x,
                    ShuffleKind::Xor => {
                        if x >= SIMD {
                            usize::MAX
                        } else {
                            lane ^ x
                        }
                    }
                    ShuffleKind::Up => lane.checked_sub(x).unwrap_or(lane),
                    ShuffleKind::Down => match lane.checked_add(x) {
                        Some(t) if t < size => t,
                        _ => lane,
                    },
                };
                if src >= size {
                    return Err(self.fail(
                        inst,
                        l as u32,
                        Violation::ShuffleLane {
                            lane: self.regs[a * n + l],
                        },
                    ));
                }
                self.regs[d * n + l] = self.regs[s * n + lo + src];
                if poisoned {
                    self.ptag[d * n + l] = self.ptag[s * n + lo + src];
                }
            }
        }
        self.pflag[d] = poisoned;
        Ok(())
    }

    pub(crate) fn group_reduce(
        &mut self,
        inst: &Inst,
        m: &Mask,
        op: ReduceOp,
        v: ValueId,
    ) -> Result<()> {
        self.check_whole_group(inst, m)?;
        let n = self.n;
        let vi = self.p.info(v);
        let (s, ty) = (vi.slot as usize, vi.elem);
        let d = self.p.info(inst.results[0]).slot as usize;
        let bop = match op {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        if !ty.is_numeric() || ty == Scalar::Bool {
            return Err(self.fail(
                inst,
                0,
                Violation::Unsupported {
                    message: format!("`{}` on {ty}", op.name()),
                },
            ));
        }
        let r = with_binary!(bop, ty, f => {
            let src = &self.regs[s * n..s * n + n];
            src[1..].iter().fold(src[0], |a, &x| f(a, x))
        });
        self.regs[d * n..d * n + n].fill(r);
        let t = self.first_tag(s, 0..n);
        if t != 0 {
            self.set_tags(d, 0..n, t);
        }
        self.pflag[d] = t != 0;
        Ok(())
    }
}
