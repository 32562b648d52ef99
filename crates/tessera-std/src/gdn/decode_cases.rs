//! Registered cases of the two decode steps: correctness over f32/f16/bf16 activations
//! with f32 or activation-dtype state, GQA and every supported Dk; a rejection per
//! invariant; the specialisations; decode bench shapes (Qwen3.5/3.6: Hk 16, Hv 32,
//! Dk = Dv = 128, B = 1..64).

use super::decode::{gdn_decode_kernel, gdn_decode_step, DecodeArgs};
use super::prep_decode::{
    gdn_prep_decode_kernel, gdn_prep_decode_step, PrepDecodeArgs, PrepDecodeShape,
};
use super::reference::{prep, recurrent, GdnInputs, GdnShape};
use super::validate::decode_lanes;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, Outcome, PreparedBench};
use crate::testing::{compare, expect_rejection, random_tensor, tolerance, CaseRng};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{KernelDef, Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

const EPS: f32 = 1e-6;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Merges the outcomes of comparing two outputs.
pub(crate) fn both(a: Outcome, b: Outcome) -> Outcome {
    Outcome {
        checked: a.checked + b.checked,
        max_abs_err: a.max_abs_err.max(b.max_abs_err),
        max_rel_err: a.max_rel_err.max(b.max_rel_err),
        note: String::new(),
    }
}

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

fn decode_case(d: Dec) -> Case {
    Case {
        op: "gdn_decode_step",
        kind: CaseKind::Correctness,
        dtype: Some(d.t),
        name: d.name(),
        run: Box::new(move |ctx, rng| {
            let set = decode_set(ctx, rng, d)?;
            gdn_decode_step(ctx, &decode_args(&set.t), set.scale).map_err(err)?;
            let o = compare(
                &set.t[7].to_f64_vec().map_err(err)?,
                &set.want_o,
                tolerance(d.t),
            )?;
            let s = compare(
                &set.t[6].to_f64_vec().map_err(err)?,
                &set.want_s,
                tolerance(d.s),
            )?;
            Ok(both(o, s))
        }),
    }
}

/// A valid f32 problem with one tensor replaced.
type Tamper = fn(&Context, &mut [Tensor; 8], &mut f32) -> Result<(), String>;

fn decode_reject(what: &str, reason: &'static str, tamper: Tamper) -> Case {
    Case {
        op: "gdn_decode_step",
        kind: CaseKind::Rejection,
        dtype: None,
        name: what.to_string(),
        run: Box::new(move |ctx, rng| {
            let d = Dec {
                t: DType::F32,
                s: DType::F32,
                b: 2,
                shape: GdnShape {
                    hk: 1,
                    hv: 2,
                    dk: 64,
                    dv: 8,
                },
            };
            let mut set = decode_set(ctx, rng, d)?;
            let mut scale = set.scale;
            tamper(ctx, &mut set.t, &mut scale)?;
            let out = set.t[7].clone();
            expect_rejection(&out, reason, || {
                gdn_decode_step(ctx, &decode_args(&set.t), scale)
            })
        }),
    }
}

fn zeros(ctx: &Context, dt: DType, shape: &[usize]) -> Result<Tensor, String> {
    ctx.zeros(dt, shape).map_err(err)
}

fn decode_rejections() -> Vec<Case> {
    vec![
        decode_reject(
            "integer q",
            "`q` must be one of f32, f16, bf16",
            |c, t, _| {
                t[0] = zeros(c, DType::U32, &[2, 1, 64])?;
                Ok(())
            },
        ),
        decode_reject("k dtype != q dtype", "`k` must be f32", |c, t, _| {
            t[1] = zeros(c, DType::F16, &[2, 1, 64])?;
            Ok(())
        }),
        decode_reject("o dtype != q dtype", "`o` must be f32", |c, t, _| {
            t[7] = zeros(c, DType::BF16, &[2, 2, 8])?;
            Ok(())
        }),
        decode_reject("g not f32", "`g` must be f32", |c, t, _| {
            t[3] = zeros(c, DType::F16, &[2, 2])?;
            Ok(())
        }),
        decode_reject("beta not f32", "`beta` must be f32", |c, t, _| {
            t[4] = zeros(c, DType::BF16, &[2, 2])?;
            Ok(())
        }),
        decode_reject("q not 3-D", "`q` must be [B, Hk, Dk]", |c, t, _| {
            t[0] = zeros(c, DType::F32, &[2, 64])?;
            Ok(())
        }),
        decode_reject("v batch != q batch", "`v` must be [B = 2", |c, t, _| {
            t[2] = zeros(c, DType::F32, &[3, 2, 8])?;
            Ok(())
        }),
        decode_reject("empty batch", "must not be empty", |c, t, _| {
            t[0] = zeros(c, DType::F32, &[0, 1, 64])?;
            t[2] = zeros(c, DType::F32, &[0, 2, 8])?;
            Ok(())
        }),
        decode_reject("Dk = 96", "Dk must be 64, 128 or 256", |c, t, _| {
            t[0] = zeros(c, DType::F32, &[2, 1, 96])?;
            Ok(())
        }),
        decode_reject(
            "Hv not a multiple of Hk",
            "must be a multiple of Hk",
            |c, t, _| {
                t[0] = zeros(c, DType::F32, &[2, 3, 64])?;
                Ok(())
            },
        ),
        decode_reject(
            "k shape != q shape",
            "`k` must have shape [2, 1, 64]",
            |c, t, _| {
                t[1] = zeros(c, DType::F32, &[2, 2, 64])?;
                Ok(())
            },
        ),
        decode_reject("g shape", "`g` must have shape [2, 2]", |c, t, _| {
            t[3] = zeros(c, DType::F32, &[2, 1])?;
            Ok(())
        }),
        decode_reject("beta shape", "`beta` must have shape [2, 2]", |c, t, _| {
            t[4] = zeros(c, DType::F32, &[4])?;
            Ok(())
        }),
        decode_reject("o shape", "`o` must have shape [2, 2, 8]", |c, t, _| {
            t[7] = zeros(c, DType::F32, &[2, 2, 9])?;
            Ok(())
        }),
        decode_reject(
            "f16 state with f32 activations",
            "`state_in` must be f32, got f16",
            |c, t, _| {
                t[5] = zeros(c, DType::F16, &[2, 2, 8, 64])?;
                t[6] = zeros(c, DType::F16, &[2, 2, 8, 64])?;
                Ok(())
            },
        ),
        decode_reject(
            "state_out dtype != state_in",
            "`state_out` must be f32",
            |c, t, _| {
                t[6] = zeros(c, DType::F16, &[2, 2, 8, 64])?;
                Ok(())
            },
        ),
        decode_reject(
            "state shape",
            "`state_in` must have shape [2, 2, 8, 64]",
            |c, t, _| {
                t[5] = zeros(c, DType::F32, &[2, 2, 64, 8])?;
                Ok(())
            },
        ),
        decode_reject(
            "state_out shape",
            "`state_out` must have shape",
            |c, t, _| {
                t[6] = zeros(c, DType::F32, &[2, 2, 8, 32])?;
                Ok(())
            },
        ),
        decode_reject("o aliases v", "aliases `v`", |_, t, _| {
            t[7] = t[2].clone();
            Ok(())
        }),
        decode_reject(
            "state_out aliases state_in",
            "aliases `state_in`",
            |_, t, _| {
                t[6] = t[5].clone();
                Ok(())
            },
        ),
        decode_reject("scale NaN", "`scale` must be finite", |_, _, s| {
            *s = f32::NAN;
            Ok(())
        }),
    ]
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

pub(super) fn decode_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        for (i, (b, shape)) in shapes().into_iter().enumerate() {
            let s = if i == 1 { t } else { DType::F32 };
            v.push(decode_case(Dec { t, s, b, shape }));
        }
    }
    v.extend(decode_rejections());
    v
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

fn decode_bytes(d: Dec) -> u64 {
    let s = d.shape;
    let state = 2 * d.b * s.state_len() * d.s.size_bytes();
    let act = d.b * (2 * s.hk * s.dk + 2 * s.hv * s.dv) * d.t.size_bytes() + d.b * s.hv * 8;
    (state + act) as u64
}

pub(super) fn decode_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for t in [DType::BF16, DType::F16, DType::F32] {
        for s in [DType::F32, t] {
            if s == t && t == DType::F32 {
                continue;
            }
            for b in [1usize, 8, 32, 64] {
                let d = Dec {
                    t,
                    s,
                    b,
                    shape: qwen(),
                };
                v.push(BenchCase {
                    op: "gdn_decode_step",
                    kernel: "gdn_decode_kernel",
                    dtype: t,
                    shape: d.name(),
                    bytes: decode_bytes(d),
                    flops: (4 * b * qwen().state_len()) as u64,
                    quick: b == 1,
                    prepare: Box::new(move |ctx, rng| {
                        let set = decode_set(ctx, rng, d)?;
                        let (c, scale) = (ctx.clone(), set.scale);
                        let output = set.t[7].clone();
                        let tensors = set.t;
                        Ok(PreparedBench {
                            launch: Box::new(move || {
                                gdn_decode_step(&c, &decode_args(&tensors), scale).map_err(err)
                            }),
                            output,
                            reference: set.want_o,
                        })
                    }),
                });
            }
        }
    }
    v
}

