//! f64 references for Gated DeltaNet, written from the math: the plain recurrence (the
//! definition every kernel is checked against), the chunked (WY) form of the same
//! recurrence that the prefill kernels implement, and the decode step's fused prep
//! (conv-output split, per-head RMSNorm of q and k, gate and beta from raw projections).
//!
//! Layouts (tokens of all sequences packed, sequence `s` spanning
//! `cu_seqlens[s]..cu_seqlens[s + 1]`):
//! q, k `[T, Hk, Dk]` · v `[T, Hv, Dv]` · g (log decay), beta `[T, Hv]` ·
//! state `[N, Hv, Dv, Dk]` · o `[T, Hv, Dv]`. Value head `h` reads key head
//! `h / (Hv / Hk)` (GQA).

use rayon::prelude::*;

/// Head counts and head sizes of one Gated DeltaNet layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GdnShape {
    /// Key (and query) heads.
    pub hk: usize,
    /// Value heads: a multiple of `hk`.
    pub hv: usize,
    pub dk: usize,
    pub dv: usize,
}

impl GdnShape {
    /// The key head value head `h` reads.
    pub fn key_head(&self, h: usize) -> usize {
        h / (self.hv / self.hk)
    }

    /// Elements of one sequence's state.
    pub fn state_len(&self) -> usize {
        self.hv * self.dv * self.dk
    }
}

/// The inputs of a Gated DeltaNet layer over packed sequences.
pub struct GdnInputs<'a> {
    pub q: &'a [f64],
    pub k: &'a [f64],
    pub v: &'a [f64],
    /// Log decay per token and value head (`<= 0` in models).
    pub g: &'a [f64],
    pub beta: &'a [f64],
    /// Initial state per sequence, `[N, Hv, Dv, Dk]`; zero when `None`.
    pub h0: Option<&'a [f64]>,
    /// Sequence boundaries, `N + 1` non-decreasing offsets starting at 0.
    pub cu_seqlens: &'a [usize],
    pub shape: GdnShape,
    pub scale: f64,
}

/// One sequence's state for one value head, `[Dv][Dk]` row-major.
fn initial(inp: &GdnInputs, seq: usize, h: usize) -> Vec<f64> {
    let s = inp.shape;
    let n = s.dv * s.dk;
    match inp.h0 {
        Some(h0) => {
            let base = (seq * s.hv + h) * n;
            h0[base..base + n].to_vec()
        }
        None => vec![0.0; n],
    }
}

/// The recurrence, token by token: `S ← e^{g_t}·S; v_new = β_t·(v_t − S k_t);
/// S ← S + v_new k_tᵀ; o_t = scale·S q_t`. Returns (o `[T, Hv, Dv]`, final state
/// `[N, Hv, Dv, Dk]`).
pub fn recurrent(inp: &GdnInputs) -> (Vec<f64>, Vec<f64>) {
    let s = inp.shape;
    let (dk, dv) = (s.dk, s.dv);
    let total = inp.cu_seqlens.last().copied().unwrap_or(0);
    let seqs = inp.cu_seqlens.len().saturating_sub(1);
    // Every (sequence, value head) pair is independent: run them in parallel, each
    // producing its outputs `[len, Dv]` and final state, then scatter.
    let pairs: Vec<(usize, usize)> = (0..seqs)
        .flat_map(|seq| (0..s.hv).map(move |h| (seq, h)))
        .collect();
    let parts: Vec<(Vec<f64>, Vec<f64>)> = pairs
        .par_iter()
        .map(|&(seq, h)| {
            let kh = s.key_head(h);
            let mut st = initial(inp, seq, h);
            let (t0, t1) = (inp.cu_seqlens[seq], inp.cu_seqlens[seq + 1]);
            let mut o = vec![0.0; (t1 - t0) * dv];
            for t in t0..t1 {
                let q = &inp.q[(t * s.hk + kh) * dk..][..dk];
                let k = &inp.k[(t * s.hk + kh) * dk..][..dk];
                let v = &inp.v[(t * s.hv + h) * dv..][..dv];
                let decay = inp.g[t * s.hv + h].exp();
                let beta = inp.beta[t * s.hv + h];
                st.iter_mut().for_each(|x| *x *= decay);
                for a in 0..dv {
                    let row = &mut st[a * dk..][..dk];
                    let sk: f64 = row.iter().zip(k).map(|(x, y)| x * y).sum();
                    let vn = beta * (v[a] - sk);
                    row.iter_mut().zip(k).for_each(|(x, y)| *x += vn * y);
                    let sq: f64 = row.iter().zip(q).map(|(x, y)| x * y).sum();
                    o[(t - t0) * dv + a] = inp.scale * sq;
                }
            }
            (o, st)
        })
        .collect();
    let mut o = vec![0.0; total * s.hv * dv];
    let mut fin = vec![0.0; seqs * s.state_len()];
    for (&(seq, h), (part, st)) in pairs.iter().zip(parts) {
        let t0 = inp.cu_seqlens[seq];
        for (i, row) in part.chunks(dv).enumerate() {
            o[((t0 + i) * s.hv + h) * dv..][..dv].copy_from_slice(row);
        }
        fin[(seq * s.hv + h) * dv * dk..][..dv * dk].copy_from_slice(&st);
    }
    (o, fin)
}

