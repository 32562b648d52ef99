"""Float64 references written from the published math of each op, independent of Tessera's
kernels and Rust references; where PyTorch is installed, the ops it has come from PyTorch
(computed in float64 on the CPU) instead."""

import math

import numpy as np

from harness import HAVE_TORCH

if HAVE_TORCH:
    import torch
    import torch.nn.functional as F

    def _t(x):
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))


# --- elementwise, matmul -------------------------------------------------------------------


def add(a, b):
    return (_t(a) + _t(b)).numpy() if HAVE_TORCH else a + b


def matmul(a, b):
    return (_t(a) @ _t(b)).numpy() if HAVE_TORCH else a @ b


# --- row ops ------------------------------------------------------------------------------


def softmax(x):
    if HAVE_TORCH:
        return torch.softmax(_t(x), dim=-1).numpy()
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    with np.errstate(invalid="ignore"):  # a fully masked row is NaN, as in every library
        return e / e.sum(axis=-1, keepdims=True)


def logsumexp(x):
    if HAVE_TORCH:
        return torch.logsumexp(_t(x), dim=-1).numpy()
    m = np.max(x, axis=-1, keepdims=True)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return (np.log(np.exp(x - safe).sum(axis=-1, keepdims=True)) + safe)[..., 0]


def rms_norm(x, w, eps):
    """Zhang & Sennrich 2019: x / sqrt(mean(x²) + eps) · w."""
    if HAVE_TORCH and hasattr(F, "rms_norm"):
        return F.rms_norm(_t(x), (x.shape[-1],), _t(w), eps).numpy()
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps):
    """Ba et al. 2016, with the biased variance."""
    if HAVE_TORCH:
        return F.layer_norm(_t(x), (x.shape[-1],), _t(w), _t(b), eps).numpy()
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu(x, approximate):
    """Hendrycks & Gimpel 2016: x·Φ(x) (`none`), or its tanh approximation."""
    if HAVE_TORCH:
        return F.gelu(_t(x), approximate=approximate).numpy()
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * np.vectorize(math.erfc)(-x / math.sqrt(2.0))


def gated_mixer_norm(y, z, w, eps):
    """Mamba-2 / Qwen3-Next gated norm: rms_norm(y, w) · silu(z)."""
    return rms_norm(y, w, eps) * silu(z)


# --- attention ----------------------------------------------------------------------------


def attend(q, k, v, scale, visible, sink=None):
    """One query against keys/values [n, d]: softmax over the visible positions (and an
    optional sink logit in the denominator) of scale·q·k, times v. No visible key: zeros."""
    idx = np.flatnonzero(visible)
    if idx.size == 0:
        return np.zeros(v.shape[-1])
    s = scale * (k[idx] @ q)
    m = s.max() if sink is None else max(s.max(), sink)
    p = np.exp(s - m)
    den = p.sum() + (0.0 if sink is None else math.exp(sink - m))
    return (p @ v[idx]) / den


def visible(n_keys, filled, window, n_sink):
    """Which of `n_keys` positions a query sees when `filled` keys precede it (itself
    included): the last `window` (all with 0) plus the first `n_sink`."""
    p = np.arange(n_keys)
    seen = p < filled
    if window:
        seen &= (p >= filled - window) | (p < n_sink)
    return seen


