//! Loads, stores, vector accesses and atomics on device tensors, threadgroup arrays and
//! stack arrays, with bounds, alignment and poison checks.

use super::group::{lanes_of, DevView, Group, UNWRITTEN};
use super::mask::Mask;
use super::scalar::{f32d, f32e};
use crate::error::{Result, Violation};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use tessera_ir::{AtomicOp, Inst, MemRef, Op, Scalar, ValueId};

/// Reads element `i` of a device view as a register pattern.
#[inline(always)]
pub(crate) fn dev_load(v: DevView<'_>, i: usize, elem: Scalar) -> u32 {
    match v {
        DevView::B8(s) => {
            let b = s[i].load(Relaxed) as u32;
            if elem == Scalar::Bool {
                (b != 0) as u32
            } else {
                b
            }
        }
        DevView::B16(s) => s[i].load(Relaxed) as u32,
        DevView::B32(s) => s[i].load(Relaxed),
    }
}

#[inline(always)]
pub(crate) fn dev_store(v: DevView<'_>, i: usize, bits: u32) {
    match v {
        DevView::B8(s) => s[i].store(bits as u8, Relaxed),
        DevView::B16(s) => s[i].store(bits as u16, Relaxed),
        DevView::B32(s) => s[i].store(bits, Relaxed),
    }
}

/// The read-modify-write an atomic performs, on register patterns.
fn rmw(op: AtomicOp, elem: Scalar, old: u32, v: u32) -> u32 {
    let signed = elem == Scalar::I32;
    match op {
        AtomicOp::Add if elem == Scalar::F32 => f32e(f32d(old) + f32d(v)),
        AtomicOp::Add => old.wrapping_add(v),
        AtomicOp::Max if signed => (old as i32).max(v as i32) as u32,
        AtomicOp::Max => old.max(v),
        AtomicOp::Min if signed => (old as i32).min(v as i32) as u32,
        AtomicOp::Min => old.min(v),
        AtomicOp::And => old & v,
        AtomicOp::Or => old | v,
        AtomicOp::Exchange => v,
    }
}

fn dev_atomic(a: &AtomicU32, op: AtomicOp, elem: Scalar, v: u32) -> u32 {
    match (op, elem) {
        (AtomicOp::Add, Scalar::U32 | Scalar::I32) => a.fetch_add(v, Relaxed),
        (AtomicOp::Max, Scalar::U32) => a.fetch_max(v, Relaxed),
        (AtomicOp::Min, Scalar::U32) => a.fetch_min(v, Relaxed),
        (AtomicOp::And, _) => a.fetch_and(v, Relaxed),
        (AtomicOp::Or, _) => a.fetch_or(v, Relaxed),
        (AtomicOp::Exchange, _) => a.swap(v, Relaxed),
        // f32 add and signed min/max: compare-and-swap loop.
        _ => {
            let mut old = a.load(Relaxed);
            loop {
                let new = rmw(op, elem, old, v);
                match a.compare_exchange_weak(old, new, Relaxed, Relaxed) {
                    Ok(prev) => return prev,
                    Err(cur) => old = cur,
                }
            }
        }
    }
}

