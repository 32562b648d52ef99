//! Attention: decode SDPA (GQA, strided cache, sliding window, sinks, learned sink logit,
//! split-KV, batched), decode over a paged cache (vLLM block tables, FlashInfer CSR
//! tables), multi-query SDPA over a shared cache, and tiled prefill attention.
//! One decode plan serves every decode-shaped op: the wrappers validate, and the plan runs
//! f16/bf16 caches of head_dim 64, 128 or 256 on the matrix-fragment kernel
//! (`decode_mma`), everything else on the CUDA-core kernels (`decode_kernels`), single
//! pass or split-KV by shape. Prefill runs f16/bf16 on fragments (`prefill_mma`), f32 on
//! the CUDA-core tiles (`prefill`); packed variable-length batches run the same kernels
//! (`prefill_varlen`), as do chunks over a paged cache (`prefill_paged`, quantized:
//! `prefill_paged_quant`).

#[cfg(feature = "cases")]
mod cases;
mod checks;
mod decl;
pub mod decode;
pub mod decode_combine;
pub mod decode_kernels;
pub mod decode_mma;
pub mod kv_quant;
pub mod kv_quant_decode;
pub mod kv_quant_int4;
mod kv_staging;
pub mod multi_query;
pub mod paged;
pub mod paged_append;
pub mod paged_append_ragged;
pub mod paged_append_rope;
pub mod paged_prepared;
#[cfg(feature = "cases")]
pub mod paged_reference;
pub mod paged_rows;
pub mod paged_table;
pub mod plan;
pub mod prefill;
pub mod prefill_mma;
pub mod prefill_paged;
pub mod prefill_paged_quant;
pub mod prefill_tiles;
pub mod prefill_varlen;
#[cfg(feature = "cases")]
pub mod reference;
pub mod softmax;

pub use decode::{
    sdpa_decode, sdpa_decode_batched, sdpa_decode_split, sdpa_decode_strided, DecodeOptions,
};
pub use kv_quant::{kv_quant_append, KvFormat, KvScales};
pub use kv_quant_decode::{sdpa_decode_paged_quant, sdpa_multi_query_paged_quant};
pub use multi_query::sdpa_multi_query;
pub use paged::{
    sdpa_decode_paged, sdpa_multi_query_paged, KvLayout, PageTable, PagedKv, PagedWorkspace,
};
pub use paged_append::{paged_kv_append, SlotCheck};
pub use paged_append_ragged::paged_kv_append_ragged;
pub use paged_append_rope::KeyRope;
pub use paged_prepared::PreparedPages;
pub use plan::{auto_split_bound, DecodeWorkspace};
pub use prefill::sdpa_prefill;
pub use prefill_paged::{sdpa_prefill_paged, PagedPrefillWorkspace, PagedQueries};
pub use prefill_paged_quant::sdpa_prefill_paged_quant;
pub use prefill_varlen::{sdpa_prefill_varlen, Packed, VarlenWorkspace};
