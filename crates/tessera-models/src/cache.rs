//! The paged KV cache: per layer a K and a V pool of pages in vLLM's NHD layout
//! (`[blocks, page_size, n_kv_heads, head_dim]`), shared by every sequence, and the
//! bookkeeping the ops read through a block table: each sequence slot's pages (taken from
//! a free list as it grows, given back when it is released) and its length. The pools
//! are allocated once; appends and attention go through `tessera-std`'s paged ops.

use crate::error::ModelError;
use tessera_runtime::{Context, DType, Tensor};
use tessera_std::attention::KvLayout;

/// The page pools of every layer and the pages each sequence slot holds.
pub struct PagedCache {
    /// Per layer: the K and V pools.
    pools: Vec<(Tensor, Tensor)>,
    page_size: usize,
    /// Pages a sequence may hold: the block table's width.
    max_pages: usize,
    /// Free page ids, the next one taken from the end.
    free: Vec<u32>,
    /// Each slot's pages, in order, and its length in tokens.
    pages: Vec<Vec<u32>>,
    lens: Vec<usize>,
}

/// The geometry of a cache.
#[derive(Clone, Copy, Debug)]
pub struct CacheShape {
    pub layers: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub dtype: DType,
    pub page_size: usize,
    /// Pages in each pool.
    pub blocks: usize,
    /// Sequence slots.
    pub max_batch: usize,
    /// Pages one sequence may hold.
    pub max_pages: usize,
}

impl PagedCache {
    /// Allocates zeroed pools of `shape` and puts every page on the free list.
    pub fn new(ctx: &Context, shape: CacheShape) -> Result<PagedCache, ModelError> {
        let CacheShape {
            layers,
            n_kv_heads,
            head_dim,
            dtype,
            page_size,
            blocks,
            max_batch,
            max_pages,
        } = shape;
        if page_size == 0 || blocks == 0 || max_batch == 0 || max_pages == 0 {
            return Err(ModelError::request(format!(
                "a cache needs pages, slots and a table width: page_size {page_size}, blocks {blocks}, max_batch {max_batch}, max_pages {max_pages}"
            )));
        }
        if blocks > i32::MAX as usize {
            return Err(ModelError::request(format!(
                "{blocks} pages do not fit the i32 block table"
            )));
        }
        let pool = [blocks, page_size, n_kv_heads, head_dim];
        let pools = (0..layers)
            .map(|_| Ok((ctx.zeros(dtype, &pool)?, ctx.zeros(dtype, &pool)?)))
            .collect::<Result<Vec<_>, ModelError>>()?;
        Ok(PagedCache {
            pools,
            page_size,
            max_pages,
            free: (0..blocks as u32).rev().collect(),
            pages: vec![Vec::new(); max_batch],
            lens: vec![0; max_batch],
        })
    }

    /// The pools' layout.
    pub fn layout(&self) -> KvLayout {
        KvLayout::Nhd
    }

    /// Layer `layer`'s K and V pools.
    pub fn pools(&self, layer: usize) -> (&Tensor, &Tensor) {
        let (k, v) = &self.pools[layer];
        (k, v)
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The block table's width: pages one sequence may hold.
    pub fn max_pages(&self) -> usize {
        self.max_pages
    }

    /// Sequence slots.
    pub fn slots(&self) -> usize {
        self.lens.len()
    }

    /// The most tokens one sequence may hold.
    pub fn max_context(&self) -> usize {
        self.max_pages * self.page_size
    }

    /// Slot `seq`'s length in tokens.
    pub fn len(&self, seq: usize) -> usize {
        self.lens[seq]
    }

    /// True when no slot holds a token.
    pub fn is_empty(&self) -> bool {
        self.lens.iter().all(|&l| l == 0)
    }

    /// Gives slot `seq` pages for `len` tokens in all (taking free pages as needed) and
    /// records `len` as its length; refused, changing nothing, when the table row or the
    /// pool runs out.
    pub fn grow(&mut self, seq: usize, len: usize) -> Result<(), ModelError> {
        let need = len.div_ceil(self.page_size);
        if need > self.max_pages {
            return Err(ModelError::request(format!(
                "sequence {seq} would hold {len} tokens; the cache holds at most {} a sequence ({} pages of {})",
                self.max_context(),
                self.max_pages,
                self.page_size
            )));
        }
        let more = need.saturating_sub(self.pages[seq].len());
        if more > self.free.len() {
            return Err(ModelError::request(format!(
                "sequence {seq} needs {more} more pages, {} are free",
                self.free.len()
            )));
        }
        for _ in 0..more {
            let page = self.free.pop().expect("counted above");
            self.pages[seq].push(page);
        }
        self.lens[seq] = self.lens[seq].max(len);
        Ok(())
    }

    /// Empties slot `seq`, returning its pages to the free list.
    pub fn release(&mut self, seq: usize) {
        self.free.extend(self.pages[seq].drain(..).rev());
        self.lens[seq] = 0;
    }

    /// Empties every slot.
    pub fn clear(&mut self) {
        for seq in 0..self.slots() {
            self.release(seq);
        }
    }

    /// Slot `seq`'s block-table row: its pages, then zeros (a valid page id the ops never
    /// read past the length).
    pub fn table_row(&self, seq: usize, row: &mut [i32]) {
        row.fill(0);
        for (dst, &p) in row.iter_mut().zip(&self.pages[seq]) {
            *dst = p as i32;
        }
    }
}
