//! `moe_route`: the router of a Mixture-of-Experts layer, one threadgroup per token and one
//! thread per expert. From a row of router logits it picks `top_k` experts and their
//! weights, in one of the two forms models use:
//!
//! - **softmax** (Qwen3-MoE, Mixtral): `p = softmax(logits)` in f32 over all experts; the
//!   `top_k` largest, their `p` as weights, renormalised to sum 1 when asked (Qwen3's
//!   `norm_topk_prob`).
//! - **sigmoid** (DeepSeek-V3): `p = sigmoid(logits)`; the selection is on `p + bias`
//!   (`e_score_correction_bias`), the weights are the unbiased `p` of the chosen experts.
//!
//! Either scoring takes the selection bias and DeepSeek-V3's grouped top-k: the experts are
//! `n_group` contiguous groups, a group's score is the sum of its two largest biased
//! scores, only the experts of the `topk_group` best groups are candidates. Renormalised
//! weights are `w / (Σ w + 1e-20)` (DeepSeek-V3's form; Qwen3's plain `w / Σ w` is the same
//! number in f32, the sum being at least 1/E); all weights are then multiplied by
//! `routed_scaling_factor`. Without a bias or groups the selection is on the logits, whose
//! order is the scores' without their rounding.
//!
//! Order and ties: slot 0 holds the best expert; equal keys (and equal group scores) go to
//! the lowest index. An expert outside the chosen groups is never chosen (Hugging Face's
//! DeepSeek-V3 fills them with 0.0 rather than −∞, which differs only when biased scores
//! are negative).
//!
//! Non-finite logits: a −∞ logit has score 0 and ranks last; under sigmoid a +∞ logit has
//! score 1. A row holding a NaN logit, or, under softmax, a +∞ logit or only −∞ logits
//! (softmax has no value there), gives ids −1 (an id no expert has, so `moe_permute`
//! refuses it) and NaN weights; other rows are unaffected. A NaN in the bias touches every
//! row's selection, so every row gives −1 and NaN; an infinite bias is its limit (the
//! expert always, or never, chosen).

use super::MAX_EXPERTS;
use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "moe_route";

/// How router logits become scores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scoring {
    /// Softmax over all experts (Qwen3-MoE, Mixtral).
    Softmax,
    /// A sigmoid per expert (DeepSeek-V3).
    Sigmoid,
}

/// The router's settings (a model's config fields).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouteConfig {
    /// Experts per token (`num_experts_per_tok`).
    pub top_k: usize,
    pub scoring: Scoring,
    /// Renormalise the chosen weights to sum 1 (`norm_topk_prob`).
    pub renormalize: bool,
    /// Expert groups (1: no grouping).
    pub n_group: usize,
    /// Groups whose experts are candidates.
    pub topk_group: usize,
    /// Multiplies every weight, after any renormalisation.
    pub routed_scaling_factor: f32,
}

impl RouteConfig {
    /// Qwen3-MoE / Mixtral: softmax, top-k, renormalised when `renormalize`.
    pub fn softmax(top_k: usize, renormalize: bool) -> RouteConfig {
        RouteConfig {
            top_k,
            scoring: Scoring::Softmax,
            renormalize,
            n_group: 1,
            topk_group: 1,
            routed_scaling_factor: 1.0,
        }
    }
}

