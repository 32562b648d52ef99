//! Backend self-test: runs the compiler's hand-built sample kernels
//! (`tessera_compiler::cuda::samples`) on a backend and on the CPU reference with the same
//! random inputs, and compares every output element.

use crate::context::Context;
use crate::error::Result;
use crate::tensor::Tensor;
use tessera_compiler::cuda::samples::{self, Check, Init, Sample, SampleArg};
use tessera_ir::{Literal, ParamKind, Scalar};

/// The outcome of one sample.
#[derive(Clone, Debug)]
pub struct SampleOutcome {
    pub name: &'static str,
    /// Output elements compared.
    pub elements: usize,
    /// Elements outside the tolerance.
    pub mismatches: usize,
    /// The largest absolute difference seen (ignoring matching NaNs).
    pub max_abs_diff: f64,
    /// The first mismatches, as `tensor[i]: got vs want`.
    pub examples: Vec<String>,
    /// Why the sample was not run on this device, if it was not.
    pub skipped: Option<String>,
}

impl SampleOutcome {
    pub fn passed(&self) -> bool {
        self.mismatches == 0
    }
}

/// splitmix64: a small deterministic generator for test inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// Little-endian bytes of `len` elements of `ty` drawn from `init`.
fn host_bytes(ty: Scalar, len: usize, init: Init, rng: &mut Rng) -> Vec<u8> {
    let size = ty.size_bytes();
    let mut out = Vec::with_capacity(len * size);
    for _ in 0..len {
        let v = match init {
            Init::Zero => 0.0,
            Init::Uniform(lo, hi) if ty.is_float() => rng.uniform(lo, hi),
            Init::Uniform(lo, hi) => rng.uniform(lo, hi).round(),
        };
        let bits = Literal::from_f64(ty, v).to_bits();
        out.extend_from_slice(&bits.to_le_bytes()[..size]);
    }
    out
}

fn decode(ty: Scalar, bytes: &[u8]) -> Vec<Literal> {
    bytes
        .chunks_exact(ty.size_bytes())
        .map(|c| {
            let mut b = [0u8; 4];
            b[..c.len()].copy_from_slice(c);
            Literal::from_bits(ty, u32::from_le_bytes(b))
        })
        .collect()
}

fn make_tensors(ctx: &Context, s: &Sample, seed: u64) -> Result<Vec<Option<Tensor>>> {
    let mut rng = Rng(seed);
    s.kernel
        .params
        .iter()
        .zip(&s.args)
        .map(|(p, a)| match (p.kind, a) {
            (ParamKind::Tensor { elem, .. }, SampleArg::Tensor { len, init }) => {
                let bytes = host_bytes(elem, *len, *init, &mut rng);
                ctx.tensor_from_bytes(elem, &bytes, &[*len]).map(Some)
            }
            _ => Ok(None),
        })
        .collect()
}

fn run_on(ctx: &Context, s: &Sample, seed: u64) -> Result<Vec<Option<Tensor>>> {
    let tensors = make_tensors(ctx, s, seed)?;
    let mut launch = ctx
        .launch_ir(&s.kernel)
        .no_optimize()
        .grid(s.grid)
        .group_size(s.group_size);
    for ((p, a), t) in s.kernel.params.iter().zip(&s.args).zip(&tensors) {
        match (a, t) {
            (_, Some(t)) => launch = launch.arg(&p.name, t),
            (SampleArg::Scalar(l), None) => launch = launch.scalar(&p.name, *l),
            _ => {}
        }
    }
    launch.run()?;
    ctx.synchronize()?;
    Ok(tensors)
}

fn same(check: Check, got: Literal, want: Literal) -> (bool, f64) {
    let (g, w) = (got.as_f64(), want.as_f64());
    if g.is_nan() || w.is_nan() {
        return (g.is_nan() && w.is_nan(), 0.0);
    }
    let diff = (g - w).abs();
    let ok = match check {
        Check::Exact => got == want || (g == 0.0 && w == 0.0 && got.ty().is_float() && g == w),
        Check::Close { abs, rel } => diff <= abs + rel * w.abs() || g == w,
    };
    (ok, if diff.is_finite() { diff } else { 0.0 })
}

/// What an output is compared with.
enum Expected {
    Tensor(Tensor),
    Values(Vec<f64>),
}