def sdpa(q, k, v, scale, filled, window=0, n_sink=0, sinks=None):
    """q [hq, d], k/v [hkv, n, d] → [hq, d]; GQA: q head h reads KV head h // (hq / hkv)."""
    hq, hkv = q.shape[0], k.shape[0]
    group = hq // hkv
    seen = visible(k.shape[1], filled, window, n_sink)
    if HAVE_TORCH and sinks is None and seen.any():
        kk = _t(k[:, seen]).repeat_interleave(group, dim=0)
        vv = _t(v[:, seen]).repeat_interleave(group, dim=0)
        out = F.scaled_dot_product_attention(_t(q)[:, None, :], kk, vv, scale=scale)
        return out[:, 0, :].numpy()
    return np.stack(
        [
            attend(q[h], k[h // group], v[h // group], scale, seen, None if sinks is None else sinks[h])
            for h in range(hq)
        ]
    )


# --- rotary embeddings --------------------------------------------------------------------


def rope_inv_freq(rot_dim, theta, scaling, factor, original_max_position, low_freq_factor,
                  high_freq_factor, beta_fast, beta_slow):
    """Frequencies (and the cos/sin scale) as Hugging Face transformers computes them in
    `modeling_rope_utils` (`_compute_default/llama3/yarn_parameters`)."""
    inv = 1.0 / theta ** (np.arange(0, rot_dim, 2, dtype=np.float64) / rot_dim)
    if scaling == "none":
        return inv, 1.0
    if scaling == "llama3":
        low_wl = original_max_position / low_freq_factor
        high_wl = original_max_position / high_freq_factor
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > low_wl, inv / factor, inv)
        smooth = (original_max_position / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wl) & ~(wavelen > low_wl)
        return np.where(medium, smoothed, scaled), 1.0
    # YaRN (Peng et al. 2023), as transformers: ramp clamped to [0, rot_dim - 1].
    def correction_dim(rotations):
        return rot_dim * math.log(original_max_position / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), rot_dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(rot_dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    inv = (inv / factor) * (1 - extrapolation) + inv * extrapolation
    mscale = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    return inv, mscale


def rope(x, positions, rot_dim, layout, inv_freq, mscale):
    """x [tokens, heads, head_dim]: pairs (i, i + rot_dim/2) (neox) or (2i, 2i+1)
    (interleaved) of the first rot_dim dims rotated by pos·f_i, scaled by mscale; the rest
    pass through."""
    out = x.copy()
    ang = positions.astype(np.float64)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(ang)[:, None, :] * mscale, np.sin(ang)[:, None, :] * mscale
    half = rot_dim // 2
    if layout == "neox":
        a, b = x[..., :half], x[..., half:rot_dim]
        out[..., :half] = a * cos - b * sin
        out[..., half:rot_dim] = b * cos + a * sin
    else:
        a, b = x[..., 0:rot_dim:2], x[..., 1:rot_dim:2]
        out[..., 0:rot_dim:2] = a * cos - b * sin
        out[..., 1:rot_dim:2] = b * cos + a * sin
    return out


# --- Gated DeltaNet -----------------------------------------------------------------------


def gdn_recurrent(q, k, v, g, beta, scale, h0):
    """flash-linear-attention's naive recurrent gated delta rule, for one sequence:
    q/k [T, Hk, Dk], v [T, Hv, Dv], g/beta [T, Hv], h0 [Hv, Dv, Dk] (S with rows over v).
    Per token: S ← S·exp(g); S ← S + β·(v − S k) ⊗ k; o = scale · S q. GQA: value head h
    reads q/k head h // (Hv / Hk). Returns o [T, Hv, Dv] and the final S."""
    T, hk, _ = q.shape
    hv = v.shape[1]
    group = hv // hk
    S = h0.copy()
    o = np.zeros((T, hv, v.shape[2]))
    for t in range(T):
        for h in range(hv):
            kk, qq = k[t, h // group], q[t, h // group]
            S[h] *= math.exp(g[t, h])
            S[h] += beta[t, h] * np.outer(v[t, h] - S[h] @ kk, kk)
            o[t, h] = scale * (S[h] @ qq)
    return o, S


# --- causal conv1d, selective scan --------------------------------------------------------


def causal_conv1d(x, w, bias, state, silu_on):
    """Depthwise causal conv: x [B, T, C], w [C, W], state [B, C, W-1] the previous W-1
    inputs. out[t, c] = Σ_j w[c, j] · xs[t + j, c] over the state-prefixed sequence xs, +
    bias, then SiLU. Returns out and the last W-1 inputs as the new state."""
    B, T, C = x.shape
    W = w.shape[1]
    xs = np.concatenate([np.transpose(state, (0, 2, 1)), x], axis=1)  # [B, W-1+T, C]
    if HAVE_TORCH:
        y = F.conv1d(_t(np.transpose(xs, (0, 2, 1))), _t(w)[:, None, :], _t(bias), groups=C)
        out = np.transpose(y.numpy(), (0, 2, 1))
    else:
        out = np.zeros((B, T, C))
        for j in range(W):
            out += xs[:, j : j + T, :] * w[:, j]
        out += bias
    if silu_on:
        out = silu(out)
    return out, np.transpose(xs[:, T:, :], (0, 2, 1))


def softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def selective_scan_step(state, x, dt, a, b, c, d, z, dt_bias):
    """Mamba (Gu & Dao 2023) discretised step: Δ = softplus(dt + dt_bias);
    h ← exp(Δ·A)·h + Δ·B·x; y = (C·h + D·x)·silu(z)."""
    delta = softplus(dt + dt_bias)  # [B, D]
    h = np.exp(delta[:, :, None] * a[None]) * state + (delta * x)[:, :, None] * b[:, None, :]
    y = (np.einsum("bdn,bn->bd", h, c) + d * x) * silu(z)
    return h, y
