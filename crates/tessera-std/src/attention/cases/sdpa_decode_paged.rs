//! Cases of `sdpa_decode_paged`: random, shuffled page tables (vLLM block tables and
//! FlashInfer CSR tables, NHD and HND pages, page sizes 1 to 128 and one not a power of
//! two) whose unused pages, unused table entries and partly filled last pages hold NaN or
//! out-of-range garbage that must not reach the output; a rejection per invariant, those
//! of the device-side table check included; bench shapes at pages of 16 and 1.

use super::*;
use crate::attention::paged::{sdpa_decode_paged, KvLayout, PageTable, PagedKv, PagedWorkspace};
use crate::attention::paged_reference::{block_table_seqs, csr_seqs, paged_decode, PagedProblem};
use crate::attention::paged_rows::{PAGED_ANY, PAGED_POW2};
use crate::attention::paged_table::{paged_lengths_kernel, paged_pages_kernel};
use crate::decl::RefArgs;
use tessera_ir::{Literal, Specialization};
use DType::I32;

const OP: &str = "sdpa_decode_paged";

/// Which page table a case uses.
#[derive(Clone, Copy, Debug)]
pub(super) enum Form {
    Blocks,
    Csr,
}

/// A paged call's tensors and, as stored, its data and each sequence's pages.
pub(super) struct Paged {
    pub(super) q: Tensor,
    pub(super) k: Tensor,
    pub(super) v: Tensor,
    pub(super) out: Tensor,
    pub(super) tables: Vec<Tensor>,
    pub(super) form: Form,
    pub(super) layout: KvLayout,
    pub(super) qv: Vec<f64>,
    pub(super) kv: Vec<f64>,
    pub(super) vv: Vec<f64>,
    pub(super) seqs: Vec<(Vec<usize>, usize)>,
    /// Table entries and the most tokens a sequence's table row holds.
    pub(super) entries: usize,
    pub(super) capacity: usize,
}

impl Paged {
    pub(super) fn cache(&self) -> PagedKv<'_> {
        let t = &self.tables;
        let table = match self.form {
            Form::Blocks => PageTable::Blocks {
                block_table: &t[0],
                seq_lens: &t[1],
            },
            Form::Csr => PageTable::Csr {
                indptr: &t[0],
                indices: &t[1],
                last_page_len: &t[2],
            },
        };
        PagedKv {
            k_cache: &self.k,
            v_cache: &self.v,
            layout: self.layout,
            table,
        }
    }

    /// A workspace for q's rows: every dimension before the heads.
    pub(super) fn workspace(&self, ctx: &Context) -> Result<PagedWorkspace, OpError> {
        let qs = self.q.shape();
        let (rows, heads) = (
            qs[..qs.len() - 2].iter().product(),
            qs[qs.len() - 2..].to_vec(),
        );
        PagedWorkspace::new(ctx, rows, heads[0], heads[1], self.entries, self.capacity)
    }
}

/// The pool shape of `blocks` pages in `layout`.
fn pool_shape(layout: KvLayout, [blocks, page, hkv, d]: [usize; 4]) -> Vec<usize> {
    match layout {
        KvLayout::Nhd => vec![blocks, page, hkv, d],
        KvLayout::Hnd => vec![blocks, hkv, page, d],
    }
}

/// `0..n` in a random order.
fn shuffled(rng: &mut CaseRng, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.int(0, i as u32 + 1) as usize);
    }
    v
}

