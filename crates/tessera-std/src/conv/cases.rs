//! Registered cases of the causal conv1d: prefill and decode over f32/f16/bf16 with and
//! without SiLU, decode checked to continue a prefill exactly; a rejection per invariant;
//! specialisations (W = 4 as in Mamba/GDN, and 2); bench shapes (Qwen3.5 GDN conv: C = 8192
//! from q, k, v of 16 + 16 key heads and 32 value heads at 128; T up to 32k, B up to 64).

use super::causal_conv1d::{
    causal_conv1d, causal_conv1d_update, conv1d_decode_kernel, conv1d_prefill_kernel, Conv1dArgs,
};
use super::reference::conv1d;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{accuracy, compare, err, merge, random_tensor, rejection_of, zeros, CaseRng};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{KernelDef, Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

/// `[x, w, bias, state_in, out, state_out]` and the reference's view of the inputs.
struct Set {
    t: [Tensor; 6],
    want: (Vec<f64>, Vec<f64>),
}

fn set(
    ctx: &Context,
    rng: &mut CaseRng,
    dt: DType,
    (b, t, c, width): (usize, usize, usize, usize),
    decode: bool,
    silu: bool,
) -> Result<Set, String> {
    let xs: Vec<usize> = if decode { vec![b, c] } else { vec![b, t, c] };
    let (x, xv) = random_tensor(ctx, rng, dt, &xs, -2.0, 2.0)?;
    let (w, wv) = random_tensor(ctx, rng, dt, &[c, width], -1.0, 1.0)?;
    let (bias, bv) = random_tensor(ctx, rng, dt, &[c], -0.5, 0.5)?;
    let (st, sv) = random_tensor(ctx, rng, dt, &[b, c, width - 1], -2.0, 2.0)?;
    let out = ctx.full_nan(dt, &xs).map_err(err)?;
    let so = ctx.full_nan(dt, &[b, c, width - 1]).map_err(err)?;
    let tt = if decode { 1 } else { t };
    let want = conv1d(&xv, &wv, &bv, &sv, (b, tt, c, width), silu);
    Ok(Set {
        t: [x, w, bias, st, out, so],
        want,
    })
}

fn args(t: &[Tensor; 6]) -> Conv1dArgs<'_> {
    Conv1dArgs {
        x: &t[0],
        w: &t[1],
        bias: &t[2],
        state_in: &t[3],
        out: &t[4],
        state_out: &t[5],
    }
}

fn run(ctx: &Context, s: &Set, decode: bool, silu: bool) -> Result<(), String> {
    if decode {
        causal_conv1d_update(ctx, &args(&s.t), silu).map_err(err)
    } else {
        causal_conv1d(ctx, &args(&s.t), silu).map_err(err)
    }
}

fn correct(op: &'static str, dt: DType, dims: (usize, usize, usize, usize), silu: bool) -> Case {
    let decode = op == "causal_conv1d_update";
    let (b, t, c, width) = dims;
    Case {
        op,
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: if decode {
            format!("B={b} C={c} W={width} silu={silu}")
        } else {
            format!("B={b} T={t} C={c} W={width} silu={silu}")
        },
        run: Box::new(move |ctx, rng| {
            let s = set(ctx, rng, dt, dims, decode, silu)?;
            run(ctx, &s, decode, silu)?;
            let o = compare(
                &s.t[4].to_f64_vec().map_err(err)?,
                &s.want.0,
                accuracy(op, dt)?,
            )?;
            let st = compare(
                &s.t[5].to_f64_vec().map_err(err)?,
                &s.want.1,
                accuracy(op, dt)?,
            )?;
            Ok(merge(o, st))
        }),
    }
}

