//! A page table reduced, on the device, to what the paged decode kernels walk: a flat list
//! of checked page ids, and each sequence's first entry in it and length. vLLM's block
//! table (`[batch, max_pages]` with `seq_lens`) and FlashInfer's CSR table (`indptr`,
//! `indices`, `last_page_len`) both become that list.
//!
//! The tables live on the device, so they are checked there, as the embedding ids are: two
//! small kernels record the first sequence with a negative length, the first whose length
//! is more than its pages hold, the first table entry it uses that is not a page of the
//! cache, and (CSR) the first sequence whose row pointers are not ordered within `indices`,
//! each as an atomic minimum in a verdict of four words. The list they write holds only
//! checked ids (0 in every entry no sequence uses, or that failed) and the lengths are
//! clamped to what the pages hold, so the attention kernels never address outside the
//! cache, whatever the tables say. Eagerly the wrapper reads the verdict back and refuses
//! the call before the attention runs; in a recorded graph it cannot, and
//! [`super::paged::PagedWorkspace::take_error`] reports the verdict after the replay.

use tessera_macros::{func, kernel};

/// Verdict word: the first sequence whose length is negative.
pub const NEGATIVE_LENGTH: usize = 0;
/// Verdict word: the first sequence whose length is more than its pages hold (or than
/// the workspace's `max_context`, which the split plan counts on).
pub const LENGTH_PAST_TABLE: usize = 1;
/// Verdict word: the first used table entry that is not a page of the cache.
pub const PAGE_OUT_OF_RANGE: usize = 2;
/// Verdict word: the first sequence whose CSR row pointers are out of order or range.
pub const BAD_ROW_POINTERS: usize = 3;
/// Verdict word: the first sequence that holds tokens, but fewer than its new queries.
pub const SHORTER_THAN_QUERIES: usize = 4;
/// Words in a verdict.
pub const VERDICT_WORDS: usize = 5;

/// Each query row's first entry in the page list (`starts`) and visible length (`lens`,
/// clamped to what its pages hold), one thread a row: sequence `b` has `n_query` rows,
/// the last `n_query` of its tokens; row `i` sees the first `len − n_query + i + 1` keys
/// when `causal != 0`, else all `len` (a sequence of 0 tokens: none); decode is one
/// row a sequence. Block table (`csr = 0`): `lengths` is `seq_lens`, sequence `b`'s pages are entries `b · width ..` of the flattened table.
/// CSR (`csr = 1`): `lengths` is `last_page_len`, sequence `b`'s pages are `indices[indptr[b]
/// .. indptr[b + 1])` of `width` entries, its length `(pages − 1) · page_size +
/// last_page_len` (0 without pages).
#[kernel]
pub fn paged_lengths_kernel(
    lengths: Tensor<i32>,
    indptr: Tensor<i32>,
    mut starts: Tensor<u32>,
    mut lens: Tensor<u32>,
    mut verdict: Tensor<u32>,
    batch: u32,
    width: u32,
    page_size: u32,
    n_query: u32,
    causal: u32,
    max_len: u32,
    #[constexpr] csr: u32,
) {
    let r = global_id();
    let b = r / n_query;
    let i = r - b * n_query;
    if b < batch {
        let l = load(lengths[b]);
        if l < 0i32 {
            let _first = atomic_min(verdict[0], b);
        }
        let lu = select(l < 0i32, 0u32, l.cast::<u32>());
        // The sequence's tokens, clamped to what its pages hold, and its first entry.
        let mut n = 0u32;
        let mut start = 0u32;
        if csr == 0 {
            let cap = min(width * page_size, max_len);
            if lu > cap {
                let _first = atomic_min(verdict[1], b);
            }
            n = min(lu, cap);
            start = b * width;
        } else {
            let p0 = load(indptr[b]);
            let p1 = load(indptr[b + 1]);
            let ordered = p0 >= 0i32 && p1 >= p0 && p1.cast::<u32>() <= width;
            if !ordered {
                let _first = atomic_min(verdict[3], b);
            }
            let np = select(ordered, (p1 - p0).cast::<u32>(), 0u32);
            if lu > page_size || (np == 0 && lu > 0) {
                let _first = atomic_min(verdict[1], b);
            }
            let held = select(np > 0, (np - 1) * page_size + min(lu, page_size), 0u32);
            if held > max_len {
                let _first = atomic_min(verdict[1], b);
            }
            n = min(held, max_len);
            start = select(ordered, p0.cast::<u32>(), 0u32);
        }
        if causal != 0 && n > 0 && n < n_query {
            let _first = atomic_min(verdict[4], b);
        }
        store(starts[r], start);
        store(lens[r], row_len(n, i, n_query, causal));
    }
}

/// The keys row `i` of `n_query` sees in a sequence of `n` tokens: causal, the first `n −
/// n_query + i + 1` (none when `n` is shorter than the queries: refused), else all `n`.
#[func]
fn row_len(n: u32, i: u32, n_query: u32, causal: u32) -> u32 {
    select(
        causal != 0,
        select(n >= n_query, n - n_query + i + 1, 0u32),
        n,
    )
}

/// The checked page list, one thread an entry of the table (`entries` in all): an entry a
/// sequence uses is copied when it is a page of the cache (`0..blocks`) and recorded in
/// the verdict otherwise; every other entry becomes 0. Block table: entry `e` is page
/// `e mod width` of sequence `e / width`, used below `⌈lens / page_size⌉` of the
/// sequence's last query row (which sees all its keys). CSR: entries
/// `indptr[0] .. indptr[batch]` are used.
#[kernel]
pub fn paged_pages_kernel(
    table: Tensor<i32>,
    indptr: Tensor<i32>,
    lens: Tensor<u32>,
    mut pages: Tensor<u32>,
    mut verdict: Tensor<u32>,
    entries: u32,
    batch: u32,
    width: u32,
    page_size: u32,
    blocks: u32,
    n_query: u32,
    #[constexpr] csr: u32,
) {
    let e = global_id();
    if e < entries {
        let used = if csr == 0 {
            let b = e / width;
            let n = load(lens[b * n_query + n_query - 1]);
            e % width < (n + page_size - 1) / page_size
        } else {
            let at = e.cast::<i32>();
            at >= load(indptr[0]) && at < load(indptr[batch])
        };
        let id = load(table[e]);
        let in_cache = id >= 0i32 && id.cast::<u32>() < blocks;
        if used && !in_cache {
            let _first = atomic_min(verdict[2], e);
        }
        store(pages[e], select(used && in_cache, id.cast::<u32>(), 0u32));
    }
}