/// Sequences of `lens` tokens in shuffled pages of a pool with `spare` pages more than
/// they use; every slot no sequence fills holds NaN, every table entry no sequence uses
/// holds an id outside the pool. q is `[batch, n_q_heads, head_dim]`, or with `q_rows`
/// `[batch, q_rows, n_q_heads, head_dim]`.
pub(super) fn build(
    (ctx, rng): (&Context, &mut CaseRng),
    (dt, layout, form): (DType, KvLayout, Form),
    (lens, q_rows): (&[usize], Option<usize>),
    [hq, hkv, page, d]: [usize; 4],
    spare: usize,
) -> Result<Paged, String> {
    let used: Vec<usize> = lens.iter().map(|n| n.div_ceil(page)).collect();
    let blocks = used.iter().sum::<usize>() + spare.max(1);
    let order = shuffled(rng, blocks);
    let mut next = order.into_iter();
    let mut seqs = Vec::new();
    // Tokens each page holds (0: unused).
    let mut filled = vec![0usize; blocks];
    for (&n, &np) in lens.iter().zip(&used) {
        let pages: Vec<usize> = next.by_ref().take(np).collect();
        for (i, &p) in pages.iter().enumerate() {
            filled[p] = (n - i * page).min(page);
        }
        seqs.push((pages, n));
    }
    let shape = pool_shape(layout, [blocks, page, hkv, d]);
    let slot_of = |e: usize| {
        let row = e / d;
        match layout {
            KvLayout::Nhd => (row / (page * hkv), row / hkv % page),
            KvLayout::Hnd => (row / (hkv * page), row % page),
        }
    };
    let pool = |rng: &mut CaseRng| -> Result<(Tensor, Vec<f64>), String> {
        let vals: Vec<f64> = (0..shape.iter().product::<usize>())
            .map(|e| {
                let (p, slot) = slot_of(e);
                if slot < filled[p] {
                    rng.uniform(-1.0, 1.0)
                } else {
                    f64::NAN
                }
            })
            .collect();
        upload(ctx, dt, &vals, &shape)
    };
    let (k, kv) = pool(rng)?;
    let (v, vv) = pool(rng)?;
    let b = lens.len();
    let q_shape = match q_rows {
        None => vec![b, hq, d],
        Some(n) => vec![b, n, hq, d],
    };
    let (q, qv) = random_tensor(ctx, rng, dt, &q_shape, -1.0, 1.0)?;
    let out = ctx.full_nan(dt, &q_shape).map_err(err)?;
    let garbage = |i: usize| {
        if i.is_multiple_of(2) {
            -5.0
        } else {
            (blocks + 7) as f64
        }
    };
    let (tables, entries, capacity) = match form {
        Form::Blocks => {
            let width = used.iter().copied().max().unwrap_or(0) + 1;
            let mut t = Vec::with_capacity(b * width);
            for (pages, _) in &seqs {
                t.extend(pages.iter().map(|&p| p as f64));
                t.extend((pages.len()..width).map(garbage));
            }
            let n: Vec<f64> = lens.iter().map(|&n| n as f64).collect();
            let (bt, _) = upload(ctx, I32, &t, &[b, width])?;
            let (sl, _) = upload(ctx, I32, &n, &[b])?;
            (vec![bt, sl], b * width, width * page)
        }
        Form::Csr => {
            let mut indptr = vec![0.0];
            let mut indices = Vec::new();
            let mut last = Vec::new();
            for (pages, n) in &seqs {
                indices.extend(pages.iter().map(|&p| p as f64));
                indptr.push(indices.len() as f64);
                last.push(if pages.is_empty() {
                    0.0
                } else {
                    (n - (pages.len() - 1) * page) as f64
                });
            }
            // Entries past the last sequence's are not read.
            indices.extend((0..2).map(garbage));
            let m = indices.len();
            let (ip, _) = upload(ctx, I32, &indptr, &[b + 1])?;
            let (ix, _) = upload(ctx, I32, &indices, &[m])?;
            let (lp, _) = upload(ctx, I32, &last, &[b])?;
            (vec![ip, ix, lp], m, m * page)
        }
    };
    Ok(Paged {
        q,
        k,
        v,
        out,
        tables,
        form,
        layout,
        qv,
        kv,
        vv,
        seqs,
        entries,
        capacity,
    })
}

/// One paged case: `layout`, `form`, sequences of `lens` tokens, `[hq, hkv, page, d]`,
/// the visibility `vis` and `splits` forced where given.
#[derive(Clone, Copy)]
struct PagedCase {
    layout: KvLayout,
    form: Form,
    lens: &'static [usize],
    dims: [usize; 4],
    vis: Visibility,
    splits: Option<u32>,
}

