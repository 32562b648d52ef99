//! The online-softmax arithmetic every attention kernel shares: one score folded into a
//! running (max, sum), and two partial states merged. Written once, inlined everywhere.

use tessera_macros::func;

/// Folds one score `s` into a running max `m`: returns the new max, the factor the old
/// sum and output are scaled by, and the weight of `s`. An invalid or −∞ score weighs
/// nothing.
/// One `exp` per score: whichever of `s` and `m` is smaller is the one rescaled.
#[func]
pub fn online_step(m: f32, s: f32, valid: bool) -> (f32, f32, f32) {
    let bigger = valid && s > m;
    let e = exp(-abs(s - m));
    let factor = select(bigger, e, 1.0f32);
    // A −∞ score weighs nothing, also while `m` is still −∞ (where `s − m` is NaN).
    let counts = valid && s != neg_infinity();
    let weight = select(counts, select(bigger, 1.0f32, e), 0.0f32);
    (select(bigger, s, m), factor, weight)
}

/// Merges two partial states with maxima `m_a` and `m_b`: returns the merged max and the
/// factors each side's sum and output are scaled by (zero for an empty side).
#[func]
pub fn merge_factors(m_a: f32, m_b: f32) -> (f32, f32, f32) {
    let m = max(m_a, m_b);
    let dead = m == neg_infinity();
    let a = select(dead, 0.0f32, exp(m_a - m));
    let b = select(dead, 0.0f32, exp(m_b - m));
    (m, a, b)
}

/// `num / den`: the normalised output of a row whose softmax sum is `den`; zero for a row
/// that saw no key (`den == 0`). A NaN sum (a NaN score) stays NaN: the comparison is
/// `den == 0`, never `den > 0`, which a NaN fails.
#[func]
pub fn normalise(num: f32, den: f32) -> f32 {
    select(den == 0.0f32, 0.0f32, num / den)
}

/// `exp(score - m)`, zero for a masked score (−∞) even when the running max `m` is still
/// −∞; a NaN score gives NaN (`max` drops NaN, so `m` can be −∞ under a NaN score).
#[func]
pub fn score_weight(score: f32, m: f32) -> f32 {
    select(score == neg_infinity(), 0.0f32, exp(score - m))
}

/// `exp(m_part - m_total)`, zero when the part is empty (both maxima −∞).
#[func]
pub fn part_weight(m_part: f32, m_total: f32) -> f32 {
    select(m_total == neg_infinity(), 0.0f32, exp(m_part - m_total))
}

/// A score's weight as it multiplies V in a running output: `w · 2⁻²⁴`. The running
/// output `Σ w_j·v_j` grows with the sum of the weights (up to the number of keys), so
/// with V near f32's range it would overflow before the divide; scaled by 2⁻²⁴ (exact)
/// it stays finite for fewer than 2²⁴ keys of any finite f32 V, and [`normalise_output`]
/// scales the convex combination back. Values below 2⁻¹⁰² lose precision to subnormals.
#[func]
pub fn v_weight(w: f32) -> f32 {
    w * 5.960_464_5e-8
}

/// The normalised output of a running output built with [`v_weight`]: `num / den · 2²⁴`,
/// zero for a row that saw no key, NaN stays NaN.
#[func]
pub fn normalise_output(num: f32, den: f32) -> f32 {
    normalise(num, den) * 16_777_216.0f32
}

/// `exp(sink − m)`, the sink logit's term of the denominator under the row's max `m`
/// (which includes the sink): 1 when the sink is the max, also a +∞ sink (where `sink − m`
/// is NaN). A +∞ sink then takes all the weight and the output is 0, the limit of
/// `Σ e^s·v / (Σ e^s + e^sink)`.
#[func]
pub fn sink_weight(sink: f32, m: f32) -> f32 {
    select(sink == m, 1.0f32, exp(sink - m))
}
