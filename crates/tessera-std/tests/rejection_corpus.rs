//! The rejection corpus: invalid op calls and kernel launches that cut across the
//! declarations' generated rejection cases (which `tessera check` runs): outputs of the
//! wrong dtype or shape, aliasing between outputs and inputs, tensors of another context,
//! zero-size and wrongly ranked tensors, malformed RoPE tables, non-finite parameters,
//! bad sequence boundaries, and launches with a bad grid or group size. Each entry must be
//! refused with a message naming the problem, leave every output as it was (poisoned with
//! a sentinel before the call), and neither panic nor hang.

use std::sync::mpsc;
use std::time::Duration;
use tessera_runtime::{Context, DType, RuntimeError, Tensor};
use tessera_std::attention::{
    sdpa_decode, sdpa_decode_batched, sdpa_decode_strided, sdpa_multi_query, sdpa_prefill,
    sdpa_prefill_varlen, DecodeOptions, DecodeWorkspace, Packed, VarlenWorkspace,
};
use tessera_std::conv::{causal_conv1d, causal_conv1d_update, Conv1dArgs};
use tessera_std::elementwise::add;
use tessera_std::elementwise::add::add_kernel;
use tessera_std::gdn::{
    gdn_chunked_prefill, gdn_decode_step, DecodeArgs, GdnPrefillWorkspace, PrefillArgs,
    PrefillShape,
};
use tessera_std::matmul::{matmul, matmul_bt};
use tessera_std::norm::{
    gated_mixer_norm, layer_norm, logsumexp, rms_norm, rms_norm_residual, rms_norm_small,
    rms_norm_vec, softmax,
};
use tessera_std::rope::{qk_norm_rope, rope, RopeConfig, RopeLayout, RopeScaling, RopeTable};
use tessera_std::ssm::{selective_scan_step, ScanArgs};
use tessera_std::OpError;

/// What a refused call left behind: its message, and whether every output kept its bytes.
struct Refusal {
    message: String,
    outputs_unchanged: bool,
}

type Outcome = Result<Refusal, String>;

/// One invalid call: a name, a part of the message it must give, and the call.
struct Entry {
    name: &'static str,
    expect: &'static str,
    call: fn(&Context) -> Outcome,
}

/// The byte every output is filled with before the call.
const SENTINEL: u8 = 0xA7;

fn z(ctx: &Context, dtype: DType, shape: &[usize]) -> Result<Tensor, String> {
    ctx.zeros(dtype, shape).map_err(|e| format!("setup: {e}"))
}

/// Fills `outputs` with the sentinel, makes the call, and reports how it was refused.
fn refused_with<E: std::fmt::Display>(
    outputs: &[&Tensor],
    is_rejection: fn(&E) -> bool,
    call: impl FnOnce() -> Result<(), E>,
) -> Outcome {
    for t in outputs {
        t.write_bytes(&vec![SENTINEL; t.size_bytes()])
            .map_err(|e| format!("setup: {e}"))?;
    }
    let err = match call() {
        Ok(()) => return Err("the call was accepted".into()),
        Err(e) => e,
    };
    if !is_rejection(&err) {
        return Err(format!(
            "failed while running instead of being refused: {err}"
        ));
    }
    let mut outputs_unchanged = true;
    for t in outputs {
        let bytes = t.to_bytes().map_err(|e| format!("read back: {e}"))?;
        outputs_unchanged &= bytes.iter().all(|&b| b == SENTINEL);
    }
    Ok(Refusal {
        message: err.to_string(),
        outputs_unchanged,
    })
}

/// An op call that must be refused.
fn refused(outputs: &[&Tensor], call: impl FnOnce() -> Result<(), OpError>) -> Outcome {
    refused_with(outputs, OpError::is_rejection, call)
}

/// A kernel launch that must be refused.
fn launch_refused(outputs: &[&Tensor], call: impl FnOnce() -> Result<(), RuntimeError>) -> Outcome {
    refused_with(outputs, RuntimeError::is_invalid_launch, call)
}

fn table(ctx: &Context, rot_dim: usize, scaling: RopeScaling) -> Result<RopeTable, OpError> {
    RopeTable::new(
        ctx,
        RopeConfig {
            layout: RopeLayout::NeoX,
            theta: 10000.0,
            rot_dim,
            scaling,
        },
    )
}

fn table_refused(config: RopeConfig) -> impl Fn(&Context) -> Outcome {
    move |ctx| refused(&[], || RopeTable::new(ctx, config).map(|_| ()))
}

/// Split scratch large enough for every decode call here (3 rows × 8 heads × 4 chunks of
/// head_dim 128), so a refusal is always for the invariant the call breaks.
fn decode_ws(ctx: &Context) -> Result<DecodeWorkspace, String> {
    DecodeWorkspace::new(ctx, 3, 8, 128, 4).map_err(|e| format!("setup: {e}"))
}

fn opts(scale: f32) -> DecodeOptions<'static> {
    DecodeOptions {
        scale: Some(scale),
        ..Default::default()
    }
}

const F32: DType = DType::F32;
const F16: DType = DType::F16;
const BF16: DType = DType::BF16;

/// `add` over `a`, `b` of f32 [64] into `out`.
fn add_with(ctx: &Context, b: &Tensor, out: &Tensor) -> Outcome {
    let a = z(ctx, F32, &[64])?;
    refused(&[out], || add(ctx, &a, b, out))
}

/// `rms_norm` of f16 x [4, 64] with weight `w` into `out`, at `eps`.
fn rms_with(ctx: &Context, w: &Tensor, out: &Tensor, eps: f32) -> Outcome {
    let x = z(ctx, F16, &[4, 64])?;
    refused(&[out], || rms_norm(ctx, &x, w, out, eps))
}

/// `sdpa_decode` of f16 q [4, 64] over `k`, `v` into `out`.
fn decode_with(ctx: &Context, k: &Tensor, v: &Tensor, out: &Tensor) -> Outcome {
    let q = z(ctx, F16, &[4, 64])?;
    let ws = decode_ws(ctx)?;
    refused(&[out], || sdpa_decode(ctx, &q, k, v, out, None, &ws))
}

/// The GDN decode step's tensors (B 1, Hk 1, Hv 2, Dk 64, Dv 16, f16, f32 state).
struct GdnStep {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    state_in: Tensor,
    state_out: Tensor,
    o: Tensor,
}

fn gdn_step(ctx: &Context) -> Result<GdnStep, String> {
    Ok(GdnStep {
        q: z(ctx, F16, &[1, 1, 64])?,
        k: z(ctx, F16, &[1, 1, 64])?,
        v: z(ctx, F16, &[1, 2, 16])?,
        g: z(ctx, F32, &[1, 2])?,
        beta: z(ctx, F32, &[1, 2])?,
        state_in: z(ctx, F32, &[1, 2, 16, 64])?,
        state_out: z(ctx, F32, &[1, 2, 16, 64])?,
        o: z(ctx, F16, &[1, 2, 16])?,
    })
}

