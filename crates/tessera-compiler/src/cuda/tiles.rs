//! `matrix_mma_tiles` in CUDA C. On sm_90a each warpgroup (threads `128w …`) issues four
//! `wgmma.mma_async.m64nNk16` over its 64 rows of tile A and the whole of tile B, read by
//! the tensor cores from shared memory through descriptors (A from its four operand
//! fragments' registers instead when it is in registers: the wgmma A register layout of
//! warp `s` is the `mma.sync` m16n8k16 A layout of its 16 rows), into the accumulators'
//! registers: the wgmma accumulator layout of warp `s` of the group is, column block by
//! column block, the `mma.sync` m16n8 layout of our 16×16 accumulators, so accumulator `j`
//! is registers `8j … 8j + 7` of the instruction. Elsewhere each simdgroup loads its
//! operands from the same swizzled tiles with `ldmatrix` (each lane addressing its own
//! swizzled row) and multiplies with `mma.sync`.

use super::dialect::Cuda;
use crate::c_family::{Emitter, Mem, TileForm, TileSource};
use tessera_ir::Scalar;

/// The fence that orders the thread's earlier generic-proxy accesses of shared memory
/// (plain stores, `cp.async`) before the tensor cores' async-proxy reads.
const PROXY_FENCE: &str = "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");";

/// Emitted before a threadgroup barrier of a kernel with tile products: every thread's
/// writes of a tile are fenced for the tensor cores before the barrier hands them over.
pub(super) fn before_barrier(e: &mut Emitter<Cuda>) {
    e.line("#if TS_WGMMA");
    e.line(PROXY_FENCE);
    e.line("#endif");
}

/// The registers of accumulators `accs`, in wgmma's order.
fn registers(e: &Emitter<Cuda>, accs: &[usize]) -> Vec<String> {
    accs.iter()
        .flat_map(|&f| {
            let nm = e.names.frags[f].clone();
            (0..8).map(move |r| format!("{nm}[{r}]"))
        })
        .collect()
}

/// Waits until at most `pending` asynchronous products into `accs` are in flight (nothing
/// where products are synchronous).
pub(super) fn emit_wait(e: &mut Emitter<Cuda>, accs: &[usize], pending: u32) {
    let regs = registers(e, accs);
    e.line("#if TS_WGMMA");
    e.line(&format!(
        "asm volatile(\"wgmma.wait_group.sync.aligned {pending};\" ::: \"memory\");"
    ));
    fence_operands(e, &regs);
    e.line("#endif");
}