// ── fused prep + decode ─────────────────────────────────────────────────────

struct PrepSet {
    t: [Tensor; 10],
    want_o: Vec<f64>,
    want_s: Vec<f64>,
    scale: f32,
}

fn prep_set(ctx: &Context, rng: &mut CaseRng, d: Dec) -> Result<PrepSet, String> {
    let s = d.shape;
    let b = d.b;
    let width = 2 * s.hk * s.dk + s.hv * s.dv;
    let (conv, cv) = random_tensor(ctx, rng, d.t, &[b, width], -2.0, 2.0)?;
    let (a_log, alv) = random_tensor(ctx, rng, d.t, &[s.hv], -2.0, 1.0)?;
    let (dt, dtv) = random_tensor(ctx, rng, d.t, &[s.hv], -1.0, 1.0)?;
    let (a, av) = random_tensor(ctx, rng, d.t, &[b, s.hv], -4.0, 2.0)?;
    let (bb, bv) = random_tensor(ctx, rng, d.t, &[b, s.hv], -3.0, 3.0)?;
    let (wq, wqv) = random_tensor(ctx, rng, d.t, &[s.hk * s.dk], 0.5, 1.5)?;
    let (wk, wkv) = random_tensor(ctx, rng, d.t, &[s.hk * s.dk], 0.5, 1.5)?;
    let st = [b, s.hv, s.dv, s.dk];
    let (sin, sv) = random_tensor(ctx, rng, d.s, &st, -1.0, 1.0)?;
    let sout = ctx.full_nan(d.s, &st).map_err(err)?;
    let o = ctx.full_nan(d.t, &[b, s.hv, s.dv]).map_err(err)?;
    let scale = 1.0 / (s.dk as f32).sqrt();
    let (q, k, v, g, beta) = prep(&cv, &alv, &dtv, &av, &bv, &wqv, &wkv, EPS as f64, s);
    let cu: Vec<usize> = (0..=b).collect();
    let (want_o, want_s) = recurrent(&GdnInputs {
        q: &q,
        k: &k,
        v: &v,
        g: &g,
        beta: &beta,
        h0: Some(&sv),
        cu_seqlens: &cu,
        shape: s,
        scale: scale as f64,
    });
    Ok(PrepSet {
        t: [conv, a_log, dt, a, bb, wq, wk, sin, sout, o],
        want_o,
        want_s,
        scale,
    })
}