/// The sample's outputs computed on the host from the same inputs.
fn host_expected(
    ctx: &Context,
    s: &Sample,
    seed: u64,
    host: samples::HostReference,
) -> Result<Vec<Option<Expected>>> {
    let inputs = make_tensors(ctx, s, seed)?;
    let mut values = Vec::new();
    for t in inputs.iter().flatten() {
        values.push(t.to_f64_vec()?);
    }
    let mut outs = host(&values).into_iter();
    Ok(inputs
        .iter()
        .map(|t| t.as_ref().and_then(|_| outs.next()).map(Expected::Values))
        .collect())
}

/// Runs one sample on `ctx` and on `reference`, comparing every writable tensor.
pub fn run_sample(
    ctx: &Context,
    reference: &Context,
    s: &Sample,
    seed: u64,
) -> Result<SampleOutcome> {
    let got = run_on(ctx, s, seed)?;
    let want = match (run_on(reference, s, seed), s.host_reference) {
        (Ok(w), _) => w.into_iter().map(|t| t.map(Expected::Tensor)).collect(),
        // The reference backend cannot run it (too much threadgroup memory for the CPU):
        // compare with the sample's host computation instead.
        (Err(e), Some(host)) if e.is_invalid_launch() => host_expected(ctx, s, seed, host)?,
        (Err(e), _) => return Err(e),
    };
    let mut out = SampleOutcome {
        name: s.name,
        elements: 0,
        mismatches: 0,
        max_abs_diff: 0.0,
        examples: Vec::new(),
        skipped: None,
    };
    for (p, (g, w)) in s.kernel.params.iter().zip(got.iter().zip(&want)) {
        let (
            ParamKind::Tensor {
                elem,
                writable: true,
            },
            Some(g),
            Some(w),
        ) = (p.kind, g, w)
        else {
            continue;
        };
        let gv = decode(elem, &g.to_bytes()?);
        let wv = match w {
            Expected::Tensor(t) => decode(elem, &t.to_bytes()?),
            Expected::Values(v) => v.iter().map(|&x| Literal::from_f64(elem, x)).collect(),
        };
        for (i, (&a, &b)) in gv.iter().zip(&wv).enumerate() {
            out.elements += 1;
            let (ok, diff) = same(s.check, a, b);
            out.max_abs_diff = out.max_abs_diff.max(diff);
            if !ok {
                out.mismatches += 1;
                if out.examples.len() < 8 {
                    out.examples
                        .push(format!("{}[{i}]: got {a}, want {b}", p.name));
                }
            }
        }
    }
    Ok(out)
}

/// Runs every sample on `ctx` against the CPU backend.
pub fn run_all(ctx: &Context, seed: u64) -> Result<Vec<SampleOutcome>> {
    let reference = Context::cpu();
    let all = samples::all()?;
    let limit = ctx.info().max_shared_bytes;
    all.iter()
        .enumerate()
        .map(|(k, s)| {
            let need = s.kernel.body.shared_bytes();
            if need > limit {
                return Ok(SampleOutcome {
                    name: s.name,
                    elements: 0,
                    mismatches: 0,
                    max_abs_diff: 0.0,
                    examples: Vec::new(),
                    skipped: Some(format!(
                        "needs {need} bytes of threadgroup memory; the device allows {limit}"
                    )),
                });
            }
            run_sample(ctx, &reference, s, seed.wrapping_add(k as u64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_agrees_with_itself_on_every_sample() {
        let cpu = Context::cpu();
        for o in run_all(&cpu, 7).unwrap() {
            assert!(o.passed(), "{}: {:?}", o.name, o.examples);
            assert!(o.elements > 0 || o.skipped.is_some(), "{}", o.name);
        }
    }

    #[test]
    fn comparison_rules() {
        let exact = Check::Exact;
        assert!(same(exact, Literal::F32(f32::NAN), Literal::F32(f32::NAN)).0);
        assert!(!same(exact, Literal::F32(1.0), Literal::F32(f32::NAN)).0);
        assert!(!same(exact, Literal::I32(1), Literal::I32(2)).0);
        let close = Check::Close {
            abs: 0.0,
            rel: 1e-3,
        };
        assert!(same(close, Literal::F32(1.0005), Literal::F32(1.0)).0);
        assert!(!same(close, Literal::F32(1.01), Literal::F32(1.0)).0);
    }
}
