//! Chunked prefill over a quantized paged cache (int8, e4m3 or int4 codes with the scales
//! `kv_quant_append` writes): `sdpa_prefill_paged` with u8 pools. The table is reduced and
//! checked on the device as there, and the attention runs on the f16/bf16 kernel a float
//! cache of that shape would (`prefill::half_prefill_kernel`) with its `quant` constexpr
//! set: each block's codes and scales are loaded and their values, `code · scale` computed
//! in f32 and rounded to q's dtype, stored straight into the kernel's K and V tiles where
//! the float walk's asynchronous copies land the elements. The cache is never dequantized
//! anywhere else.
//!
//! Both kernels take the codes. The fragment kernel (`prefill_mma`) is the one every
//! backend runs (Apple GPUs' 32 KiB of threadgroup memory does not hold the tile-product
//! stages, so they always take it): it holds a block's codes in registers from where the
//! float walk issues its copy until the tile is free. The tile-product kernel
//! (`prefill_tiles`, the fast one on CUDA where a call makes a wave) loads and stores the
//! next block into its other buffers while the block's `P·V` product runs.

use super::kv_quant::KvScales;
use super::paged::PagedKv;
use super::prefill_paged::{paged_prefill, PagedPrefillCall, PagedPrefillWorkspace, PagedQueries};
use crate::error::OpError;
use tessera_runtime::{Context, Tensor};

const OP: &str = "sdpa_prefill_paged_quant";

/// [`super::sdpa_prefill_paged`] over a quantized cache: `kv`'s pools are u8 codes in
/// `scales.format` (int8 or e4m3, one byte an element and one f32 scale per (token, KV
/// head); int4, head_dim / 2 bytes a row and a scale per group of dims: the layouts of
/// `kv_quant` and `kv_quant_int4`), q and out f16 or bf16. Each key and value element is
/// `code · scale` computed in f32 and rounded once to q's dtype, as the cache would hold
/// it in that dtype (an f16 q over values past f16's range reads them as ±inf, as an f16
/// cache would have stored them). A row appended with NaN or inf (scale NaN) makes every
/// output that sees it NaN; a key a row does not see never reaches it. Everything else —
/// offsets, tables and their device-side check, layouts, page sizes, GQA, causal, scale,
/// workspace — as `sdpa_prefill_paged` takes it; head_dim 64, 96, 128, 192 or 256 (int4:
/// 64, 128, 256).
#[allow(clippy::too_many_arguments)]
pub fn sdpa_prefill_paged_quant(
    ctx: &Context,
    q: &Tensor,
    kv: &PagedKv,
    scales: &KvScales,
    queries: &PagedQueries,
    out: &Tensor,
    causal: bool,
    scale: Option<f32>,
    ws: &PagedPrefillWorkspace,
) -> Result<(), OpError> {
    let eager = !ctx.recording_graph();
    let call = PagedPrefillCall {
        op: OP,
        tensors: (q, kv, out),
        queries,
        quant: Some(scales),
    };
    paged_prefill(ctx, &call, (causal, scale), ws, eager)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::kv_quant::KvFormat;
    use crate::attention::paged::{KvLayout, PageTable};
    use tessera_runtime::DType;

    /// A graph replay cannot refuse a bad table: the quantized walk as it runs there (no
    /// read-back) must stay inside the code and scale pools (the CPU backend checks every
    /// access) and leave the finding for `take_error`, for every format's row layout.
    #[test]
    fn bad_tables_in_a_replay_stay_inside_the_code_and_scale_pools() {
        let ctx = Context::cpu();
        let q = ctx
            .tensor(&vec![half::bf16::ONE; 6 * 2 * 64], &[6, 2, 64])
            .expect("q");
        let out = ctx.zeros(DType::BF16, &[6, 2, 64]).expect("out");
        let cu = ctx.tensor(&[0i32, 4, 6], &[3]).expect("cu");
        let table = ctx.tensor(&[0i32, 9, 1, 2], &[2, 2]).expect("table");
        let lens = ctx.tensor(&[7i32, 1], &[2]).expect("lens");
        let queries = PagedQueries {
            cu_seqlens_q: &cu,
            max_seqlen_q: 4,
        };
        let ws = PagedPrefillWorkspace::new(&ctx, 2, 4).expect("workspace");
        for format in [KvFormat::Int8, KvFormat::Int4 { group: 32 }] {
            let pool = [3, 4, 1, format.row_bytes(64)];
            let kc = ctx.zeros(DType::U8, &pool).expect("k codes");
            let vc = ctx.zeros(DType::U8, &pool).expect("v codes");
            let sshape = format.scale_shape(&pool);
            let n: usize = sshape.iter().product();
            let ks = ctx.tensor(&vec![0.01f32; n], &sshape).expect("k scales");
            let vs = ctx.tensor(&vec![0.01f32; n], &sshape).expect("v scales");
            let kv = PagedKv {
                k_cache: &kc,
                v_cache: &vc,
                layout: KvLayout::Nhd,
                table: PageTable::Blocks {
                    block_table: &table,
                    seq_lens: &lens,
                },
            };
            let scales = KvScales {
                k_scale: &ks,
                v_scale: &vs,
                format,
            };
            let call = PagedPrefillCall {
                op: OP,
                tensors: (&q, &kv, &out),
                queries: &queries,
                quant: Some(&scales),
            };
            paged_prefill(&ctx, &call, (true, None), &ws, false).expect("a replay runs, in bounds");
            let e = ws.take_error().expect_err("the finding is kept");
            assert!(
                e.to_string().contains("a page id outside the cache, at 1"),
                "{e}"
            );
            let e = paged_prefill(&ctx, &call, (true, None), &ws, true).expect_err("refused");
            assert!(e.to_string().contains("`block_table`[0, 1] = 9"), "{e}");
        }
    }
}