/// The same layer computed chunk by chunk, as the prefill kernels do: per chunk,
/// `A = strict_lower(β·K·Kᵀ ⊙ e^{g_i − g_j})` on the chunk-local cumulative log decay,
/// `w = (I + A)⁻¹(β·e^{g}·K)`, `u = (I + A)⁻¹(β·V)`, `V_new = u − w·Sᵀ`,
/// `o = scale·(e^{g}·Q·Sᵀ + tril(Q·Kᵀ ⊙ e^{g_i − g_j})·V_new)` and
/// `S ← e^{g_last}·S + V_newᵀ·(e^{g_last − g}·K)`. Equal to [`recurrent`] in exact
/// arithmetic.
pub fn chunked(inp: &GdnInputs, chunk: usize) -> (Vec<f64>, Vec<f64>) {
    let s = inp.shape;
    let (dk, dv) = (s.dk, s.dv);
    let total = inp.cu_seqlens.last().copied().unwrap_or(0);
    let seqs = inp.cu_seqlens.len().saturating_sub(1);
    let mut o = vec![0.0; total * s.hv * dv];
    let mut fin = vec![0.0; seqs * s.state_len()];
    for seq in 0..seqs {
        let (bos, eos) = (inp.cu_seqlens[seq], inp.cu_seqlens[seq + 1]);
        for h in 0..s.hv {
            let kh = s.key_head(h);
            let mut st = initial(inp, seq, h);
            let mut t0 = bos;
            while t0 < eos {
                let l = chunk.min(eos - t0);
                let qr = |i: usize| &inp.q[((t0 + i) * s.hk + kh) * dk..][..dk];
                let kr = |i: usize| &inp.k[((t0 + i) * s.hk + kh) * dk..][..dk];
                let vr = |i: usize| &inp.v[((t0 + i) * s.hv + h) * dv..][..dv];
                let beta = |i: usize| inp.beta[(t0 + i) * s.hv + h];
                let mut gc = vec![0.0; l];
                let mut acc = 0.0;
                for (i, g) in gc.iter_mut().enumerate() {
                    acc += inp.g[(t0 + i) * s.hv + h];
                    *g = acc;
                }
                let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
                // A, then (I + A)⁻¹ by forward substitution (unit lower triangular).
                let mut a = vec![0.0; l * l];
                for i in 0..l {
                    for j in 0..i {
                        a[i * l + j] = beta(i) * dot(kr(i), kr(j)) * (gc[i] - gc[j]).exp();
                    }
                }
                let mut ai = vec![0.0; l * l];
                for i in 0..l {
                    ai[i * l + i] = 1.0;
                    for j in 0..i {
                        let mut x = 0.0;
                        for m in j..i {
                            x -= a[i * l + m] * ai[m * l + j];
                        }
                        ai[i * l + j] = x;
                    }
                }
                let mut w = vec![0.0; l * dk];
                let mut u = vec![0.0; l * dv];
                for i in 0..l {
                    for j in 0..=i {
                        let c = ai[i * l + j] * beta(j);
                        let e = gc[j].exp();
                        for b in 0..dk {
                            w[i * dk + b] += c * e * kr(j)[b];
                        }
                        for b in 0..dv {
                            u[i * dv + b] += c * vr(j)[b];
                        }
                    }
                }
                let mut vnew = vec![0.0; l * dv];
                for i in 0..l {
                    for x in 0..dv {
                        vnew[i * dv + x] =
                            u[i * dv + x] - dot(&w[i * dk..][..dk], &st[x * dk..][..dk]);
                    }
                }
                for i in 0..l {
                    for x in 0..dv {
                        let mut r = gc[i].exp() * dot(qr(i), &st[x * dk..][..dk]);
                        for j in 0..=i {
                            r += dot(qr(i), kr(j)) * (gc[i] - gc[j]).exp() * vnew[j * dv + x];
                        }
                        o[((t0 + i) * s.hv + h) * dv + x] = inp.scale * r;
                    }
                }
                let glast = gc[l - 1];
                for x in 0..dv {
                    for b in 0..dk {
                        let mut y = glast.exp() * st[x * dk + b];
                        for j in 0..l {
                            y += (glast - gc[j]).exp() * vnew[j * dv + x] * kr(j)[b];
                        }
                        st[x * dk + b] = y;
                    }
                }
                t0 += l;
            }
            fin[(seq * s.hv + h) * dv * dk..][..dv * dk].copy_from_slice(&st);
        }
    }
    (o, fin)
}

