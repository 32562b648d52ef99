//! Asynchronous copies on the CPU, and their race checker. A copy reads its source when
//! it is issued and lands in threadgroup memory when a wait of its thread retires its
//! group — the latest moment a GPU may complete it. Until then its destination keeps its
//! old contents (or stays never-written), and every read or write of it is an error, as
//! is a wait with uncommitted copies (no wait would ever cover them) or the kernel's end
//! with copies in flight.

use super::group::Group;
use super::mask::Mask;
use super::memops::dev_load;
use crate::error::{Result, Violation};
use tessera_ir::{Inst, MemRef, ValueId};

/// One copy in flight.
struct InFlight {
    lane: u32,
    /// The issuing lane's group it belongs to (its commit count when issued).
    group: u32,
    array: u32,
    at: usize,
    /// The element bits that land (zeros for the zero-fill form's out-of-bounds copies).
    data: Vec<u32>,
    /// The issuing op, for the end-of-kernel message.
    inst: Inst,
}

/// The asynchronous copies of one threadgroup.
#[derive(Default)]
pub(crate) struct AsyncCopies {
    /// Per lane: how many groups it has committed (the number of its open group).
    committed: Vec<u32>,
    in_flight: Vec<InFlight>,
    /// Per threadgroup array and element: `1 + lane` of the copy in flight into it, or 0.
    marks: Vec<Vec<u32>>,
}

impl AsyncCopies {
    pub fn new(lanes: usize, shared_lens: impl Iterator<Item = usize>) -> AsyncCopies {
        AsyncCopies {
            committed: vec![0; lanes],
            in_flight: Vec::new(),
            marks: shared_lens.map(|n| vec![0; n]).collect(),
        }
    }

    /// Forgets every copy (a new threadgroup starts).
    pub fn reset(&mut self) {
        if self.in_flight.is_empty() && self.committed.iter().all(|&c| c == 0) {
            return;
        }
        self.committed.fill(0);
        for c in self.in_flight.drain(..) {
            self.marks[c.array as usize][c.at..c.at + c.data.len()].fill(0);
        }
    }

    /// The lane whose copy in flight targets element `at` of threadgroup array `array`.
    #[inline(always)]
    pub fn issuer(&self, array: u32, at: usize) -> Option<u32> {
        if self.in_flight.is_empty() {
            return None;
        }
        match self.marks[array as usize].get(at) {
            Some(&m) if m != 0 => Some(m - 1),
            _ => None,
        }
    }
}