/// Emits the tile product into accumulators `accs` (fragment indices); an asynchronous
/// one on sm_90a is committed but not waited for. A `[K, N]` tile B is read by wgmma as
/// MN-major (its transpose bit; 64-column blocks 8 KiB apart, 8-row groups 1 KiB apart,
/// 2 KiB per 16 rows of K) and by `ldmatrix.trans` elsewhere.
pub(super) fn emit(
    e: &mut Emitter<Cuda>,
    accs: &[usize],
    a: TileSource<'_>,
    b: (&Mem, &str),
    form: TileForm,
) {
    let TileForm { asynchronous, b_kn } = form;
    let names: Vec<String> = accs.iter().map(|&f| e.names.frags[f].clone()).collect();
    let (mb, bi) = b;
    // A in registers: the four operand fragments' names, one per 16 columns of K.
    let regs_a: Option<Vec<String>> = match a {
        TileSource::Frags(fa) => Some(fa.iter().map(|&f| e.names.frags[f].clone()).collect()),
        TileSource::Tile(..) => None,
    };
    let ty = match mb.elem {
        Scalar::BF16 => "bf16",
        _ => "f16",
    };
    let n = 16 * names.len();
    let regs = registers(e, accs);
    e.line("{");
    e.depth += 1;
    e.line("#if TS_WGMMA");
    e.line(PROXY_FENCE);
    if let TileSource::Tile(ma, ai) = a {
        e.line(&format!(
            "const unsigned long long ts_da = ts_wgmma_desc(&{}[({ai}) + (threadIdx.x >> 7) * 4096u]);",
            ma.name
        ));
    }
    let (desc_b, step_b, trans_b) = if b_kn {
        ("ts_wgmma_desc_kn", 128, 1)
    } else {
        ("ts_wgmma_desc", 2, 0)
    };
    e.line(&format!(
        "const unsigned long long ts_db = {desc_b}(&{}[{bi}]);",
        mb.name
    ));
    fence_operands(e, &regs);
    e.line("asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");");
    let d_list: Vec<String> = (0..regs.len()).map(|i| format!("%{i}")).collect();
    let (da, db, one) = (regs.len(), regs.len() + 1, regs.len() + 2);
    let outs: Vec<String> = regs.iter().map(|r| format!("\"+f\"({r})")).collect();
    for kk in 0..4 {
        match &regs_a {
            None => e.line(&format!(
                "asm volatile(\"{{ .reg .pred p; setp.ne.b32 p, %{one}, 0; \
                 wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {{{}}}, %{da}, %{db}, p, 1, 1, 0, {trans_b}; }}\" \
                 : {} : \"l\"(ts_da + {}ull), \"l\"(ts_db + {}ull), \"r\"(1));",
                d_list.join(","),
                outs.join(", "),
                2 * kk,
                step_b * kk
            )),
            Some(fa) => {
                // Operands after the accumulators: A's four registers, B's descriptor, 1.
                let (r0, db, one) = (regs.len(), regs.len() + 4, regs.len() + 5);
                e.line(&format!(
                    "asm volatile(\"{{ .reg .pred p; setp.ne.b32 p, %{one}, 0; \
                     wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {{{}}}, {{%{r0},%{},%{},%{}}}, %{db}, p, 1, 1, {trans_b}; }}\" \
                     : {} : \"r\"({a}[0]), \"r\"({a}[1]), \"r\"({a}[2]), \"r\"({a}[3]), \"l\"(ts_db + {}ull), \"r\"(1));",
                    d_list.join(","),
                    r0 + 1,
                    r0 + 2,
                    r0 + 3,
                    outs.join(", "),
                    step_b * kk,
                    a = fa[kk]
                ));
            }
        }
    }
    e.line("asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");");
    if !asynchronous {
        e.line("asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");");
        fence_operands(e, &regs);
    }
    e.line("#else");
    // Simdgroup s: rows 16s … of A, every column block of B, 16 columns of K at a time.
    e.line("const unsigned int ts_l = threadIdx.x & 31u, ts_q = ts_l >> 3, ts_rr = ts_l & 7u;");
    e.line("const unsigned int ts_ar = (threadIdx.x >> 5) * 16u + ts_rr + 8u * (ts_q & 1u);");
    e.line("#pragma unroll");
    e.line("for (unsigned int ts_k = 0; ts_k < 4u; ++ts_k) {");
    e.line("  unsigned int ts_fa[4], ts_fb[4];");
    match a {
        TileSource::Tile(ma, ai) => e.line(&format!(
            "  ts_ldmatrix4(ts_fa, &{}[({ai}) + ts_ar * 64u + (((2u * ts_k + (ts_q >> 1)) ^ (ts_ar & 7u)) << 3)]);",
            ma.name
        )),
        TileSource::Frags(_) => {
            // The operand of these 16 columns of K (the loop is unrolled, so `ts_k` is known).
            let fa = regs_a.as_deref().unwrap_or_default();
            for (i, f) in fa.iter().enumerate() {
                let pick = if i == 0 { "" } else { "else " };
                e.line(&format!(
                    "  {pick}if (ts_k == {i}u) {{ ts_fa[0] = {f}[0]; ts_fa[1] = {f}[1]; ts_fa[2] = {f}[2]; ts_fa[3] = {f}[3]; }}"
                ));
            }
        }
    }
    for (j, nm) in names.iter().enumerate() {
        e.line("  {");
        if b_kn {
            // Quarter q: rows of K 16k + 8 (q & 1) …, columns of N 16j + 8 (q >> 1) ….
            e.line(&format!(
                "    const unsigned int ts_bk = 16u * ts_k + ts_rr + 8u * (ts_q & 1u), ts_bn = {}u + 8u * (ts_q >> 1);",
                16 * j
            ));
            e.line(&format!(
                "    ts_ldmatrix4_trans(ts_fb, &{}[({bi}) + (ts_bn >> 6) * 4096u + ts_bk * 64u + ((((ts_bn & 63u) >> 3) ^ (ts_bk & 7u)) << 3)]);",
                mb.name
            ));
        } else {
            e.line(&format!(
                "    const unsigned int ts_br = {}u + ts_rr + 8u * (ts_q >> 1);",
                16 * j
            ));
            e.line(&format!(
                "    ts_ldmatrix4(ts_fb, &{}[({bi}) + ts_br * 64u + (((2u * ts_k + (ts_q & 1u)) ^ (ts_br & 7u)) << 3)]);",
                mb.name
            ));
        }
        for h in 0..2 {
            let o = 4 * h;
            e.line(&format!(
                "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32 \
                 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};\" \
                 : \"+f\"({nm}[{o}]), \"+f\"({nm}[{}]), \"+f\"({nm}[{}]), \"+f\"({nm}[{}]) \
                 : \"r\"(ts_fa[0]), \"r\"(ts_fa[1]), \"r\"(ts_fa[2]), \"r\"(ts_fa[3]), \
                 \"r\"(ts_fb[{}]), \"r\"(ts_fb[{}]));",
                o + 1,
                o + 2,
                o + 3,
                2 * h,
                2 * h + 1
            ));
        }
        e.line("  }");
    }
    e.line("}");
    e.line("#endif");
    e.depth -= 1;
    e.line("}");
}

/// Keeps the compiler from moving accesses of the accumulators across the asynchronous
/// product (an empty asm that reads and writes each register).
fn fence_operands(e: &mut Emitter<Cuda>, regs: &[String]) {
    for chunk in regs.chunks(8) {
        let ops: Vec<String> = chunk.iter().map(|r| format!("\"+f\"({r})")).collect();
        e.line(&format!(
            "asm volatile(\"\" : {} :: \"memory\");",
            ops.join(", ")
        ));
    }
}