fn paged_case(dt: DType, c: PagedCase) -> Case {
    let [hq, hkv, page, d] = c.dims;
    let name = format!(
        "{:?} {:?} page={page} lens={:?} hq={hq} hkv={hkv} d={d} window={} sinks={}{}{}",
        c.layout,
        c.form,
        c.lens,
        c.vis.window,
        c.vis.n_sink,
        if c.vis.logit { " +sink_logit" } else { "" },
        c.splits.map_or(String::new(), |s| format!(" splits={s}")),
    );
    correctness(OP, dt, name, move |ctx, rng| {
        let p = build(
            (ctx, rng),
            (dt, c.layout, c.form),
            (c.lens, None),
            c.dims,
            3,
        )?;
        let (sinks, sv) = random_tensor(ctx, rng, dt, &[hq], -1.0, 2.0)?;
        let opts = DecodeOptions {
            window: c.vis.window as u32,
            n_sink: c.vis.n_sink as u32,
            sink_logits: c.vis.logit.then_some(&sinks),
            splits: c.splits,
            ..DecodeOptions::default()
        };
        let ws = p.workspace(ctx).map_err(err)?;
        sdpa_decode_paged(ctx, &p.q, &p.cache(), &p.out, &opts, &ws).map_err(err)?;
        let want = paged_decode(&PagedProblem {
            q: &p.qv,
            k: &p.kv,
            v: &p.vv,
            layout: c.layout,
            dims: [c.lens.len(), hq, hkv, page, d],
            seqs: p.seqs.clone(),
            scale: scale_of(d),
            window: c.vis.window,
            n_sink: c.vis.n_sink,
            sinks: c.vis.logit.then_some(&sv[..]),
            n_query: 1,
            causal: false,
        });
        Ok((p.out.to_f64_vec().map_err(err)?, want))
    })
}

/// A refused call (a sequence longer than its table row) on a workspace, then a good
/// call on the same one: the refusal leaves the workspace's verdict clean.
fn after_refusal_case(dt: DType) -> Case {
    let dims = [4, 2, 16, 128];
    correctness(
        OP,
        dt,
        "a good call after a refused one".into(),
        move |ctx, rng| {
            let mode = (dt, KvLayout::Nhd, Form::Blocks);
            let p = build((ctx, rng), mode, (&[40, 9], None), dims, 2)?;
            let ws = p.workspace(ctx).map_err(err)?;
            let (too_long, _) = upload(ctx, I32, &[40.0, 1000.0], &[2])?;
            let bad = PagedKv {
                table: PageTable::Blocks {
                    block_table: &p.tables[0],
                    seq_lens: &too_long,
                },
                ..p.cache()
            };
            let o = DecodeOptions::default();
            if sdpa_decode_paged(ctx, &p.q, &bad, &p.out, &o, &ws).is_ok() {
                return Err("a seq_len past the table was accepted".into());
            }
            sdpa_decode_paged(ctx, &p.q, &p.cache(), &p.out, &o, &ws).map_err(err)?;
            let want = paged_decode(&PagedProblem {
                q: &p.qv,
                k: &p.kv,
                v: &p.vv,
                layout: KvLayout::Nhd,
                dims: [2, 4, 2, 16, 128],
                seqs: p.seqs.clone(),
                scale: scale_of(128),
                window: 0,
                n_sink: 0,
                sinks: None,
                n_query: 1,
                causal: false,
            });
            Ok((p.out.to_f64_vec().map_err(err)?, want))
        },
    )
}

/// A small f32 call (q [2, 4, 64], NHD pages [6, 4, 2, 64]) whose table `ints` (the block
/// table and seq_lens, or indptr, indices and last_page_len, each (values, shape)) must be
/// refused for `reason`, `out` untouched.
fn table_rejection(
    what: &str,
    reason: &'static str,
    form: Form,
    ints: &'static [(&'static [i32], &'static [usize])],
) -> Case {
    table_rejection_within(what, reason, form, ints, 64)
}

