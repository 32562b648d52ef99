//! `moe_permute`: the (token, slot) pairs of a routing grouped by expert, the plan the
//! grouped GEMV walks so that each chosen expert's weights are read once for all the
//! tokens that chose it. Pair `p = t·top_k + j` is token `t`'s `j`-th choice. The plan:
//! `expert_counts[e]` pairs chose expert `e`; they are `sorted_pairs[expert_offsets[e] ..
//! expert_offsets[e] + expert_counts[e]]`, in ascending pair order (a stable counting sort,
//! so the plan is the same on every backend); `active_experts` lists the experts chosen at
//! all, ascending, then `experts` (no expert) in the slots left.
//!
//! An id outside `0..experts` (a negative one included, and the −1 the router gives a NaN
//! row) is refused before anything is written: the ids live on the device, so the kernel
//! finds the first bad pair there and, having found one, writes nothing but that pair's
//! index into the caller's [`MoeCheck`]; the wrapper reads the word back and refuses the
//! call naming the pair and its id. That read-back waits for the device, so a call cannot
//! be recorded into a graph (it is refused). One threadgroup does it all, with no atomics:
//! decode sizes, at most 4096 pairs.

use super::MAX_EXPERTS;
use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_is, fits_u32, shape_is};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "moe_permute";

/// The most (token, slot) pairs a plan holds.
pub const MAX_PAIRS: usize = 4096;
/// Threads of the permute's one threadgroup.
const PERMUTE_GROUP: u32 = 1024;

/// Builds the plan of `pairs` ids over `experts` experts, or, when an id is out of range,
/// writes only the first such pair's index to `first_bad[0]`. Grid `[1, 1, 1]`.
#[kernel]
pub fn moe_permute_kernel(
    topk_ids: Tensor<i32>,
    mut expert_counts: Tensor<u32>,
    mut expert_offsets: Tensor<u32>,
    mut sorted_pairs: Tensor<u32>,
    mut active_experts: Tensor<u32>,
    mut first_bad: Tensor<u32>,
    experts: u32,
    pairs: u32,
) {
    let ids = threadgroup_array::<u32>(4096);
    let counts = threadgroup_array::<u32>(1024);
    let starts = threadgroup_array::<u32>(1024);
    let tid = thread_id();
    let step = group_size();
    // A negative i32 id is above every expert once read as u32.
    let mut bad = pairs;
    for p in range(tid, pairs, step) {
        let id = load(topk_ids[p]).cast::<u32>();
        store(ids[p], id);
        bad = min(bad, select(id >= experts, p, pairs));
    }
    let first = group_min(bad);
    barrier();
    if first < pairs {
        if tid == 0u32 {
            store(first_bad[0], first);
        }
    } else {
        for e in range(tid, experts, step) {
            let mut c = 0u32;
            for p in range(0u32, pairs, 1u32) {
                c += select(load(ids[p]) == e, 1u32, 0u32);
            }
            store(counts[e], c);
        }
        barrier();
        for e in range(tid, experts, step) {
            let mut start = 0u32;
            let mut slot = 0u32;
            let mut active = 0u32;
            for f in range(0u32, experts, 1u32) {
                let c = load(counts[f]);
                let before = f < e;
                start += select(before, c, 0u32);
                slot += select(before && c > 0u32, 1u32, 0u32);
                active += select(c > 0u32, 1u32, 0u32);
            }
            let c = load(counts[e]);
            store(starts[e], start);
            store(expert_counts[e], c);
            store(expert_offsets[e], start);
            if c > 0u32 {
                store(active_experts[slot], e);
            }
            if e >= active {
                store(active_experts[e], experts);
            }
        }
        barrier();
        for p in range(tid, pairs, step) {
            let id = load(ids[p]);
            let mut earlier = 0u32;
            for q in range(0u32, p, 1u32) {
                earlier += select(load(ids[q]) == id, 1u32, 0u32);
            }
            store(sorted_pairs[load(starts[id]) + earlier], p);
        }
    }
}

/// A routing grouped by expert: the four u32 tensors [`moe_permute`] writes and the grouped
/// GEMVs read. Make it once per shape; the GEMVs trust it to describe the ids it was built
/// from (whatever it holds, they read nothing out of bounds).
#[derive(Clone)]
pub struct MoePlan {
    /// `[experts]`: how many pairs chose each expert.
    pub expert_counts: Tensor,
    /// `[experts]`: where each expert's pairs start in `sorted_pairs`.
    pub expert_offsets: Tensor,
    /// `[pairs]`: the pairs `t·top_k + j`, grouped by expert.
    pub sorted_pairs: Tensor,
    /// `[experts]`: the experts chosen at all, ascending, then `experts`.
    pub active_experts: Tensor,
}

impl MoePlan {
    /// Allocates a plan for `pairs` = tokens·top_k pairs over `experts` experts.
    pub fn new(ctx: &Context, experts: usize, pairs: usize) -> Result<MoePlan, OpError> {
        let z = |n: usize| ctx.zeros(DType::U32, &[n]).map_err(runtime(OP));
        Ok(MoePlan {
            expert_counts: z(experts)?,
            expert_offsets: z(experts)?,
            sorted_pairs: z(pairs)?,
            active_experts: z(experts)?,
        })
    }

