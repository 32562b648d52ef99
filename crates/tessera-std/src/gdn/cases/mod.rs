//! Registered Gated DeltaNet cases, one file per op, around the decode fixtures they
//! share here: the decode problem (activations and state dtypes, batch, head layout),
//! its random inputs, the shapes every supported Dk is checked at, and the Qwen3.5/3.6
//! bench geometry (Hk 16, Hv 32, Dk = Dv = 128, B = 1..64).

use super::decode::{gdn_decode_kernel, gdn_decode_step, DecodeArgs};
use super::prep_decode::{
    gdn_prep_decode_kernel, gdn_prep_decode_step, PrepDecodeArgs, PrepDecodeShape,
};
use super::reference::{prep, recurrent, GdnInputs, GdnShape};
use super::validate::decode_lanes;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{
    accuracy, compare, err, expect_rejection, merge, random_tensor, zeros, CaseRng,
};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{KernelDef, Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

const EPS: f32 = 1e-6;

/// A decode problem: activations dtype, state dtype, batch and head layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dec {
    pub t: DType,
    pub s: DType,
    pub b: usize,
    pub shape: GdnShape,
}

impl Dec {
    fn name(&self) -> String {
        let s = self.shape;
        format!(
            "B={} Hk={} Hv={} Dk={} Dv={} state={}",
            self.b, s.hk, s.hv, s.dk, s.dv, self.s
        )
    }
}

/// The tensors of a plain decode step and the values the reference sees.
struct DecodeSet {
    t: [Tensor; 8],
    scale: f32,
    want_o: Vec<f64>,
    want_s: Vec<f64>,
}

fn decode_set(ctx: &Context, rng: &mut CaseRng, d: Dec) -> Result<DecodeSet, String> {
    let s = d.shape;
    let b = d.b;
    let (q, qv) = random_tensor(ctx, rng, d.t, &[b, s.hk, s.dk], -1.0, 1.0)?;
    let (k, kv) = random_tensor(ctx, rng, d.t, &[b, s.hk, s.dk], -1.0, 1.0)?;
    let (v, vv) = random_tensor(ctx, rng, d.t, &[b, s.hv, s.dv], -1.0, 1.0)?;
    let (g, gv) = random_tensor(ctx, rng, DType::F32, &[b, s.hv], -1.0, 0.0)?;
    let (beta, bv) = random_tensor(ctx, rng, DType::F32, &[b, s.hv], 0.0, 1.0)?;
    let st = [b, s.hv, s.dv, s.dk];
    let (sin, sv) = random_tensor(ctx, rng, d.s, &st, -1.0, 1.0)?;
    let sout = ctx.full_nan(d.s, &st).map_err(err)?;
    let o = ctx.full_nan(d.t, &[b, s.hv, s.dv]).map_err(err)?;
    let scale = 1.0 / (s.dk as f32).sqrt();
    let cu: Vec<usize> = (0..=b).collect();
    let (want_o, want_s) = recurrent(&GdnInputs {
        q: &qv,
        k: &kv,
        v: &vv,
        g: &gv,
        beta: &bv,
        h0: Some(&sv),
        cu_seqlens: &cu,
        shape: s,
        scale: scale as f64,
    });
    Ok(DecodeSet {
        t: [q, k, v, g, beta, sin, sout, o],
        scale,
        want_o,
        want_s,
    })
}

fn decode_args(t: &[Tensor; 8]) -> DecodeArgs<'_> {
    DecodeArgs {
        q: &t[0],
        k: &t[1],
        v: &t[2],
        g: &t[3],
        beta: &t[4],
        state_in: &t[5],
        state_out: &t[6],
        o: &t[7],
    }
}

fn shapes() -> Vec<(usize, GdnShape)> {
    vec![
        (
            2,
            GdnShape {
                hk: 1,
                hv: 2,
                dk: 64,
                dv: 16,
            },
        ),
        (
            3,
            GdnShape {
                hk: 2,
                hv: 4,
                dk: 128,
                dv: 10,
            },
        ),
        (
            1,
            GdnShape {
                hk: 1,
                hv: 1,
                dk: 256,
                dv: 8,
            },
        ),
    ]
}

/// The specialisations `(dk, dv, hv, hk)` cases and benches use, for every dtype pair;
/// `lanes` adds the decode step's `(lanes, lg)`, which follow from Dk and the state dtype.
fn uses(def: &'static KernelDef, cfgs: &[(usize, GdnShape)], lanes: bool) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        for s in [DType::F32, t] {
            if s == t && t == DType::F32 && !v.is_empty() {
                continue;
            }
            for (_, sh) in cfgs {
                v.push(KernelUse {
                    def,
                    spec: Specialization::new(vec![t, s], {
                        let mut c: Vec<Literal> = [sh.dk, sh.dv, sh.hv, sh.hk]
                            .iter()
                            .map(|&x| Literal::U32(x as u32))
                            .collect();
                        if lanes {
                            let (l, lg) = decode_lanes(sh.dk, s);
                            c.extend([Literal::U32(l), Literal::U32(lg)]);
                        }
                        c
                    }),
                });
            }
        }
    }
    v
}

fn qwen() -> GdnShape {
    GdnShape {
        hk: 16,
        hv: 32,
        dk: 128,
        dv: 128,
    }
}

fn all_cfgs() -> Vec<(usize, GdnShape)> {
    let mut c = shapes();
    c.push((1, qwen()));
    c
}

/// A decode-step bench of `op` at `d` (quick at batch 1): `prepare` makes its tensors and
/// the launch.
fn decode_bench(
    (op, kernel): (&'static str, &'static str),
    d: Dec,
    prepare: impl Fn(&Context, &mut CaseRng) -> Result<PreparedBench, String> + Send + Sync + 'static,
) -> BenchCase {
    BenchCase {
        op,
        kernel,
        dtype: d.t,
        shape: d.name(),
        bytes: decode_bytes(d),
        flops: (4 * d.b * d.shape.state_len()) as u64,
        quick: d.b == 1,
        prepare: Box::new(prepare),
    }
}

/// The state read and written once, the activations once.
fn decode_bytes(d: Dec) -> u64 {
    let s = d.shape;
    let state = 2 * d.b * s.state_len() * d.s.size_bytes();
    let act = d.b * (2 * s.hk * s.dk + 2 * s.hv * s.dv) * d.t.size_bytes() + d.b * s.hv * 8;
    (state + act) as u64
}

mod gdn_chunked_prefill;
mod gdn_decode_step;
mod gdn_prep_decode_step;

pub(super) use gdn_chunked_prefill::{benches, cases, kernels};
pub(super) use gdn_decode_step::{decode_benches, decode_cases, gdn_decode_step_kernels};
pub(super) use gdn_prep_decode_step::{gdn_prep_decode_step_kernels, prep_benches, prep_cases};
