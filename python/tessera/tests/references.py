"""float64 NumPy references written from each op's published math, not from the kernels."""

import numpy as np


def rms_norm(x, w, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w.astype(np.float64)


def rope_neox(x, positions, theta=10000.0):
    x = x.astype(np.float64)
    d = x.shape[-1]
    half = d // 2
    inv = theta ** (-np.arange(half, dtype=np.float64) * 2 / d)
    ang = positions.astype(np.float64)[:, None] * inv[None, :]  # [tokens, half]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def decode_attention(q, k, v, scale=None):
    """q [Hq, D], k and v [Hkv, S, D]: every key visible, GQA by head groups."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    hq, d = q.shape
    hkv = k.shape[0]
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    out = np.empty((hq, d))
    for h in range(hq):
        kh = h // (hq // hkv)
        s = k[kh] @ q[h] * scale
        p = np.exp(s - s.max())
        out[h] = (p / p.sum()) @ v[kh]
    return out


def silu_mul(gate, up):
    g = gate.astype(np.float64)
    return g / (1 + np.exp(-g)) * up.astype(np.float64)
