//! Cases of `gdn_decode_step`: correctness over f32/f16/bf16 activations with f32 or
//! activation-dtype state, GQA and every supported Dk; a rejection per invariant; its
//! specialisations and decode bench shapes.

use super::*;

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
                accuracy("gdn_decode_step", d.t)?,
            )?;
            let s = compare(
                &set.t[6].to_f64_vec().map_err(err)?,
                &set.want_s,
                accuracy("gdn_decode_step", d.s)?,
            )?;
            Ok(merge(o, s))
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

pub(crate) fn decode_cases() -> Vec<Case> {
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

pub(crate) fn decode_benches() -> Vec<BenchCase> {
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
                let names = ("gdn_decode_step", "gdn_decode_kernel");
                v.push(decode_bench(names, d, move |ctx, rng| {
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
                }));
            }
        }
    }
    v
}

pub(crate) fn gdn_decode_step_kernels() -> Vec<KernelUse> {
    uses(&gdn_decode_kernel::DEF, &all_cfgs(), true)
}