/// [`table_rejection`] on a workspace made for sequences of up to `max_context` tokens.
fn table_rejection_within(
    what: &str,
    reason: &'static str,
    form: Form,
    ints: &'static [(&'static [i32], &'static [usize])],
    max_context: usize,
) -> Case {
    rejection(OP, what, reason, move |ctx| {
        let [q, k, v, out] = zeros_of(
            ctx,
            [
                (F32, &[2, 4, 64]),
                (F32, &[6, 4, 2, 64]),
                (F32, &[6, 4, 2, 64]),
                (F32, &[2, 4, 64]),
            ],
        )?;
        let mut tables = Vec::new();
        for (vals, shape) in ints {
            tables.push(ctx.tensor(vals, shape).map_err(err)?);
        }
        let entries = tables[if matches!(form, Form::Blocks) { 0 } else { 1 }].len();
        let ws = PagedWorkspace::new(ctx, 2, 4, 64, entries, max_context).map_err(err)?;
        let (c, untouched) = (ctx.clone(), out.clone());
        Ok((
            untouched,
            Box::new(move || {
                let p = Paged {
                    q,
                    k,
                    v,
                    out,
                    tables,
                    form,
                    layout: KvLayout::Nhd,
                    qv: vec![],
                    kv: vec![],
                    vv: vec![],
                    seqs: vec![],
                    entries,
                    capacity: 64,
                };
                sdpa_decode_paged(&c, &p.q, &p.cache(), &p.out, &DecodeOptions::default(), &ws)
            }),
        ))
    })
}

/// Shape and dtype rejections of the good small call: `specs` are q, k_cache, v_cache,
/// block_table, seq_lens and out.
fn shape_rejection(what: &str, reason: &'static str, specs: [Spec; 6], ws_batch: usize) -> Case {
    rejection(OP, what, reason, move |ctx| {
        let [q, k, v, bt, sl, out] = zeros_of(ctx, specs)?;
        let ws = PagedWorkspace::new(ctx, ws_batch, 4, 64, 6, 12).map_err(err)?;
        let (c, untouched) = (ctx.clone(), out.clone());
        Ok((
            untouched,
            Box::new(move || {
                let kv = PagedKv {
                    k_cache: &k,
                    v_cache: &v,
                    layout: KvLayout::Nhd,
                    table: PageTable::Blocks {
                        block_table: &bt,
                        seq_lens: &sl,
                    },
                };
                sdpa_decode_paged(&c, &q, &kv, &out, &DecodeOptions::default(), &ws)
            }),
        ))
    })
}

const SMALL: [Spec; 6] = [
    (F32, &[2, 4, 64]),
    (F32, &[6, 4, 2, 64]),
    (F32, &[6, 4, 2, 64]),
    (I32, &[2, 3]),
    (I32, &[2]),
    (F32, &[2, 4, 64]),
];

