//! The FFT kernels: a power-of-two transform of m = 2^k complex f32 (k ≤ 13) done by one
//! threadgroup per row (several rows a threadgroup below m = 1024), and Bluestein's
//! chirp-z transform of any n built on it in the same kernel.
//!
//! A row is spread over `threads = m / epl` threads, thread `t` holding elements
//! `t + threads·s` (s < epl) in registers. The transform is Stockham's auto-sorting FFT
//! (as Govindaraju et al. lay it out for GPUs): each pass reads the elements
//! `j + r·m/R` of its butterflies `j`, twiddles them, does an R-point DFT in registers and
//! writes them to `(j / Ns)·Ns·R + j mod Ns + r·Ns`, which the next pass reads back
//! through threadgroup memory in the register layout above; after the last pass every
//! thread holds its outputs at the positions it loaded its inputs from, so global memory
//! is read once and written once, coalesced. Radix 8 (the elements a thread holds), the
//! last pass of 2 or 4 where log2 m is not a multiple of 3. Twiddles come from an exact
//! integer angle index, reduced to an eighth of a turn, through Taylor polynomials
//! accurate to f32 there ([`unit_root`]), never by repeated multiplication.

use tessera_macros::{func, kernel};

/// `(cos θ, sin θ)` for θ = 2π·k / 2^log_n, any k. The angle is reduced exactly in integers
/// to the nearest quarter turn q and a remainder x of at most an eighth of a turn
/// (|x| ≤ π/4), whose cos and sin the Taylor polynomials give to within an ulp of f32
/// (their first dropped terms are below 3e-8 and 2e-9), then rotated by q quarter turns.
#[func]
pub fn unit_root(k: u32, log_n: u32) -> (f32, f32) {
    let n = 1u32 << log_n;
    let half = n >> 1u32;
    let quarters = ((k & (n - 1u32)) << 2u32) + half;
    let q = (quarters >> log_n) & 3u32;
    let rem = quarters & (n - 1u32);
    let x = (rem.cast::<f32>() - half.cast::<f32>()) / n.cast::<f32>() * 1.570_796_4f32;
    let x2 = x * x;
    let s =
        x * (1.0 - x2 * (1.0 / 6.0 - x2 * (1.0 / 120.0 - x2 * (1.0 / 5040.0 - x2 / 362_880.0))));
    let c = 1.0
        - x2 * (0.5
            - x2 * (1.0 / 24.0 - x2 * (1.0 / 720.0 - x2 * (1.0 / 40_320.0 - x2 / 3_628_800.0))));
    let cos = select(
        q == 0u32,
        c,
        select(q == 1u32, -s, select(q == 2u32, -c, s)),
    );
    let sin = select(
        q == 0u32,
        s,
        select(q == 1u32, c, select(q == 2u32, -s, -c)),
    );
    (cos, sin)
}

/// The low `bits` bits of `i` in reverse order.
#[func]
pub fn bit_reverse(i: u32, bits: u32) -> u32 {
    let mut out = 0u32;
    for b in 0..bits {
        out |= ((i >> b) & 1u32) << (bits - 1u32 - b);
    }
    out
}

/// The DFT of the 2^log_r values at `first + stride·i` of (re, im), in place, with the
/// sign of the exponent `sign` (−1 forward, +1 inverse): radix-2 decimation in frequency,
/// so output `e` lands at position `bit_reverse(e)`.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn dft_in_registers(
    mut re: Mem<f32>,
    mut im: Mem<f32>,
    first: u32,
    stride: u32,
    log_r: u32,
    sign: f32,
) {
    let r = 1u32 << log_r;
    for st in 0..log_r {
        let h = r >> (st + 1u32);
        for i in 0..r / 2u32 {
            let lo = first + stride * ((i / h) * 2u32 * h + i % h);
            let hi = lo + stride * h;
            let ar = load(re[lo]);
            let ai = load(im[lo]);
            let br = load(re[hi]);
            let bi = load(im[hi]);
            store(re[lo], ar + br);
            store(im[lo], ai + bi);
            let dr = ar - br;
            let di = ai - bi;
            let (c, s0) = unit_root(i % h, log_r - st);
            let s = sign * s0;
            store(re[hi], dr * c - di * s);
            store(im[hi], dr * s + di * c);
        }
    }
}

