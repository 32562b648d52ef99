//! Cases of `gdn_chunked_prefill`: against the f64 recurrence for lengths
//! around the chunk size (1, 63, 64, 65), packed variable-length batches with empty
//! sequences, GQA, initial state, every supported Dk; prefill-then-decode equal to the
//! recurrence over the whole sequence; a rejection per invariant; specialisations; bench
//! shapes (Qwen3.5: Hk 16, Hv 32, K = V = 128, T up to 32k). Long sequences (1000, 4096)
//! are `cargo test` tests below, to keep the registered suite fast.

use crate::error::OpError;
use crate::gdn::decode::{gdn_decode_step, DecodeArgs};
use crate::gdn::prefill::{gdn_chunked_prefill, staging_dtype, PrefillArgs, STAGED_DK_MAX};
use crate::gdn::prefill_kernels::{
    gdn_chunk_out_kernel, gdn_chunk_prep_kernel, gdn_chunk_state_kernel,
    gdn_chunk_state_wide_kernel,
};
use crate::gdn::prefill_recurrent::gdn_recurrent_prefill_kernel;
use crate::gdn::prefill_workspace::{equal_sequences, GdnPrefillWorkspace, PrefillShape};
use crate::gdn::reference::{recurrent, GdnInputs, GdnShape};
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, Outcome, PreparedBench};
use crate::testing::{accuracy, compare, err, expect_rejection, merge, upload, CaseRng, Tolerance};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

const OP: &str = "gdn_chunked_prefill";

/// A prefill problem.
#[derive(Clone, Debug)]
pub(crate) struct Pre {
    pub t: DType,
    pub s: DType,
    pub lens: Vec<usize>,
    pub shape: GdnShape,
    pub h0: bool,
}

impl Pre {
    fn name(&self) -> String {
        let s = self.shape;
        format!(
            "lens={:?} Hk={} Hv={} Dk={} Dv={} h0={} state={}",
            self.lens, s.hk, s.hv, s.dk, s.dv, self.h0, self.s
        )
    }
}

/// The tolerance of a prefill output (o and the final state alike): the op's declared
/// accuracy for its activations' dtype.
pub(crate) fn prefill_tolerance(t: DType) -> Result<Tolerance, String> {
    accuracy("gdn_chunked_prefill", t)
}

/// Random rows of unit L2 norm (as q and k are in models), `rows × d`.
fn unit_rows(rng: &mut CaseRng, rows: usize, d: usize) -> Vec<f64> {
    let mut v = Vec::with_capacity(rows * d);
    for _ in 0..rows {
        let r: Vec<f64> = (0..d).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let norm = r.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-6);
        v.extend(r.iter().map(|x| x / norm));
    }
    v
}

fn uniform(rng: &mut CaseRng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| rng.uniform(lo, hi)).collect()
}

/// Inputs (tensors and the values the reference sees) of a prefill.
pub(crate) struct PreSet {
    pub q: (Tensor, Vec<f64>),
    pub k: (Tensor, Vec<f64>),
    pub v: (Tensor, Vec<f64>),
    pub g: (Tensor, Vec<f64>),
    pub beta: (Tensor, Vec<f64>),
    pub h0: Option<(Tensor, Vec<f64>)>,
    pub o: Tensor,
    pub fin: Tensor,
    pub cu: Vec<usize>,
    pub scale: f32,
}

pub(crate) fn pre_set(ctx: &Context, rng: &mut CaseRng, p: &Pre) -> Result<PreSet, String> {
    let s = p.shape;
    let mut cu = vec![0];
    for l in &p.lens {
        cu.push(cu[cu.len() - 1] + l);
    }
    let t = cu[cu.len() - 1];
    let n = p.lens.len();
    let q = upload(ctx, p.t, &unit_rows(rng, t * s.hk, s.dk), &[t, s.hk, s.dk])?;
    let k = upload(ctx, p.t, &unit_rows(rng, t * s.hk, s.dk), &[t, s.hk, s.dk])?;
    let v = upload(
        ctx,
        p.t,
        &uniform(rng, t * s.hv * s.dv, -1.0, 1.0),
        &[t, s.hv, s.dv],
    )?;
    let g = upload(
        ctx,
        DType::F32,
        &uniform(rng, t * s.hv, -0.4, 0.0),
        &[t, s.hv],
    )?;
    let beta = upload(
        ctx,
        DType::F32,
        &uniform(rng, t * s.hv, 0.05, 1.0),
        &[t, s.hv],
    )?;
    let st = [n, s.hv, s.dv, s.dk];
    let h0 = if p.h0 {
        Some(upload(
            ctx,
            p.s,
            &uniform(rng, n * s.state_len(), -0.5, 0.5),
            &st,
        )?)
    } else {
        None
    };
    let o = ctx.full_nan(p.t, &[t, s.hv, s.dv]).map_err(err)?;
    let fin = ctx.full_nan(p.s, &st).map_err(err)?;
    Ok(PreSet {
        q,
        k,
        v,
        g,
        beta,
        h0,
        o,
        fin,
        cu,
        scale: 1.0 / (s.dk as f32).sqrt(),
    })
}

