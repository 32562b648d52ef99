//! The declared rejections run as registered cases: each builds the op's example, breaks
//! one invariant as declared, and checks the call is refused and writes nothing.

use super::rejections::describe;
use super::{eval_shape, Break, Dims, DtypeRule, OpDecl, ParamValues, Rejection};
use crate::registry::{Case, CaseKind, Outcome};
use crate::testing::{expect_rejection, random_tensor, CaseRng};
use std::collections::BTreeMap;
use tessera_runtime::{Context, DType, Tensor};

/// Every declared rejection of `op` as a registered case.
pub fn rejection_cases(op: &'static OpDecl) -> Vec<Case> {
    op.rejections
        .iter()
        .map(|&r| Case {
            op: op.name,
            kind: CaseKind::Rejection,
            dtype: None,
            name: format!("declared: {}", describe(r.by)),
            run: Box::new(move |ctx, rng| run(op, r, ctx, rng)),
        })
        .collect()
}

/// The tensors and parameters of one call.
pub(crate) type ExampleCall = (
    BTreeMap<String, Tensor>,
    Vec<(String, String)>,
    BTreeMap<String, Tensor>,
);

/// The op's example as a call (inputs random in their declared ranges, outputs NaN), broken
/// by `by` when given.
pub(crate) fn example_call(
    op: &'static OpDecl,
    by: Option<Break>,
    ctx: &Context,
    rng: &mut CaseRng,
) -> Result<ExampleCall, String> {
    example_call_in(op, by.as_slice(), None, ctx, rng)
}

/// The op's example as a call, with every break of `breaks` applied and, when `dtype` is
/// given, every tensor whose declared dtypes include it in that dtype instead of the first.
pub(crate) fn example_call_in(
    op: &'static OpDecl,
    breaks: &[Break],
    dtype: Option<DType>,
    ctx: &Context,
    rng: &mut CaseRng,
) -> Result<ExampleCall, String> {
    let ex = op.example;
    let resized = |name: Option<&str>| -> Vec<(&'static str, usize)> {
        ex.dims
            .iter()
            .map(|&(k, old)| {
                let new = breaks.iter().rev().find_map(|b| match *b {
                    Break::Dim(d, v) if d == k => Some(v),
                    Break::InputDim(t, d, v) if d == k && Some(t) == name => Some(v),
                    _ => None,
                });
                (k, new.unwrap_or(old))
            })
            .collect()
    };
    let pick = |list: &[DType]| match dtype {
        Some(d) if list.contains(&d) => d,
        _ => list.first().copied().unwrap_or(DType::F32),
    };
    let dims = Dims::from_pairs(&resized(None));
    let mut inputs: BTreeMap<String, Tensor> = BTreeMap::new();
    let mut dtypes: BTreeMap<&str, DType> = BTreeMap::new();
    for t in op.inputs {
        if t.optional && !ex.with.contains(&t.name) {
            continue;
        }
        let mut dtype = match t.dtype {
            DtypeRule::OneOf(list) => pick(list),
            DtypeRule::Like(n) => dtypes.get(n).copied().unwrap_or(DType::F32),
            DtypeRule::F32OrLike(_) | DtypeRule::Derived(..) => DType::F32,
        };
        for b in breaks {
            if let Break::Dtype(name, d) = *b {
                if name == t.name {
                    dtype = d;
                }
            }
        }
        let shape_dims = Dims::from_pairs(&resized(Some(t.name)));
        dtypes.insert(t.name, dtype);
        let shape = eval_shape(t.shape, &shape_dims)?;
        let (lo, hi) = ex.ranges.iter().find(|x| x.0 == t.name).map_or(
            if dtype == DType::U32 {
                (0.0, 16.0)
            } else {
                (-1.0, 1.0)
            },
            |x| (x.1, x.2),
        );
        let (tensor, _) = random_tensor(ctx, rng, dtype, &shape, lo, hi)?;
        inputs.insert(t.name.to_string(), tensor);
    }
    let example: Vec<(String, String)> = ex
        .params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut given = example.clone();
    for b in breaks {
        if let Break::Param(p, v) = *b {
            given.retain(|(k, _)| k != p);
            given.push((p.to_string(), v.to_string()));
        }
    }
    // Derived output dtypes as the example's own call gets them (a broken parameter must
    // meet the outputs a correct call would pass), where the inputs let the op compute
    // them; f32 otherwise.
    let derived: BTreeMap<&str, DType> = ParamValues::parse(op, &example)
        .ok()
        .and_then(|p| op.output_specs(&inputs, &p).ok())
        .map(|specs| specs.into_iter().map(|s| (s.name, s.dtype)).collect())
        .unwrap_or_default();
    let mut outputs: BTreeMap<String, Tensor> = BTreeMap::new();
    for o in op.outputs {
        let alias = breaks.iter().find_map(|b| match *b {
            Break::Alias(out, input) if out == o.name => Some(input),
            _ => None,
        });
        let t = match alias {
            Some(input) => inputs
                .get(input)
                .cloned()
                .ok_or_else(|| format!("the example gives no input `{input}`"))?,
            _ => {
                let dtype = match o.dtype {
                    DtypeRule::OneOf(list) => pick(list),
                    DtypeRule::Like(n) | DtypeRule::F32OrLike(n) => {
                        dtypes.get(n).copied().unwrap_or(DType::F32)
                    }
                    DtypeRule::Derived(..) => derived.get(o.name).copied().unwrap_or(DType::F32),
                };
                let shape = eval_shape(o.shape, &dims)?;
                ctx.full_nan(dtype, &shape).map_err(|e| e.to_string())?
            }
        };
        outputs.insert(o.name.to_string(), t);
    }
    Ok((inputs, given, outputs))
}

fn run(
    op: &'static OpDecl,
    r: Rejection,
    ctx: &Context,
    rng: &mut CaseRng,
) -> Result<Outcome, String> {
    let (inputs, given, outputs) = example_call(op, Some(r.by), ctx, rng)?;
    let watched = match r.by {
        Break::Alias(out, _) => out,
        _ => op.outputs.first().map_or("", |o| o.name),
    };
    let out = outputs
        .get(watched)
        .ok_or_else(|| format!("no output `{watched}`"))?;
    // A parameter outside its declared values is refused by the declaration itself.
    let params = match ParamValues::parse(op, &given) {
        Ok(p) => p,
        Err(msg) if msg.contains(r.reason) => {
            return Ok(Outcome {
                checked: 1,
                note: msg,
                ..Outcome::default()
            })
        }
        Err(msg) => {
            return Err(format!(
                "refused for another reason: `{msg}`; expected `{}`",
                r.reason
            ))
        }
    };
    expect_rejection(out, r.reason, || op.invoke(ctx, &inputs, &outputs, &params))
}
