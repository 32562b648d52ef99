//! Registered cases of the selective-scan step: f32/f16/bf16 activations with f32 or
//! activation-dtype state, N of 16 (Mamba-1) and 128; a rejection per invariant;
//! specialisations; bench shapes (Mamba-2.8B: D = 5120, N = 16; B = 1..64).

use super::reference::{selective_scan_step as reference, ScanStep};
use super::selective_scan::{selective_scan_step, selective_scan_step_kernel, ScanArgs};
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, Outcome, PreparedBench};
use crate::testing::{accuracy, compare, err, random_tensor, rejection_of, zeros, CaseRng};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

/// `[state_in, x, dt, a, b, c, d, z, dt_bias, state_out, y]`.
struct Set {
    t: [Tensor; 11],
    want: (Vec<f64>, Vec<f64>),
}

fn set(
    ctx: &Context,
    rng: &mut CaseRng,
    t: DType,
    s: DType,
    (bt, dim, n): (usize, usize, usize),
) -> Result<Set, String> {
    let (st, sv) = random_tensor(ctx, rng, s, &[bt, dim, n], -1.0, 1.0)?;
    let (x, xv) = random_tensor(ctx, rng, t, &[bt, dim], -2.0, 2.0)?;
    let (dt, dtv) = random_tensor(ctx, rng, t, &[bt, dim], -3.0, 1.0)?;
    let (a, av) = random_tensor(ctx, rng, DType::F32, &[dim, n], -4.0, -0.1)?;
    let (b, bv) = random_tensor(ctx, rng, t, &[bt, n], -1.0, 1.0)?;
    let (c, cv) = random_tensor(ctx, rng, t, &[bt, n], -1.0, 1.0)?;
    let (d, dv) = random_tensor(ctx, rng, t, &[dim], -1.0, 1.0)?;
    let (z, zv) = random_tensor(ctx, rng, t, &[bt, dim], -3.0, 3.0)?;
    let (db, dbv) = random_tensor(ctx, rng, t, &[dim], -1.0, 1.0)?;
    let so = ctx.full_nan(s, &[bt, dim, n]).map_err(err)?;
    let y = ctx.full_nan(t, &[bt, dim]).map_err(err)?;
    let want = reference(&ScanStep {
        state: &sv,
        x: &xv,
        dt: &dtv,
        a: &av,
        b: &bv,
        c: &cv,
        d: &dv,
        z: &zv,
        dt_bias: &dbv,
        dims: (bt, dim, n),
    });
    Ok(Set {
        t: [st, x, dt, a, b, c, d, z, db, so, y],
        want,
    })
}

fn args(t: &[Tensor; 11]) -> ScanArgs<'_> {
    ScanArgs {
        state_in: &t[0],
        x: &t[1],
        dt: &t[2],
        a: &t[3],
        b: &t[4],
        c: &t[5],
        d: &t[6],
        z: &t[7],
        dt_bias: &t[8],
        state_out: &t[9],
        y: &t[10],
    }
}

fn correct(t: DType, s: DType, dims: (usize, usize, usize)) -> Case {
    Case {
        op: "selective_scan_step",
        kind: CaseKind::Correctness,
        dtype: Some(t),
        name: format!("B={} D={} N={} state={s}", dims.0, dims.1, dims.2),
        run: Box::new(move |ctx, rng| {
            let st = set(ctx, rng, t, s, dims)?;
            selective_scan_step(ctx, &args(&st.t)).map_err(err)?;
            let y = compare(
                &st.t[10].to_f64_vec().map_err(err)?,
                &st.want.0,
                accuracy("selective_scan_step", t)?,
            )?;
            let h = compare(
                &st.t[9].to_f64_vec().map_err(err)?,
                &st.want.1,
                accuracy("selective_scan_step", s)?,
            )?;
            Ok(Outcome {
                checked: y.checked + h.checked,
                max_abs_err: y.max_abs_err.max(h.max_abs_err),
                max_rel_err: y.max_rel_err.max(h.max_rel_err),
                note: String::new(),
            })
        }),
    }
}

type Tamper = fn(&Context, &mut [Tensor; 11]) -> Result<(), String>;

fn reject(what: &str, reason: &'static str, tamper: Tamper) -> Case {
    rejection_of("selective_scan_step", what, reason, move |ctx, rng| {
        let mut s = set(ctx, rng, DType::F32, DType::F32, (2, 8, 4))?;
        tamper(ctx, &mut s.t)?;
        let (c, t, untouched) = (ctx.clone(), s.t.clone(), s.t[10].clone());
        Ok((
            untouched,
            Box::new(move || selective_scan_step(&c, &args(&t))),
        ))
    })
}