pub(crate) fn pre_args(x: &PreSet) -> PrefillArgs<'_> {
    PrefillArgs {
        q: &x.q.0,
        k: &x.k.0,
        v: &x.v.0,
        g: &x.g.0,
        beta: &x.beta.0,
        h0: x.h0.as_ref().map(|h| &h.0),
        o: &x.o,
        final_state: &x.fin,
    }
}

pub(crate) fn pre_reference(x: &PreSet, shape: GdnShape) -> (Vec<f64>, Vec<f64>) {
    recurrent(&GdnInputs {
        q: &x.q.1,
        k: &x.k.1,
        v: &x.v.1,
        g: &x.g.1,
        beta: &x.beta.1,
        h0: x.h0.as_ref().map(|h| &h.1[..]),
        cu_seqlens: &x.cu,
        shape,
        scale: x.scale as f64,
    })
}

/// The workspace for a prefill of `x`'s shape and boundaries, made as a caller would:
/// once, outside the op call.
pub(crate) fn workspace_for(ctx: &Context, x: &PreSet) -> Result<GdnPrefillWorkspace, OpError> {
    let (qs, vs) = (x.q.0.shape(), x.v.0.shape());
    GdnPrefillWorkspace::new(
        ctx,
        &PrefillShape {
            dtype: x.q.0.dtype(),
            hv: vs[vs.len() - 2],
            dk: qs[qs.len() - 1],
            dv: vs[vs.len() - 1],
            cu_seqlens: &x.cu,
        },
    )
}

/// Runs a prefill and compares its output and final state with the recurrence.
pub(crate) fn run_prefill(ctx: &Context, rng: &mut CaseRng, p: &Pre) -> Result<Outcome, String> {
    let x = pre_set(ctx, rng, p)?;
    let ws = workspace_for(ctx, &x).map_err(err)?;
    check_prefill(ctx, &x, p.shape, &ws)
}

/// Runs the prefill of `x` in `ws` and compares it with the recurrence.
pub(crate) fn check_prefill(
    ctx: &Context,
    x: &PreSet,
    shape: GdnShape,
    ws: &GdnPrefillWorkspace,
) -> Result<Outcome, String> {
    let p = Pre {
        t: x.q.0.dtype(),
        s: x.fin.dtype(),
        lens: vec![x.cu[x.cu.len() - 1]],
        shape,
        h0: x.h0.is_some(),
    };
    gdn_chunked_prefill(ctx, &pre_args(x), ws, x.scale).map_err(err)?;
    let (want_o, want_s) = pre_reference(x, p.shape);
    let o = compare(
        &x.o.to_f64_vec().map_err(err)?,
        &want_o,
        prefill_tolerance(p.t)?,
    )
    .map_err(|e| format!("o: {e}"))?;
    let s = compare(
        &x.fin.to_f64_vec().map_err(err)?,
        &want_s,
        prefill_tolerance(p.t)?,
    )
    .map_err(|e| format!("final state: {e}"))?;
    Ok(merge(o, s))
}

fn correct(p: Pre) -> Case {
    Case {
        op: "gdn_chunked_prefill",
        kind: CaseKind::Correctness,
        dtype: Some(p.t),
        name: p.name(),
        run: Box::new(move |ctx, rng| run_prefill(ctx, rng, &p)),
    }
}

