//! f64 references for the causal depthwise conv1d, written from its definition:
//! `out[t, c] = act(bias[c] + Σ_j w[c, j]·x[t − (W − 1) + j, c])`, where positions before
//! the sequence read the carried state `[C, W − 1]` (oldest first).

/// Prefill over `[B, T, C]` with per-batch initial state `[B, C, W − 1]`; returns the
/// output `[B, T, C]` and the final state (the last `W − 1` inputs, state-extended).
pub fn conv1d(
    x: &[f64],
    w: &[f64],
    bias: &[f64],
    state: &[f64],
    (b, t, c, width): (usize, usize, usize, usize),
    silu: bool,
) -> (Vec<f64>, Vec<f64>) {
    let k = width - 1;
    let mut out = vec![0.0; b * t * c];
    let mut fin = vec![0.0; b * c * k];
    for bi in 0..b {
        // The padded sequence: state then inputs.
        let at = |ch: usize, p: usize| -> f64 {
            if p < k {
                state[(bi * c + ch) * k + p]
            } else {
                x[(bi * t + p - k) * c + ch]
            }
        };
        for ti in 0..t {
            for ch in 0..c {
                let mut acc = bias[ch];
                for j in 0..width {
                    acc += w[ch * width + j] * at(ch, ti + j);
                }
                out[(bi * t + ti) * c + ch] = if silu {
                    acc / (1.0 + (-acc).exp())
                } else {
                    acc
                };
            }
        }
        for ch in 0..c {
            for i in 0..k {
                fin[(bi * c + ch) * k + i] = at(ch, t + i);
            }
        }
    }
    (out, fin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_width_two_filter_by_hand() {
        // One channel, w = [1, 10]: out_t = x_{t-1} + 10·x_t, x_{-1} from the state.
        let (o, s) = conv1d(
            &[1.0, 2.0, 3.0],
            &[1.0, 10.0],
            &[0.5],
            &[7.0],
            (1, 3, 1, 2),
            false,
        );
        assert_eq!(o, vec![17.5, 21.5, 32.5]);
        assert_eq!(s, vec![3.0]);
    }
}