fn prep_args(t: &[Tensor; 10]) -> PrepDecodeArgs<'_> {
    PrepDecodeArgs {
        conv_out: &t[0],
        a_log: &t[1],
        dt_bias: &t[2],
        a: &t[3],
        b: &t[4],
        wq: &t[5],
        wk: &t[6],
        state_in: &t[7],
        state_out: &t[8],
        o: &t[9],
    }
}

fn pshape(s: GdnShape) -> PrepDecodeShape {
    PrepDecodeShape {
        hk: s.hk,
        hv: s.hv,
        dk: s.dk,
        dv: s.dv,
    }
}

fn prep_case(d: Dec) -> Case {
    Case {
        op: "gdn_prep_decode_step",
        kind: CaseKind::Correctness,
        dtype: Some(d.t),
        name: d.name(),
        run: Box::new(move |ctx, rng| {
            let set = prep_set(ctx, rng, d)?;
            gdn_prep_decode_step(ctx, &prep_args(&set.t), pshape(d.shape), EPS, set.scale)
                .map_err(err)?;
            let o = compare(
                &set.t[9].to_f64_vec().map_err(err)?,
                &set.want_o,
                tolerance(d.t),
            )?;
            let s = compare(
                &set.t[8].to_f64_vec().map_err(err)?,
                &set.want_s,
                tolerance(d.s),
            )?;
            Ok(both(o, s))
        }),
    }
}

type PrepTamper = fn(&Context, &mut [Tensor; 10], &mut GdnShape, &mut f32) -> Result<(), String>;

fn prep_reject(what: &str, reason: &'static str, tamper: PrepTamper) -> Case {
    Case {
        op: "gdn_prep_decode_step",
        kind: CaseKind::Rejection,
        dtype: None,
        name: what.to_string(),
        run: Box::new(move |ctx, rng| {
            let mut shape = GdnShape {
                hk: 1,
                hv: 2,
                dk: 64,
                dv: 8,
            };
            let d = Dec {
                t: DType::F32,
                s: DType::F32,
                b: 2,
                shape,
            };
            let mut set = prep_set(ctx, rng, d)?;
            let mut eps = EPS;
            tamper(ctx, &mut set.t, &mut shape, &mut eps)?;
            let out = set.t[9].clone();
            expect_rejection(&out, reason, || {
                gdn_prep_decode_step(ctx, &prep_args(&set.t), pshape(shape), eps, set.scale)
            })
        }),
    }
}