/// One Stockham pass of radix 2^log_r after passes covering Ns = 2^log_ns: each of the
/// thread's `epl / R` butterflies `j = t + threads·q` holds its inputs at register
/// `q + (epl/R)·e`; they are twiddled by exp(sign·2πi·e·(j mod Ns)/(Ns·R)) and transformed
/// (outputs in bit-reversed register order).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn stockham_pass(
    mut re: Mem<f32>,
    mut im: Mem<f32>,
    t: u32,
    threads: u32,
    epl: u32,
    log_r: u32,
    log_ns: u32,
    sign: f32,
) {
    let r = 1u32 << log_r;
    let b = epl >> log_r;
    for q in 0..b {
        let k = (t + threads * q) & ((1u32 << log_ns) - 1u32);
        for e in 1..r {
            let (c, s0) = unit_root(e * k, log_ns + log_r);
            let s = sign * s0;
            let at = q + b * e;
            let vr = load(re[at]);
            let vi = load(im[at]);
            store(re[at], vr * c - vi * s);
            store(im[at], vr * s + vi * c);
        }
        dft_in_registers(re, im, q, b, log_r, sign);
    }
}

/// Writes a pass's outputs (register `q + b·bit_reverse(e)` of butterfly `q`) to their
/// Stockham places `(j / Ns)·Ns·R + j mod Ns + e·Ns` in `buf` from `base`.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn scatter(
    v: Mem<f32>,
    mut buf: Mem<f32>,
    base: u32,
    t: u32,
    threads: u32,
    epl: u32,
    log_r: u32,
    log_ns: u32,
) {
    let b = epl >> log_r;
    let ns = 1u32 << log_ns;
    for q in 0..b {
        let j = t + threads * q;
        let to = base + ((j >> log_ns) << (log_ns + log_r)) + (j & (ns - 1u32));
        for e in 0..(1u32 << log_r) {
            store(buf[to + e * ns], load(v[q + b * bit_reverse(e, log_r)]));
        }
    }
}

/// Reads the thread's elements `t + threads·s` back from `buf` at `base`.
#[func]
pub fn gather(mut v: Mem<f32>, buf: Mem<f32>, base: u32, t: u32, threads: u32, epl: u32) {
    for s in 0..epl {
        store(v[s], load(buf[base + t + threads * s]));
    }
}

/// After the last pass: register `q + b·bit_reverse(e)` moved to `q + b·e`, so that each
/// thread holds outputs `t + threads·s` at register `s` (`tr`, `ti` are scratch).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn unscramble(
    mut re: Mem<f32>,
    mut im: Mem<f32>,
    mut tr: Mem<f32>,
    mut ti: Mem<f32>,
    epl: u32,
    log_r: u32,
) {
    for s in 0..epl {
        store(tr[s], load(re[s]));
        store(ti[s], load(im[s]));
    }
    let b = epl >> log_r;
    for q in 0..b {
        for e in 0..(1u32 << log_r) {
            let from = q + b * bit_reverse(e, log_r);
            store(re[q + b * e], load(tr[from]));
            store(im[q + b * e], load(ti[from]));
        }
    }
}

/// The DFT (exponent sign `sign`) of the row of 2^log_m this thread's part of is held in
/// (re, im) as `t + threads·s` at register `s`, left in the same layout. `passes − 1`
/// passes of radix 2^log_radix, each followed by an exchange through `buf` (from `base`:
/// both planes at once when `planes` is 2, one after the other when 1), then a last pass
/// of radix 2^final_log.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn fft_row(
    mut re: Mem<f32>,
    mut im: Mem<f32>,
    mut tr: Mem<f32>,
    mut ti: Mem<f32>,
    mut buf: Mem<f32>,
    base: u32,
    t: u32,
    threads: u32,
    epl: u32,
    log_m: u32,
    log_radix: u32,
    passes: u32,
    final_log: u32,
    planes: u32,
    sign: f32,
) {
    let m = 1u32 << log_m;
    for p in 0..passes - 1u32 {
        let log_ns = p * log_radix;
        stockham_pass(re, im, t, threads, epl, log_radix, log_ns, sign);
        if planes == 2u32 {
            scatter(re, buf, base, t, threads, epl, log_radix, log_ns);
            scatter(im, buf, base + m, t, threads, epl, log_radix, log_ns);
            barrier();
            gather(re, buf, base, t, threads, epl);
            gather(im, buf, base + m, t, threads, epl);
            barrier();
        } else {
            scatter(re, buf, base, t, threads, epl, log_radix, log_ns);
            barrier();
            gather(re, buf, base, t, threads, epl);
            barrier();
            scatter(im, buf, base, t, threads, epl, log_radix, log_ns);
            barrier();
            gather(im, buf, base, t, threads, epl);
            barrier();
        }
    }
    stockham_pass(
        re,
        im,
        t,
        threads,
        epl,
        final_log,
        (passes - 1u32) * log_radix,
        sign,
    );
    unscramble(re, im, tr, ti, epl, final_log);
}