fn rejections() -> Vec<Case> {
    use Form::{Blocks, Csr};
    let mut v = vec![
        table_rejection(
            "negative seq_len",
            "`seq_lens` holds a negative length: sequence 1 has -3",
            Blocks,
            &[(&[0, 1, 2, 3, 4, 5], &[2, 3]), (&[5, -3], &[2])],
        ),
        table_rejection(
            "seq_len past the block table",
            "sequence 0 has seq_len 13, more than its block-table row holds (3 pages of 4 = 12 tokens)",
            Blocks,
            &[(&[0, 1, 2, 3, 4, 5], &[2, 3]), (&[13, 2], &[2])],
        ),
        table_rejection(
            "page id past the pool",
            "`block_table`[0, 2] = 6 is not a page of the cache (0..6)",
            Blocks,
            &[(&[0, 1, 6, 3, 4, 5], &[2, 3]), (&[9, 4], &[2])],
        ),
        table_rejection(
            "negative page id",
            "`block_table`[1, 0] = -1 is not a page of the cache (0..6)",
            Blocks,
            &[(&[0, 1, 2, -1, 4, 5], &[2, 3]), (&[9, 1], &[2])],
        ),
        table_rejection(
            "indptr falls",
            "`indptr` must rise within `indices` (0 ≤ indptr[b] ≤ indptr[b + 1] ≤ 3): sequence 1 has indptr[1] = 3, indptr[2] = 2",
            Csr,
            &[(&[0, 3, 2], &[3]), (&[0, 1, 2], &[3]), (&[4, 1], &[2])],
        ),
        table_rejection(
            "indptr past indices",
            "sequence 1 has indptr[1] = 2, indptr[2] = 5",
            Csr,
            &[(&[0, 2, 5], &[3]), (&[0, 1, 2], &[3]), (&[4, 1], &[2])],
        ),
        table_rejection(
            "CSR page id past the pool",
            "`indices`[2] = 9 is not a page of the cache (0..6)",
            Csr,
            &[(&[0, 2, 3], &[3]), (&[0, 1, 9], &[3]), (&[4, 1], &[2])],
        ),
        table_rejection(
            "last_page_len past the page",
            "sequence 0 has last_page_len 5, more than its pages hold",
            Csr,
            &[(&[0, 2, 3], &[3]), (&[0, 1, 2], &[3]), (&[5, 1], &[2])],
        ),
        table_rejection_within(
            "seq_len past the workspace's max_context",
            "sequence 1 has seq_len 10, more than its block-table row holds (3 pages of 4 = 12 tokens) or the workspace's max_context 8",
            Blocks,
            &[(&[0, 1, 2, 3, 4, 5], &[2, 3]), (&[8, 10], &[2])],
            8,
        ),
        table_rejection_within(
            "CSR sequence past the workspace's max_context",
            "sequence 0 has last_page_len 2, more than its pages hold (at most 4 on a last page, 0 without pages), or is longer than the workspace's max_context 5",
            Csr,
            &[(&[0, 2, 3], &[3]), (&[0, 1, 2], &[3]), (&[2, 1], &[2])],
            5,
        ),
        table_rejection(
            "negative last_page_len",
            "`last_page_len` holds a negative length: sequence 1 has -2",
            Csr,
            &[(&[0, 2, 3], &[3]), (&[0, 1, 2], &[3]), (&[4, -2], &[2])],
        ),
    ];
    let table = [
        (
            "seq_lens not i32",
            "`seq_lens` must be i32",
            replaced(SMALL, 4, (U32, &[2])),
        ),
        (
            "block_table of another batch",
            "`block_table` must have shape [2, 3]",
            replaced(SMALL, 3, (I32, &[3, 3])),
        ),
        (
            "v_cache shape != k_cache shape",
            "`v_cache` must have shape [6, 4, 2, 64]",
            replaced(SMALL, 2, (F32, &[6, 8, 2, 64])),
        ),
        (
            "k_cache dtype",
            "`k` must be f32",
            replaced(SMALL, 1, (F16, &[6, 4, 2, 64])),
        ),
        (
            "k_cache 3-D",
            "`k_cache` must be 4-D",
            replaced(SMALL, 1, (F32, &[6, 4, 128])),
        ),
        (
            "head_dim unsupported",
            "head_dim 80 is not supported",
            [
                (F32, &[2, 4, 80]),
                (F32, &[6, 4, 2, 80]),
                (F32, &[6, 4, 2, 80]),
                (I32, &[2, 3]),
                (I32, &[2]),
                (F32, &[2, 4, 80]),
            ],
        ),
        (
            "q heads not a multiple of kv heads",
            "must be a multiple of n_kv_heads = 3",
            [
                (F32, &[2, 4, 64]),
                (F32, &[6, 4, 3, 64]),
                (F32, &[6, 4, 3, 64]),
                (I32, &[2, 3]),
                (I32, &[2]),
                (F32, &[2, 4, 64]),
            ],
        ),
    ];
    for (what, reason, specs) in table {
        v.push(shape_rejection(what, reason, specs, 2));
    }
    v.push(shape_rejection(
        "workspace for fewer sequences",
        "the workspace holds 1 query rows",
        SMALL,
        1,
    ));
    v
}