/// Prefill of `len` tokens, then a decode step from its final state, equals the
/// recurrence over `len + 1` tokens.
fn then_decode(t: DType) -> Case {
    Case {
        op: "gdn_chunked_prefill",
        kind: CaseKind::Correctness,
        dtype: Some(t),
        name: "prefill 70 then decode 1".into(),
        run: Box::new(move |ctx, rng| {
            let shape = GdnShape {
                hk: 1,
                hv: 2,
                dk: 64,
                dv: 16,
            };
            let len = 70;
            let p = Pre {
                t,
                s: DType::F32,
                lens: vec![len + 1],
                shape,
                h0: false,
            };
            let x = pre_set(ctx, rng, &p)?;
            let (want_o, _) = pre_reference(&x, shape);
            // Prefill the first `len` tokens (a prefix of the same tensors' values).
            let head = |v: &[f64], per: usize| v[..len * per].to_vec();
            let tail = |v: &[f64], per: usize| v[len * per..].to_vec();
            let (q, k, v) = (&x.q.1, &x.k.1, &x.v.1);
            let (hk, hv, dk, dv) = (shape.hk, shape.hv, shape.dk, shape.dv);
            let q1 = upload(ctx, t, &head(q, hk * dk), &[len, hk, dk])?;
            let k1 = upload(ctx, t, &head(k, hk * dk), &[len, hk, dk])?;
            let v1 = upload(ctx, t, &head(v, hv * dv), &[len, hv, dv])?;
            let g1 = upload(ctx, DType::F32, &head(&x.g.1, hv), &[len, hv])?;
            let b1 = upload(ctx, DType::F32, &head(&x.beta.1, hv), &[len, hv])?;
            let o1 = ctx.full_nan(t, &[len, hv, dv]).map_err(err)?;
            let mid = ctx.full_nan(DType::F32, &[1, hv, dv, dk]).map_err(err)?;
            let ws = GdnPrefillWorkspace::new(
                ctx,
                &PrefillShape {
                    dtype: t,
                    hv,
                    dk,
                    dv,
                    cu_seqlens: &equal_sequences(1, len),
                },
            )
            .map_err(err)?;
            gdn_chunked_prefill(
                ctx,
                &PrefillArgs {
                    q: &q1.0,
                    k: &k1.0,
                    v: &v1.0,
                    g: &g1.0,
                    beta: &b1.0,
                    h0: None,
                    o: &o1,
                    final_state: &mid,
                },
                &ws,
                x.scale,
            )
            .map_err(err)?;
            let q2 = upload(ctx, t, &tail(q, hk * dk), &[1, hk, dk])?;
            let k2 = upload(ctx, t, &tail(k, hk * dk), &[1, hk, dk])?;
            let v2 = upload(ctx, t, &tail(v, hv * dv), &[1, hv, dv])?;
            let g2 = upload(ctx, DType::F32, &tail(&x.g.1, hv), &[1, hv])?;
            let b2 = upload(ctx, DType::F32, &tail(&x.beta.1, hv), &[1, hv])?;
            let o2 = ctx.full_nan(t, &[1, hv, dv]).map_err(err)?;
            let fin = ctx.full_nan(DType::F32, &[1, hv, dv, dk]).map_err(err)?;
            gdn_decode_step(
                ctx,
                &DecodeArgs {
                    q: &q2.0,
                    k: &k2.0,
                    v: &v2.0,
                    g: &g2.0,
                    beta: &b2.0,
                    state_in: &mid,
                    state_out: &fin,
                    o: &o2,
                },
                x.scale,
            )
            .map_err(err)?;
            let mut got = o1.to_f64_vec().map_err(err)?;
            got.extend(o2.to_f64_vec().map_err(err)?);
            compare(&got, &want_o, prefill_tolerance(t)?)
        }),
    }
}

type Tamper = fn(&Context, &mut PreSet) -> Result<(), String>;
type MakeWorkspace = fn(&Context, &PreSet) -> Result<GdnPrefillWorkspace, OpError>;

fn reject(what: &str, reason: &'static str, tamper: Tamper) -> Case {
    reject_in(what, reason, tamper, workspace_for)
}

/// A call of `x` tampered with, in the workspace `make` builds (the planning counts as
/// part of the call: a refusal there is a refusal too).
fn reject_in(what: &str, reason: &'static str, tamper: Tamper, make: MakeWorkspace) -> Case {
    Case {
        op: "gdn_chunked_prefill",
        kind: CaseKind::Rejection,
        dtype: None,
        name: what.to_string(),
        run: Box::new(move |ctx, rng| {
            let p = Pre {
                t: DType::F32,
                s: DType::F32,
                lens: vec![5, 3],
                shape: GdnShape {
                    hk: 1,
                    hv: 2,
                    dk: 64,
                    dv: 16,
                },
                h0: true,
            };
            let mut x = pre_set(ctx, rng, &p)?;
            tamper(ctx, &mut x)?;
            let out = x.o.clone();
            expect_rejection(&out, reason, || {
                let ws = make(ctx, &x)?;
                gdn_chunked_prefill(ctx, &pre_args(&x), &ws, x.scale)
            })
        }),
    }
}