/// Prefill of T tokens then one decode step equals a prefill of T + 1 tokens.
fn continuation(dt: DType) -> Case {
    Case {
        op: "causal_conv1d_update",
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: "continues a prefill".into(),
        run: Box::new(move |ctx, rng| {
            let (b, t, c, width) = (2, 9, 40, 4);
            let (x, xv) = random_tensor(ctx, rng, dt, &[b, t + 1, c], -2.0, 2.0)?;
            let (w, wv) = random_tensor(ctx, rng, dt, &[c, width], -1.0, 1.0)?;
            let (bias, bv) = random_tensor(ctx, rng, dt, &[c], -0.5, 0.5)?;
            let zero = ctx.zeros(dt, &[b, c, width - 1]).map_err(err)?;
            let (want, _) = conv1d(
                &xv,
                &wv,
                &bv,
                &vec![0.0; b * c * 3],
                (b, t + 1, c, width),
                true,
            );
            // Split x into the first T tokens and the last one.
            let all = x.to_f64_vec().map_err(err)?;
            let mut head = Vec::new();
            let mut tail = Vec::new();
            for bi in 0..b {
                head.extend_from_slice(&all[bi * (t + 1) * c..][..t * c]);
                tail.extend_from_slice(&all[(bi * (t + 1) + t) * c..][..c]);
            }
            let (xh, _) = crate::testing::upload(ctx, dt, &head, &[b, t, c])?;
            let (xt, _) = crate::testing::upload(ctx, dt, &tail, &[b, c])?;
            let oh = ctx.full_nan(dt, &[b, t, c]).map_err(err)?;
            let mid = ctx.full_nan(dt, &[b, c, 3]).map_err(err)?;
            let ot = ctx.full_nan(dt, &[b, c]).map_err(err)?;
            let fin = ctx.full_nan(dt, &[b, c, 3]).map_err(err)?;
            let ts = [xh, w.clone(), bias.clone(), zero, oh, mid.clone()];
            causal_conv1d(ctx, &args(&ts), true).map_err(err)?;
            let ts2 = [xt, w, bias, mid, ot.clone(), fin];
            causal_conv1d_update(ctx, &args(&ts2), true).map_err(err)?;
            let last: Vec<f64> = (0..b)
                .flat_map(|bi| want[(bi * (t + 1) + t) * c..][..c].to_vec())
                .collect();
            compare(
                &ot.to_f64_vec().map_err(err)?,
                &last,
                accuracy("causal_conv1d_update", dt)?,
            )
        }),
    }
}

type Tamper = fn(&Context, &mut [Tensor; 6]) -> Result<(), String>;

fn reject(op: &'static str, what: &str, reason: &'static str, tamper: Tamper) -> Case {
    let decode = op == "causal_conv1d_update";
    rejection_of(op, what, reason, move |ctx, rng| {
        let mut s = set(ctx, rng, DType::F32, (2, 5, 16, 4), decode, true)?;
        tamper(ctx, &mut s.t)?;
        let (c, t, untouched) = (ctx.clone(), s.t.clone(), s.t[4].clone());
        Ok((
            untouched,
            Box::new(move || {
                if decode {
                    causal_conv1d_update(&c, &args(&t), true)
                } else {
                    causal_conv1d(&c, &args(&t), true)
                }
            }),
        ))
    })
}

fn rejections(op: &'static str) -> Vec<Case> {
    let decode = op == "causal_conv1d_update";
    let mut v = vec![
        reject(op, "integer x", "`x` must be one of", |c, t| {
            let s = t[0].shape().to_vec();
            t[0] = zeros(c, DType::U32, &s)?;
            Ok(())
        }),
        reject(op, "w dtype", "`w` must be f32", |c, t| {
            t[1] = zeros(c, DType::F16, &[16, 4])?;
            Ok(())
        }),
        reject(op, "width 9", "a width W of 2..=8", |c, t| {
            t[1] = zeros(c, DType::F32, &[16, 9])?;
            Ok(())
        }),
        reject(op, "bias shape", "`bias` must have shape [16]", |c, t| {
            t[2] = zeros(c, DType::F32, &[15])?;
            Ok(())
        }),
        reject(
            op,
            "state shape",
            "`state_in` must have shape [2, 16, 3]",
            |c, t| {
                t[3] = zeros(c, DType::F32, &[2, 16, 4])?;
                Ok(())
            },
        ),
        reject(
            op,
            "state_out shape",
            "`state_out` must have shape [2, 16, 3]",
            |c, t| {
                t[5] = zeros(c, DType::F32, &[2, 3, 16])?;
                Ok(())
            },
        ),
        reject(op, "out aliases x", "aliases `x`", |_, t| {
            t[4] = t[0].clone();
            Ok(())
        }),
        reject(
            op,
            "state_out aliases state_in",
            "aliases `state_in`",
            |_, t| {
                t[5] = t[3].clone();
                Ok(())
            },
        ),
    ];
    if decode {
        v.push(reject(op, "x not [B, C]", "`x` must be [B, C]", |c, t| {
            t[0] = zeros(c, DType::F32, &[2, 1, 16])?;
            Ok(())
        }));
        v.push(reject(
            op,
            "channels differ",
            "`x` must have shape [2, 16]",
            |c, t| {
                t[0] = zeros(c, DType::F32, &[2, 17])?;
                Ok(())
            },
        ));
        v.push(reject(
            op,
            "out shape",
            "`out` must have shape [2, 16]",
            |c, t| {
                t[4] = zeros(c, DType::F32, &[2, 15])?;
                Ok(())
            },
        ));
    } else {
        v.push(reject(
            op,
            "empty T",
            "`x` must be [B, T, C] with B, T > 0",
            |c, t| {
                t[0] = zeros(c, DType::F32, &[2, 0, 16])?;
                Ok(())
            },
        ));
        v.push(reject(
            op,
            "channels differ",
            "`x` must have shape [2, 5, 16]",
            |c, t| {
                t[0] = zeros(c, DType::F32, &[2, 5, 8])?;
                Ok(())
            },
        ));
        v.push(reject(
            op,
            "out shape",
            "`out` must have shape [2, 5, 16]",
            |c, t| {
                t[4] = zeros(c, DType::F32, &[2, 4, 16])?;
                Ok(())
            },
        ));
    }
    v
}

