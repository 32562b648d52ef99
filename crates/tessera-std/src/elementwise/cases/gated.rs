//! Cases of the gated activations (`silu_mul`, `gelu_mul` and their packed forms): every
//! float dtype and activation over shapes with a partial 16-byte run, one-element rows and
//! odd `d` (scalar packed runs), gates far enough out to reach every piece of the erf, a
//! non-finite case, the packed layout's odd width, kernels and benches.

use super::*;
use crate::elementwise::activation::Activation;
use crate::elementwise::gated::{
    act_mul, act_mul_kernel, act_mul_packed, act_mul_packed_kernel, gelu_mul, gelu_mul_packed,
    silu_mul, silu_mul_packed, vec_width, GeluApproximation,
};
use crate::testing::{zeros_of, Spec};
use tessera_runtime::{Context, Tensor};

/// Builds a refused call's tensors: the output it must leave untouched, and the call.
type BadCall = fn(&Context) -> Result<(Tensor, Refused), String>;

/// One op's name, its activation and the f64 activation of the reference.
#[derive(Clone, Copy)]
pub(crate) struct Gated {
    pub op: &'static str,
    pub act: Activation,
    pub f: fn(f64) -> f64,
}

pub(crate) const SILU: Gated = Gated {
    op: "silu_mul",
    act: Activation::Silu,
    f: reference::silu,
};
pub(crate) const GELU_ERF: Gated = Gated {
    op: "gelu_mul",
    act: Activation::GeluErf,
    f: reference::gelu_erf,
};
pub(crate) const GELU_TANH: Gated = Gated {
    op: "gelu_mul",
    act: Activation::GeluTanh,
    f: reference::gelu_tanh,
};

fn packed_op(g: Gated) -> &'static str {
    match g.op {
        "silu_mul" => "silu_mul_packed",
        _ => "gelu_mul_packed",
    }
}

fn act_name(act: Activation) -> &'static str {
    match act {
        Activation::Silu => "silu",
        Activation::GeluErf => "erf",
        Activation::GeluTanh => "tanh",
    }
}

/// Gates across every piece of the activations (the erf's polynomial, its tail, and where
/// it rounds to ±1), up projections of either sign.
const GATE: (f64, f64) = (-7.0, 7.0);
const UP: (f64, f64) = (-2.0, 2.0);

fn separate(g: Gated, dtype: DType, shape: Vec<usize>) -> Case {
    Case {
        op: g.op,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("{} shape={shape:?}", act_name(g.act)),
        run: Box::new(move |ctx, rng| {
            let (gate, gv) = random_tensor(ctx, rng, dtype, &shape, GATE.0, GATE.1)?;
            let (up, uv) = random_tensor(ctx, rng, dtype, &shape, UP.0, UP.1)?;
            let out = ctx.full_nan(dtype, &shape).map_err(err)?;
            act_mul(g.op, ctx, &gate, &up, &out, g.act).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            compare(
                &got,
                &reference::act_mul(g.f, &gv, &uv),
                accuracy(g.op, dtype)?,
            )
        }),
    }
}

fn packed(g: Gated, dtype: DType, rows: usize, d: usize) -> Case {
    let op = packed_op(g);
    Case {
        op,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("{} rows={rows} d={d}", act_name(g.act)),
        run: Box::new(move |ctx, rng| {
            let (gu, gv) = random_tensor(ctx, rng, dtype, &[rows, 2 * d], GATE.0, GATE.1)?;
            let out = ctx.full_nan(dtype, &[rows, d]).map_err(err)?;
            act_mul_packed(op, ctx, &gu, &out, g.act).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            compare(
                &got,
                &reference::act_mul_packed(g.f, &gv, d),
                accuracy(op, dtype)?,
            )
        }),
    }
}