fn gdn_step_args(s: &GdnStep) -> DecodeArgs<'_> {
    DecodeArgs {
        q: &s.q,
        k: &s.k,
        v: &s.v,
        g: &s.g,
        beta: &s.beta,
        state_in: &s.state_in,
        state_out: &s.state_out,
        o: &s.o,
    }
}

/// The GDN prefill's tensors: T tokens packed, Hk = Hv = 1, Dk 64, Dv 32, f16.
struct GdnPrefill {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    o: Tensor,
    final_state: Tensor,
}

fn gdn_prefill(ctx: &Context, t: usize, n: usize) -> Result<GdnPrefill, String> {
    Ok(GdnPrefill {
        q: z(ctx, F16, &[t, 1, 64])?,
        k: z(ctx, F16, &[t, 1, 64])?,
        v: z(ctx, F16, &[t, 1, 32])?,
        g: z(ctx, F32, &[t, 1])?,
        beta: z(ctx, F32, &[t, 1])?,
        o: z(ctx, F16, &[t, 1, 32])?,
        final_state: z(ctx, F32, &[n, 1, 32, 64])?,
    })
}

/// The prefill planned for `cu` (default: one sequence of every token), refused either
/// when the workspace is planned (bad boundaries) or when the op checks the call.
fn prefill_refused(ctx: &Context, p: &GdnPrefill, cu: Option<&[usize]>) -> Outcome {
    let args = PrefillArgs {
        q: &p.q,
        k: &p.k,
        v: &p.v,
        g: &p.g,
        beta: &p.beta,
        h0: None,
        o: &p.o,
        final_state: &p.final_state,
    };
    let shape = p.q.shape();
    let tokens: usize = shape[..shape.len() - 2].iter().product();
    let cu = cu.map_or_else(|| vec![0, tokens], <[usize]>::to_vec);
    refused(&[&p.o, &p.final_state], || {
        let ws = GdnPrefillWorkspace::new(
            ctx,
            &PrefillShape {
                dtype: p.q.dtype(),
                hv: 1,
                dk: 64,
                dv: 32,
                cu_seqlens: &cu,
            },
        )?;
        gdn_chunked_prefill(ctx, &args, &ws, 0.125)
    })
}

/// causal_conv1d over x [B, T, C] = [1, 4, 8], W 4, f32, with the given tensors swapped in.
struct Conv {
    x: Tensor,
    w: Tensor,
    bias: Tensor,
    state_in: Tensor,
    out: Tensor,
    state_out: Tensor,
}

fn conv(ctx: &Context) -> Result<Conv, String> {
    Ok(Conv {
        x: z(ctx, F32, &[1, 4, 8])?,
        w: z(ctx, F32, &[8, 4])?,
        bias: z(ctx, F32, &[8])?,
        state_in: z(ctx, F32, &[1, 8, 3])?,
        out: z(ctx, F32, &[1, 4, 8])?,
        state_out: z(ctx, F32, &[1, 8, 3])?,
    })
}

fn conv_args(c: &Conv) -> Conv1dArgs<'_> {
    Conv1dArgs {
        x: &c.x,
        w: &c.w,
        bias: &c.bias,
        state_in: &c.state_in,
        out: &c.out,
        state_out: &c.state_out,
    }
}

/// The selective-scan step's tensors: B 2, D 8, N 16, f16 activations, f32 state.
struct Scan {
    state_in: Tensor,
    x: Tensor,
    dt: Tensor,
    a: Tensor,
    b: Tensor,
    c: Tensor,
    d: Tensor,
    zg: Tensor,
    dt_bias: Tensor,
    state_out: Tensor,
    y: Tensor,
}

fn scan(ctx: &Context, batch: usize) -> Result<Scan, String> {
    Ok(Scan {
        state_in: z(ctx, F32, &[batch, 8, 16])?,
        x: z(ctx, F16, &[batch, 8])?,
        dt: z(ctx, F16, &[batch, 8])?,
        a: z(ctx, F32, &[8, 16])?,
        b: z(ctx, F16, &[batch, 16])?,
        c: z(ctx, F16, &[batch, 16])?,
        d: z(ctx, F16, &[8])?,
        zg: z(ctx, F16, &[batch, 8])?,
        dt_bias: z(ctx, F16, &[8])?,
        state_out: z(ctx, F32, &[batch, 8, 16])?,
        y: z(ctx, F16, &[batch, 8])?,
    })
}

fn scan_refused(ctx: &Context, s: &Scan) -> Outcome {
    let args = ScanArgs {
        state_in: &s.state_in,
        x: &s.x,
        dt: &s.dt,
        a: &s.a,
        b: &s.b,
        c: &s.c,
        d: &s.d,
        z: &s.zg,
        dt_bias: &s.dt_bias,
        state_out: &s.state_out,
        y: &s.y,
    };
    refused(&[&s.state_out, &s.y], || selective_scan_step(ctx, &args))
}

/// A typed launch of the std library's add kernel on f32 [256] tensors.
fn add_launch(ctx: &Context, grid: Option<[u32; 3]>, group: Option<u32>) -> Outcome {
    let (a, b, out) = (
        z(ctx, F32, &[256])?,
        z(ctx, F32, &[256])?,
        z(ctx, F32, &[256])?,
    );
    launch_refused(&[&out], || {
        let args = add_kernel::Args {
            a: &a,
            b: &b,
            out: &out,
            n: 256,
        };
        let mut l = add_kernel::launch(ctx, args);
        if let Some(g) = grid {
            l = l.grid(g);
        }
        if let Some(g) = group {
            l = l.group_size(g);
        }
        l.run()
    })
}