fn z(ctx: &Context, dt: DType, shape: &[usize]) -> Result<(Tensor, Vec<f64>), String> {
    Ok((ctx.zeros(dt, shape).map_err(err)?, vec![]))
}

pub(crate) fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    let small = GdnShape {
        hk: 1,
        hv: 2,
        dk: 64,
        dv: 16,
    };
    for t in FLOAT_DTYPES {
        for len in [1, 63, 64, 65] {
            v.push(correct(Pre {
                t,
                s: DType::F32,
                lens: vec![len],
                shape: small,
                h0: false,
            }));
        }
        v.push(correct(Pre {
            t,
            s: t,
            lens: vec![3, 70, 0, 20],
            shape: GdnShape {
                hk: 2,
                hv: 4,
                dk: 128,
                dv: 32,
            },
            h0: true,
        }));
        v.push(then_decode(t));
    }
    v.push(correct(Pre {
        t: DType::BF16,
        s: DType::F32,
        lens: vec![40],
        shape: GdnShape {
            hk: 1,
            hv: 1,
            dk: 256,
            dv: 48,
        },
        h0: true,
    }));
    v.extend([
        reject("integer q", "`q` must be one of", |c, x| {
            x.q = z(c, DType::U32, &[8, 1, 64])?;
            Ok(())
        }),
        reject("v dtype", "`v` must be f32", |c, x| {
            x.v = z(c, DType::F16, &[8, 2, 16])?;
            Ok(())
        }),
        reject("g not f32", "`g` must be f32", |c, x| {
            x.g = z(c, DType::BF16, &[8, 2])?;
            Ok(())
        }),
        reject("q rank", "`q` must be [T, …] or [B, T, …]", |c, x| {
            x.q = z(c, DType::F32, &[8, 64])?;
            Ok(())
        }),
        reject("v tokens", "`v` must have the token dimensions", |c, x| {
            x.v = z(c, DType::F32, &[9, 2, 16])?;
            Ok(())
        }),
        reject("Dk = 32", "Dk must be 64, 128 or 256", |c, x| {
            x.q = z(c, DType::F32, &[8, 1, 32])?;
            Ok(())
        }),
        reject(
            "Hv not a multiple of Hk",
            "must be a positive multiple of Hk",
            |c, x| {
                x.q = z(c, DType::F32, &[8, 3, 64])?;
                Ok(())
            },
        ),
        reject("Dv = 24", "must be a multiple of 16", |c, x| {
            x.v = z(c, DType::F32, &[8, 2, 24])?;
            Ok(())
        }),
        reject("k shape", "`k` must have shape [8, 1, 64]", |c, x| {
            x.k = z(c, DType::F32, &[8, 1, 128])?;
            Ok(())
        }),
        reject("beta shape", "`beta` must have shape [8, 2]", |c, x| {
            x.beta = z(c, DType::F32, &[8, 1])?;
            Ok(())
        }),
        reject("o shape", "`o` must have shape [8, 2, 16]", |c, x| {
            x.o = c.zeros(DType::F32, &[8, 2, 32]).map_err(err)?;
            Ok(())
        }),
        reject(
            "cu_seqlens not ending at T",
            "which do not end at T = 8",
            |_, x| {
                x.cu = vec![0, 5, 9];
                Ok(())
            },
        ),
        reject("cu_seqlens decreasing", "`cu_seqlens` must be", |_, x| {
            x.cu = vec![0, 6, 5, 8];
            Ok(())
        }),
        reject(
            "state dtype",
            "`final_state` must be f32, got f16",
            |c, x| {
                x.fin = c.zeros(DType::F16, &[2, 2, 16, 64]).map_err(err)?;
                Ok(())
            },
        ),
        reject(
            "state shape",
            "`final_state` must have shape [2, 2, 16, 64]",
            |c, x| {
                x.fin = c.zeros(DType::F32, &[1, 2, 16, 64]).map_err(err)?;
                Ok(())
            },
        ),
        reject("h0 shape", "`h0` must have shape", |c, x| {
            x.h0 = Some(z(c, DType::F32, &[2, 2, 64, 16])?);
            Ok(())
        }),
        reject("o aliases v", "aliases `v`", |_, x| {
            x.o = x.v.0.clone();
            Ok(())
        }),
        reject("final_state aliases h0", "aliases `h0`", |_, x| {
            if let Some(h) = &x.h0 {
                x.fin = h.0.clone();
            }
            Ok(())
        }),
        reject("scale infinite", "`scale` must be finite", |_, x| {
            x.scale = f32::INFINITY;
            Ok(())
        }),
        reject_in(
            "workspace too small",
            "the workspace holds",
            |_, _| Ok(()),
            |c, x| {
                let shape = PrefillShape {
                    dtype: DType::F32,
                    hv: 1,
                    dk: 64,
                    dv: 16,
                    cu_seqlens: &x.cu,
                };
                GdnPrefillWorkspace::new(c, &shape)
            },
        ),
        reject_in(
            "workspace for another dtype",
            "the workspace is for f16 activations",
            |_, _| Ok(()),
            |c, x| {
                let shape = PrefillShape {
                    dtype: DType::F16,
                    hv: 2,
                    dk: 64,
                    dv: 16,
                    cu_seqlens: &x.cu,
                };
                GdnPrefillWorkspace::new(c, &shape)
            },
        ),
        reject_in(
            "workspace on another context",
            "made on another context",
            |_, _| Ok(()),
            |c, x| {
                let other = Context::by_kind(c.kind(), 0).map_err(crate::error::runtime(OP))?;
                workspace_for(&other, x)
            },
        ),
        reject_in(
            "workspace planned for too many sequences",
            "the workspace holds 1 and 1",
            |_, _| Ok(()),
            |c, x| {
                let shape = PrefillShape {
                    dtype: DType::F32,
                    hv: 2,
                    dk: 64,
                    dv: 16,
                    cu_seqlens: &[0, 8],
                };
                let mut ws = GdnPrefillWorkspace::new(c, &shape)?;
                ws.plan(&x.cu)?;
                Ok(ws)
            },
        ),
    ]);
    v
}

