//! The ops `tessera run` knows: for each, its input names, its parameters with defaults,
//! how its outputs' shapes and dtypes follow from the inputs, and the wrapper call.

use std::collections::BTreeMap;
use tessera_runtime::{Context, DType, Tensor};
use tessera_std::attention::{self, DecodeOptions};
use tessera_std::error::OpError;
use tessera_std::rope::{RopeConfig, RopeLayout, RopeScaling, RopeTable};
use tessera_std::{elementwise, norm};

pub type Inputs = BTreeMap<String, Tensor>;
pub type Params = BTreeMap<String, String>;
/// Output (name, dtype, shape).
pub type OutSpec = Vec<(&'static str, DType, Vec<usize>)>;

/// One runnable op.
pub struct RunOp {
    pub name: &'static str,
    /// Required inputs, in the order the op takes them.
    pub inputs: &'static [&'static str],
    /// Inputs that may be left out.
    pub optional: &'static [&'static str],
    /// (name, default or "" for required, meaning).
    pub params: &'static [(&'static str, &'static str, &'static str)],
    /// Output (name, dtype, shape) from the inputs.
    pub outputs: fn(&Inputs) -> OutSpec,
    pub call: fn(&Context, &Inputs, &Params, &[Tensor]) -> Result<(), String>,
}

fn t<'a>(i: &'a Inputs, n: &str) -> &'a Tensor {
    &i[n]
}

fn like(i: &Inputs, n: &str, out: &'static str) -> OutSpec {
    vec![(out, t(i, n).dtype(), t(i, n).shape().to_vec())]
}

/// A parameter parsed as `T`, with the op's default.
pub fn param<T: std::str::FromStr>(p: &Params, name: &str) -> Result<T, String> {
    let v = p
        .get(name)
        .ok_or_else(|| format!("missing --param {name}=…"))?;
    v.parse()
        .map_err(|_| format!("--param {name}={v}: not a valid value"))
}

/// A boolean parameter: `true`/`false` or `1`/`0`.
fn flag(p: &Params, name: &str) -> Result<bool, String> {
    crate::kernels::parse_bool(name, &param::<String>(p, name)?)
}

fn opt_f32(p: &Params, name: &str) -> Result<Option<f32>, String> {
    match p.get(name).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(_) => param(p, name).map(Some),
    }
}

fn e(r: Result<(), OpError>) -> Result<(), String> {
    r.map_err(|e| e.to_string())
}

fn decode_opts<'a>(p: &Params, i: &'a Inputs) -> Result<DecodeOptions<'a>, String> {
    Ok(DecodeOptions {
        scale: opt_f32(p, "scale")?,
        window: param(p, "window")?,
        n_sink: param(p, "n_sink")?,
        sink_logits: i.get("sink_logits"),
        ..DecodeOptions::default()
    })
}

fn rope_table(ctx: &Context, p: &Params, head_dim: usize) -> Result<RopeTable, String> {
    let layout = match p.get("layout").map(String::as_str) {
        Some("neox") | None => RopeLayout::NeoX,
        Some("interleaved") => RopeLayout::Interleaved,
        Some(o) => return Err(format!("--param layout={o}: expected neox or interleaved")),
    };
    let rot_dim = match p.get("rot_dim").map(String::as_str) {
        None | Some("") => head_dim,
        Some(_) => param(p, "rot_dim")?,
    };
    let factor: f64 = param(p, "factor")?;
    let orig: f64 = param(p, "original_max_position")?;
    let scaling = match p.get("scaling").map(String::as_str) {
        Some("none") | None => RopeScaling::None,
        Some("llama3") => RopeScaling::Llama3 {
            factor,
            low_freq_factor: param(p, "low_freq_factor")?,
            high_freq_factor: param(p, "high_freq_factor")?,
            original_max_position: orig,
        },
        Some("yarn") => RopeScaling::Yarn {
            factor,
            original_max_position: orig,
            beta_fast: param(p, "beta_fast")?,
            beta_slow: param(p, "beta_slow")?,
        },
        Some(o) => {
            return Err(format!(
                "--param scaling={o}: expected none, llama3 or yarn"
            ))
        }
    };
    let cfg = RopeConfig {
        layout,
        theta: param(p, "theta")?,
        rot_dim,
        scaling,
    };
    RopeTable::new(ctx, cfg).map_err(|e| e.to_string())
}