pub(crate) fn paged_cases() -> Vec<Case> {
    use Form::{Blocks, Csr};
    use KvLayout::{Hnd, Nhd};
    let vis = |window, n_sink, logit| Visibility {
        window,
        n_sink,
        logit,
    };
    let none = vis(0, 0, false);
    let case = |layout, form, lens, dims, vis| PagedCase {
        layout,
        form,
        lens,
        dims,
        vis,
        splits: None,
    };
    let table = [
        case(Nhd, Blocks, &[37, 0, 70], [8, 2, 16, 128], none),
        case(Hnd, Csr, &[33, 17], [4, 4, 8, 64], vis(10, 2, true)),
        case(Nhd, Csr, &[23, 40], [4, 1, 1, 128], none),
        case(Hnd, Blocks, &[50, 5], [4, 2, 32, 256], vis(16, 0, false)),
        case(Nhd, Blocks, &[130], [2, 1, 64, 96], none),
        case(Hnd, Csr, &[200, 129], [8, 2, 128, 64], vis(0, 0, true)),
        case(Nhd, Blocks, &[50, 25], [4, 2, 12, 128], vis(20, 3, false)),
    ];
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for c in table {
            v.push(paged_case(dt, c));
        }
        v.push(after_refusal_case(dt));
        v.push(graph_form_case(dt));
        v.push(tight_workspace_case(dt));
    }
    // Forced and chosen split-KV over long sequences.
    let long = case(
        Hnd,
        Blocks,
        &[300, 150, 1],
        [8, 2, 16, 128],
        vis(0, 0, true),
    );
    v.push(paged_case(
        F16,
        PagedCase {
            splits: Some(3),
            ..long
        },
    ));
    v.push(paged_case(
        F32,
        PagedCase {
            splits: Some(4),
            ..long
        },
    ));
    v.push(paged_case(
        BF16,
        case(Nhd, Csr, &[1500], [8, 2, 16, 64], none),
    ));
    v.extend(rejections());
    v.extend(super::sdpa_decode_paged_prepared::prepared_cases());
    v
}

/// The reference of a declared call: the sequences its table names, gathered page by page.
pub(crate) fn paged_reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    let qs = r.shape("q")?;
    let ks = r.shape("k_cache")?;
    let hnd = r.params.choice("layout")? == "hnd";
    let (page, hkv) = if hnd { (ks[2], ks[1]) } else { (ks[1], ks[2]) };
    let seqs = match (r.optional("block_table"), r.optional("seq_lens")) {
        (Some(t), Some(n)) => block_table_seqs(t, n, page),
        _ => csr_seqs(
            r.data("indptr")?,
            r.data("indices")?,
            r.data("last_page_len")?,
            page,
        ),
    };
    let (n_query, causal) = match qs.len() {
        4 => (qs[1], r.params.bool("causal")?),
        _ => (1, false),
    };
    let (hq, d) = (qs[qs.len() - 2], qs[qs.len() - 1]);
    let p = r.params;
    Ok(vec![paged_decode(&PagedProblem {
        q: r.data("q")?,
        k: r.data("k_cache")?,
        v: r.data("v_cache")?,
        layout: if hnd { KvLayout::Hnd } else { KvLayout::Nhd },
        dims: [qs[0], hq, hkv, page, d],
        seqs,
        scale: p.opt_f64("scale")?.unwrap_or(1.0 / (d as f64).sqrt()),
        window: p.opt_uint("window")?.unwrap_or(0) as usize,
        n_sink: p.opt_uint("n_sink")?.unwrap_or(0) as usize,
        sinks: r.optional("sink_logits"),
        n_query,
        causal,
    })])
}