/// Row `group_id_x()`: thread `e` is expert `e` (threads past `experts` take no part).
/// `group_width = experts / n_group`; `has_bias` 1 when `bias` is the selection bias (else
/// it is a stand-in, never read); `keyed` 1 when the selection is on score + bias, 0 when
/// on the logits. Grid `[tokens, 1, 1]`, a power-of-two group of at least `experts` threads.
#[kernel]
pub fn moe_route_kernel<T, B>(
    logits: Tensor<T>,
    bias: Tensor<B>,
    mut topk_ids: Tensor<i32>,
    mut topk_weights: Tensor<f32>,
    experts: u32,
    top_k: u32,
    n_group: u32,
    group_width: u32,
    topk_group: u32,
    has_bias: u32,
    keyed: u32,
    renormalize: u32,
    scaling: f32,
    #[constexpr] sigmoid: u32,
) {
    let keys = threadgroup_array::<f32>(1024);
    let eligible = threadgroup_array::<u32>(1024);
    let group_keys = threadgroup_array::<f32>(1024);
    let group_chosen = threadgroup_array::<u32>(1024);
    let row = group_id_x();
    let e = thread_id();
    let inside = e < experts;
    let ec = min(e, experts - 1);
    let x = load(logits[row * experts + ec]).cast::<f32>();
    let b = select(has_bias == 1u32, load(bias[ec]).cast::<f32>(), 0.0f32);
    let m = group_max(select(inside, x, neg_infinity()));
    // Softmax has no value for a row holding +∞ or only −∞; a NaN logit or bias none.
    let softmax_undefined = sigmoid == 0u32 && (x == infinity() || m == neg_infinity());
    let bad_here = inside && (is_nan(x) || is_nan(b) || softmax_undefined);
    let bad = group_max(select(bad_here, 1u32, 0u32));
    let s = select(inside, exp(x - m), 0.0f32);
    let total = group_sum(s);
    let p = select(sigmoid == 1u32, 1.0f32 / (1.0f32 + exp(-x)), s / total);
    let key = select(keyed == 1u32, p + b, x);
    if inside {
        store(keys[e], key);
    }
    barrier();
    // A group's score: the sum of its two largest keys; the best `topk_group` groups.
    if e < n_group {
        let mut first = neg_infinity();
        let mut second = neg_infinity();
        for i in range(0u32, group_width, 1u32) {
            let v = load(keys[e * group_width + i]);
            let higher = v > first;
            second = select(higher, first, max(second, v));
            first = select(higher, v, first);
        }
        store(group_keys[e], first + second);
    }
    barrier();
    if e < n_group {
        let mine = load(group_keys[e]);
        let mut rank = 0u32;
        for h in range(0u32, n_group, 1u32) {
            let other = load(group_keys[h]);
            let ahead = other > mine || (other == mine && h < e);
            rank += select(ahead, 1u32, 0u32);
        }
        store(group_chosen[e], select(rank < topk_group, 1u32, 0u32));
    }
    barrier();
    let candidate = inside && (n_group == 1u32 || load(group_chosen[ec / group_width]) == 1u32);
    if inside {
        store(eligible[e], select(candidate, 1u32, 0u32));
    }
    barrier();
    // An expert's place: the candidates with a larger key, or an equal key and a lower index.
    let mut rank = 0u32;
    for f in range(0u32, experts, 1u32) {
        let other = load(keys[f]);
        let ahead = load(eligible[f]) == 1u32 && (other > key || (other == key && f < e));
        rank += select(ahead, 1u32, 0u32);
    }
    let chosen = candidate && rank < top_k;
    let chosen_sum = group_sum(select(chosen, p, 0.0f32));
    let norm = select(
        renormalize == 1u32,
        1.0f32 / (chosen_sum + 1e-20f32),
        1.0f32,
    );
    if bad == 0u32 {
        if chosen {
            store(topk_ids[row * top_k + rank], e.cast::<i32>());
            store(topk_weights[row * top_k + rank], p * norm * scaling);
        }
    } else {
        if e < top_k {
            store(topk_ids[row * top_k + e], -1i32);
            store(topk_weights[row * top_k + e], infinity() - infinity());
        }
    }
}

/// Threads for a row of `experts`: the power of two at or above it, at least a simdgroup.
pub fn route_group(experts: usize) -> u32 {
    (experts.next_power_of_two() as u32).max(32)
}