fn corpus() -> Vec<Entry> {
    vec![
        // ---- add ----
        Entry {
            name: "add: b has another length",
            expect: "`b`",
            call: |ctx| add_with(ctx, &z(ctx, F32, &[65])?, &z(ctx, F32, &[64])?),
        },
        Entry {
            name: "add: b of another dtype",
            expect: "`b`",
            call: |ctx| add_with(ctx, &z(ctx, F16, &[64])?, &z(ctx, F32, &[64])?),
        },
        Entry {
            name: "add: out of another dtype",
            expect: "`out`",
            call: |ctx| add_with(ctx, &z(ctx, F32, &[64])?, &z(ctx, BF16, &[64])?),
        },
        Entry {
            name: "add: out of the same size, another shape",
            expect: "`out`",
            call: |ctx| add_with(ctx, &z(ctx, F32, &[64])?, &z(ctx, F32, &[2, 32])?),
        },
        Entry {
            name: "add: out is b",
            expect: "`b`",
            call: |ctx| {
                let b = z(ctx, F32, &[64])?;
                add_with(ctx, &b, &b)
            },
        },
        Entry {
            name: "add: out from another context",
            expect: "context",
            call: |ctx| {
                let other = Context::cpu();
                add_with(ctx, &z(ctx, F32, &[64])?, &z(&other, F32, &[64])?)
            },
        },
        Entry {
            name: "add: integer tensors",
            expect: "i32",
            call: |ctx| {
                let (a, b, out) = (
                    z(ctx, DType::I32, &[8])?,
                    z(ctx, DType::I32, &[8])?,
                    z(ctx, DType::I32, &[8])?,
                );
                refused(&[&out], || add(ctx, &a, &b, &out))
            },
        },
        // ---- matmul ----
        Entry {
            name: "matmul: c has another N",
            expect: "`c`",
            call: |ctx| {
                let (a, b, c) = (
                    z(ctx, F16, &[8, 16])?,
                    z(ctx, F16, &[16, 4])?,
                    z(ctx, F16, &[8, 5])?,
                );
                refused(&[&c], || matmul(ctx, &a, &b, &c))
            },
        },
        Entry {
            name: "matmul: c of another dtype",
            expect: "`c`",
            call: |ctx| {
                let (a, b, c) = (
                    z(ctx, F16, &[8, 16])?,
                    z(ctx, F16, &[16, 4])?,
                    z(ctx, F32, &[8, 4])?,
                );
                refused(&[&c], || matmul(ctx, &a, &b, &c))
            },
        },
        Entry {
            name: "matmul: a batched (3-D)",
            expect: "`a`",
            call: |ctx| {
                let (a, b, c) = (
                    z(ctx, F16, &[2, 8, 16])?,
                    z(ctx, F16, &[16, 4])?,
                    z(ctx, F16, &[8, 4])?,
                );
                refused(&[&c], || matmul(ctx, &a, &b, &c))
            },
        },
        Entry {
            name: "matmul: c is a",
            expect: "`c` aliases `a`",
            call: |ctx| {
                let (a, b) = (z(ctx, F16, &[16, 16])?, z(ctx, F16, &[16, 16])?);
                refused(&[&a], || matmul(ctx, &a, &b, &a))
            },
        },
        Entry {
            name: "matmul_bt: b of another dtype",
            expect: "`b`",
            call: |ctx| {
                let (a, b, c) = (
                    z(ctx, F16, &[8, 16])?,
                    z(ctx, BF16, &[4, 16])?,
                    z(ctx, F16, &[8, 4])?,
                );
                refused(&[&c], || matmul_bt(ctx, &a, &b, &c))
            },
        },
        Entry {
            name: "matmul: K = 0",
            expect: "K",
            call: |ctx| {
                let (a, b, c) = (
                    z(ctx, F16, &[8, 0])?,
                    z(ctx, F16, &[0, 4])?,
                    z(ctx, F16, &[8, 4])?,
                );
                refused(&[&c], || matmul(ctx, &a, &b, &c))
            },
        },
        // ---- softmax, logsumexp ----
        Entry {
            name: "softmax: out one column short",
            expect: "`out`",
            call: |ctx| {
                let (x, out) = (z(ctx, F32, &[4, 32])?, z(ctx, F32, &[4, 31])?);
                refused(&[&out], || softmax(ctx, &x, &out))
            },
        },
        Entry {
            name: "softmax: out of another dtype",
            expect: "`out`",
            call: |ctx| {
                let (x, out) = (z(ctx, F32, &[4, 32])?, z(ctx, F16, &[4, 32])?);
                refused(&[&out], || softmax(ctx, &x, &out))
            },
        },
        Entry {
            name: "softmax: a 0-d x",
            expect: "`x`",
            call: |ctx| {
                let (x, out) = (z(ctx, F32, &[])?, z(ctx, F32, &[])?);
                refused(&[&out], || softmax(ctx, &x, &out))
            },
        },
        Entry {
            name: "softmax: rows of length 0",
            expect: "n",
            call: |ctx| {
                let (x, out) = (z(ctx, F32, &[4, 0])?, z(ctx, F32, &[4, 0])?);
                refused(&[&out], || softmax(ctx, &x, &out))
            },
        },
        Entry {
            name: "logsumexp: f16 out",
            expect: "f32",
            call: |ctx| {
                let (x, out) = (z(ctx, F16, &[4, 32])?, z(ctx, F16, &[4])?);
                refused(&[&out], || logsumexp(ctx, &x, &out))
            },
        },
        Entry {
            name: "logsumexp: out keeps the reduced axis",
            expect: "`out`",
            call: |ctx| {
                let (x, out) = (z(ctx, F32, &[4, 32])?, z(ctx, F32, &[4, 1])?);
                refused(&[&out], || logsumexp(ctx, &x, &out))
            },
        },
        Entry {
            name: "softmax: x from another context",
            expect: "context",
            call: |ctx| {
                let other = Context::cpu();
                let (x, out) = (z(&other, F32, &[4, 32])?, z(ctx, F32, &[4, 32])?);
                refused(&[&out], || softmax(ctx, &x, &out))
            },
        },
        // ---- the RMSNorm family, LayerNorm, the gated norm ----
        Entry {
            name: "rms_norm: eps NaN",
            expect: "eps",
            call: |ctx| rms_with(ctx, &z(ctx, F16, &[64])?, &z(ctx, F16, &[4, 64])?, f32::NAN),
        },
        Entry {
            name: "rms_norm: eps infinite",
            expect: "eps",
            call: |ctx| {
                rms_with(
                    ctx,
                    &z(ctx, F16, &[64])?,
                    &z(ctx, F16, &[4, 64])?,
                    f32::INFINITY,
                )
            },
        },
        Entry {
            name: "rms_norm: out of another dtype",
            expect: "`out`",
            call: |ctx| rms_with(ctx, &z(ctx, F16, &[64])?, &z(ctx, F32, &[4, 64])?, 1e-6),
        },
        Entry {
            name: "rms_norm: out with another row count",
            expect: "`out`",
            call: |ctx| rms_with(ctx, &z(ctx, F16, &[64])?, &z(ctx, F16, &[5, 64])?, 1e-6),
        },
        Entry {
            name: "rms_norm: w 2-D",
            expect: "`w`",
            call: |ctx| rms_with(ctx, &z(ctx, F16, &[1, 64])?, &z(ctx, F16, &[4, 64])?, 1e-6),
        },
        Entry {
            name: "rms_norm: w of another dtype",
            expect: "`w`",
            call: |ctx| rms_with(ctx, &z(ctx, BF16, &[64])?, &z(ctx, F16, &[4, 64])?, 1e-6),
        },
        Entry {
            name: "rms_norm: out is w",
            expect: "`w`",
            call: |ctx| {
                let (x, w) = (z(ctx, F16, &[64])?, z(ctx, F16, &[64])?);
                refused(&[&w], || rms_norm(ctx, &x, &w, &w, 1e-6))
            },
        },
        Entry {
            name: "rms_norm_small: n above 2048",
            expect: "2048",
            call: |ctx| {
                let (x, w, out) = (
                    z(ctx, F16, &[2, 4096])?,
                    z(ctx, F16, &[4096])?,
                    z(ctx, F16, &[2, 4096])?,
                );
                refused(&[&out], || rms_norm_small(ctx, &x, &w, &out, 1e-6))
            },
        },
        Entry {
            name: "rms_norm_vec: a row of 7 halves",
            expect: "16-byte",
            call: |ctx| {
                let (x, w, out) = (
                    z(ctx, F16, &[2, 7])?,
                    z(ctx, F16, &[7])?,
                    z(ctx, F16, &[2, 7])?,
                );
                refused(&[&out], || rms_norm_vec(ctx, &x, &w, &out, 1e-6))
            },
        },
        Entry {
            name: "rms_norm_residual: sum is out",
            expect: "aliases",
            call: |ctx| {
                let (x, r, w, s) = (
                    z(ctx, F16, &[2, 64])?,
                    z(ctx, F16, &[2, 64])?,
                    z(ctx, F16, &[64])?,
                    z(ctx, F16, &[2, 64])?,
                );
                refused(&[&s], || rms_norm_residual(ctx, &x, &r, &w, &s, &s, 1e-6))
            },
        },
        Entry {
            name: "rms_norm_residual: residual of another dtype",
            expect: "`residual`",
            call: |ctx| {
                let (x, r, w, s, o) = (
                    z(ctx, F16, &[2, 64])?,
                    z(ctx, BF16, &[2, 64])?,
                    z(ctx, F16, &[64])?,
                    z(ctx, F16, &[2, 64])?,
                    z(ctx, F16, &[2, 64])?,
                );
                refused(&[&s, &o], || {
                    rms_norm_residual(ctx, &x, &r, &w, &s, &o, 1e-6)
                })
            },
        },
        Entry {
            name: "layer_norm: b one short",
            expect: "`b`",
            call: |ctx| {
                let (x, w, b, o) = (
                    z(ctx, F32, &[2, 64])?,
                    z(ctx, F32, &[64])?,
                    z(ctx, F32, &[63])?,
                    z(ctx, F32, &[2, 64])?,
                );
                refused(&[&o], || layer_norm(ctx, &x, &w, &b, &o, 1e-5))
            },
        },
        Entry {
            name: "layer_norm: out is b",
            expect: "`b`",
            call: |ctx| {
                let (x, w, b) = (
                    z(ctx, F32, &[64])?,
                    z(ctx, F32, &[64])?,
                    z(ctx, F32, &[64])?,
                );
                refused(&[&b], || layer_norm(ctx, &x, &w, &b, &b, 1e-5))
            },
        },
        Entry {
            name: "layer_norm: eps NaN",
            expect: "eps",
            call: |ctx| {
                let (x, w, b, o) = (
                    z(ctx, F32, &[2, 64])?,
                    z(ctx, F32, &[64])?,
                    z(ctx, F32, &[64])?,
                    z(ctx, F32, &[2, 64])?,
                );
                refused(&[&o], || layer_norm(ctx, &x, &w, &b, &o, f32::NAN))
            },
        },
        Entry {
            name: "gated_mixer_norm: z with another row count",
            expect: "`z`",
            call: |ctx| {
                let (y, zz, w, o) = (
                    z(ctx, F32, &[2, 128])?,
                    z(ctx, F16, &[3, 128])?,
                    z(ctx, F16, &[128])?,
                    z(ctx, F16, &[2, 128])?,
                );
                refused(&[&o], || gated_mixer_norm(ctx, &y, &zz, &w, &o, 1e-6))
            },
        },
        Entry {
            name: "gated_mixer_norm: out is z",
            expect: "`z`",
            call: |ctx| {
                let (y, zz, w) = (
                    z(ctx, F32, &[2, 128])?,
                    z(ctx, F32, &[2, 128])?,
                    z(ctx, F32, &[128])?,
                );
                refused(&[&zz], || gated_mixer_norm(ctx, &y, &zz, &w, &zz, 1e-6))
            },
        },
        Entry {
            name: "gated_mixer_norm: n = 100",
            expect: "multiple of 128",
            call: |ctx| {
                let (y, zz, w, o) = (
                    z(ctx, F32, &[2, 100])?,
                    z(ctx, F16, &[2, 100])?,
                    z(ctx, F16, &[100])?,
                    z(ctx, F16, &[2, 100])?,
                );
                refused(&[&o], || gated_mixer_norm(ctx, &y, &zz, &w, &o, 1e-6))
            },
        },
        // ---- RoPE tables and calls ----
        Entry {
            name: "RopeTable: rot_dim 0",
            expect: "rot_dim",
            call: |ctx| {
                table_refused(RopeConfig {
                    layout: RopeLayout::NeoX,
                    theta: 10000.0,
                    rot_dim: 0,
                    scaling: RopeScaling::None,
                })(ctx)
            },
        },
        Entry {
            name: "RopeTable: theta 0",
            expect: "theta",
            call: |ctx| {
                table_refused(RopeConfig {
                    layout: RopeLayout::NeoX,
                    theta: 0.0,
                    rot_dim: 64,
                    scaling: RopeScaling::None,
                })(ctx)
            },
        },
        Entry {
            name: "RopeTable: theta NaN",
            expect: "theta",
            call: |ctx| {
                table_refused(RopeConfig {
                    layout: RopeLayout::NeoX,
                    theta: f64::NAN,
                    rot_dim: 64,
                    scaling: RopeScaling::None,
                })(ctx)
            },
        },
        Entry {
            name: "RopeTable: llama3 low_freq_factor = high_freq_factor",
            expect: "freq_factor",
            call: |ctx| {
                table_refused(RopeConfig {
                    layout: RopeLayout::NeoX,
                    theta: 500000.0,
                    rot_dim: 64,
                    scaling: RopeScaling::Llama3 {
                        factor: 8.0,
                        low_freq_factor: 4.0,
                        high_freq_factor: 4.0,
                        original_max_position: 8192.0,
                    },
                })(ctx)
            },
        },
        Entry {
            name: "RopeTable: yarn factor NaN",
            expect: "factor",
            call: |ctx| {
                table_refused(RopeConfig {
                    layout: RopeLayout::NeoX,
                    theta: 10000.0,
                    rot_dim: 64,
                    scaling: RopeScaling::Yarn {
                        factor: f64::NAN,
                        original_max_position: 4096.0,
                        beta_fast: 32.0,
                        beta_slow: 1.0,
                    },
                })(ctx)
            },
        },
        Entry {
            name: "RopeTable: yarn beta_fast below beta_slow",
            expect: "beta",
            call: |ctx| {
                table_refused(RopeConfig {
                    layout: RopeLayout::NeoX,
                    theta: 10000.0,
                    rot_dim: 64,
                    scaling: RopeScaling::Yarn {
                        factor: 4.0,
                        original_max_position: 4096.0,
                        beta_fast: 1.0,
                        beta_slow: 32.0,
                    },
                })(ctx)
            },
        },
        Entry {
            name: "RopeTable: original_max_position 0",
            expect: "original_max_position",
            call: |ctx| {
                table_refused(RopeConfig {
                    layout: RopeLayout::NeoX,
                    theta: 10000.0,
                    rot_dim: 64,
                    scaling: RopeScaling::Yarn {
                        factor: 4.0,
                        original_max_position: 0.0,
                        beta_fast: 32.0,
                        beta_slow: 1.0,
                    },
                })(ctx)
            },
        },
        Entry {
            name: "rope: one position short",
            expect: "positions",
            call: |ctx| {
                let t = table(ctx, 64, RopeScaling::None).map_err(|e| e.to_string())?;
                let (x, p, o) = (
                    z(ctx, F32, &[3, 2, 64])?,
                    z(ctx, DType::U32, &[2])?,
                    z(ctx, F32, &[3, 2, 64])?,
                );
                refused(&[&o], || rope(ctx, &x, &p, &t, &o))
            },
        },
        Entry {
            name: "rope: x without a head axis",
            expect: "`x`",
            call: |ctx| {
                let t = table(ctx, 64, RopeScaling::None).map_err(|e| e.to_string())?;
                let (x, p, o) = (
                    z(ctx, F32, &[3, 64])?,
                    z(ctx, DType::U32, &[3])?,
                    z(ctx, F32, &[3, 64])?,
                );
                refused(&[&o], || rope(ctx, &x, &p, &t, &o))
            },
        },
        Entry {
            name: "rope: a table's rot_dim past head_dim",
            expect: "rot_dim",
            call: |ctx| {
                let t = table(ctx, 128, RopeScaling::None).map_err(|e| e.to_string())?;
                let (x, p, o) = (
                    z(ctx, F32, &[3, 2, 64])?,
                    z(ctx, DType::U32, &[3])?,
                    z(ctx, F32, &[3, 2, 64])?,
                );
                refused(&[&o], || rope(ctx, &x, &p, &t, &o))
            },
        },
        Entry {
            name: "rope: a table of another context",
            expect: "context",
            call: |ctx| {
                let other = Context::cpu();
                let t = table(&other, 64, RopeScaling::None).map_err(|e| e.to_string())?;
                let (x, p, o) = (
                    z(ctx, F32, &[3, 2, 64])?,
                    z(ctx, DType::U32, &[3])?,
                    z(ctx, F32, &[3, 2, 64])?,
                );
                refused(&[&o], || rope(ctx, &x, &p, &t, &o))
            },
        },
        Entry {
            name: "rope: out of another dtype",
            expect: "`out`",
            call: |ctx| {
                let t = table(ctx, 64, RopeScaling::None).map_err(|e| e.to_string())?;
                let (x, p, o) = (
                    z(ctx, F32, &[3, 2, 64])?,
                    z(ctx, DType::U32, &[3])?,
                    z(ctx, F16, &[3, 2, 64])?,
                );
                refused(&[&o], || rope(ctx, &x, &p, &t, &o))
            },
        },
        Entry {
            name: "qk_norm_rope: k with another token count",
            expect: "`k`",
            call: |ctx| {
                let t = table(ctx, 64, RopeScaling::None).map_err(|e| e.to_string())?;
                let (q, k, w, p, qo, ko) = (
                    z(ctx, F16, &[3, 4, 64])?,
                    z(ctx, F16, &[2, 1, 64])?,
                    z(ctx, F16, &[64])?,
                    z(ctx, DType::U32, &[3])?,
                    z(ctx, F16, &[3, 4, 64])?,
                    z(ctx, F16, &[2, 1, 64])?,
                );
                refused(&[&qo, &ko], || {
                    qk_norm_rope(ctx, &q, &k, &w, &w, &p, &t, &qo, &ko, 1e-6)
                })
            },
        },
        Entry {
            name: "qk_norm_rope: eps NaN",
            expect: "eps",
            call: |ctx| {
                let t = table(ctx, 64, RopeScaling::None).map_err(|e| e.to_string())?;
                let (q, k, w, p, qo, ko) = (
                    z(ctx, F16, &[3, 4, 64])?,
                    z(ctx, F16, &[3, 1, 64])?,
                    z(ctx, F16, &[64])?,
                    z(ctx, DType::U32, &[3])?,
                    z(ctx, F16, &[3, 4, 64])?,
                    z(ctx, F16, &[3, 1, 64])?,
                );
                refused(&[&qo, &ko], || {
                    qk_norm_rope(ctx, &q, &k, &w, &w, &p, &t, &qo, &ko, f32::NAN)
                })
            },
        },
        Entry {
            name: "qk_norm_rope: k_out is q_out",
            expect: "must be separate",
            call: |ctx| {
                let t = table(ctx, 64, RopeScaling::None).map_err(|e| e.to_string())?;
                let (q, k, w, p, qo) = (
                    z(ctx, F16, &[3, 1, 64])?,
                    z(ctx, F16, &[3, 1, 64])?,
                    z(ctx, F16, &[64])?,
                    z(ctx, DType::U32, &[3])?,
                    z(ctx, F16, &[3, 1, 64])?,
                );
                refused(&[&qo], || {
                    qk_norm_rope(ctx, &q, &k, &w, &w, &p, &t, &qo, &qo, 1e-6)
                })
            },
        },
        // ---- attention ----
        Entry {
            name: "sdpa_decode: q's head_dim differs from k's",
            expect: "head_dim",
            call: |ctx| {
                let q = z(ctx, F16, &[4, 128])?;
                let (k, v, o) = (
                    z(ctx, F16, &[2, 16, 64])?,
                    z(ctx, F16, &[2, 16, 64])?,
                    z(ctx, F16, &[4, 128])?,
                );
                let ws = decode_ws(ctx)?;
                refused(&[&o], || sdpa_decode(ctx, &q, &k, &v, &o, None, &ws))
            },
        },
        Entry {
            name: "sdpa_decode: v of another dtype",
            expect: "`v`",
            call: |ctx| {
                decode_with(
                    ctx,
                    &z(ctx, F16, &[2, 16, 64])?,
                    &z(ctx, BF16, &[2, 16, 64])?,
                    &z(ctx, F16, &[4, 64])?,
                )
            },
        },
        Entry {
            name: "sdpa_decode: v with one KV head",
            expect: "`v`",
            call: |ctx| {
                decode_with(
                    ctx,
                    &z(ctx, F16, &[2, 16, 64])?,
                    &z(ctx, F16, &[1, 16, 64])?,
                    &z(ctx, F16, &[4, 64])?,
                )
            },
        },
        Entry {
            name: "sdpa_decode: k with a leading batch of 2",
            expect: "`k`",
            call: |ctx| {
                decode_with(
                    ctx,
                    &z(ctx, F16, &[2, 2, 16, 64])?,
                    &z(ctx, F16, &[2, 2, 16, 64])?,
                    &z(ctx, F16, &[4, 64])?,
                )
            },
        },
        Entry {
            name: "sdpa_decode: out with 3 heads",
            expect: "`out`",
            call: |ctx| {
                decode_with(
                    ctx,
                    &z(ctx, F16, &[2, 16, 64])?,
                    &z(ctx, F16, &[2, 16, 64])?,
                    &z(ctx, F16, &[3, 64])?,
                )
            },
        },
        Entry {
            name: "sdpa_decode: an empty cache",
            expect: "`k` must not be empty",
            call: |ctx| {
                decode_with(
                    ctx,
                    &z(ctx, F16, &[2, 0, 64])?,
                    &z(ctx, F16, &[2, 0, 64])?,
                    &z(ctx, F16, &[4, 64])?,
                )
            },
        },
        Entry {
            name: "sdpa_decode: scale NaN",
            expect: "scale",
            call: |ctx| {
                let (q, k, v, o) = (
                    z(ctx, F32, &[4, 64])?,
                    z(ctx, F32, &[2, 16, 64])?,
                    z(ctx, F32, &[2, 16, 64])?,
                    z(ctx, F32, &[4, 64])?,
                );
                let ws = decode_ws(ctx)?;
                refused(&[&o], || {
                    sdpa_decode(ctx, &q, &k, &v, &o, Some(f32::NAN), &ws)
                })
            },
        },
        Entry {
            name: "sdpa_decode_strided: kv_len 0",
            expect: "kv_len",
            call: |ctx| {
                let (q, k, v, o) = (
                    z(ctx, F16, &[4, 64])?,
                    z(ctx, F16, &[2, 16, 64])?,
                    z(ctx, F16, &[2, 16, 64])?,
                    z(ctx, F16, &[4, 64])?,
                );
                let ws = decode_ws(ctx)?;
                refused(&[&o], || {
                    sdpa_decode_strided(ctx, &q, &k, &v, &o, 0, &opts(0.125), &ws)
                })
            },
        },
        Entry {
            name: "sdpa_decode_strided: kv_len past u32",
            expect: "kv_len",
            call: |ctx| {
                let (q, k, v, o) = (
                    z(ctx, F16, &[4, 64])?,
                    z(ctx, F16, &[2, 16, 64])?,
                    z(ctx, F16, &[2, 16, 64])?,
                    z(ctx, F16, &[4, 64])?,
                );
                let ws = decode_ws(ctx)?;
                refused(&[&o], || {
                    sdpa_decode_strided(ctx, &q, &k, &v, &o, 1usize << 33, &opts(0.125), &ws)
                })
            },
        },
        Entry {
            name: "sdpa_decode_strided: sink_logits of another dtype",
            expect: "`sink_logits`",
            call: |ctx| {
                let (q, k, v, o, s) = (
                    z(ctx, F16, &[4, 64])?,
                    z(ctx, F16, &[2, 16, 64])?,
                    z(ctx, F16, &[2, 16, 64])?,
                    z(ctx, F16, &[4, 64])?,
                    z(ctx, F32, &[4])?,
                );
                let ws = decode_ws(ctx)?;
                refused(&[&o], || {
                    sdpa_decode_strided(
                        ctx,
                        &q,
                        &k,
                        &v,
                        &o,
                        16,
                        &DecodeOptions {
                            scale: Some(0.125),
                            sink_logits: Some(&s),
                            ..Default::default()
                        },
                        &ws,
                    )
                })
            },
        },
        Entry {
            name: "sdpa_decode_strided: out is q",
            expect: "aliases",
            call: |ctx| {
                let (q, k, v) = (
                    z(ctx, F16, &[4, 64])?,
                    z(ctx, F16, &[2, 16, 64])?,
                    z(ctx, F16, &[2, 16, 64])?,
                );
                let ws = decode_ws(ctx)?;
                refused(&[&q], || {
                    sdpa_decode_strided(ctx, &q, &k, &v, &q, 16, &opts(0.125), &ws)
                })
            },
        },
        Entry {
            name: "sdpa_decode_batched: one kv_lens entry short",
            expect: "`kv_lens`",
            call: |ctx| {
                let (q, k, v, l, o) = (
                    z(ctx, F16, &[3, 4, 64])?,
                    z(ctx, F16, &[3, 2, 16, 64])?,
                    z(ctx, F16, &[3, 2, 16, 64])?,
                    z(ctx, DType::U32, &[2])?,
                    z(ctx, F16, &[3, 4, 64])?,
                );
                let ws = decode_ws(ctx)?;
                refused(&[&o], || {
                    sdpa_decode_batched(ctx, &q, &k, &v, &l, &o, &opts(0.125), &ws)
                })
            },
        },
        Entry {
            name: "sdpa_decode_batched: k's batch differs from q's",
            expect: "k's batch is 2",
            call: |ctx| {
                let (q, k, v, l, o) = (
                    z(ctx, F16, &[3, 4, 64])?,
                    z(ctx, F16, &[2, 2, 16, 64])?,
                    z(ctx, F16, &[2, 2, 16, 64])?,
                    z(ctx, DType::U32, &[3])?,
                    z(ctx, F16, &[3, 4, 64])?,
                );
                let ws = decode_ws(ctx)?;
                refused(&[&o], || {
                    sdpa_decode_batched(ctx, &q, &k, &v, &l, &o, &opts(0.125), &ws)
                })
            },
        },
        Entry {
            name: "sdpa_multi_query: q without a token axis",
            expect: "`q`",
            call: |ctx| {
                let (q, k, v, o) = (
                    z(ctx, F16, &[4, 64])?,
                    z(ctx, F16, &[1, 24, 64])?,
                    z(ctx, F16, &[1, 24, 64])?,
                    z(ctx, F16, &[4, 64])?,
                );
                let ws = decode_ws(ctx)?;
                refused(&[&o], || {
                    sdpa_multi_query(ctx, &q, &k, &v, &o, 10, true, &opts(0.125), &ws)
                })
            },
        },
        Entry {
            name: "sdpa_multi_query: no query tokens",
            expect: "`q` must not be empty",
            call: |ctx| {
                let (q, k, v, o) = (
                    z(ctx, F16, &[0, 4, 64])?,
                    z(ctx, F16, &[1, 24, 64])?,
                    z(ctx, F16, &[1, 24, 64])?,
                    z(ctx, F16, &[0, 4, 64])?,
                );
                let ws = decode_ws(ctx)?;
                refused(&[&o], || {
                    sdpa_multi_query(ctx, &q, &k, &v, &o, 10, true, &opts(0.125), &ws)
                })
            },
        },
        Entry {
            name: "sdpa_prefill: v has one token fewer than k",
            expect: "`v`",
            call: |ctx| {
                let (q, k, v, o) = (
                    z(ctx, F16, &[5, 4, 64])?,
                    z(ctx, F16, &[9, 2, 64])?,
                    z(ctx, F16, &[8, 2, 64])?,
                    z(ctx, F16, &[5, 4, 64])?,
                );
                refused(&[&o], || sdpa_prefill(ctx, &q, &k, &v, &o, true, None))
            },
        },
        Entry {
            name: "sdpa_prefill: head_dim 320",
            expect: "head_dim",
            call: |ctx| {
                let (q, k, v, o) = (
                    z(ctx, F16, &[5, 4, 320])?,
                    z(ctx, F16, &[9, 2, 320])?,
                    z(ctx, F16, &[9, 2, 320])?,
                    z(ctx, F16, &[5, 4, 320])?,
                );
                refused(&[&o], || sdpa_prefill(ctx, &q, &k, &v, &o, true, None))
            },
        },
        Entry {
            name: "sdpa_prefill: out is v",
            expect: "aliases",
            call: |ctx| {
                let (q, k, v) = (
                    z(ctx, F16, &[5, 2, 64])?,
                    z(ctx, F16, &[5, 2, 64])?,
                    z(ctx, F16, &[5, 2, 64])?,
                );
                refused(&[&v], || sdpa_prefill(ctx, &q, &k, &v, &v, true, None))
            },
        },
        Entry {
            name: "sdpa_prefill_varlen: cu_seqlens_k past k's tokens",
            expect: "`cu_seqlens_k` is bad at sequence 1",
            call: |ctx| {
                let (q, k, v, o) = (
                    z(ctx, F16, &[7, 4, 64])?,
                    z(ctx, F16, &[9, 2, 64])?,
                    z(ctx, F16, &[9, 2, 64])?,
                    z(ctx, F16, &[7, 4, 64])?,
                );
                let cu_q = ctx.tensor(&[0u32, 3, 7], &[3]).map_err(|e| e.to_string())?;
                let cu_k = ctx
                    .tensor(&[0u32, 4, 10], &[3])
                    .map_err(|e| e.to_string())?;
                let ws = VarlenWorkspace::new(ctx, 2).map_err(|e| e.to_string())?;
                let packed = Packed {
                    cu_seqlens_q: &cu_q,
                    cu_seqlens_k: &cu_k,
                    max_seqlen_q: 4,
                };
                refused(&[&o], || {
                    sdpa_prefill_varlen(ctx, &q, &k, &v, &packed, &o, true, None, &ws)
                })
            },
        },
        Entry {
            name: "sdpa_prefill_varlen: i32 cu_seqlens_q with a negative offset",
            expect: "`cu_seqlens_q` is bad at sequence 0",
            call: |ctx| {
                let (q, k, v, o) = (
                    z(ctx, F32, &[7, 2, 128])?,
                    z(ctx, F32, &[7, 2, 128])?,
                    z(ctx, F32, &[7, 2, 128])?,
                    z(ctx, F32, &[7, 2, 128])?,
                );
                let cu_q = ctx
                    .tensor(&[0i32, -2, 7], &[3])
                    .map_err(|e| e.to_string())?;
                let cu_k = ctx.tensor(&[0i32, 2, 7], &[3]).map_err(|e| e.to_string())?;
                let ws = VarlenWorkspace::new(ctx, 2).map_err(|e| e.to_string())?;
                let packed = Packed {
                    cu_seqlens_q: &cu_q,
                    cu_seqlens_k: &cu_k,
                    max_seqlen_q: 7,
                };
                refused(&[&o], || {
                    sdpa_prefill_varlen(ctx, &q, &k, &v, &packed, &o, false, None, &ws)
                })
            },
        },
        // ---- Gated DeltaNet ----
        Entry {
            name: "gdn_decode_step: state_out of another dtype",
            expect: "`state_out`",
            call: |ctx| {
                let mut s = gdn_step(ctx)?;
                s.state_out = z(ctx, F16, &[1, 2, 16, 64])?;
                refused(&[&s.state_out, &s.o], || {
                    gdn_decode_step(ctx, &gdn_step_args(&s), 0.125)
                })
            },
        },
        Entry {
            name: "gdn_decode_step: o is v",
            expect: "`o` aliases `v`",
            call: |ctx| {
                let mut s = gdn_step(ctx)?;
                s.o = s.v.clone();
                refused(&[&s.state_out], || {
                    gdn_decode_step(ctx, &gdn_step_args(&s), 0.125)
                })
            },
        },
        Entry {
            name: "gdn_decode_step: g for one head too many",
            expect: "`g`",
            call: |ctx| {
                let mut s = gdn_step(ctx)?;
                s.g = z(ctx, F32, &[1, 3])?;
                refused(&[&s.state_out, &s.o], || {
                    gdn_decode_step(ctx, &gdn_step_args(&s), 0.125)
                })
            },
        },
        Entry {
            name: "gdn_decode_step: a bf16 state for f16 activations",
            expect: "state",
            call: |ctx| {
                let mut s = gdn_step(ctx)?;
                s.state_in = z(ctx, BF16, &[1, 2, 16, 64])?;
                s.state_out = z(ctx, BF16, &[1, 2, 16, 64])?;
                refused(&[&s.state_out, &s.o], || {
                    gdn_decode_step(ctx, &gdn_step_args(&s), 0.125)
                })
            },
        },
        Entry {
            name: "gdn_decode_step: scale infinite",
            expect: "finite",
            call: |ctx| {
                let s = gdn_step(ctx)?;
                refused(&[&s.state_out, &s.o], || {
                    gdn_decode_step(ctx, &gdn_step_args(&s), f32::INFINITY)
                })
            },
        },
        Entry {
            name: "gdn_chunked_prefill: decreasing cu_seqlens",
            expect: "cu_seqlens",
            call: |ctx| {
                let p = gdn_prefill(ctx, 8, 3)?;
                prefill_refused(ctx, &p, Some(&[0, 5, 3, 8]))
            },
        },
        Entry {
            name: "gdn_chunked_prefill: cu_seqlens not starting at 0",
            expect: "cu_seqlens",
            call: |ctx| {
                let p = gdn_prefill(ctx, 8, 1)?;
                prefill_refused(ctx, &p, Some(&[2, 8]))
            },
        },
        Entry {
            name: "gdn_chunked_prefill: final_state for one sequence too many",
            expect: "`final_state`",
            call: |ctx| {
                let p = gdn_prefill(ctx, 8, 2)?;
                prefill_refused(ctx, &p, None)
            },
        },
        Entry {
            name: "gdn_chunked_prefill: cu_seqlens over a batch of 2",
            expect: "[B, T, …] inputs are 2 sequences of 4 tokens",
            call: |ctx| {
                let mut p = gdn_prefill(ctx, 8, 1)?;
                p.q = z(ctx, F16, &[2, 4, 1, 64])?;
                p.k = z(ctx, F16, &[2, 4, 1, 64])?;
                p.v = z(ctx, F16, &[2, 4, 1, 32])?;
                p.o = z(ctx, F16, &[2, 4, 1, 32])?;
                p.g = z(ctx, F32, &[2, 4, 1])?;
                p.beta = z(ctx, F32, &[2, 4, 1])?;
                prefill_refused(ctx, &p, Some(&[0, 8]))
            },
        },
        Entry {
            name: "gdn_chunked_prefill: beta one token short",
            expect: "`beta`",
            call: |ctx| {
                let mut p = gdn_prefill(ctx, 8, 1)?;
                p.beta = z(ctx, F32, &[7, 1])?;
                prefill_refused(ctx, &p, None)
            },
        },
        // ---- causal conv1d ----
        Entry {
            name: "causal_conv1d: state_in of width W - 2",
            expect: "`state_in`",
            call: |ctx| {
                let mut c = conv(ctx)?;
                c.state_in = z(ctx, F32, &[1, 8, 2])?;
                refused(&[&c.out, &c.state_out], || {
                    causal_conv1d(ctx, &conv_args(&c), true)
                })
            },
        },
        Entry {
            name: "causal_conv1d: state_out is state_in",
            expect: "`state_out` aliases `state_in`",
            call: |ctx| {
                let mut c = conv(ctx)?;
                c.state_out = c.state_in.clone();
                refused(&[&c.out], || causal_conv1d(ctx, &conv_args(&c), true))
            },
        },
        Entry {
            name: "causal_conv1d: no tokens",
            expect: "T",
            call: |ctx| {
                let mut c = conv(ctx)?;
                c.x = z(ctx, F32, &[1, 0, 8])?;
                c.out = z(ctx, F32, &[1, 0, 8])?;
                refused(&[&c.state_out], || causal_conv1d(ctx, &conv_args(&c), true))
            },
        },
        Entry {
            name: "causal_conv1d_update: a 3-D x",
            expect: "`x`",
            call: |ctx| {
                let c = conv(ctx)?;
                refused(&[&c.out, &c.state_out], || {
                    causal_conv1d_update(ctx, &conv_args(&c), true)
                })
            },
        },
        Entry {
            name: "causal_conv1d: out of another dtype",
            expect: "`out`",
            call: |ctx| {
                let mut c = conv(ctx)?;
                c.out = z(ctx, F16, &[1, 4, 8])?;
                refused(&[&c.out, &c.state_out], || {
                    causal_conv1d(ctx, &conv_args(&c), true)
                })
            },
        },
        // ---- selective scan ----
        Entry {
            name: "selective_scan_step: state_out of another dtype",
            expect: "`state_out`",
            call: |ctx| {
                let mut s = scan(ctx, 2)?;
                s.state_out = z(ctx, F16, &[2, 8, 16])?;
                scan_refused(ctx, &s)
            },
        },
        Entry {
            name: "selective_scan_step: dt_bias one too long",
            expect: "`dt_bias`",
            call: |ctx| {
                let mut s = scan(ctx, 2)?;
                s.dt_bias = z(ctx, F16, &[9])?;
                scan_refused(ctx, &s)
            },
        },
        Entry {
            name: "selective_scan_step: an empty batch",
            expect: "B",
            call: |ctx| {
                let s = scan(ctx, 0)?;
                scan_refused(ctx, &s)
            },
        },
        Entry {
            name: "selective_scan_step: state_out is state_in",
            expect: "`state_out` aliases `state_in`",
            call: |ctx| {
                let mut s = scan(ctx, 2)?;
                s.state_out = s.state_in.clone();
                scan_refused(ctx, &s)
            },
        },
        // ---- launches ----
        Entry {
            name: "add_kernel: a zero grid dimension",
            expect: "zero dimension",
            call: |ctx| add_launch(ctx, Some([1, 0, 1]), Some(256)),
        },
        Entry {
            name: "add_kernel: group size 0",
            expect: "group size 0",
            call: |ctx| add_launch(ctx, Some([1, 1, 1]), Some(0)),
        },
        Entry {
            name: "add_kernel: group size 2048",
            expect: "group size 2048",
            call: |ctx| add_launch(ctx, Some([1, 1, 1]), Some(2048)),
        },
        Entry {
            name: "add_kernel: no grid",
            expect: "no grid",
            call: |ctx| add_launch(ctx, None, Some(256)),
        },
        Entry {
            name: "add_kernel: out is a",
            expect: "shares its buffer",
            call: |ctx| {
                let (a, b) = (z(ctx, F32, &[256])?, z(ctx, F32, &[256])?);
                launch_refused(&[&a], || {
                    add_kernel::launch(
                        ctx,
                        add_kernel::Args {
                            a: &a,
                            b: &b,
                            out: &a,
                            n: 256,
                        },
                    )
                    .grid([1, 1, 1])
                    .group_size(256)
                    .run()
                })
            },
        },
        Entry {
            name: "add_kernel: f16 a with f32 b",
            expect: "generic `T`",
            call: |ctx| {
                let (a, b, out) = (
                    z(ctx, F16, &[256])?,
                    z(ctx, F32, &[256])?,
                    z(ctx, F32, &[256])?,
                );
                launch_refused(&[&out], || {
                    add_kernel::launch(
                        ctx,
                        add_kernel::Args {
                            a: &a,
                            b: &b,
                            out: &out,
                            n: 256,
                        },
                    )
                    .grid([1, 1, 1])
                    .group_size(256)
                    .run()
                })
            },
        },
        Entry {
            name: "add_kernel: a tensor of another context",
            expect: "context",
            call: |ctx| {
                let other = Context::cpu();
                let (a, b, out) = (
                    z(&other, F32, &[256])?,
                    z(ctx, F32, &[256])?,
                    z(ctx, F32, &[256])?,
                );
                launch_refused(&[&out], || {
                    add_kernel::launch(
                        ctx,
                        add_kernel::Args {
                            a: &a,
                            b: &b,
                            out: &out,
                            n: 256,
                        },
                    )
                    .grid([1, 1, 1])
                    .group_size(256)
                    .run()
                })
            },
        },
    ]
}

