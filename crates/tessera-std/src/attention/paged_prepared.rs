//! A page table reduced and checked once for every layer of a step. An engine's layers
//! read the same block or CSR table, each through its own pools; reducing the table in
//! every layer's call costs two small kernels a layer (and, eagerly, a read-back of the
//! verdict). [`PagedWorkspace::prepare`] does that once; each layer then passes
//! [`PageTable::Prepared`], and its call checks only that its pools, batch and query
//! rows are those the table was checked against, and that the workspace has reduced no
//! other table since.

use super::checks::dims;
use super::paged::{
    check_workspace, pool_dims, reduce_table, refusal, table_shape, PageTable, PagedKv,
    PagedWorkspace, TableGeometry,
};
use crate::error::OpError;
use std::sync::atomic::Ordering;
use tessera_runtime::Context;

const OP: &str = "PagedWorkspace::prepare";

/// A page table reduced on a workspace: what it was checked against. Pass it to the
/// paged decode and multi-query calls as [`PageTable::Prepared`].
#[derive(Clone, Debug)]
pub struct PreparedPages {
    workspace: u64,
    generation: u64,
    batch: usize,
    n_query: usize,
    causal: bool,
    page_size: usize,
    blocks: usize,
    entries: usize,
    width: usize,
}

impl PagedWorkspace {
    /// Reduces and checks `kv`'s table (a block or CSR table) for `n_query` query rows a
    /// sequence (decode: 1; multi-query: its `n_query`, with `causal` as the calls take
    /// it), over pools shaped like `kv`'s, which every layer's pools must match. Eagerly a
    /// bad table is refused here, naming the sequence; in a recorded graph see
    /// [`PagedWorkspace::take_error`]. The result stays good until a table is reduced on
    /// this workspace again (another `prepare`, or a call given a block or CSR table);
    /// after that a call given it is refused. Prepare again whenever the table changes.
    pub fn prepare(
        &self,
        ctx: &Context,
        kv: &PagedKv,
        n_query: usize,
        causal: bool,
    ) -> Result<PreparedPages, OpError> {
        if n_query == 0 {
            return Err(OpError::invalid(OP, "n_query must be at least 1"));
        }
        let (ks, page_size, _) = pool_dims(OP, kv)?;
        let batch = match kv.table {
            PageTable::Blocks { block_table, .. } => {
                dims(OP, "block_table", block_table, "batch, max_pages")?[0]
            }
            PageTable::Csr { indptr, .. } => {
                let n = dims(OP, "indptr", indptr, "batch + 1")?[0];
                if n == 0 {
                    return Err(OpError::invalid(
                        OP,
                        "`indptr` must hold batch + 1 offsets, got 0",
                    ));
                }
                n - 1
            }
            PageTable::Prepared(_) => {
                return Err(OpError::invalid(OP, "the table is prepared already"))
            }
        };
        let blocks = ks[0];
        let (entries, width) = table_shape(OP, kv.table, batch, page_size, blocks)?;
        let rows = batch.saturating_mul(n_query);
        check_workspace(ctx, OP, (rows, entries), self)?;
        let g = TableGeometry {
            page: page_size,
            blocks,
            width,
            entries,
        };
        reduce_table(ctx, OP, kv.table, (batch, n_query, causal), &g, self)?;
        if !ctx.recording_graph() {
            if let Some(finding) = self.take_verdict()? {
                return Err(refusal(OP, (kv.table, n_query), &g, self, finding));
            }
        }
        Ok(PreparedPages {
            workspace: self.id,
            generation: self.generation.load(Ordering::Relaxed),
            batch,
            n_query,
            causal: causal && n_query > 1,
            page_size,
            blocks,
            entries,
            width,
        })
    }
}

impl PreparedPages {
    /// The table's entries and width, for a call of `batch` sequences over pools of
    /// `blocks` pages of `page_size`: refused unless those are what it was prepared for.
    pub(super) fn fits(
        &self,
        op: &'static str,
        batch: usize,
        page_size: usize,
        blocks: usize,
    ) -> Result<(usize, usize), OpError> {
        let want = (self.batch, self.page_size, self.blocks);
        if (batch, page_size, blocks) != want {
            return Err(OpError::invalid(
                op,
                format!(
                    "the table was prepared for {} sequences over pools of {} pages of {} tokens; \
                     this call has {batch} sequences and {blocks} pages of {page_size}",
                    want.0, want.2, want.1
                ),
            ));
        }
        Ok((self.entries, self.width))
    }

    /// Refused unless `ws` prepared this table, has reduced none since, and the call reads
    /// `n_query` rows a sequence with the same causality.
    pub(super) fn current(
        &self,
        op: &'static str,
        ws: &PagedWorkspace,
        (n_query, causal): (usize, bool),
    ) -> Result<(), OpError> {
        if self.workspace != ws.id {
            return Err(OpError::invalid(
                op,
                "the table was prepared on another workspace; pass the one that prepared it",
            ));
        }
        if self.generation != ws.generation.load(Ordering::Relaxed) {
            return Err(OpError::invalid(
                op,
                "the workspace has reduced another table since this one was prepared; prepare it again",
            ));
        }
        let causal = causal && n_query > 1;
        if (self.n_query, self.causal) != (n_query, causal) {
            return Err(OpError::invalid(
                op,
                format!(
                    "the table was prepared for {} query rows a sequence{}; this call has {n_query}{}",
                    self.n_query,
                    if self.causal { ", causal" } else { "" },
                    if causal { ", causal" } else { "" },
                ),
            ));
        }
        Ok(())
    }
}