/// Checks the settings against `experts`: returns the group width.
pub fn check_config(op: &'static str, cfg: &RouteConfig, experts: usize) -> Result<usize, OpError> {
    if cfg.top_k == 0 || cfg.top_k > experts {
        return Err(OpError::invalid(
            op,
            format!(
                "top_k = {} must be in 1..={experts} (the experts)",
                cfg.top_k
            ),
        ));
    }
    if cfg.n_group == 0 || !experts.is_multiple_of(cfg.n_group) {
        return Err(OpError::invalid(
            op,
            format!(
                "n_group = {} must divide the {experts} experts into equal groups",
                cfg.n_group
            ),
        ));
    }
    let width = experts / cfg.n_group;
    if cfg.n_group > 1 && width < 2 {
        return Err(OpError::invalid(
            op,
            format!("n_group = {} leaves groups of one expert; a group's score is the sum of its two best", cfg.n_group),
        ));
    }
    if cfg.topk_group == 0 || cfg.topk_group > cfg.n_group {
        return Err(OpError::invalid(
            op,
            format!(
                "topk_group = {} must be in 1..={} (n_group)",
                cfg.topk_group, cfg.n_group
            ),
        ));
    }
    if cfg.topk_group * width < cfg.top_k {
        return Err(OpError::invalid(
            op,
            format!(
                "topk_group = {} groups of {width} experts hold fewer than top_k = {} candidates",
                cfg.topk_group, cfg.top_k
            ),
        ));
    }
    if !cfg.routed_scaling_factor.is_finite() {
        return Err(OpError::invalid(
            op,
            format!(
                "routed_scaling_factor must be finite, got {}",
                cfg.routed_scaling_factor
            ),
        ));
    }
    Ok(width)
}

/// Routes each row of `logits` `[tokens, experts]` (f32/f16/bf16) to `top_k` experts:
/// `topk_ids` i32 `[tokens, top_k]` (best first) and `topk_weights` f32 `[tokens, top_k]`.
/// `bias` (any float dtype, `[experts]`) is the selection bias. See the module's text for
/// the math, the ties and non-finite rows.
pub fn moe_route(
    ctx: &Context,
    logits: &Tensor,
    bias: Option<&Tensor>,
    cfg: &RouteConfig,
    topk_ids: &Tensor,
    topk_weights: &Tensor,
) -> Result<(), OpError> {
    dtype_in(OP, "logits", logits, &FLOAT_DTYPES)?;
    let (tokens, experts) = match *logits.shape() {
        [t, e] if t > 0 && e > 0 => (t, e),
        ref s => {
            return Err(OpError::invalid(
                OP,
                format!("`logits` must be a non-empty [tokens, experts], got shape {s:?}"),
            ))
        }
    };
    if experts > MAX_EXPERTS {
        return Err(OpError::invalid(
            OP,
            format!("{experts} experts; at most {MAX_EXPERTS} are taken (one thread each)"),
        ));
    }
    let width = check_config(OP, cfg, experts)?;
    if let Some(b) = bias {
        dtype_in(OP, "bias", b, &FLOAT_DTYPES)?;
        shape_is(OP, "bias", b, &[experts])?;
    }
    dtype_is(OP, "topk_ids", topk_ids, DType::I32)?;
    dtype_is(OP, "topk_weights", topk_weights, DType::F32)?;
    shape_is(OP, "topk_ids", topk_ids, &[tokens, cfg.top_k])?;
    shape_is(OP, "topk_weights", topk_weights, &[tokens, cfg.top_k])?;
    let mut inputs = vec![("logits", logits)];
    if let Some(b) = bias {
        inputs.push(("bias", b));
    }
    distinct_named(OP, "topk_ids", topk_ids, &inputs)?;
    inputs.push(("topk_ids", topk_ids));
    distinct_named(OP, "topk_weights", topk_weights, &inputs)?;
    fits_u32(OP, "the element count of `logits`", logits.len())?;
    let tokens = fits_u32(OP, "tokens", tokens)?;
    let keyed = bias.is_some() || cfg.n_group > 1;
    moe_route_kernel::launch(
        ctx,
        moe_route_kernel::Args {
            logits,
            bias: bias.unwrap_or(logits),
            topk_ids,
            topk_weights,
            experts: experts as u32,
            top_k: cfg.top_k as u32,
            n_group: cfg.n_group as u32,
            group_width: width as u32,
            topk_group: cfg.topk_group as u32,
            has_bias: u32::from(bias.is_some()),
            keyed: u32::from(keyed),
            renormalize: u32::from(cfg.renormalize),
            scaling: cfg.routed_scaling_factor,
        },
        moe_route_kernel::Consts {
            sigmoid: u32::from(cfg.scoring == Scoring::Sigmoid),
        },
    )
    .grid([tokens, 1, 1])
    .group_size(route_group(experts))
    .run()
    .map_err(runtime(OP))
}