/// `(re, im)`, or where either is NaN or ±∞, both made non-finite (`re + im`): a
/// non-finite element then reaches both parts of every output of its row, never leaving
/// one of them finite.
#[func]
pub fn poisoned(re: f32, im: f32) -> (f32, f32) {
    let bad = re.is_nan() || re.is_infinite() || im.is_nan() || im.is_infinite();
    let both = re + im;
    (select(bad, both, re), select(bad, both, im))
}

/// `out[r] = scale · DFT_m(x[r])` (exponent sign `sign`: −1 forward, +1 inverse) for rows
/// of m = 2^log_m complex f32 stored as (re, im) pairs. `rows_per_group` rows a
/// threadgroup of `rows_per_group · m / epl` threads; threads past the last row hold
/// zeros and store nothing. Compiled for groups of up to 1024 threads (m = 8192).
#[kernel(group_size = 1024, groups_per_core = 1)]
#[allow(clippy::too_many_arguments)]
pub fn fft_pow2_kernel(
    x: Tensor<f32>,
    mut out: Tensor<f32>,
    rows: u32,
    scale: f32,
    sign: f32,
    #[constexpr] log_m: u32,
    #[constexpr] epl: u32,
    #[constexpr] log_radix: u32,
    #[constexpr] passes: u32,
    #[constexpr] final_log: u32,
    #[constexpr] planes: u32,
    #[constexpr] rows_per_group: u32,
) {
    let m = 1u32 << log_m;
    let threads = m / epl;
    let slot = thread_id() / threads;
    let t = thread_id() % threads;
    let row = group_id_x() * rows_per_group + slot;
    let active = row < rows;
    let first = select(active, row, 0u32) * m + t;
    let re = stack_array::<f32>(epl);
    let im = stack_array::<f32>(epl);
    let tr = stack_array::<f32>(epl);
    let ti = stack_array::<f32>(epl);
    for s in 0..epl {
        let i = first + threads * s;
        let (a, b) = poisoned(load(x[2u32 * i]), load(x[2u32 * i + 1u32]));
        store(re[s], select(active, a * scale, 0.0f32));
        store(im[s], select(active, b * scale, 0.0f32));
    }
    let buf = threadgroup_array::<f32>(rows_per_group * m * planes);
    fft_row(
        re,
        im,
        tr,
        ti,
        buf,
        slot * m * planes,
        t,
        threads,
        epl,
        log_m,
        log_radix,
        passes,
        final_log,
        planes,
        sign,
    );
    if active {
        for s in 0..epl {
            let i = first + threads * s;
            store(out[2u32 * i], load(re[s]));
            store(out[2u32 * i + 1u32], load(im[s]));
        }
    }
}