/// NaN and ±∞ in gate or up reach exactly their own output element.
fn non_finite(g: Gated, dtype: DType) -> Case {
    Case {
        op: g.op,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("{} non-finite inputs", act_name(g.act)),
        run: Box::new(move |ctx, rng| {
            let n = 203;
            let (_, mut gv) = random_tensor(ctx, rng, dtype, &[n], GATE.0, GATE.1)?;
            let (_, mut uv) = random_tensor(ctx, rng, dtype, &[n], UP.0, UP.1)?;
            let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
            for (k, &s) in specials.iter().enumerate() {
                gv[7 + 31 * k] = s;
                uv[100 + 29 * k] = s;
            }
            let (gate, _) = upload(ctx, dtype, &gv, &[n])?;
            let (up, _) = upload(ctx, dtype, &uv, &[n])?;
            let out = ctx.full_nan(dtype, &[n]).map_err(err)?;
            act_mul(g.op, ctx, &gate, &up, &out, g.act).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            let touched: Vec<bool> = gv
                .iter()
                .zip(&uv)
                .map(|(a, b)| !a.is_finite() || !b.is_finite())
                .collect();
            compare_non_finite(
                &got,
                &touched,
                |i| (g.f)(gv[i]) * uv[i],
                accuracy(g.op, dtype)?,
            )
        }),
    }
}

pub(crate) fn cases(g: Gated) -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for shape in [
            vec![1, 1],
            vec![1, 7],
            vec![3, 37],
            vec![5, 1000],
            vec![2, 3, 64],
            vec![4, 4096],
        ] {
            v.push(separate(g, dtype, shape));
        }
        v.push(non_finite(g, dtype));
    }
    const EMPTY: [Spec; 3] = [(DType::F16, &[3, 0]); 3];
    let empty: BadCall = if g.op == "silu_mul" {
        |ctx| {
            let [gate, up, out] = zeros_of(ctx, EMPTY)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || silu_mul(&c, &gate, &up, &o)) as Refused,
            ))
        }
    } else {
        |ctx| {
            let [gate, up, out] = zeros_of(ctx, EMPTY)?;
            let (c, o) = (ctx.clone(), out.clone());
            let none = GeluApproximation::None;
            Ok((
                out,
                Box::new(move || gelu_mul(&c, &gate, &up, &o, none)) as Refused,
            ))
        }
    };
    v.push(rejection(g.op, "empty rows", "must not be empty", empty));
    v
}

pub(crate) fn packed_cases(g: Gated) -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for (rows, d) in [
            (1, 1),
            (3, 2),
            (4, 3),
            (2, 4),
            (5, 37),
            (7, 128),
            (3, 1000),
            (2, 4104),
        ] {
            v.push(packed(g, dtype, rows, d));
        }
    }
    let odd: BadCall = if g.op == "silu_mul" {
        |ctx| {
            let (gu, out) = (
                zeros(ctx, DType::F32, &[2, 9])?,
                zeros(ctx, DType::F32, &[2, 4])?,
            );
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || silu_mul_packed(&c, &gu, &o)) as Refused,
            ))
        }
    } else {
        |ctx| {
            let (gu, out) = (
                zeros(ctx, DType::F32, &[2, 9])?,
                zeros(ctx, DType::F32, &[2, 4])?,
            );
            let (c, o) = (ctx.clone(), out.clone());
            let tanh = GeluApproximation::Tanh;
            Ok((
                out,
                Box::new(move || gelu_mul_packed(&c, &gu, &o, tanh)) as Refused,
            ))
        }
    };
    v.push(rejection(
        packed_op(g),
        "odd gate_up width",
        "must be even",
        odd,
    ));
    v
}

pub(crate) fn kernels(acts: &[Activation]) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for &act in acts {
        for dt in FLOAT_DTYPES {
            v.push(KernelUse {
                def: &act_mul_kernel::DEF,
                spec: Specialization::new(
                    vec![dt],
                    vec![Literal::U32(act.code()), Literal::U32(vec_width(dt))],
                ),
            });
        }
    }
    v
}