impl Group<'_> {
    /// True while any copy of the threadgroup is in flight.
    #[inline(always)]
    pub(crate) fn copies_in_flight(&self) -> bool {
        !self.copies.in_flight.is_empty() || !self.products.is_empty()
    }

    /// Fails if an access (a read, or a write with `write`) of `len` elements of `mem`
    /// from `at` by `lane` touches an element a copy in flight targets.
    #[inline(always)]
    pub(crate) fn check_not_in_flight(
        &self,
        inst: &Inst,
        lane: u32,
        mem: MemRef,
        at: usize,
        len: usize,
        write: bool,
    ) -> Result<()> {
        let MemRef::Shared(a) = mem else {
            return Ok(());
        };
        if write {
            self.check_tiles_not_written(inst, lane, a, at, len)?;
        }
        if self.copies.in_flight.is_empty() {
            return Ok(());
        }
        for i in at..at + len {
            if let Some(issuer) = self.copies.issuer(a, i) {
                return Err(self.fail(
                    inst,
                    lane,
                    Violation::PendingCopy {
                        memory: self.p.mem_name(mem),
                        index: i as u64,
                        issuer,
                        write,
                    },
                ));
            }
        }
        Ok(())
    }

    /// Issues `dst[dst_index..] ← src[src_index..]` (`width` elements) for every active
    /// lane, into its open group.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy_async(
        &mut self,
        inst: &Inst,
        m: &Mask,
        (dst, dst_index): (MemRef, ValueId),
        (src, src_index): (MemRef, ValueId),
        width: u8,
        valid: Option<ValueId>,
    ) -> Result<()> {
        self.check_clean(
            inst,
            m,
            dst_index,
            "an asynchronous copy's destination index",
        )?;
        self.check_clean(inst, m, src_index, "an asynchronous copy's source index")?;
        if let Some(v) = valid {
            self.check_clean(inst, m, v, "an asynchronous copy's in-bounds flag")?;
        }
        let (MemRef::Shared(array), MemRef::Param(p)) = (dst, src) else {
            return Err(self.fail(
                inst,
                m.first(),
                Violation::Unsupported {
                    message: format!("an asynchronous copy from {src} into {dst}"),
                },
            ));
        };
        let n = self.n;
        let w = width as usize;
        let (ds, ss) = (
            self.p.info(dst_index).slot as usize,
            self.p.info(src_index).slot as usize,
        );
        let vs = valid.map(|v| self.p.info(v).slot as usize);
        let dst_len = self.mem_len(dst) as u64;
        let src_len = self.mem_len(src) as u64;
        let elem = self.mem_elem(src);
        let view = self.l.tensors[p as usize];
        for l in super::group::lanes_of(m, n) {
            let reads = vs.is_none_or(|s| self.regs[s * n + l] != 0);
            for (memory, index, len, checked) in [
                (dst, self.regs[ds * n + l] as u64, dst_len, true),
                (src, self.regs[ss * n + l] as u64, src_len, reads),
            ] {
                if !checked {
                    continue;
                }
                if !index.is_multiple_of(w as u64) {
                    return Err(self.fail(
                        inst,
                        l as u32,
                        Violation::Misaligned {
                            memory: self.p.mem_name(memory),
                            index,
                            width: width as u32,
                        },
                    ));
                }
                if index + w as u64 > len {
                    return Err(self.fail(
                        inst,
                        l as u32,
                        Violation::OutOfBounds {
                            memory: self.p.mem_name(memory),
                            index: index.max(len),
                            len,
                        },
                    ));
                }
            }
            let at = self.regs[ds * n + l] as usize;
            self.check_not_in_flight(inst, l as u32, dst, at, w, true)?;
            let from = self.regs[ss * n + l] as usize;
            let data = match (reads, view) {
                (true, Some(v)) => (0..w).map(|k| dev_load(v, from + k, elem)).collect(),
                _ => vec![0; w],
            };
            self.copies.marks[array as usize][at..at + w].fill(l as u32 + 1);
            self.copies.in_flight.push(InFlight {
                lane: l as u32,
                group: self.copies.committed[l],
                array,
                at,
                data,
                inst: inst.clone(),
            });
        }
        Ok(())
    }

    /// Closes every active lane's open group.
    pub(crate) fn commit_copies(&mut self, m: &Mask) {
        for l in super::group::lanes_of(m, self.n) {
            self.copies.committed[l] += 1;
        }
    }

    /// Lands, for every active lane, its committed groups but the newest `pending`.
    pub(crate) fn wait_copies(&mut self, inst: &Inst, m: &Mask, pending: u32) -> Result<()> {
        if self.copies.in_flight.is_empty() {
            return Ok(());
        }
        let n = self.n;
        let mut active = vec![false; n];
        for l in super::group::lanes_of(m, n) {
            active[l] = true;
        }
        let committed = &self.copies.committed;
        if let Some(c) = self
            .copies
            .in_flight
            .iter()
            .find(|c| active[c.lane as usize] && c.group == committed[c.lane as usize])
        {
            let lane = c.lane;
            let copies = self
                .copies
                .in_flight
                .iter()
                .filter(|d| d.lane == lane && d.group == committed[lane as usize])
                .count() as u32;
            return Err(self.fail(
                inst,
                lane,
                Violation::CopiesInFlight {
                    copies,
                    at_end: false,
                },
            ));
        }
        let retired = |c: &InFlight| {
            active[c.lane as usize]
                && (c.group as u64 + pending as u64) < committed[c.lane as usize] as u64
        };
        let (landing, staying): (Vec<InFlight>, Vec<InFlight>) =
            self.copies.in_flight.drain(..).partition(retired);
        self.copies.in_flight = staying;
        for c in landing {
            let arr = &mut self.shared[c.array as usize];
            arr.data[c.at..c.at + c.data.len()].copy_from_slice(&c.data);
            arr.tag[c.at..c.at + c.data.len()].fill(0);
            self.copies.marks[c.array as usize][c.at..c.at + c.data.len()].fill(0);
        }
        Ok(())
    }

    /// Fails if copies are still in flight when the threadgroup ends.
    pub(crate) fn check_copies_landed(&self) -> Result<()> {
        let Some(first) = self.copies.in_flight.first() else {
            return Ok(());
        };
        Err(self.fail(
            &first.inst,
            first.lane,
            Violation::CopiesInFlight {
                copies: self.copies.in_flight.len() as u32,
                at_end: true,
            },
        ))
    }
}