/// The paged specialisations: the CUDA-core partial kernel and the fragment kernel with
/// per-row lengths, for power-of-two and other page sizes; the table kernels; the combine.
pub(crate) fn paged_uses() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for paged in [PAGED_POW2, PAGED_ANY] {
        for dt in FLOAT_DTYPES {
            for d in DECODE_HEAD_DIMS {
                for gqa in [1, 4, 8] {
                    let g = geometry(dt, d, gqa);
                    let c = [d, g.epl, g.hpt, g.sgs, g.lg, 1, g.unroll, paged];
                    v.push(kernel_use(&sdpa_decode_partial_kernel::DEF, dt, &c));
                }
            }
        }
        for dt in [F16, BF16] {
            for d in MMA_HEAD_DIMS {
                for direct in [0, 1] {
                    let c = [d, 1, 16, direct, paged, 0, 4096 / d];
                    v.push(mma_kernel_use(dt, dt, &c));
                }
            }
        }
    }
    for csr in [0, 1] {
        for def in [&paged_lengths_kernel::DEF, &paged_pages_kernel::DEF] {
            v.push(KernelUse {
                def,
                spec: Specialization::new(vec![], vec![Literal::U32(csr)]),
            });
        }
    }
    v.extend(combine_uses());
    v
}

/// Batched decode over pages of `page` tokens, the shapes of `sdpa_decode_batched`'s and
/// `sdpa_decode`'s benches, each sequence in shuffled pages of an NHD pool.
fn paged_bench(
    dt: DType,
    b: usize,
    [hq, hkv, n, d]: [usize; 4],
    (page, prepared): (usize, bool),
    quick: bool,
) -> BenchCase {
    let es = dt.size_bytes();
    let kernel = if dt == F32 {
        "sdpa_decode_partial_kernel"
    } else {
        "sdpa_decode_mma_kernel"
    };
    BenchCase {
        op: OP,
        kernel,
        dtype: dt,
        shape: format!(
            "B={b} hq={hq} hkv={hkv} len={n} d={d} page={page}{}",
            if prepared { " prepared" } else { "" }
        ),
        bytes: ((2 * b * hkv * n * d + 2 * b * hq * d) * es + 4 * b * n.div_ceil(page)) as u64,
        flops: (4 * b * hq * n * d) as u64,
        quick,
        prepare: Box::new(move |ctx, rng| {
            let lens = vec![n; b];
            let mode = (dt, KvLayout::Nhd, Form::Blocks);
            let p = build((ctx, rng), mode, (&lens, None), [hq, hkv, page, d], 1)?;
            let reference = paged_decode(&PagedProblem {
                q: &p.qv,
                k: &p.kv,
                v: &p.vv,
                layout: KvLayout::Nhd,
                dims: [b, hq, hkv, page, d],
                seqs: p.seqs.clone(),
                scale: scale_of(d),
                window: 0,
                n_sink: 0,
                sinks: None,
                n_query: 1,
                causal: false,
            });
            let ws = p.workspace(ctx).map_err(err)?;
            // Prepared: the table reduced once, as for every layer of an engine's step.
            let pages = if prepared {
                Some(ws.prepare(ctx, &p.cache(), 1, false).map_err(err)?)
            } else {
                None
            };
            let output = p.out.clone();
            let c = ctx.clone();
            Ok(PreparedBench {
                launch: Box::new(move || {
                    let o = DecodeOptions::default();
                    let kv = match &pages {
                        Some(pages) => PagedKv {
                            table: PageTable::Prepared(pages),
                            ..p.cache()
                        },
                        None => p.cache(),
                    };
                    sdpa_decode_paged(&c, &p.q, &kv, &p.out, &o, &ws).map_err(err)
                }),
                output,
                reference,
            })
        }),
    }
}

pub(crate) fn paged_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    // The table reduced in the call, as a single call (or the first layer) pays it.
    for n in [4096, 32768] {
        v.push(paged_bench(F16, 1, [32, 8, n, 128], (16, false), false));
    }
    // Prepared once: what each layer of a step pays.
    for page in [16, 1] {
        v.push(paged_bench(F16, 1, [8, 2, 256, 128], (page, true), true));
        // sdpa_decode's shapes (one sequence) and sdpa_decode_batched's.
        for dt in [F16, BF16] {
            for (hq, hkv, n) in [
                (32, 8, 4096),
                (32, 8, 32768),
                (64, 8, 32768),
                (32, 4, 32768),
            ] {
                v.push(paged_bench(dt, 1, [hq, hkv, n, 128], (page, true), false));
            }
        }
        for (dt, b, hq, hkv, n) in [
            (F16, 8, 32, 8, 4096),
            (BF16, 32, 32, 8, 2048),
            (BF16, 4, 64, 8, 16384),
        ] {
            v.push(paged_bench(dt, b, [hq, hkv, n, 128], (page, true), false));
        }
    }
    v
}