pub(crate) fn packed_kernels(acts: &[Activation]) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for &act in acts {
        for dt in FLOAT_DTYPES {
            let mut w = vec_width(dt);
            while w >= 1 {
                v.push(KernelUse {
                    def: &act_mul_packed_kernel::DEF,
                    spec: Specialization::new(
                        vec![dt],
                        vec![Literal::U32(act.code()), Literal::U32(w)],
                    ),
                });
                w /= 2;
            }
        }
    }
    v
}

/// Llama-3-8B's MLP at 2048 tokens (d = 14336: 56 MiB per bf16 tensor, 168 MiB moved),
/// and a quick shape.
const BENCH_SHAPES: [(usize, usize, bool); 2] = [(16, 1024, true), (2048, 14336, false)];

/// Builds a gated bench's inputs, NaN-poisoned output, launch and reference for (dtype,
/// rows, d).
type GatedPrepare = fn(
    Gated,
    &Context,
    &mut crate::testing::CaseRng,
    DType,
    usize,
    usize,
) -> Result<PreparedBench, String>;

/// A gated op's bench at every float dtype and bench shape: `prepare` builds the inputs,
/// the NaN-poisoned output, the launch and the reference for (dtype, rows, d).
fn gated_benches(
    op: &'static str,
    kernel: &'static str,
    g: Gated,
    prepare: GatedPrepare,
) -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for (rows, d, quick) in BENCH_SHAPES {
            v.push(BenchCase {
                op,
                kernel,
                dtype,
                shape: format!("{} rows={rows} d={d}", act_name(g.act)),
                bytes: (3 * rows * d * dtype.size_bytes()) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| prepare(g, ctx, rng, dtype, rows, d)),
            });
        }
    }
    v
}

pub(crate) fn benches(g: Gated) -> Vec<BenchCase> {
    gated_benches(g.op, "act_mul_kernel", g, |g, ctx, rng, dtype, rows, d| {
        let (gate, gv) = random_tensor(ctx, rng, dtype, &[rows, d], GATE.0, GATE.1)?;
        let (up, uv) = random_tensor(ctx, rng, dtype, &[rows, d], UP.0, UP.1)?;
        let out = ctx.full_nan(dtype, &[rows, d]).map_err(err)?;
        let (c, o) = (ctx.clone(), out.clone());
        Ok(PreparedBench {
            launch: Box::new(move || act_mul(g.op, &c, &gate, &up, &o, g.act).map_err(err)),
            output: out,
            reference: reference::act_mul(g.f, &gv, &uv),
        })
    })
}

pub(crate) fn packed_benches(g: Gated) -> Vec<BenchCase> {
    gated_benches(
        packed_op(g),
        "act_mul_packed_kernel",
        g,
        |g, ctx, rng, dtype, rows, d| {
            let op = packed_op(g);
            let (gu, gv) = random_tensor(ctx, rng, dtype, &[rows, 2 * d], GATE.0, GATE.1)?;
            let out = ctx.full_nan(dtype, &[rows, d]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok(PreparedBench {
                launch: Box::new(move || act_mul_packed(op, &c, &gu, &o, g.act).map_err(err)),
                output: out,
                reference: reference::act_mul_packed(g.f, &gv, d),
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elementwise::gated::row_vec_width;

    #[test]
    fn packed_runs_are_the_widest_power_of_two_dividing_d() {
        assert_eq!(row_vec_width(DType::BF16, 14336), 8);
        assert_eq!(row_vec_width(DType::F32, 14336), 4);
        assert_eq!(row_vec_width(DType::F16, 4104), 8);
        assert_eq!(row_vec_width(DType::F16, 12), 4);
        assert_eq!(row_vec_width(DType::F32, 6), 2);
        assert_eq!(row_vec_width(DType::BF16, 37), 1);
    }
}
