//! Cases of `gdn_prep_decode_step` (the prep fused with the decode step): correctness
//! against the f64 prep and recurrence, a rejection per invariant, its specialisations
//! and bench shapes.

use super::*;

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
                accuracy("gdn_prep_decode_step", d.t)?,
            )?;
            let s = compare(
                &set.t[8].to_f64_vec().map_err(err)?,
                &set.want_s,
                accuracy("gdn_prep_decode_step", d.s)?,
            )?;
            Ok(merge(o, s))
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

pub(crate) fn prep_cases() -> Vec<Case> {
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

pub(crate) fn prep_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for t in [DType::BF16, DType::F16] {
        for b in [1usize, 8, 32, 64] {
            let d = Dec {
                t,
                s: DType::F32,
                b,
                shape: qwen(),
            };
            let names = ("gdn_prep_decode_step", "gdn_prep_decode_kernel");
            v.push(decode_bench(names, d, move |ctx, rng| {
                let set = prep_set(ctx, rng, d)?;
                let (c, scale) = (ctx.clone(), set.scale);
                let output = set.t[9].clone();
                let tensors = set.t;
                let launch = move || {
                    let shape = pshape(d.shape);
                    gdn_prep_decode_step(&c, &prep_args(&tensors), shape, EPS, scale).map_err(err)
                };
                Ok(PreparedBench {
                    launch: Box::new(launch),
                    output,
                    reference: set.want_o,
                })
            }));
        }
    }
    v
}

pub(crate) fn gdn_prep_decode_step_kernels() -> Vec<KernelUse> {
    uses(&gdn_prep_decode_kernel::DEF, &all_cfgs(), false)
}
