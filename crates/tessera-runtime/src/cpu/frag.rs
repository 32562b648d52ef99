//! Matrix fragments on the CPU: each simdgroup holds every fragment as a whole 16×16 tile
//! of f32 (operand values are exact in f32), loaded, stored and multiplied with plain
//! loops; a row vector is the first 16 values of its tile, row `r` at `r`. Every op checks that the whole simdgroup takes part, that its index and stride
//! agree on every lane, that every element is in bounds and that no never-written
//! threadgroup element enters a fragment.

use super::group::{Group, UNWRITTEN};
use super::mask::Mask;
use super::memops::{dev_load, dev_store};
use super::scalar::{f32d, f32e};
use crate::error::{Result, Violation};
use half::{bf16, f16};
use tessera_ir::{Inst, MemRef, Op, RowMap, RowReduce, Scalar, ValueId, FRAG_DIM};

const D: usize = FRAG_DIM as usize;
/// Elements of one fragment tile.
pub(crate) const TILE: usize = D * D;
const SIMD: usize = 32;

/// Register bits of a memory element to f32.
pub(super) fn to_f32(elem: Scalar, bits: u32) -> f32 {
    match elem {
        Scalar::F16 => f16::from_bits(bits as u16).to_f32(),
        Scalar::BF16 => bf16::from_bits(bits as u16).to_f32(),
        _ => f32d(bits),
    }
}

/// The bits of `x` as an element of `elem` (f32, or rounded to f16/bf16).
fn bits_of(elem: Scalar, x: f32) -> u32 {
    match elem {
        Scalar::F16 => f16::from_f32(x).to_bits() as u32,
        Scalar::BF16 => bf16::from_f32(x).to_bits() as u32,
        _ => f32e(x),
    }
}

/// f32 rounded to a fragment's element type, still as f32.
fn round_to(elem: Scalar, x: f32) -> f32 {
    match elem {
        Scalar::F16 => f16::from_f32(x).to_f32(),
        Scalar::BF16 => bf16::from_f32(x).to_f32(),
        _ => x,
    }
}

