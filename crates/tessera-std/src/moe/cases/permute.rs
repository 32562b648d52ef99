//! Cases of `moe_permute`: decode routings over 1 to 256 experts, distinct experts per
//! token and repeats, up to 2400 pairs, every output compared exactly with the counting
//! reference; ids out of range (−1, E) refused with the plan untouched; benches.

use super::*;
use crate::moe::permute::{moe_permute, moe_permute_kernel, MoeCheck, MoePlan, OP};

/// Builds the plan of `ids` on the device: (plan, check).
pub(super) fn plan_of(
    ctx: &Context,
    ids: &Tensor,
    experts: usize,
    pairs: usize,
) -> Result<MoePlan, String> {
    let plan = MoePlan::new(ctx, experts, pairs).map_err(err)?;
    let check = MoeCheck::new(ctx).map_err(err)?;
    moe_permute(ctx, ids, &plan, &check).map_err(err)?;
    Ok(plan)
}

fn correctness(tokens: usize, top_k: usize, experts: usize, distinct: bool) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: None,
        name: format!("T={tokens} k={top_k} E={experts} distinct={distinct}"),
        run: Box::new(move |ctx, rng| {
            let ids = routing(rng, tokens, top_k, experts, distinct);
            let t = ids_tensor(ctx, &ids, tokens, top_k)?;
            let pairs = tokens * top_k;
            let plan = MoePlan::new(ctx, experts, pairs).map_err(err)?;
            for x in [
                &plan.expert_counts,
                &plan.expert_offsets,
                &plan.sorted_pairs,
                &plan.active_experts,
            ] {
                x.write(&vec![0xDEAD_BEEFu32; x.len()]).map_err(err)?;
            }
            let check = MoeCheck::new(ctx).map_err(err)?;
            moe_permute(ctx, &t, &plan, &check).map_err(err)?;
            let [counts, offsets, sorted, active] = reference::permute(&ids, experts);
            let mut out = exact("expert_counts", &plan.expert_counts, &counts)?;
            out.checked += exact("expert_offsets", &plan.expert_offsets, &offsets)?.checked;
            out.checked += exact("sorted_pairs", &plan.sorted_pairs, &sorted)?.checked;
            out.checked += exact("active_experts", &plan.active_experts, &active)?.checked;
            Ok(out)
        }),
    }
}

/// A call whose pair `at` has expert id `bad`: refused naming it, the plan untouched.
fn out_of_range(bad: f64, at: usize) -> Case {
    rejection(
        OP,
        &format!("id {bad} at pair {at}"),
        "`topk_ids` out of range",
        move |ctx| {
            let (tokens, top_k, experts) = (4, 3, 6);
            let mut ids: Vec<f64> = (0..tokens * top_k).map(|p| (p % experts) as f64).collect();
            ids[at] = bad;
            let t = ids_tensor(ctx, &ids, tokens, top_k)?;
            let plan = MoePlan::new(ctx, experts, tokens * top_k).map_err(err)?;
            let check = MoeCheck::new(ctx).map_err(err)?;
            let (c, watched) = (ctx.clone(), plan.sorted_pairs.clone());
            Ok((
                watched,
                Box::new(move || {
                    let first = moe_permute(&c, &t, &plan, &check);
                    // The check's word is back at u32::MAX: a good call afterwards succeeds.
                    let good = ids_tensor(&c, &[0.0; 12], tokens, top_k)
                        .map_err(|e| crate::OpError::invalid(OP, e))?;
                    let other = MoePlan::new(&c, experts, tokens * top_k)?;
                    moe_permute(&c, &good, &other, &check)?;
                    first
                }) as Refused,
            ))
        },
    )
}

pub(crate) fn permute_cases() -> Vec<Case> {
    let mut v = vec![
        correctness(1, 8, 128, true),
        correctness(16, 8, 128, true),
        correctness(64, 8, 128, true),
        correctness(3, 2, 5, false),
        correctness(5, 1, 1, false),
        correctness(7, 4, 1000, false),
        correctness(300, 8, 256, true),
        correctness(1, 1, 1024, false),
    ];
    v.push(out_of_range(-1.0, 0));
    v.push(out_of_range(6.0, 11));
    v.push(out_of_range(-2_147_483_648.0, 5));
    v.push(rejection(
        OP,
        "ids of another count",
        "`topk_ids` must be a non-empty [tokens, top_k] of 12 ids",
        |ctx| {
            let t = zeros(ctx, DType::I32, &[5, 3])?;
            let plan = MoePlan::new(ctx, 6, 12).map_err(err)?;
            let check = MoeCheck::new(ctx).map_err(err)?;
            let (c, watched) = (ctx.clone(), plan.expert_counts.clone());
            Ok((
                watched,
                Box::new(move || moe_permute(&c, &t, &plan, &check)) as Refused,
            ))
        },
    ));
    v.push(rejection(
        OP,
        "plan tensors alias",
        "`active_experts` aliases `expert_counts`",
        |ctx| {
            let t = zeros(ctx, DType::I32, &[4, 3])?;
            let mut plan = MoePlan::new(ctx, 6, 12).map_err(err)?;
            plan.active_experts = plan.expert_counts.clone();
            let check = MoeCheck::new(ctx).map_err(err)?;
            let (c, watched) = (ctx.clone(), plan.expert_counts.clone());
            Ok((
                watched,
                Box::new(move || moe_permute(&c, &t, &plan, &check)) as Refused,
            ))
        },
    ));
    v
}

pub(crate) fn permute_kernels() -> Vec<KernelUse> {
    vec![KernelUse {
        def: &moe_permute_kernel::DEF,
        spec: tessera_ir::Specialization::new(vec![], vec![]),
    }]
}

/// The plan of Qwen3-30B-A3B's routing (128 experts, top-8) at 1, 16 and 64 tokens,
/// read back each call (the id check).
pub(crate) fn permute_benches() -> Vec<BenchCase> {
    let (experts, top_k, _, _) = QWEN3_MOE;
    BENCH_TOKENS
        .into_iter()
        .map(|tokens| BenchCase {
            op: OP,
            kernel: "moe_permute_kernel",
            dtype: DType::I32,
            shape: format!("T={tokens} k={top_k} E={experts}"),
            bytes: (tokens * top_k * 8 + experts * 12) as u64,
            flops: 0,
            quick: tokens == 1,
            prepare: Box::new(move |ctx, rng| {
                let ids = routing(rng, tokens, top_k, experts, true);
                let t = ids_tensor(ctx, &ids, tokens, top_k)?;
                let plan = MoePlan::new(ctx, experts, tokens * top_k).map_err(err)?;
                let check = MoeCheck::new(ctx).map_err(err)?;
                let (c, out) = (ctx.clone(), plan.sorted_pairs.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || moe_permute(&c, &t, &plan, &check).map_err(err)),
                    output: out,
                    reference: reference::permute(&ids, experts)[2].clone(),
                })
            }),
        })
        .collect()
}
