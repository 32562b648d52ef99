//! Every declared op, called on its example on the CPU in every float dtype it takes,
//! allocates nothing inside the call: its workspace (when it takes one) is made before, so
//! every launch of the call could be captured in a CUDA graph. The context's allocation
//! counter is read around the call. The decode ops run again over a cache long enough that
//! the plan splits the keys, and the test checks that it really did.

use super::rejection_cases::example_call_in;
use super::{Break, DtypeRule, OpDecl, ParamValues};
use crate::attention::plan::SPLIT_RUNS;
use crate::registry::ops;
use crate::testing::CaseRng;
use tessera_runtime::{Context, DType};

/// Calls `op` on its example, changed by `breaks` and in `dtype`, the declared way
/// (workspace first), and returns how many allocations the call itself made.
fn allocations_in_call(
    op: &'static OpDecl,
    breaks: &[Break],
    dtype: Option<DType>,
    ctx: &Context,
    rng: &mut CaseRng,
) -> u64 {
    let what = format!("{} {dtype:?} {breaks:?}", op.name);
    let (inputs, given, outputs) =
        example_call_in(op, breaks, dtype, ctx, rng).unwrap_or_else(|e| panic!("{what}: {e}"));
    let params = ParamValues::parse(op, &given).unwrap_or_else(|e| panic!("{what}: {e}"));
    let bare = super::OpArgs {
        op,
        inputs: &inputs,
        outputs: &outputs,
        params: &params,
        workspace: None,
    };
    let ws = op
        .make_workspace(ctx, &bare)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let args = super::OpArgs {
        workspace: ws.as_ref(),
        ..bare
    };
    let before = ctx.allocations();
    (op.call)(ctx, &args).unwrap_or_else(|e| panic!("{what}: {e}"));
    ctx.allocations() - before
}

/// The float dtypes the op's first input takes (one run in its own dtype otherwise).
fn dtypes_of(op: &OpDecl) -> Vec<Option<DType>> {
    match op.inputs.first().map(|t| t.dtype) {
        Some(DtypeRule::OneOf(list)) if list.iter().any(|d| d.is_float()) => list
            .iter()
            .filter(|d| d.is_float())
            .map(|&d| Some(d))
            .collect(),
        _ => vec![None],
    }
}

#[test]
fn no_declared_op_allocates_inside_its_call() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(17);
    let mut allocating = Vec::new();
    for op in ops() {
        for dtype in dtypes_of(op) {
            let made = allocations_in_call(op, &[], dtype, &ctx, &mut rng);
            if made > 0 {
                allocating.push(format!("{} {dtype:?} ({made})", op.name));
            }
        }
    }
    assert!(
        allocating.is_empty(),
        "these ops allocate inside their call: {allocating:?}"
    );
}

/// `sdpa_decode` over 1024 keys with one KV head of four query heads: few threadgroups
/// for a long cache, so the plan splits the keys on any CPU (three or more chunks on the
/// CUDA-core path, four or more on the fragment path) — the path that once allocated its
/// scratch inside the call.
#[test]
fn decode_that_splits_allocates_nothing_inside_its_call() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(18);
    let op = ops()
        .into_iter()
        .find(|o| o.name == "sdpa_decode")
        .expect("sdpa_decode is declared");
    let long = [Break::Dim("kv_stride", 1024), Break::Dim("n_kv_heads", 1)];
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let splits_before = SPLIT_RUNS.with(|n| n.get());
        let made = allocations_in_call(op, &long, Some(dtype), &ctx, &mut rng);
        assert!(
            SPLIT_RUNS.with(|n| n.get()) > splits_before,
            "{dtype:?}: the call did not split the keys"
        );
        assert_eq!(made, 0, "{dtype:?}: the split call allocated {made} times");
    }
}

#[test]
fn the_counter_sees_an_allocation() {
    let ctx = Context::cpu();
    let before = ctx.allocations();
    let _t = ctx.zeros(tessera_runtime::DType::F32, &[4]).expect("alloc");
    assert_eq!(ctx.allocations(), before + 1);
}