impl Group<'_> {
    pub(crate) fn mem_len(&self, mem: MemRef) -> usize {
        match mem {
            MemRef::Param(i) => self.l.tensors[i as usize].map(|v| v.len()).unwrap_or(0),
            MemRef::Shared(i) => self.shared[i as usize].len,
            MemRef::Local(i) => self.locals[i as usize].len,
            // Refused when the program was built; no index is in bounds.
            MemRef::Arg(_) => 0,
        }
    }

    pub(crate) fn mem_elem(&self, mem: MemRef) -> Scalar {
        let k = &self.p.kernel;
        match mem {
            MemRef::Param(i) => match k.params[i as usize].kind {
                tessera_ir::ParamKind::Tensor { elem, .. } => elem,
                tessera_ir::ParamKind::Scalar(s) => s,
            },
            MemRef::Shared(i) => k.body.shared[i as usize].elem,
            MemRef::Local(i) => k.body.locals[i as usize].elem,
            MemRef::Arg(_) => Scalar::U32,
        }
    }

    /// Checks index bounds (and alignment for vectors) for every active lane.
    fn check_index(
        &self,
        inst: &Inst,
        m: &Mask,
        mem: MemRef,
        index: ValueId,
        width: usize,
    ) -> Result<()> {
        let n = self.n;
        let len = self.mem_len(mem) as u64;
        let s = self.p.info(index).slot as usize;
        let idx = &self.regs[s * n..s * n + n];
        for l in lanes_of(m, n) {
            let i = idx[l] as u64;
            if width > 1 && !i.is_multiple_of(width as u64) {
                return Err(self.fail(
                    inst,
                    l as u32,
                    Violation::Misaligned {
                        memory: self.p.mem_name(mem),
                        index: i,
                        width: width as u32,
                    },
                ));
            }
            if i + width as u64 > len {
                let bad = if i >= len { i } else { len };
                return Err(self.fail(
                    inst,
                    l as u32,
                    Violation::OutOfBounds {
                        memory: self.p.mem_name(mem),
                        index: bad,
                        len,
                    },
                ));
            }
        }
        Ok(())
    }

    /// Fails if an active lane's access of `width` elements of threadgroup memory from its
    /// `index` touches a copy in flight.
    fn check_lanes_not_in_flight(
        &self,
        inst: &Inst,
        m: &Mask,
        mem: MemRef,
        index: ValueId,
        width: usize,
        write: bool,
    ) -> Result<()> {
        if !matches!(mem, MemRef::Shared(_)) || !self.copies_in_flight() {
            return Ok(());
        }
        let s = self.p.info(index).slot as usize;
        for l in lanes_of(m, self.n) {
            let at = self.regs[s * self.n + l] as usize;
            self.check_not_in_flight(inst, l as u32, mem, at, width, write)?;
        }
        Ok(())
    }

    pub(crate) fn memory_op(&mut self, inst: &Inst, m: &Mask) -> Result<()> {
        match &inst.op {
            Op::Load { mem, index } => {
                self.check_clean(inst, m, *index, "a load's index")?;
                self.check_index(inst, m, *mem, *index, 1)?;
                self.check_lanes_not_in_flight(inst, m, *mem, *index, 1, false)?;
                self.load(m, *mem, *index, inst.results[0], 1);
            }
            Op::VecLoad { mem, index, width } => {
                self.check_clean(inst, m, *index, "a vector load's index")?;
                self.check_index(inst, m, *mem, *index, *width as usize)?;
                self.check_lanes_not_in_flight(inst, m, *mem, *index, *width as usize, false)?;
                self.load(m, *mem, *index, inst.results[0], *width as usize);
            }
            Op::Store { mem, index, value } | Op::VecStore { mem, index, value } => {
                let width = self.p.info(*value).width as usize;
                self.check_clean(inst, m, *index, "a store's index")?;
                if let MemRef::Param(_) = mem {
                    let name = self.p.mem_name(*mem);
                    self.check_clean(
                        inst,
                        m,
                        *value,
                        &format!("a store to device memory `{name}`"),
                    )?;
                }
                self.check_index(inst, m, *mem, *index, width)?;
                self.check_lanes_not_in_flight(inst, m, *mem, *index, width, true)?;
                self.store(m, *mem, *index, *value, width);
            }
            Op::Atomic {
                op,
                mem,
                index,
                value,
            } => {
                self.check_clean(inst, m, *index, "an atomic's index")?;
                self.check_clean(inst, m, *value, "an atomic's operand")?;
                self.check_index(inst, m, *mem, *index, 1)?;
                self.check_lanes_not_in_flight(inst, m, *mem, *index, 1, true)?;
                self.atomic(inst, m, *op, *mem, *index, *value)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Loads `width` consecutive elements per lane into the result's slots.
    fn load(&mut self, m: &Mask, mem: MemRef, index: ValueId, result: ValueId, width: usize) {
        let n = self.n;
        let is = self.p.info(index).slot as usize;
        let d = self.p.info(result).slot as usize;
        let elem = self.mem_elem(mem);
        match mem {
            MemRef::Param(p) => {
                let Some(view) = self.l.tensors[p as usize] else {
                    return;
                };
                for k in 0..width {
                    let (dst, [idx]) = super::group::split(&mut self.regs, n, d + k, [is]);
                    if m.full {
                        for (o, &i) in dst.iter_mut().zip(idx) {
                            *o = dev_load(view, i as usize + k, elem);
                        }
                    } else {
                        for &l in &m.lanes {
                            let l = l as usize;
                            dst[l] = dev_load(view, idx[l] as usize + k, elem);
                        }
                    }
                    self.pflag[d + k] = false;
                }
            }
            MemRef::Shared(_) | MemRef::Local(_) | MemRef::Arg(_) => {
                let origin = result.0 + 1;
                for k in 0..width {
                    let mut any = false;
                    let mut first: Option<(u64, u32)> = None;
                    for l in lanes_of(m, n) {
                        let i = self.regs[is * n + l] as usize + k;
                        let (arr, at) = match mem {
                            MemRef::Shared(a) => (&self.shared[a as usize], i),
                            MemRef::Local(a) => {
                                let arr = &self.locals[a as usize];
                                (arr, l * arr.len + i)
                            }
                            MemRef::Param(_) | MemRef::Arg(_) => unreachable!("handled above"),
                        };
                        let (v, t) = (arr.data[at], arr.tag[at]);
                        let tag = if t == UNWRITTEN {
                            if first.is_none() {
                                first = Some((i as u64, l as u32));
                            }
                            origin
                        } else {
                            t
                        };
                        any |= tag != 0;
                        self.regs[(d + k) * n + l] = v;
                        self.ptag[(d + k) * n + l] = tag;
                    }
                    self.pflag[d + k] = any;
                    if let Some(f) = first {
                        let slot = &mut self.origins[result.index()];
                        if slot.is_none() {
                            *slot = Some(f);
                            self.origins_used = true;
                        }
                    }
                }
            }
        }
    }

    /// Stores `width` consecutive elements per lane from the value's slots, in lane order.
    fn store(&mut self, m: &Mask, mem: MemRef, index: ValueId, value: ValueId, width: usize) {
        let n = self.n;
        let is = self.p.info(index).slot as usize;
        let vs = self.p.info(value).slot as usize;
        let mask_bits = match self.mem_elem(mem).size_bytes() {
            1 => 0xFF,
            2 => 0xFFFF,
            _ => u32::MAX,
        };
        match mem {
            MemRef::Param(p) => {
                let Some(view) = self.l.tensors[p as usize] else {
                    return;
                };
                for k in 0..width {
                    let idx = &self.regs[is * n..is * n + n];
                    let val = &self.regs[(vs + k) * n..(vs + k) * n + n];
                    for l in lanes_of(m, n) {
                        dev_store(view, idx[l] as usize + k, val[l]);
                    }
                }
            }
            MemRef::Arg(_) => {}
            MemRef::Shared(a) | MemRef::Local(a) => {
                let shared = matches!(mem, MemRef::Shared(_));
                for k in 0..width {
                    let poisoned = self.pflag[vs + k];
                    for l in lanes_of(m, n) {
                        let i = self.regs[is * n + l] as usize + k;
                        let v = self.regs[(vs + k) * n + l] & mask_bits;
                        let t = if poisoned {
                            self.ptag[(vs + k) * n + l]
                        } else {
                            0
                        };
                        let (arr, at) = if shared {
                            (&mut self.shared[a as usize], i)
                        } else {
                            let arr = &mut self.locals[a as usize];
                            let at = l * arr.len + i;
                            (arr, at)
                        };
                        arr.data[at] = v;
                        arr.tag[at] = t;
                    }
                }
            }
        }
    }

    fn atomic(
        &mut self,
        inst: &Inst,
        m: &Mask,
        op: AtomicOp,
        mem: MemRef,
        index: ValueId,
        value: ValueId,
    ) -> Result<()> {
        let n = self.n;
        let elem = self.mem_elem(mem);
        let is = self.p.info(index).slot as usize;
        let vs = self.p.info(value).slot as usize;
        let d = self.p.info(inst.results[0]).slot as usize;
        match mem {
            MemRef::Param(p) => {
                let Some(DevView::B32(view)) = self.l.tensors[p as usize] else {
                    return Err(self.fail(
                        inst,
                        m.first(),
                        Violation::Unsupported {
                            message: format!("`{}` on {elem} elements", op.name()),
                        },
                    ));
                };
                for l in lanes_of(m, n) {
                    let i = self.regs[is * n + l] as usize;
                    let v = self.regs[vs * n + l];
                    self.regs[d * n + l] = dev_atomic(&view[i], op, elem, v);
                }
            }
            MemRef::Shared(a) => {
                for l in lanes_of(m, n) {
                    let i = self.regs[is * n + l] as usize;
                    if self.shared[a as usize].tag[i] != 0 {
                        let memory = self.p.mem_name(mem);
                        return Err(self.fail(
                            inst,
                            l as u32,
                            Violation::Uninitialized {
                                origin: self.p.describe(inst),
                                memory,
                                index: i as u64,
                                sink: "an atomic".into(),
                            },
                        ));
                    }
                    let arr = &mut self.shared[a as usize];
                    let old = arr.data[i];
                    arr.data[i] = rmw(op, elem, old, self.regs[vs * n + l]);
                    self.regs[d * n + l] = old;
                }
            }
            MemRef::Local(_) | MemRef::Arg(_) => {
                return Err(self.fail(
                    inst,
                    m.first(),
                    Violation::Unsupported {
                        message: "atomics on stack arrays".into(),
                    },
                ))
            }
        }
        self.pflag[d] = false;
        Ok(())
    }
}