/// Bluestein's chirp-z transform of rows of any `n` through power-of-two transforms of
/// m ≥ 2n − 1, all in one kernel: a = x·w·scale (w the chirp, zero past n), A = DFT_m(a),
/// C = A·B (B the kernel's spectrum over m), c = DFT_m⁻¹(C) (the 1/m is in B), and
/// out = w·c for the first n. `conj` is +1 for the forward transform and −1 for the
/// inverse, which takes the conjugates of w and B. The layout and geometry are those of
/// [`fft_pow2_kernel`] for m.
#[kernel(group_size = 1024, groups_per_core = 1)]
#[allow(clippy::too_many_arguments)]
pub fn fft_bluestein_kernel(
    x: Tensor<f32>,
    chirp: Tensor<f32>,
    spectrum: Tensor<f32>,
    mut out: Tensor<f32>,
    rows: u32,
    n: u32,
    scale: f32,
    conj: f32,
    #[constexpr] log_m: u32,
    #[constexpr] epl: u32,
    #[constexpr] log_radix: u32,
    #[constexpr] passes: u32,
    #[constexpr] final_log: u32,
    #[constexpr] planes: u32,
    #[constexpr] rows_per_group: u32,
) {
    let m = 1u32 << log_m;
    let threads = m / epl;
    let slot = thread_id() / threads;
    let t = thread_id() % threads;
    let row = group_id_x() * rows_per_group + slot;
    let active = row < rows;
    let first = select(active, row, 0u32) * n;
    let re = stack_array::<f32>(epl);
    let im = stack_array::<f32>(epl);
    let tr = stack_array::<f32>(epl);
    let ti = stack_array::<f32>(epl);
    for s in 0..epl {
        let i = t + threads * s;
        let inside = active && i < n;
        let k = select(inside, i, 0u32);
        let (a, b) = poisoned(
            load(x[2u32 * (first + k)]),
            load(x[2u32 * (first + k) + 1u32]),
        );
        let wr = load(chirp[2u32 * k]);
        let wi = conj * load(chirp[2u32 * k + 1u32]);
        store(re[s], select(inside, (a * wr - b * wi) * scale, 0.0f32));
        store(im[s], select(inside, (a * wi + b * wr) * scale, 0.0f32));
    }
    let buf = threadgroup_array::<f32>(rows_per_group * m * planes);
    let base = slot * m * planes;
    fft_row(
        re, im, tr, ti, buf, base, t, threads, epl, log_m, log_radix, passes, final_log, planes,
        -1.0f32,
    );
    for s in 0..epl {
        let i = t + threads * s;
        let br = load(spectrum[2u32 * i]);
        let bi = conj * load(spectrum[2u32 * i + 1u32]);
        let ar = load(re[s]);
        let ai = load(im[s]);
        store(re[s], ar * br - ai * bi);
        store(im[s], ar * bi + ai * br);
    }
    fft_row(
        re, im, tr, ti, buf, base, t, threads, epl, log_m, log_radix, passes, final_log, planes,
        1.0f32,
    );
    for s in 0..epl {
        let i = t + threads * s;
        if active && i < n {
            let wr = load(chirp[2u32 * i]);
            let wi = conj * load(chirp[2u32 * i + 1u32]);
            let cr = load(re[s]);
            let ci = load(im[s]);
            store(out[2u32 * (first + i)], cr * wr - ci * wi);
            store(out[2u32 * (first + i) + 1u32], cr * wi + ci * wr);
        }
    }
}

/// How rows of a power-of-two transform of m are spread, and its passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub log_m: u32,
    /// Elements a thread: 8 (m itself below 8).
    pub epl: u32,
    /// Radix of every pass but the last: the elements a thread.
    pub log_radix: u32,
    /// Passes in all (at least 1).
    pub passes: u32,
    /// Radix of the last pass.
    pub final_log: u32,
    /// Planes exchanged through threadgroup memory at once: 2 (re and im) up to m = 4096,
    /// 1 at 8192, so at most 32 KiB of it is used.
    pub planes: u32,
    pub rows_per_group: u32,
    /// Threads a threadgroup.
    pub group: u32,
}

/// Threads of a threadgroup of short rows (several rows).
const SHORT_ROWS_GROUP: u32 = 128;

/// The layout of a transform of m = 2^log_m (log_m ≤ 13).
pub fn layout(log_m: u32) -> Layout {
    let m = 1u32 << log_m;
    let epl = m.min(8);
    let log_radix = epl.trailing_zeros();
    let (full, rest) = log_m
        .checked_div(log_radix)
        .map_or((0, 0), |full| (full, log_m % log_radix));
    let passes = (full + u32::from(rest > 0)).max(1);
    let threads = m / epl;
    let rows_per_group = (SHORT_ROWS_GROUP / threads).max(1);
    Layout {
        log_m,
        epl,
        log_radix,
        passes,
        final_log: if rest > 0 { rest } else { log_radix },
        planes: if m <= 4096 { 2 } else { 1 },
        rows_per_group,
        group: rows_per_group * threads,
    }
}

impl Layout {
    /// The constexprs, in the kernels' order.
    pub fn consts(&self) -> [u32; 7] {
        [
            self.log_m,
            self.epl,
            self.log_radix,
            self.passes,
            self.final_log,
            self.planes,
            self.rows_per_group,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_passes_cover_every_index_bit_within_32_kib() {
        for log_m in 0..=13 {
            let l = layout(log_m);
            let covered = (l.passes - 1) * l.log_radix + l.final_log;
            assert_eq!(covered, log_m, "m = 2^{log_m}");
            assert!(l.final_log <= l.log_radix);
            assert!(l.group <= 1024 && l.group >= 1);
            let bytes = 4 * l.rows_per_group * (1 << log_m) * l.planes;
            assert!(bytes <= 32 * 1024, "m = 2^{log_m}: {bytes} bytes");
        }
    }
}
