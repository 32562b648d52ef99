//! The f64 reference of paged decode, written from the layouts' definitions: each
//! sequence's visible keys are gathered from its pages one token at a time (page
//! `pages[p / page_size]`, slot `p mod page_size`, the element where the layout puts it),
//! then attended as the contiguous reference does.

use super::paged::KvLayout;
use super::reference::{attend, visible};

/// A paged decode's data, as stored (f64).
pub struct PagedProblem<'a> {
    pub q: &'a [f64],
    pub k: &'a [f64],
    pub v: &'a [f64],
    pub layout: KvLayout,
    /// `[batch, n_q_heads, n_kv_heads, page_size, head_dim]`.
    pub dims: [usize; 5],
    /// Each sequence's pages, in order, and its length.
    pub seqs: Vec<(Vec<usize>, usize)>,
    pub scale: f64,
    pub window: usize,
    pub n_sink: usize,
    pub sinks: Option<&'a [f64]>,
    /// Query rows a sequence (its last `n_query` tokens; decode: 1), and whether row i
    /// sees only its first `len − n_query + i + 1` keys.
    pub n_query: usize,
    pub causal: bool,
}

/// Each sequence's (pages, length) from a vLLM block table `[batch, width]` and `seq_lens`.
pub fn block_table_seqs(table: &[f64], seq_lens: &[f64], page: usize) -> Vec<(Vec<usize>, usize)> {
    let width = table.len() / seq_lens.len().max(1);
    seq_lens
        .iter()
        .enumerate()
        .map(|(b, &n)| {
            let n = n as usize;
            let used = n.div_ceil(page);
            let pages = table[b * width..b * width + used]
                .iter()
                .map(|&p| p as usize);
            (pages.collect(), n)
        })
        .collect()
}

/// Each sequence's (pages, length) from a FlashInfer CSR table.
pub fn csr_seqs(
    indptr: &[f64],
    indices: &[f64],
    last_page_len: &[f64],
    page: usize,
) -> Vec<(Vec<usize>, usize)> {
    last_page_len
        .iter()
        .enumerate()
        .map(|(b, &last)| {
            let (p0, p1) = (indptr[b] as usize, indptr[b + 1] as usize);
            let pages: Vec<usize> = indices[p0..p1].iter().map(|&p| p as usize).collect();
            let n = if pages.is_empty() {
                0
            } else {
                (pages.len() - 1) * page + last as usize
            };
            (pages, n)
        })
        .collect()
}

/// `out [batch, n_query, n_q_heads, head_dim]`.
pub fn paged_decode(p: &PagedProblem) -> Vec<f64> {
    let [batch, hq, hkv, page, d] = p.dims;
    let group = hq / hkv;
    let at = |page_id: usize, slot: usize, h: usize| match p.layout {
        KvLayout::Nhd => ((page_id * page + slot) * hkv + h) * d,
        KvLayout::Hnd => ((page_id * hkv + h) * page + slot) * d,
    };
    let nq = p.n_query;
    let mut out = vec![0.0; batch * nq * hq * d];
    for (row, (b, i)) in (0..batch)
        .flat_map(|b| (0..nq).map(move |i| (b, i)))
        .enumerate()
    {
        let (pages, len) = &p.seqs[b];
        let n = if p.causal && *len > 0 {
            len + i + 1 - nq
        } else {
            *len
        };
        let positions = visible(n, p.window, p.n_sink);
        for h in 0..hq {
            let kvh = h / group;
            let mut ks = Vec::with_capacity(positions.len() * d);
            let mut vs = Vec::with_capacity(positions.len() * d);
            for &pos in &positions {
                let e = at(pages[pos / page], pos % page, kvh);
                ks.extend_from_slice(&p.k[e..e + d]);
                vs.extend_from_slice(&p.v[e..e + d]);
            }
            let slab: Vec<usize> = (0..positions.len()).collect();
            let at = (row * hq + h) * d;
            let sink = p.sinks.map(|s| s[h]);
            let o = attend(&p.q[at..at + d], &ks, &vs, &slab, p.scale, sink);
            out[at..at + d].copy_from_slice(&o);
        }
    }
    out
}

/// The caches after an append: each token's head rows of `k` and `v` (`[tokens,
/// n_kv_heads, head_dim]`) at slot `slots[t]` (page `slot / page_size`, offset `slot mod
/// page_size`), tokens with slot −1 skipped, every other element as it was.
pub fn paged_append(
    (k_cache, v_cache): (&[f64], &[f64]),
    (k, v, slots): (&[f64], &[f64], &[f64]),
    layout: KvLayout,
    [page, hkv, d]: [usize; 3],
) -> (Vec<f64>, Vec<f64>) {
    let (mut kc, mut vc) = (k_cache.to_vec(), v_cache.to_vec());
    for (t, &s) in slots.iter().enumerate() {
        if s < 0.0 {
            continue;
        }
        let (p, off) = (s as usize / page, s as usize % page);
        for h in 0..hkv {
            let dst = match layout {
                KvLayout::Nhd => ((p * page + off) * hkv + h) * d,
                KvLayout::Hnd => ((p * hkv + h) * page + off) * d,
            };
            let src = (t * hkv + h) * d;
            kc[dst..dst + d].copy_from_slice(&k[src..src + d]);
            vc[dst..dst + d].copy_from_slice(&v[src..src + d]);
        }
    }
    (kc, vc)
}