const DECODE_PARAMS: &[(&str, &str, &str)] = &[
    ("scale", "", "softmax scale (default 1/sqrt(head_dim))"),
    ("window", "0", "sliding window (0: none)"),
    ("n_sink", "0", "attention sinks: first keys always visible"),
];

const ROPE_PARAMS: &[(&str, &str, &str)] = &[
    ("theta", "10000", "frequency base"),
    ("layout", "neox", "neox or interleaved"),
    ("rot_dim", "", "rotated dims (default head_dim)"),
    ("scaling", "none", "none, llama3 or yarn"),
    ("factor", "1", "scaling factor"),
    (
        "original_max_position",
        "8192",
        "original context (llama3, yarn)",
    ),
    ("low_freq_factor", "1", "llama3"),
    ("high_freq_factor", "4", "llama3"),
    ("beta_fast", "32", "yarn"),
    ("beta_slow", "1", "yarn"),
];

/// Every op `tessera run` can run.
pub fn ops() -> Vec<RunOp> {
    vec![
        RunOp {
            name: "sdpa_decode",
            inputs: &["q", "k", "v"],
            optional: &[],
            params: &[("scale", "", "softmax scale (default 1/sqrt(head_dim))")],
            outputs: |i| like(i, "q", "out"),
            call: |c, i, p, o| {
                e(attention::sdpa_decode(
                    c,
                    t(i, "q"),
                    t(i, "k"),
                    t(i, "v"),
                    &o[0],
                    opt_f32(p, "scale")?,
                ))
            },
        },
        RunOp {
            name: "sdpa_decode_strided",
            inputs: &["q", "k", "v"],
            optional: &["sink_logits"],
            params: &[
                ("kv_len", "", "filled cache positions"),
                ("scale", "", "softmax scale (default 1/sqrt(head_dim))"),
                ("window", "0", "sliding window (0: none)"),
                ("n_sink", "0", "attention sinks: first keys always visible"),
            ],
            outputs: |i| like(i, "q", "out"),
            call: |c, i, p, o| {
                let opts = decode_opts(p, i)?;
                e(attention::sdpa_decode_strided(
                    c,
                    t(i, "q"),
                    t(i, "k"),
                    t(i, "v"),
                    &o[0],
                    param(p, "kv_len")?,
                    &opts,
                ))
            },
        },
        RunOp {
            name: "sdpa_decode_batched",
            inputs: &["q", "k", "v", "kv_lens"],
            optional: &["sink_logits"],
            params: DECODE_PARAMS,
            outputs: |i| like(i, "q", "out"),
            call: |c, i, p, o| {
                let opts = decode_opts(p, i)?;
                e(attention::sdpa_decode_batched(
                    c,
                    t(i, "q"),
                    t(i, "k"),
                    t(i, "v"),
                    t(i, "kv_lens"),
                    &o[0],
                    &opts,
                ))
            },
        },
        RunOp {
            name: "sdpa_multi_query",
            inputs: &["q", "k", "v"],
            optional: &[],
            params: &[
                ("base_kv", "", "cached positions before the block"),
                ("causal", "true", "causal within the block"),
                ("scale", "", "softmax scale (default 1/sqrt(head_dim))"),
            ],
            outputs: |i| like(i, "q", "out"),
            call: |c, i, p, o| {
                e(attention::sdpa_multi_query(
                    c,
                    t(i, "q"),
                    t(i, "k"),
                    t(i, "v"),
                    &o[0],
                    param(p, "base_kv")?,
                    flag(p, "causal")?,
                    &attention::DecodeOptions {
                        scale: opt_f32(p, "scale")?,
                        ..Default::default()
                    },
                ))
            },
        },
        RunOp {
            name: "sdpa_prefill",
            inputs: &["q", "k", "v"],
            optional: &[],
            params: &[
                ("causal", "true", "causal attention"),
                ("scale", "", "softmax scale (default 1/sqrt(head_dim))"),
            ],
            outputs: |i| like(i, "q", "out"),
            call: |c, i, p, o| {
                e(attention::sdpa_prefill(
                    c,
                    t(i, "q"),
                    t(i, "k"),
                    t(i, "v"),
                    &o[0],
                    flag(p, "causal")?,
                    opt_f32(p, "scale")?,
                ))
            },
        },
        RunOp {
            name: "rms_norm",
            inputs: &["x", "w"],
            optional: &[],
            params: &[("eps", "1e-6", "epsilon")],
            outputs: |i| like(i, "x", "out"),
            call: |c, i, p, o| {
                e(norm::rms_norm(
                    c,
                    t(i, "x"),
                    t(i, "w"),
                    &o[0],
                    param(p, "eps")?,
                ))
            },
        },
        RunOp {
            name: "rms_norm_residual",
            inputs: &["x", "residual", "w"],
            optional: &[],
            params: &[("eps", "1e-6", "epsilon")],
            outputs: |i| {
                let mut v = like(i, "x", "sum");
                v.extend(like(i, "x", "out"));
                v
            },
            call: |c, i, p, o| {
                e(norm::rms_norm_residual(
                    c,
                    t(i, "x"),
                    t(i, "residual"),
                    t(i, "w"),
                    &o[0],
                    &o[1],
                    param(p, "eps")?,
                ))
            },
        },
        RunOp {
            name: "layer_norm",
            inputs: &["x", "w", "b"],
            optional: &[],
            params: &[("eps", "1e-5", "epsilon")],
            outputs: |i| like(i, "x", "out"),
            call: |c, i, p, o| {
                e(norm::layer_norm(
                    c,
                    t(i, "x"),
                    t(i, "w"),
                    t(i, "b"),
                    &o[0],
                    param(p, "eps")?,
                ))
            },
        },
        RunOp {
            name: "gated_mixer_norm",
            inputs: &["y", "z", "w"],
            optional: &[],
            params: &[("eps", "1e-6", "epsilon")],
            outputs: |i| like(i, "z", "out"),
            call: |c, i, p, o| {
                e(norm::gated_mixer_norm(
                    c,
                    t(i, "y"),
                    t(i, "z"),
                    t(i, "w"),
                    &o[0],
                    param(p, "eps")?,
                ))
            },
        },
        RunOp {
            name: "softmax",
            inputs: &["x"],
            optional: &[],
            params: &[],
            outputs: |i| like(i, "x", "out"),
            call: |c, i, _p, o| e(norm::softmax(c, t(i, "x"), &o[0])),
        },
        RunOp {
            name: "logsumexp",
            inputs: &["x"],
            optional: &[],
            params: &[],
            outputs: |i| {
                let s = t(i, "x").shape();
                let lead = if s.len() > 1 {
                    s[..s.len() - 1].to_vec()
                } else {
                    vec![1]
                };
                vec![("out", DType::F32, lead)]
            },
            call: |c, i, _p, o| e(norm::logsumexp(c, t(i, "x"), &o[0])),
        },
        RunOp {
            name: "add",
            inputs: &["a", "b"],
            optional: &[],
            params: &[],
            outputs: |i| like(i, "a", "out"),
            call: |c, i, _p, o| e(elementwise::add::add(c, t(i, "a"), t(i, "b"), &o[0])),
        },
        RunOp {
            name: "rope",
            inputs: &["x", "positions"],
            optional: &[],
            params: ROPE_PARAMS,
            outputs: |i| like(i, "x", "out"),
            call: |c, i, p, o| {
                let d = t(i, "x").shape().last().copied().unwrap_or(0);
                let table = rope_table(c, p, d)?;
                e(tessera_std::rope::rope(
                    c,
                    t(i, "x"),
                    t(i, "positions"),
                    &table,
                    &o[0],
                ))
            },
        },
    ]
}