/// `log(1 + e^x)`.
pub fn softplus(x: f64) -> f64 {
    if x > 30.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// The decode step's prep for batch rows of `conv_out = [q (Hk·Dk) | k (Hk·Dk) | v (Hv·Dv)]`:
/// q and k RMS-normalised per head with weights `wq`, `wk` (`[Hk·Dk]`), log decay
/// `g = −e^{a_log}·softplus(a + dt_bias)`, `beta = sigmoid(b)`. Returns (q, k, v, g, beta)
/// in the layouts [`recurrent`] takes, one token per batch row.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn prep(
    conv_out: &[f64],
    a_log: &[f64],
    dt_bias: &[f64],
    a: &[f64],
    b: &[f64],
    wq: &[f64],
    wk: &[f64],
    eps: f64,
    s: GdnShape,
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let row = 2 * s.hk * s.dk + s.hv * s.dv;
    let batch = conv_out.len() / row;
    let (mut q, mut k, mut v, mut g, mut beta) = (vec![], vec![], vec![], vec![], vec![]);
    let norm = |x: &[f64], w: &[f64]| -> Vec<f64> {
        let ms = x.iter().map(|y| y * y).sum::<f64>() / x.len() as f64;
        let inv = 1.0 / (ms + eps).sqrt();
        x.iter().zip(w).map(|(y, wi)| y * inv * wi).collect()
    };
    for bi in 0..batch {
        let r = &conv_out[bi * row..][..row];
        for kh in 0..s.hk {
            let w = &wq[kh * s.dk..][..s.dk];
            q.extend(norm(&r[kh * s.dk..][..s.dk], w));
        }
        for kh in 0..s.hk {
            let w = &wk[kh * s.dk..][..s.dk];
            k.extend(norm(&r[(s.hk + kh) * s.dk..][..s.dk], w));
        }
        v.extend_from_slice(&r[2 * s.hk * s.dk..]);
        for h in 0..s.hv {
            let x = a[bi * s.hv + h] + dt_bias[h];
            g.push(-a_log[h].exp() * softplus(x));
            beta.push(1.0 / (1.0 + (-b[bi * s.hv + h]).exp()));
        }
    }
    (q, k, v, g, beta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rand(n: usize, seed: &mut u64, lo: f64, hi: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                lo + (hi - lo) * ((*seed >> 11) as f64 / (1u64 << 53) as f64)
            })
            .collect()
    }

    fn check(lens: &[usize], chunk: usize, with_h0: bool) {
        let s = GdnShape {
            hk: 1,
            hv: 2,
            dk: 8,
            dv: 4,
        };
        let mut cu = vec![0];
        for l in lens {
            cu.push(cu.last().unwrap() + l);
        }
        let t = *cu.last().unwrap();
        let mut seed = 7;
        let q = rand(t * s.hk * s.dk, &mut seed, -0.5, 0.5);
        let k = rand(t * s.hk * s.dk, &mut seed, -0.5, 0.5);
        let v = rand(t * s.hv * s.dv, &mut seed, -1.0, 1.0);
        let g = rand(t * s.hv, &mut seed, -0.3, 0.0);
        let beta = rand(t * s.hv, &mut seed, 0.1, 0.9);
        let h0 = rand(lens.len() * s.state_len(), &mut seed, -1.0, 1.0);
        let inp = GdnInputs {
            q: &q,
            k: &k,
            v: &v,
            g: &g,
            beta: &beta,
            h0: with_h0.then_some(&h0[..]),
            cu_seqlens: &cu,
            shape: s,
            scale: 0.35,
        };
        let (o1, f1) = recurrent(&inp);
        let (o2, f2) = chunked(&inp, chunk);
        for (x, y) in o1.iter().zip(&o2).chain(f1.iter().zip(&f2)) {
            assert!((x - y).abs() < 1e-10, "{x} vs {y}");
        }
    }

    #[test]
    fn chunked_equals_recurrent() {
        check(&[1], 4, false);
        check(&[7, 4, 9], 4, true);
        check(&[13], 64, true);
        check(&[0, 5], 3, true);
    }

    #[test]
    fn one_step_by_hand() {
        // Dk = Dv = 1: S = e^g·S0; v_new = β(v − S k); S += v_new k; o = scale·S q.
        let s = GdnShape {
            hk: 1,
            hv: 1,
            dk: 1,
            dv: 1,
        };
        let inp = GdnInputs {
            q: &[2.0],
            k: &[0.5],
            v: &[3.0],
            g: &[(0.5f64).ln()],
            beta: &[0.5],
            h0: Some(&[4.0]),
            cu_seqlens: &[0, 1],
            shape: s,
            scale: 1.0,
        };
        let (o, f) = recurrent(&inp);
        // S = 2; v_new = 0.5·(3 − 1) = 1; S = 2.5; o = 5.
        assert!((f[0] - 2.5).abs() < 1e-12 && (o[0] - 5.0).abs() < 1e-12);
    }
}
