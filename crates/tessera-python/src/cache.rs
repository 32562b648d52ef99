//! What a call would otherwise redo every time, kept per process: each op found by name
//! once, each parameter text parsed once per `(op, parameters)`, and the split-KV scratch
//! of the decode attention ops kept per `(op, device, stream)` while the call's shapes and
//! parameters stay the same. Errors are never kept: a refused call is refused again with the
//! same message.

use crate::call::ParamText;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tessera_runtime::{Context, Tensor};
use tessera_std::attention::DecodeWorkspace;
use tessera_std::decl::{OpArgs, ParamValues, Workspace};
use tessera_std::{ops, OpDecl, OpError};

/// More distinct parameter sets than this (a float parameter swept call by call) empty the
/// parsed-parameter cache rather than grow it without bound.
const MAX_PARAM_SETS: usize = 4096;

/// The declared op `name`, looked up in a table made once.
pub fn find(name: &str) -> Option<&'static OpDecl> {
    static BY_NAME: OnceLock<HashMap<&'static str, &'static OpDecl>> = OnceLock::new();
    BY_NAME
        .get_or_init(|| ops().into_iter().map(|o| (o.name, o)).collect())
        .get(name)
        .copied()
}

type ParamKey = (&'static str, ParamText);

/// `parse(op, given)`, or the result of an earlier successful parse of the same text.
pub fn params(
    op: &'static OpDecl,
    given: ParamText,
    parse: impl FnOnce(&ParamText) -> Result<ParamValues, String>,
) -> Result<Arc<ParamValues>, String> {
    static PARSED: OnceLock<Mutex<HashMap<ParamKey, Arc<ParamValues>>>> = OnceLock::new();
    let parsed = PARSED.get_or_init(Default::default);
    let key = (op.name, given);
    // A poisoned lock only means another thread panicked mid-insert; parsing again is right.
    if let Some(p) = parsed.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return Ok(p);
    }
    let values = Arc::new(parse(&key.1)?);
    if let Ok(mut m) = parsed.lock() {
        if m.len() >= MAX_PARAM_SETS {
            m.clear();
        }
        m.insert(key, values.clone());
    }
    Ok(values)
}

/// Which call a kept workspace fits: every input's shape and the parameter text (what the
/// op's `make` reads).
type ShapeKey = (Vec<Vec<usize>>, ParamText);
/// Where a workspace is kept: `(op, device, stream)`.
type Slot = (&'static str, usize, usize);

thread_local! {
    /// Each slot's workspace last made there and the call it fits. Kept per
    /// thread (a workspace is not `Send`); calls on one stream run in its order, so the next
    /// call's kernels start after the last one's finished with the scratch.
    static WORKSPACES: RefCell<HashMap<Slot, (ShapeKey, Workspace)>> =
        RefCell::new(HashMap::new());
}

/// Runs `op` the way [`OpDecl::invoke`] does, keeping a decode workspace for the next call
/// on the same stream with the same shapes and parameters. Only [`DecodeWorkspace`] is kept:
/// its kernels write every partial result before reading it, so stale contents are never
/// seen; other workspaces (uploaded tables, check words) are made per call as before. No
/// workspace is kept or reused while the stream is being captured into a graph: the graph's
/// own allocations must be its own, not memory eager calls go on using.
pub fn invoke(
    op: &'static OpDecl,
    ctx: &Context,
    (ordinal, stream): (usize, usize),
    inputs: &std::collections::BTreeMap<String, Tensor>,
    outputs: &std::collections::BTreeMap<String, Tensor>,
    params: &ParamValues,
    param_text: &ParamText,
) -> Result<(), OpError> {
    if op.workspace.is_none() || ctx.recording_graph() {
        return op.invoke(ctx, inputs, outputs, params);
    }
    let bare = OpArgs {
        op,
        inputs,
        outputs,
        params,
        workspace: None,
    };
    let slot: Slot = (op.name, ordinal, stream);
    let shapes: ShapeKey = (
        inputs.values().map(|t| t.shape().to_vec()).collect(),
        param_text.clone(),
    );
    let kept = WORKSPACES.with(|w| {
        let mut w = w.borrow_mut();
        match w.remove(&slot) {
            Some((key, ws)) if key == shapes => Some(ws),
            _ => None,
        }
    });
    let ws = match kept {
        Some(ws) => ws,
        None => match op.make_workspace(ctx, &bare)? {
            Some(ws) => ws,
            None => return (op.call)(ctx, &bare),
        },
    };
    let result = (op.call)(
        ctx,
        &OpArgs {
            workspace: Some(&ws),
            ..bare
        },
    );
    if ws.is::<DecodeWorkspace>() {
        WORKSPACES.with(|w| w.borrow_mut().insert(slot, (shapes, ws)));
    }
    result
}