pub(super) fn prep_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        for (i, (b, shape)) in shapes().into_iter().enumerate() {
            let s = if i == 0 { t } else { DType::F32 };
            v.push(prep_case(Dec { t, s, b, shape }));
        }
    }
    // conv_out width 2·64 + 2·8 = 144.
    v.extend([
        prep_reject(
            "integer conv_out",
            "`conv_out` must be one of",
            |c, t, _, _| {
                t[0] = zeros(c, DType::I32, &[2, 144])?;
                Ok(())
            },
        ),
        prep_reject("a_log dtype", "`a_log` must be f32", |c, t, _, _| {
            t[1] = zeros(c, DType::F16, &[2])?;
            Ok(())
        }),
        prep_reject("weights dtype", "`wk` must be f32", |c, t, _, _| {
            t[6] = zeros(c, DType::BF16, &[64])?;
            Ok(())
        }),
        prep_reject("Dk = 32", "Dk must be 64, 128 or 256", |_, _, s, _| {
            s.dk = 32;
            Ok(())
        }),
        prep_reject(
            "Hv not a multiple of Hk",
            "must be a positive multiple of Hk",
            |_, _, s, _| {
                s.hk = 3;
                Ok(())
            },
        ),
        prep_reject(
            "conv_out width",
            "`conv_out` must be [B, 2·Hk·Dk + Hv·Dv = 144]",
            |c, t, _, _| {
                t[0] = zeros(c, DType::F32, &[2, 143])?;
                Ok(())
            },
        ),
        prep_reject(
            "dt_bias shape",
            "`dt_bias` must have shape [2]",
            |c, t, _, _| {
                t[2] = zeros(c, DType::F32, &[3])?;
                Ok(())
            },
        ),
        prep_reject("a shape", "`a` must have shape [2, 2]", |c, t, _, _| {
            t[3] = zeros(c, DType::F32, &[2])?;
            Ok(())
        }),
        prep_reject("b shape", "`b` must have shape [2, 2]", |c, t, _, _| {
            t[4] = zeros(c, DType::F32, &[2, 3])?;
            Ok(())
        }),
        prep_reject("wq shape", "`wq` must have shape [64]", |c, t, _, _| {
            t[5] = zeros(c, DType::F32, &[128])?;
            Ok(())
        }),
        prep_reject("state shape", "`state_in` must have shape", |c, t, _, _| {
            t[7] = zeros(c, DType::F32, &[2, 2, 8, 32])?;
            Ok(())
        }),
        prep_reject("state dtype", "`state_out` must be f32", |c, t, _, _| {
            t[8] = zeros(c, DType::BF16, &[2, 2, 8, 64])?;
            Ok(())
        }),
        prep_reject("o shape", "`o` must have shape [2, 2, 8]", |c, t, _, _| {
            t[9] = zeros(c, DType::F32, &[2, 16])?;
            Ok(())
        }),
        prep_reject(
            "state_out aliases state_in",
            "aliases `state_in`",
            |_, t, _, _| {
                t[8] = t[7].clone();
                Ok(())
            },
        ),
        prep_reject(
            "eps negative",
            "`eps` must be finite and >= 0",
            |_, _, _, e| {
                *e = -1.0;
                Ok(())
            },
        ),
    ]);
    v
}

pub(super) fn prep_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for t in [DType::BF16, DType::F16] {
        for b in [1usize, 8, 32, 64] {
            let d = Dec {
                t,
                s: DType::F32,
                b,
                shape: qwen(),
            };
            v.push(BenchCase {
                op: "gdn_prep_decode_step",
                kernel: "gdn_prep_decode_kernel",
                dtype: t,
                shape: d.name(),
                bytes: decode_bytes(d),
                flops: (4 * b * qwen().state_len()) as u64,
                quick: b == 1,
                prepare: Box::new(move |ctx, rng| {
                    let set = prep_set(ctx, rng, d)?;
                    let (c, scale) = (ctx.clone(), set.scale);
                    let output = set.t[9].clone();
                    let tensors = set.t;
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            gdn_prep_decode_step(
                                &c,
                                &prep_args(&tensors),
                                pshape(d.shape),
                                EPS,
                                scale,
                            )
                            .map_err(err)
                        }),
                        output,
                        reference: set.want_o,
                    })
                }),
            });
        }
    }
    v
}

pub(super) fn gdn_decode_step_kernels() -> Vec<KernelUse> {
    uses(&gdn_decode_kernel::DEF, &all_cfgs(), true)
}

pub(super) fn gdn_prep_decode_step_kernels() -> Vec<KernelUse> {
    uses(&gdn_prep_decode_kernel::DEF, &all_cfgs(), false)
}