pub(super) fn prefill_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(correct("causal_conv1d", dt, (2, 37, 48, 4), true));
        v.push(correct("causal_conv1d", dt, (1, 2, 300, 4), false));
        v.push(correct("causal_conv1d", dt, (3, 5, 20, 2), true));
    }
    v.extend(rejections("causal_conv1d"));
    v
}

pub(super) fn decode_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(correct("causal_conv1d_update", dt, (3, 1, 300, 4), true));
        v.push(correct("causal_conv1d_update", dt, (1, 1, 33, 2), false));
        v.push(continuation(dt));
    }
    v.extend(rejections("causal_conv1d_update"));
    v
}

fn uses(def: &'static KernelDef) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        for width in [2u32, 4] {
            for act in [0u32, 1] {
                v.push(KernelUse {
                    def,
                    spec: Specialization::new(
                        vec![t],
                        vec![Literal::U32(width), Literal::U32(act)],
                    ),
                });
            }
        }
    }
    v
}

/// Qwen3.5 GDN conv channels: 2·16·128 + 32·128.
const QWEN_C: usize = 8192;

fn bench(
    op: &'static str,
    kernel: &'static str,
    dt: DType,
    b: usize,
    t: usize,
    quick: bool,
) -> BenchCase {
    let decode = op == "causal_conv1d_update";
    let c = QWEN_C;
    let tt = if decode { 1 } else { t };
    let es = dt.size_bytes();
    BenchCase {
        op,
        kernel,
        dtype: dt,
        shape: if decode {
            format!("B={b} C={c} W=4")
        } else {
            format!("B={b} T={t} C={c} W=4")
        },
        bytes: ((2 * b * tt * c + 2 * b * c * 3 + 5 * c) * es) as u64,
        flops: (2 * 4 * b * tt * c) as u64,
        quick,
        prepare: Box::new(move |ctx, rng| {
            let s = set(ctx, rng, dt, (b, t, c, 4), decode, true)?;
            let output = s.t[4].clone();
            let (cx, tensors) = (ctx.clone(), s.t);
            Ok(PreparedBench {
                launch: Box::new(move || {
                    let ts = Set {
                        t: tensors.clone(),
                        want: (vec![], vec![]),
                    };
                    run(&cx, &ts, decode, true)
                }),
                output,
                reference: s.want.0,
            })
        }),
    }
}

pub(super) fn prefill_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in [DType::BF16, DType::F16] {
        v.push(bench(
            "causal_conv1d",
            "conv1d_prefill_kernel",
            dt,
            1,
            64,
            true,
        ));
        v.push(bench(
            "causal_conv1d",
            "conv1d_prefill_kernel",
            dt,
            1,
            4096,
            false,
        ));
        v.push(bench(
            "causal_conv1d",
            "conv1d_prefill_kernel",
            dt,
            1,
            32768,
            false,
        ));
    }
    v
}

pub(super) fn decode_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in [DType::BF16, DType::F16] {
        for b in [1, 64] {
            v.push(bench(
                "causal_conv1d_update",
                "conv1d_decode_kernel",
                dt,
                b,
                1,
                b == 1,
            ));
        }
    }
    v
}

pub(super) fn causal_conv1d_kernels() -> Vec<KernelUse> {
    uses(&conv1d_prefill_kernel::DEF)
}

pub(super) fn causal_conv1d_update_kernels() -> Vec<KernelUse> {
    uses(&conv1d_decode_kernel::DEF)
}
