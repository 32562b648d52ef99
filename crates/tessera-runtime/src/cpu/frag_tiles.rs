//! The threadgroup's product of two swizzled tiles ([`Op::FragMmaTiles`]) on the CPU: every
//! thread present, a group of whole warpgroups, the tile indices the same on every thread
//! and 1024-byte aligned, every element of both tiles in bounds, written and not the target
//! of a copy in flight; then each simdgroup's accumulators gain its 16 rows of `A·Bᵀ`, in f32.
//! An asynchronous product is computed when it starts and stays in flight until a wait
//! retires it (the oldest first): meanwhile a write of either tile (a store, a fragment
//! store, a copy issued into it), any op on its accumulators but another product into the
//! same ones, a product into overlapping other ones or the kernel's end is reported — what
//! a GPU would silently get wrong.

use super::frag::to_f32;
use super::group::Group;
use super::mask::Mask;
use crate::error::{Result, Violation};
use tessera_ir::{swizzled_128b, Inst, MemRef, Op, TileA, ValueId};

const SIMD: usize = 32;
/// Threads of a warpgroup.
const WARPGROUP: usize = 128;
/// Elements of a tile row (128 bytes of 16-bit elements).
const WIDTH: usize = 64;

/// An asynchronous tile product not yet waited for.
pub(crate) struct ProductInFlight {
    accs: Vec<u32>,
    /// The A operands it reads from registers (none when A is a tile).
    regs: Vec<u32>,
    /// `(threadgroup array, first element, elements)` of each tile it reads.
    tiles: Vec<(u32, usize, usize)>,
    /// The op that started it, for the end-of-kernel message.
    inst: Inst,
}