/// The form a recorded graph runs (no read-back, so no refusal): over a block table whose
/// first sequence has a page id past the pool and whose second claims more tokens than its
/// row holds, nothing is read outside the cache (the CPU backend would stop at such a read)
/// and the good third sequence's output is exact; `take_error` then reports the table
/// once, and finds nothing after.
fn graph_form_case(dt: DType) -> Case {
    let dims = [4, 2, 8, 64];
    correctness(
        OP,
        dt,
        "graph form: a bad table reads nothing outside the cache".into(),
        move |ctx, rng| {
            let mode = (dt, KvLayout::Hnd, Form::Blocks);
            let p = build((ctx, rng), mode, (&[20, 9, 30], None), dims, 2)?;
            let table = p.tables[0].to_vec::<i32>().map_err(err)?;
            let width = table.len() / 3;
            let mut bad_table = table.clone();
            bad_table[1] = 1 << 20;
            let (bt, _) = upload(
                ctx,
                I32,
                &bad_table.iter().map(|&x| x as f64).collect::<Vec<_>>(),
                &[3, width],
            )?;
            let (sl, _) = upload(ctx, I32, &[20.0, 1e6, 30.0], &[3])?;
            let kv = PagedKv {
                table: PageTable::Blocks {
                    block_table: &bt,
                    seq_lens: &sl,
                },
                ..p.cache()
            };
            let ws = p.workspace(ctx).map_err(err)?;
            let o = DecodeOptions::default();
            crate::attention::paged::sdpa_decode_paged_as_in_graph(ctx, &p.q, &kv, &p.out, &o, &ws)
                .map_err(err)?;
            if ws.take_error().is_ok() {
                return Err("the bad table was not reported after the graph form".into());
            }
            ws.take_error()
                .map_err(|e| format!("the verdict was not reset: {e}"))?;
            let want = paged_decode(&PagedProblem {
                q: &p.qv,
                k: &p.kv,
                v: &p.vv,
                layout: KvLayout::Hnd,
                dims: [3, 4, 2, 8, 64],
                seqs: p.seqs.clone(),
                scale: scale_of(64),
                window: 0,
                n_sink: 0,
                sinks: None,
                n_query: 1,
                causal: false,
            });
            let got = p.out.to_f64_vec().map_err(err)?;
            let third = 2 * 4 * 64;
            Ok((got[third..].to_vec(), want[third..].to_vec()))
        },
    )
}

/// A workspace made for the longest sequence rather than all the table holds (vLLM's
/// tables are as wide as the longest context the engine allows): the split plan cuts only
/// that many keys, and every sequence still sees all of its own.
fn tight_workspace_case(dt: DType) -> Case {
    let dims = [8, 2, 16, 128];
    correctness(
        OP,
        dt,
        "workspace made for the longest sequence, split by shape".into(),
        move |ctx, rng| {
            let lens = [600, 37, 255];
            let p = build(
                (ctx, rng),
                (dt, KvLayout::Nhd, Form::Blocks),
                (&lens, None),
                dims,
                2,
            )?;
            let ws = PagedWorkspace::new(ctx, 3, 8, 128, p.entries, 600).map_err(err)?;
            let o = DecodeOptions::default();
            sdpa_decode_paged(ctx, &p.q, &p.cache(), &p.out, &o, &ws).map_err(err)?;
            let want = paged_decode(&PagedProblem {
                q: &p.qv,
                k: &p.kv,
                v: &p.vv,
                layout: KvLayout::Nhd,
                dims: [3, 8, 2, 16, 128],
                seqs: p.seqs.clone(),
                scale: scale_of(128),
                window: 0,
                n_sink: 0,
                sinks: None,
                n_query: 1,
                causal: false,
            });
            Ok((p.out.to_f64_vec().map_err(err)?, want))
        },
    )
}