    /// Checks the four tensors: u32 `[experts]`, `[experts]`, `[pairs]`, `[experts]`, none
    /// aliasing another, with 1 ≤ experts ≤ 1024 and 1 ≤ pairs ≤ 4096: returns (experts, pairs).
    pub fn check(&self, op: &'static str) -> Result<(usize, usize), OpError> {
        let experts = match *self.expert_counts.shape() {
            [e] if (1..=MAX_EXPERTS).contains(&e) => e,
            ref s => {
                return Err(OpError::invalid(
                    op,
                    format!("`expert_counts` must be [experts] with 1 ≤ experts ≤ {MAX_EXPERTS}, got shape {s:?}"),
                ))
            }
        };
        let pairs = match *self.sorted_pairs.shape() {
            [p] if (1..=MAX_PAIRS).contains(&p) => p,
            ref s => {
                return Err(OpError::invalid(
                    op,
                    format!("`sorted_pairs` must be [pairs] with 1 ≤ pairs ≤ {MAX_PAIRS} (tokens·top_k), got shape {s:?}"),
                ))
            }
        };
        let named = [
            ("expert_counts", &self.expert_counts),
            ("expert_offsets", &self.expert_offsets),
            ("sorted_pairs", &self.sorted_pairs),
            ("active_experts", &self.active_experts),
        ];
        for (i, (name, t)) in named.iter().enumerate() {
            dtype_is(op, name, t, DType::U32)?;
            distinct_named(op, name, t, &named[..i])?;
        }
        shape_is(op, "expert_offsets", &self.expert_offsets, &[experts])?;
        shape_is(op, "active_experts", &self.active_experts, &[experts])?;
        Ok((experts, pairs))
    }

    /// The four tensors by name, for alias checks.
    pub(super) fn named(&self) -> [(&'static str, &Tensor); 4] {
        [
            ("expert_counts", &self.expert_counts),
            ("expert_offsets", &self.expert_offsets),
            ("sorted_pairs", &self.sorted_pairs),
            ("active_experts", &self.active_experts),
        ]
    }
}

/// The caller's scratch for the id check: one u32 on the device, u32::MAX between calls.
pub struct MoeCheck {
    pub(crate) first_bad: Tensor,
}

impl MoeCheck {
    /// Allocates the word the check writes.
    pub fn new(ctx: &Context) -> Result<MoeCheck, OpError> {
        Ok(MoeCheck {
            first_bad: ctx.tensor(&[u32::MAX], &[1]).map_err(runtime(OP))?,
        })
    }
}

/// Groups the pairs of `topk_ids` (i32 `[tokens, top_k]`) by expert into `plan`. An id
/// outside `0..experts` (the plan's) is refused before anything is written.
pub fn moe_permute(
    ctx: &Context,
    topk_ids: &Tensor,
    plan: &MoePlan,
    check: &MoeCheck,
) -> Result<(), OpError> {
    dtype_is(OP, "topk_ids", topk_ids, DType::I32)?;
    let (experts, pairs) = plan.check(OP)?;
    match *topk_ids.shape() {
        [t, k] if t > 0 && k > 0 && t * k == pairs => {}
        ref s => {
            return Err(OpError::invalid(
                OP,
                format!("`topk_ids` must be a non-empty [tokens, top_k] of {pairs} ids (the plan's pairs), got shape {s:?}"),
            ))
        }
    }
    for (name, t) in plan.named() {
        distinct_named(OP, name, t, &[("topk_ids", topk_ids)])?;
    }
    if !ctx.owns(&check.first_bad) {
        return Err(OpError::invalid(
            OP,
            "the MoeCheck was made by another context; make it with this one",
        ));
    }
    if ctx.recording_graph() {
        return Err(OpError::invalid(
            OP,
            "moe_permute reads its id check back before it writes, so it cannot be recorded into a graph; call it outside the graph",
        ));
    }
    moe_permute_kernel::launch(
        ctx,
        moe_permute_kernel::Args {
            topk_ids,
            expert_counts: &plan.expert_counts,
            expert_offsets: &plan.expert_offsets,
            sorted_pairs: &plan.sorted_pairs,
            active_experts: &plan.active_experts,
            first_bad: &check.first_bad,
            experts: fits_u32(OP, "experts", experts)?,
            pairs: fits_u32(OP, "pairs", pairs)?,
        },
    )
    .grid([1, 1, 1])
    .group_size(PERMUTE_GROUP)
    .run()
    .map_err(runtime(OP))?;
    let word = check.first_bad.to_vec::<u32>().map_err(runtime(OP))?;
    match word.first().copied() {
        Some(p) if p != u32::MAX => {
            check.first_bad.write(&[u32::MAX]).map_err(runtime(OP))?;
            let ids = topk_ids.to_vec::<i32>().map_err(runtime(OP))?;
            let id = ids.get(p as usize).copied().unwrap_or_default();
            let k = topk_ids.shape()[1];
            Err(OpError::invalid(
                OP,
                format!(
                    "`topk_ids` out of range: token {} slot {} has expert id {id}, the plan has {experts} experts (0..{experts})",
                    p as usize / k,
                    p as usize % k
                ),
            ))
        }
        _ => Ok(()),
    }
}