impl Group<'_> {
    /// Runs a [`Op::FragMmaTiles`].
    pub(crate) fn frag_mma_tiles(&mut self, inst: &Inst, m: &Mask) -> Result<()> {
        let Op::FragMmaTiles {
            accs,
            a,
            b,
            b_index,
            asynchronous,
            b_kn,
        } = &inst.op
        else {
            return Ok(());
        };
        self.check_whole_group(inst, m)?;
        let clash = self
            .products
            .iter()
            .any(|p| p.accs != *accs && p.accs.iter().any(|f| accs.contains(f)));
        if clash {
            return Err(self.pending(
                inst,
                "starts a tile product into some of the same accumulators".into(),
            ));
        }
        if !self.n.is_multiple_of(WARPGROUP) {
            return Err(self.unsupported_tiles(
                inst,
                0,
                format!(
                    "`matrix_mma_tiles` needs whole warpgroups: the threadgroup has {} threads, \
                     not a multiple of 128",
                    self.n
                ),
            ));
        }
        for v in inst.op.operands() {
            self.check_clean(inst, m, v, "a matrix fragment op")?;
        }
        let simdgroups = self.n / SIMD;
        let (ta, tile_a) = match a {
            TileA::Tile { mem, index } => {
                let ai = self.tile_index(inst, *index, "a")?;
                let t = self.read_tile(inst, (*mem, ai), 16 * simdgroups, "a", false)?;
                (t, Some((*mem, ai)))
            }
            TileA::Frags(fa) => (self.register_tile(inst, fa)?, None),
        };
        let bi = self.tile_index(inst, *b_index, "b")?;
        let tb = self.read_tile(inst, (*b, bi), 16 * accs.len(), "b", *b_kn)?;
        for &f in accs {
            for g in 0..simdgroups {
                self.need_filled(inst, f, g)?;
            }
        }
        for (j, &f) in accs.iter().enumerate() {
            for g in 0..simdgroups {
                let tile = &mut self.frags[f as usize][g * 256..(g + 1) * 256];
                for r in 0..16 {
                    let arow = &ta[(16 * g + r) * WIDTH..(16 * g + r + 1) * WIDTH];
                    for c in 0..16 {
                        let brow = &tb[(16 * j + c) * WIDTH..(16 * j + c + 1) * WIDTH];
                        let mut acc = tile[r * 16 + c];
                        for k in 0..WIDTH {
                            acc += arow[k] * brow[k];
                        }
                        tile[r * 16 + c] = acc;
                    }
                }
            }
        }
        if !*asynchronous {
            // Its wait retires every product before it too.
            self.products.clear();
        } else {
            let mut tiles = Vec::new();
            if let Some((MemRef::Shared(ka), ai)) = tile_a {
                tiles.push((ka, ai, 16 * simdgroups * WIDTH));
            }
            if let MemRef::Shared(kb) = *b {
                tiles.push((kb, bi, 16 * accs.len() * WIDTH));
            }
            let regs = match a {
                TileA::Frags(fa) => fa.to_vec(),
                TileA::Tile { .. } => vec![],
            };
            self.products.push(ProductInFlight {
                accs: accs.clone(),
                regs,
                tiles,
                inst: inst.clone(),
            });
        }
        Ok(())
    }

    /// Runs a [`Op::FragMmaWait`]: the oldest products retire until at most `pending`
    /// remain.
    pub(crate) fn frag_mma_wait(&mut self, inst: &Inst, m: &Mask) -> Result<()> {
        let Op::FragMmaWait { pending, .. } = &inst.op else {
            return Ok(());
        };
        self.check_whole_group(inst, m)?;
        let keep = (*pending as usize).min(self.products.len());
        self.products.drain(..self.products.len() - keep);
        Ok(())
    }

    fn pending(&self, inst: &Inst, what: String) -> crate::RuntimeError {
        self.fail(inst, 0, Violation::PendingProduct { what })
    }

    /// Fails if a fragment op names an accumulator of the product in flight.
    pub(crate) fn check_accumulators_free(&self, inst: &Inst) -> Result<()> {
        if self.products.is_empty() {
            return Ok(());
        }
        let busy = |f: &u32| self.products.iter().any(|p| p.accs.contains(f));
        if let Some(f) = inst.op.frags().into_iter().find(busy) {
            let name = self.p.kernel.body.frags[f as usize].name.clone();
            return Err(self.pending(inst, format!("uses accumulator `{name}`")));
        }
        // An op may read the A operands a product reads, never write them.
        let read = |f: &u32| self.products.iter().any(|p| p.regs.contains(f));
        let writes = !matches!(inst.op, Op::FragStore { .. });
        if let Some(f) = inst.op.frags().first().filter(|f| writes && read(f)) {
            let name = self.p.kernel.body.frags[*f as usize].name.clone();
            return Err(self.pending(inst, format!("writes operand `{name}`")));
        }
        Ok(())
    }

    /// Fails if a write of `len` elements of threadgroup array `array` from `at` (by
    /// `lane`) touches a tile of the product in flight.
    pub(crate) fn check_tiles_not_written(
        &self,
        inst: &Inst,
        lane: u32,
        array: u32,
        at: usize,
        len: usize,
    ) -> Result<()> {
        for &(k, start, n) in self.products.iter().flat_map(|p| &p.tiles) {
            if k == array && at < start + n && start < at + len {
                let memory = self.p.mem_name(MemRef::Shared(array));
                return Err(self.fail(
                    inst,
                    lane,
                    Violation::PendingProduct {
                        what: format!("thread {lane} writes element {at} of tile `{memory}`"),
                    },
                ));
            }
        }
        Ok(())
    }

    /// Fails if the kernel ends with a product in flight.
    pub(crate) fn check_no_product_at_end(&self) -> Result<()> {
        match self.products.first() {
            None => Ok(()),
            Some(p) => Err(self.pending(&p.inst, "the kernel ends".into())),
        }
    }

    fn unsupported_tiles(&self, inst: &Inst, thread: u32, message: String) -> crate::RuntimeError {
        self.fail(inst, thread, Violation::Unsupported { message })
    }

    /// A tile index: the same on every thread, a multiple of 512 elements (1024 bytes).
    fn tile_index(&self, inst: &Inst, v: ValueId, what: &str) -> Result<usize> {
        let n = self.n;
        let s = self.p.info(v).slot as usize;
        let lanes = &self.regs[s * n..s * n + n];
        let first = lanes[0];
        if let Some(k) = lanes.iter().position(|&x| x != first) {
            return Err(self.unsupported_tiles(
                inst,
                k as u32,
                format!(
                    "the index of tile `{what}` differs between threads ({first} on thread 0, \
                     {} on thread {k}); `matrix_mma_tiles` needs it threadgroup-uniform",
                    lanes[k]
                ),
            ));
        }
        if !first.is_multiple_of(512) {
            return Err(self.unsupported_tiles(
                inst,
                0,
                format!(
                    "the index of tile `{what}` is {first}, not a multiple of 512 elements: a \
                     swizzled tile starts on a 1024-byte boundary"
                ),
            ));
        }
        Ok(first as usize)
    }

    /// Tile A from registers: simdgroup `g`'s rows `16g …` from its four A operands, as
    /// f32, row-major `16·S × 64`.
    fn register_tile(&self, inst: &Inst, fa: &[u32; 4]) -> Result<Vec<f32>> {
        let simdgroups = self.n / SIMD;
        let mut out = vec![0f32; 16 * simdgroups * WIDTH];
        for (i, &f) in fa.iter().enumerate() {
            for g in 0..simdgroups {
                self.need_filled(inst, f, g)?;
                let frag = &self.frags[f as usize][g * 256..(g + 1) * 256];
                for r in 0..16 {
                    let row = &mut out[(16 * g + r) * WIDTH + 16 * i..][..16];
                    row.copy_from_slice(&frag[r * 16..r * 16 + 16]);
                }
            }
        }
        Ok(out)
    }

    /// The logical `rows × 64` tile at `index` of threadgroup array `mem`, as f32, row-major;
    /// with `kn` stored transposed, `[64, rows]` in 64-column blocks 4096 elements apart.
    fn read_tile(
        &self,
        inst: &Inst,
        (mem, index): (MemRef, usize),
        rows: usize,
        what: &str,
        kn: bool,
    ) -> Result<Vec<f32>> {
        let MemRef::Shared(k) = mem else {
            return Err(self.unsupported_tiles(
                inst,
                0,
                format!("tile `{what}` is not a threadgroup array"),
            ));
        };
        let len = self.mem_len(mem);
        let elem = self.mem_elem(mem);
        if index + rows * WIDTH > len {
            return Err(self.fail(
                inst,
                0,
                Violation::OutOfBounds {
                    memory: self.p.mem_name(mem),
                    index: (index + rows * WIDTH - 1) as u64,
                    len: len as u64,
                },
            ));
        }
        let sink = format!("tile `{what}` of `matrix_mma_tiles`");
        let mut out = vec![0f32; rows * WIDTH];
        for r in 0..rows {
            for c in 0..WIDTH {
                let (r32, c32) = (r as u32, c as u32);
                let at = index
                    + if kn {
                        (r / 64) * 4096 + swizzled_128b(c32, r32 % 64) as usize
                    } else {
                        swizzled_128b(r32, c32) as usize
                    };
                self.check_not_in_flight(inst, 0, mem, at, 1, false)?;
                let bits = self.written_shared(inst, 0, (k, at), &sink)?;
                out[r * WIDTH + c] = to_f32(elem, bits);
            }
        }
        Ok(out)
    }
}
