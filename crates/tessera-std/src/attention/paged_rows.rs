//! Where a key's K/V row lives: the one address the decode kernels form per key, either in
//! a contiguous (strided) cache or through a page list. A constant of the specialisation
//! (`paged`) picks the form, so the contiguous kernels compile to the address they always
//! had and the page lookup exists only in the paged specialisations.

use tessera_macros::func;

/// A contiguous cache: key `pos` is row `pos` after the head's first row.
pub const CONTIGUOUS: u32 = 0;
/// Pages of a power-of-two size: the page and slot of a key by shift and mask.
pub const PAGED_POW2: u32 = 1;
/// Pages of any size: the page and slot of a key by division.
pub const PAGED_ANY: u32 = 2;

/// The element index where KV head `kvh`'s row of key `pos` starts.
///
/// Contiguous (`paged = 0`): `cache + pos · head_dim`, `cache` the head's first element.
/// Paged: key `pos` sits in slot `pos mod page_size` of the page `pages[first + pos /
/// page_size]` (`page_shift = log2 page_size` for power-of-two pages); in head_dim rows, a
/// page is `page_rows` rows, a slot `slot_rows` and a KV head `head_rows` from the page's
/// start (vLLM's NHD layout: `page_size · n_kv_heads`, `n_kv_heads`, 1; HND: `n_kv_heads ·
/// page_size`, 1, `page_size`). The page list's entries were checked against the cache
/// before the launch; a list of another integer dtype is read as u32.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn key_row<P>(
    pages: Mem<P>,
    first: u32,
    pos: u32,
    cache: u32,
    kvh: u32,
    page_size: u32,
    page_shift: u32,
    page_rows: u32,
    slot_rows: u32,
    head_rows: u32,
    head_dim: u32,
    paged: u32,
) -> u32 {
    if paged == 0 {
        cache + pos * head_dim
    } else {
        let pow2 = paged == 1;
        let at = select(pow2, pos >> page_shift, pos / page_size);
        let slot = select(pow2, pos & (page_size - 1), pos % page_size);
        let page = load(pages[first + at]).cast::<u32>();
        (page * page_rows + slot * slot_rows + kvh * head_rows) * head_dim
    }
}

/// The cache position of a row's visible key `j`: the row sees its first `s_end` keys
/// (the sinks), then the keys from `lo` on (its window). A `j` at or past `end` takes
/// `fallback`'s position instead, so a lane past the chunk still loads inside the cache.
#[func]
pub fn visible_key_pos(j: u32, end: u32, fallback: u32, s_end: u32, lo: u32) -> u32 {
    let jc = select(j < end, j, fallback);
    select(jc < s_end, jc, jc - s_end + lo)
}

/// A paged cache as the decode kernels walk it: the checked page list, each row's first
/// entry in it, and the layout's strides in head_dim rows (see [`key_row`]).
#[derive(Clone, Copy)]
pub(crate) struct PageWalk<'a> {
    pub pages: &'a tessera_runtime::Tensor,
    pub starts: &'a tessera_runtime::Tensor,
    pub page_size: u32,
    pub page_rows: u32,
    pub slot_rows: u32,
    pub head_rows: u32,
}

impl PageWalk<'_> {
    /// The kernels' `paged` constant for this page size.
    pub fn mode(&self) -> u32 {
        if self.page_size.is_power_of_two() {
            PAGED_POW2
        } else {
            PAGED_ANY
        }
    }

    /// `(page_size, page_shift, page_rows, slot_rows, head_rows, paged)` of a walk, or of a
    /// contiguous cache when there is none.
    pub fn scalars(walk: Option<&Self>) -> [u32; 6] {
        match walk {
            None => [1, 0, 0, 0, 0, CONTIGUOUS],
            Some(w) => [
                w.page_size,
                w.page_size.trailing_zeros(),
                w.page_rows,
                w.slot_rows,
                w.head_rows,
                w.mode(),
            ],
        }
    }
}