impl Group<'_> {
    /// The value of `v` on the simdgroup's lanes, which must all agree.
    fn uniform_u32(&self, inst: &Inst, g: usize, v: ValueId, what: &str) -> Result<u32> {
        let n = self.n;
        let s = self.p.info(v).slot as usize;
        let lanes = &self.regs[s * n + g * SIMD..s * n + g * SIMD + SIMD];
        let first = lanes[0];
        if let Some(k) = lanes.iter().position(|&x| x != first) {
            return Err(self.fail(
                inst,
                (g * SIMD + k) as u32,
                Violation::Unsupported {
                    message: format!(
                        "the {what} of a matrix fragment op differs between lanes of simdgroup {g} \
                         ({first} on lane 0, {} on lane {k}); it must be simdgroup-uniform",
                        lanes[k]
                    ),
                },
            ));
        }
        Ok(first)
    }

    fn frag_slice(&self, f: u32, g: usize) -> &[f32] {
        &self.frags[f as usize][g * TILE..(g + 1) * TILE]
    }

    pub(crate) fn need_filled(&self, inst: &Inst, f: u32, g: usize) -> Result<()> {
        if self.frag_set[f as usize][g] {
            return Ok(());
        }
        let name = self
            .p
            .kernel
            .body
            .frags
            .get(f as usize)
            .map(|d| d.name.clone())
            .unwrap_or_default();
        Err(self.fail(
            inst,
            (g * SIMD) as u32,
            Violation::Unsupported {
                message: format!("matrix fragment `{name}` is read before it is filled or loaded"),
            },
        ))
    }

    /// Fails if a tile access of simdgroup `g` touches a threadgroup element a copy in
    /// flight targets.
    fn check_tile_not_in_flight(
        &self,
        inst: &Inst,
        g: usize,
        mem: MemRef,
        addrs: &[usize],
        write: bool,
    ) -> Result<()> {
        if !self.copies_in_flight() {
            return Ok(());
        }
        for &a in addrs {
            self.check_not_in_flight(inst, (g * SIMD) as u32, mem, a, 1, write)?;
        }
        Ok(())
    }

    /// Element addresses of a tile access, bounds-checked.
    fn tile_addresses(
        &self,
        inst: &Inst,
        g: usize,
        mem: MemRef,
        (index, stride, transpose): (u32, u32, bool),
    ) -> Result<Vec<usize>> {
        let len = self.mem_len(mem) as u64;
        let mut out = Vec::with_capacity(TILE);
        for r in 0..D as u64 {
            for c in 0..D as u64 {
                let (row, col) = if transpose { (c, r) } else { (r, c) };
                let i = index as u64 + row * stride as u64 + col;
                if i >= len {
                    return Err(self.fail(
                        inst,
                        (g * SIMD) as u32,
                        Violation::OutOfBounds {
                            memory: self.p.mem_name(mem),
                            index: i,
                            len,
                        },
                    ));
                }
                out.push(i as usize);
            }
        }
        Ok(out)
    }

    /// The bits of element `a` of threadgroup array `k`, which a fragment or tile product
    /// (`sink`) reads on behalf of `thread`: an error if it was never written or holds a
    /// poisoned value.
    pub(super) fn written_shared(
        &self,
        inst: &Inst,
        thread: u32,
        (k, a): (u32, usize),
        sink: &str,
    ) -> Result<u32> {
        let arr = &self.shared[k as usize];
        if arr.tag[a] == 0 {
            return Ok(arr.data[a]);
        }
        let origin = if arr.tag[a] == UNWRITTEN {
            "never-written threadgroup memory"
        } else {
            "a poisoned value stored there"
        };
        Err(self.fail(
            inst,
            thread,
            Violation::Uninitialized {
                origin: origin.to_string(),
                memory: self.p.mem_name(MemRef::Shared(k)),
                index: a as u64,
                sink: sink.to_string(),
            },
        ))
    }

    pub(crate) fn frag_op(&mut self, inst: &Inst, m: &Mask) -> Result<()> {
        let groups = self.active_simdgroups(inst, m)?;
        for v in inst.op.operands() {
            self.check_clean(inst, m, v, "a matrix fragment op")?;
        }
        for g in groups {
            match &inst.op {
                Op::FragFill { frag, value } => {
                    let x = f32d(self.uniform_u32(inst, g, *value, "fill value")?);
                    let elem = self.p.kernel.body.frags[*frag as usize].elem;
                    let x = round_to(elem, x);
                    self.frags[*frag as usize][g * TILE..(g + 1) * TILE].fill(x);
                    self.frag_set[*frag as usize][g] = true;
                }
                Op::FragScale { frag, value } => {
                    self.need_filled(inst, *frag, g)?;
                    let x = f32d(self.uniform_u32(inst, g, *value, "scale")?);
                    for e in &mut self.frags[*frag as usize][g * TILE..(g + 1) * TILE] {
                        *e *= x;
                    }
                }
                Op::FragLoad {
                    frag,
                    mem,
                    index,
                    stride,
                    transpose,
                } => {
                    let i = self.uniform_u32(inst, g, *index, "index")?;
                    let s = self.uniform_u32(inst, g, *stride, "stride")?;
                    let addrs = self.tile_addresses(inst, g, *mem, (i, s, *transpose))?;
                    self.check_tile_not_in_flight(inst, g, *mem, &addrs, false)?;
                    let elem = self.mem_elem(*mem);
                    let mut tile = [0f32; TILE];
                    for (t, &a) in tile.iter_mut().zip(&addrs) {
                        let bits = match *mem {
                            MemRef::Param(p) => match self.l.tensors[p as usize] {
                                Some(view) => dev_load(view, a, elem),
                                None => 0,
                            },
                            MemRef::Shared(k) => self.written_shared(
                                inst,
                                (g * SIMD) as u32,
                                (k, a),
                                "a matrix fragment",
                            )?,
                            MemRef::Local(_) | MemRef::Arg(_) => 0,
                        };
                        *t = to_f32(elem, bits);
                    }
                    self.frags[*frag as usize][g * TILE..(g + 1) * TILE].copy_from_slice(&tile);
                    self.frag_set[*frag as usize][g] = true;
                }
                Op::FragStore {
                    frag,
                    mem,
                    index,
                    stride,
                } => {
                    self.need_filled(inst, *frag, g)?;
                    let i = self.uniform_u32(inst, g, *index, "index")?;
                    let s = self.uniform_u32(inst, g, *stride, "stride")?;
                    let addrs = self.tile_addresses(inst, g, *mem, (i, s, false))?;
                    self.check_tile_not_in_flight(inst, g, *mem, &addrs, true)?;
                    let tile: Vec<f32> = self.frag_slice(*frag, g).to_vec();
                    let elem = self.mem_elem(*mem);
                    for (&x, &a) in tile.iter().zip(&addrs) {
                        match *mem {
                            MemRef::Param(p) => {
                                if let Some(view) = self.l.tensors[p as usize] {
                                    dev_store(view, a, bits_of(elem, x));
                                }
                            }
                            MemRef::Shared(k) => {
                                let arr = &mut self.shared[k as usize];
                                arr.data[a] = bits_of(elem, x);
                                arr.tag[a] = 0;
                            }
                            MemRef::Local(_) | MemRef::Arg(_) => {}
                        }
                    }
                }
                Op::FragMma { d, a, b, c } => {
                    for f in [*a, *b, *c] {
                        self.need_filled(inst, f, g)?;
                    }
                    let (ta, tb, tc) = (
                        self.frag_slice(*a, g),
                        self.frag_slice(*b, g),
                        self.frag_slice(*c, g),
                    );
                    let mut out = [0f32; TILE];
                    for r in 0..D {
                        for col in 0..D {
                            let mut acc = tc[r * D + col];
                            for k in 0..D {
                                acc += ta[r * D + k] * tb[k * D + col];
                            }
                            out[r * D + col] = acc;
                        }
                    }
                    self.frags[*d as usize][g * TILE..(g + 1) * TILE].copy_from_slice(&out);
                    self.frag_set[*d as usize][g] = true;
                }
                Op::FragRowReduce { op, rows, frag } => {
                    self.need_filled(inst, *rows, g)?;
                    self.need_filled(inst, *frag, g)?;
                    let tile = self.frag_slice(*frag, g).to_vec();
                    let acc = &mut self.frags[*rows as usize][g * TILE..g * TILE + D];
                    for (r, out) in acc.iter_mut().enumerate() {
                        let row = &tile[r * D..(r + 1) * D];
                        *out = match op {
                            RowReduce::Max => row.iter().fold(*out, |m, &x| m.max(x)),
                            RowReduce::Sum => *out + row.iter().sum::<f32>(),
                        };
                    }
                }
                Op::FragRowMap { op, frag, rows } => {
                    self.need_filled(inst, *rows, g)?;
                    self.need_filled(inst, *frag, g)?;
                    let m: Vec<f32> = self.frag_slice(*rows, g)[..D].to_vec();
                    let tile = &mut self.frags[*frag as usize][g * TILE..(g + 1) * TILE];
                    for (i, x) in tile.iter_mut().enumerate() {
                        let mr = m[i / D];
                        *x = match op {
                            RowMap::Scale => *x * mr,
                            RowMap::Exp2Sub if *x == f32::NEG_INFINITY => 0.0,
                            RowMap::Exp2Sub => (*x - mr).exp2(),
                        };
                    }
                }
                Op::FragMask {
                    frag,
                    diag,
                    cap,
                    value,
                } => {
                    self.need_filled(inst, *frag, g)?;
                    let diag = self.uniform_u32(inst, g, *diag, "diagonal")? as i32 as i64;
                    let cap = self.uniform_u32(inst, g, *cap, "column limit")? as i32 as i64;
                    let x = f32d(self.uniform_u32(inst, g, *value, "fill value")?);
                    let tile = &mut self.frags[*frag as usize][g * TILE..(g + 1) * TILE];
                    for (i, e) in tile.iter_mut().enumerate() {
                        let (r, c) = ((i / D) as i64, (i % D) as i64);
                        if c - r >= diag || c >= cap {
                            *e = x;
                        }
                    }
                }
                Op::FragRows { op, d, a, b } => {
                    self.need_filled(inst, *a, g)?;
                    self.need_filled(inst, *b, g)?;
                    let (va, vb) = (
                        self.frag_slice(*a, g)[..D].to_vec(),
                        self.frag_slice(*b, g)[..D].to_vec(),
                    );
                    let out = &mut self.frags[*d as usize][g * TILE..g * TILE + D];
                    for r in 0..D {
                        out[r] = op.apply(va[r], vb[r]);
                    }
                    self.frag_set[*d as usize][g] = true;
                }
                Op::FragRowsRaise { d, a, b, margin } => {
                    self.need_filled(inst, *a, g)?;
                    self.need_filled(inst, *b, g)?;
                    let margin = f32d(self.uniform_u32(inst, g, *margin, "margin")?);
                    let (va, vb) = (
                        self.frag_slice(*a, g)[..D].to_vec(),
                        self.frag_slice(*b, g)[..D].to_vec(),
                    );
                    let out = &mut self.frags[*d as usize][g * TILE..g * TILE + D];
                    for r in 0..D {
                        out[r] = if vb[r] > va[r] + margin { vb[r] } else { va[r] };
                    }
                    self.frag_set[*d as usize][g] = true;
                }
                Op::FragAdd { d, a, b } => {
                    self.need_filled(inst, *a, g)?;
                    self.need_filled(inst, *b, g)?;
                    let sum: Vec<f32> = self
                        .frag_slice(*a, g)
                        .iter()
                        .zip(self.frag_slice(*b, g))
                        .map(|(x, y)| x + y)
                        .collect();
                    self.frags[*d as usize][g * TILE..(g + 1) * TILE].copy_from_slice(&sum);
                    self.frag_set[*d as usize][g] = true;
                }
                Op::FragConvert { dst, src } => {
                    self.need_filled(inst, *src, g)?;
                    let elem = self.p.kernel.body.frags[*dst as usize].elem;
                    let tile: Vec<f32> = self
                        .frag_slice(*src, g)
                        .iter()
                        .map(|&x| round_to(elem, x))
                        .collect();
                    self.frags[*dst as usize][g * TILE..(g + 1) * TILE].copy_from_slice(&tile);
                    self.frag_set[*dst as usize][g] = true;
                }
                _ => {}
            }
        }
        Ok(())
    }
}