pub(crate) fn kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    let cfgs = [
        (64u32, 16u32, 2u32, 1u32),
        (128, 32, 4, 2),
        (256, 48, 1, 1),
        (128, 128, 32, 16),
    ];
    let lit = |x: u32| Literal::U32(x);
    for &(dk, dv, hv, hk) in &cfgs {
        v.push(KernelUse {
            def: &gdn_recurrent_prefill_kernel::DEF,
            spec: Specialization::new(
                vec![DType::F32, DType::F32],
                vec![lit(dk), lit(dv), lit(hv), lit(hk)],
            ),
        });
    }
    for t in [DType::F16, DType::BF16] {
        let p = staging_dtype(t);
        for &(dk, dv, hv, hk) in &cfgs {
            // The f32 redo of flagged pairs, for either state dtype.
            for s in [DType::F32, t] {
                v.push(KernelUse {
                    def: &gdn_recurrent_prefill_kernel::DEF,
                    spec: Specialization::new(vec![t, s], vec![lit(dk), lit(dv), lit(hv), lit(hk)]),
                });
            }
            v.push(KernelUse {
                def: &gdn_chunk_prep_kernel::DEF,
                spec: Specialization::new(vec![t, p], vec![lit(dk), lit(dv), lit(hv), lit(hk)]),
            });
            let consts = vec![lit(dk), lit(dv), lit(hv)];
            let staged = dk as usize <= STAGED_DK_MAX;
            if staged {
                v.push(KernelUse {
                    def: &gdn_chunk_out_kernel::DEF,
                    spec: Specialization::new(vec![t, p], consts.clone()),
                });
            }
            for s in [DType::F32, t] {
                let (def, dtypes) = if staged {
                    (&gdn_chunk_state_kernel::DEF, vec![s, p])
                } else {
                    (&gdn_chunk_state_wide_kernel::DEF, vec![t, s, p])
                };
                v.push(KernelUse {
                    def,
                    spec: Specialization::new(dtypes, consts.clone()),
                });
            }
        }
    }
    v
}