/// Runs one entry on its own thread with a fresh CPU context, turning a panic or a call
/// that outlives `limit` into a failure.
fn run_entry(entry: &Entry, limit: Duration) -> Result<Refusal, String> {
    let call = entry.call;
    let (send, recv) = mpsc::channel();
    std::thread::spawn(move || {
        let ctx = Context::cpu();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(&ctx)));
        let _ = send.send(result.unwrap_or_else(|_| Err("panicked".into())));
    });
    recv.recv_timeout(limit)
        .unwrap_or_else(|_| Err(format!("still running after {limit:?}")))
}

#[test]
fn every_invalid_call_is_refused_with_its_message_and_writes_nothing() {
    let corpus = corpus();
    let mut names: Vec<&str> = corpus.iter().map(|e| e.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), corpus.len(), "two entries share a name");
    assert!(
        corpus.len() >= 60,
        "the corpus holds {} entries",
        corpus.len()
    );
    let mut failures = Vec::new();
    for entry in &corpus {
        match run_entry(entry, Duration::from_secs(120)) {
            Err(e) => failures.push(format!("{}: {e}", entry.name)),
            Ok(r) if !r.message.contains(entry.expect) => failures.push(format!(
                "{}: refused as `{}`, expected a message with `{}`",
                entry.name, r.message, entry.expect
            )),
            Ok(r) if !r.outputs_unchanged => {
                failures.push(format!("{}: refused but wrote an output", entry.name))
            }
            Ok(r) => eprintln!("{}: {}", entry.name, r.message),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} entries failed:\n{}",
        failures.len(),
        corpus.len(),
        failures.join("\n")
    );
}
