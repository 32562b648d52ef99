//! Every declared op, called on its example on the CPU, allocates nothing inside the call:
//! its workspace (when it takes one) is made before, so every launch of the call could be
//! captured in a CUDA graph. The context's allocation counter is read around the call.

use super::rejection_cases::example_call;
use super::ParamValues;
use crate::registry::ops;
use crate::testing::CaseRng;
use tessera_runtime::Context;

#[test]
fn no_declared_op_allocates_inside_its_call() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(17);
    let mut allocating = Vec::new();
    for op in ops() {
        let (inputs, given, outputs) = example_call(op, None, &ctx, &mut rng).expect("example");
        let params = ParamValues::parse(op, &given).expect("example parameters");
        let bare = super::OpArgs {
            op,
            inputs: &inputs,
            outputs: &outputs,
            params: &params,
            workspace: None,
        };
        let ws = op.make_workspace(&ctx, &bare).expect("workspace");
        let args = super::OpArgs {
            workspace: ws.as_ref(),
            ..bare
        };
        let before = ctx.allocations();
        (op.call)(&ctx, &args).unwrap_or_else(|e| panic!("{}: {e}", op.name));
        let made = ctx.allocations() - before;
        if made > 0 {
            allocating.push(format!("{} ({made})", op.name));
        }
    }
    assert!(
        allocating.is_empty(),
        "these ops allocate inside their call: {allocating:?}"
    );
}

#[test]
fn the_counter_sees_an_allocation() {
    let ctx = Context::cpu();
    let before = ctx.allocations();
    let _t = ctx.zeros(tessera_runtime::DType::F32, &[4]).expect("alloc");
    assert_eq!(ctx.allocations(), before + 1);
}