pub(super) fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        v.push(correct(t, DType::F32, (3, 70, 16)));
        v.push(correct(t, t, (2, 33, 128)));
    }
    v.extend([
        reject("integer x", "`x` must be one of", |c, t| {
            t[1] = zeros(c, DType::I32, &[2, 8])?;
            Ok(())
        }),
        reject("dt dtype", "`dt` must be f32", |c, t| {
            t[2] = zeros(c, DType::F16, &[2, 8])?;
            Ok(())
        }),
        reject("a not f32", "`a` must be f32", |c, t| {
            t[3] = zeros(c, DType::BF16, &[8, 4])?;
            Ok(())
        }),
        reject("state dtype", "`state_in` must be f32, got f16", |c, t| {
            t[0] = zeros(c, DType::F16, &[2, 8, 4])?;
            Ok(())
        }),
        reject("state_out dtype", "`state_out` must be f32", |c, t| {
            t[9] = zeros(c, DType::F16, &[2, 8, 4])?;
            Ok(())
        }),
        reject("N above 256", "1 <= N <= 256", |c, t| {
            t[0] = zeros(c, DType::F32, &[2, 8, 300])?;
            Ok(())
        }),
        reject("x shape", "`x` must have shape [2, 8]", |c, t| {
            t[1] = zeros(c, DType::F32, &[2, 9])?;
            Ok(())
        }),
        reject("a shape", "`a` must have shape [8, 4]", |c, t| {
            t[3] = zeros(c, DType::F32, &[4, 8])?;
            Ok(())
        }),
        reject("b shape", "`b` must have shape [2, 4]", |c, t| {
            t[4] = zeros(c, DType::F32, &[2, 5])?;
            Ok(())
        }),
        reject("c shape", "`c` must have shape [2, 4]", |c, t| {
            t[5] = zeros(c, DType::F32, &[1, 4])?;
            Ok(())
        }),
        reject("d shape", "`d` must have shape [8]", |c, t| {
            t[6] = zeros(c, DType::F32, &[7])?;
            Ok(())
        }),
        reject("dt_bias shape", "`dt_bias` must have shape [8]", |c, t| {
            t[8] = zeros(c, DType::F32, &[2, 8])?;
            Ok(())
        }),
        reject(
            "state_out shape",
            "`state_out` must have shape [2, 8, 4]",
            |c, t| {
                t[9] = zeros(c, DType::F32, &[2, 8, 5])?;
                Ok(())
            },
        ),
        reject("y aliases x", "aliases `x`", |_, t| {
            t[10] = t[1].clone();
            Ok(())
        }),
        reject(
            "state_out aliases state_in",
            "aliases `state_in`",
            |_, t| {
                t[9] = t[0].clone();
                Ok(())
            },
        ),
    ]);
    v
}

pub(super) fn kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        for s in [DType::F32, t] {
            for n in [16u32, 128] {
                if s == t && t == DType::F32 && n == 16 && !v.is_empty() {
                    continue;
                }
                v.push(KernelUse {
                    def: &selective_scan_step_kernel::DEF,
                    spec: Specialization::new(vec![t, s], vec![Literal::U32(n)]),
                });
            }
        }
    }
    v
}

pub(super) fn benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    let (dim, n) = (5120usize, 16usize);
    for t in [DType::BF16, DType::F16] {
        for b in [1usize, 64] {
            v.push(BenchCase {
                op: "selective_scan_step",
                kernel: "selective_scan_step_kernel",
                dtype: t,
                shape: format!("B={b} D={dim} N={n} state=f32"),
                bytes: (2 * b * dim * n * 4 + dim * n * 4 + b * dim * 4 * t.size_bytes()) as u64,
                flops: (6 * b * dim * n) as u64,
                quick: b == 1,
                prepare: Box::new(move |ctx, rng| {
                    let s = set(ctx, rng, t, DType::F32, (b, dim, n))?;
                    let output = s.t[10].clone();
                    let (c, tensors) = (ctx.clone(), s.t);
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            selective_scan_step(&c, &args(&tensors)).map_err(err)
                        }),
                        output,
                        reference: s.want.0,
                    })
                }),
            });
        }
    }
    v
}