pub(crate) fn benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    let qwen = GdnShape {
        hk: 16,
        hv: 32,
        dk: 128,
        dv: 128,
    };
    for t in [DType::BF16, DType::F16] {
        for (tl, quick) in [(256usize, true), (4096, false), (32768, false)] {
            let p = Pre {
                t,
                s: DType::F32,
                lens: vec![tl],
                shape: qwen,
                h0: false,
            };
            let es = t.size_bytes();
            let bytes = tl * (2 * qwen.hk * qwen.dk + 2 * qwen.hv * qwen.dv) * es
                + tl * qwen.hv * 8
                + qwen.state_len() * 4;
            let flops =
                tl * qwen.hv * (4 * 64 * qwen.dk + 6 * qwen.dk * qwen.dv + 4 * 64 * qwen.dv);
            v.push(BenchCase {
                op: "gdn_chunked_prefill",
                kernel: "gdn_chunk_state_kernel",
                dtype: t,
                shape: format!("T={tl} Hk=16 Hv=32 Dk=128 Dv=128"),
                bytes: bytes as u64,
                flops: flops as u64,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let x = pre_set(ctx, rng, &p)?;
                    let ws = workspace_for(ctx, &x).map_err(err)?;
                    let (reference, _) = pre_reference(&x, p.shape);
                    let output = x.o.clone();
                    let c = ctx.clone();
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            gdn_chunked_prefill(&c, &pre_args(&x), &ws, x.scale).map_err(err)
                        }),
                        output,
                        reference,
                    })
                }),
            });
        }
    }
    v
}
#[cfg(test)]
mod tests {
    use super::*;

    fn long(len: usize, t: DType) {
        let ctx = Context::cpu();
        let mut rng = CaseRng::new(len as u64);
        let p = Pre {
            t,
            s: DType::F32,
            lens: vec![len],
            shape: GdnShape {
                hk: 1,
                hv: 1,
                dk: 64,
                dv: 16,
            },
            h0: true,
        };
        run_prefill(&ctx, &mut rng, &p).unwrap();
    }

    /// One workspace, made for the larger of two batches, serves both (and the larger one
    /// again after the smaller): each call equals the recurrence.
    #[test]
    fn a_workspace_is_reused_across_shapes() {
        let ctx = Context::cpu();
        let mut rng = CaseRng::new(5);
        let wide = GdnShape {
            hk: 1,
            hv: 2,
            dk: 64,
            dv: 32,
        };
        let narrow = GdnShape { dv: 16, ..wide };
        let p = |lens: Vec<usize>, shape| Pre {
            t: DType::F16,
            s: DType::F32,
            lens,
            shape,
            h0: true,
        };
        let big = pre_set(&ctx, &mut rng, &p(vec![70, 0, 60], wide)).unwrap();
        let small = pre_set(&ctx, &mut rng, &p(vec![20, 65], narrow)).unwrap();
        let mut ws = workspace_for(&ctx, &big).unwrap();
        let bytes = ws.bytes();
        check_prefill(&ctx, &big, wide, &ws).unwrap();
        ws.plan(&small.cu).unwrap();
        check_prefill(&ctx, &small, narrow, &ws).unwrap();
        ws.plan(&big.cu).unwrap();
        check_prefill(&ctx, &big, wide, &ws).unwrap();
        assert_eq!(ws.bytes(), bytes);
    }

    /// A workspace too small for the call is refused and the outputs keep their NaN.
    #[test]
    fn a_small_workspace_is_refused_and_nothing_is_written() {
        let ctx = Context::cpu();
        let mut rng = CaseRng::new(6);
        let shape = GdnShape {
            hk: 1,
            hv: 2,
            dk: 64,
            dv: 32,
        };
        let x = pre_set(
            &ctx,
            &mut rng,
            &Pre {
                t: DType::BF16,
                s: DType::F32,
                lens: vec![130],
                shape,
                h0: false,
            },
        )
        .unwrap();
        let ws = GdnPrefillWorkspace::new(
            &ctx,
            &PrefillShape {
                dtype: DType::BF16,
                hv: 2,
                dk: 64,
                dv: 16,
                cu_seqlens: &x.cu,
            },
        )
        .unwrap();
        let e = gdn_chunked_prefill(&ctx, &pre_args(&x), &ws, x.scale).unwrap_err();
        assert!(e.to_string().contains("the workspace holds"), "{e}");
        for t in [&x.o, &x.fin] {
            assert!(t.to_f64_vec().unwrap().iter().all(|v| v.is_nan()));
        }
        let mut ws = ws;
        let e = ws.plan(&[0, 64, 130, 130, 130]).unwrap_err();
        assert!(e.to_string().contains("the workspace holds"), "{e}");
        assert_eq!(ws.cu_seqlens(), &x.cu[..]);
    }

    #[test]
    fn long_sequence_1000_equals_the_recurrence() {
        long(1000, DType::BF16);
    }

    #[test]
    fn long_sequence_4096_equals_the_recurrence() {
        long(4096, DType::F16);
    }
}
