//! The rule for non-finite values (docs/kernels.md), checked for every registered op from
//! its declaration: each op runs on its declared example, once per float dtype it takes,
//! on the CPU backend, beside its own f64 reference on the same (rounded) data.
//!
//! - Poison: for every floating input tensor, a NaN, then +∞, then −∞ at a random
//!   position. Every output the reference makes non-finite must be non-finite (the NaN or
//!   infinity is never hidden), and every output the reference keeps finite must be finite
//!   and match it (nothing spreads to other rows or heads).
//! - Adversarial finite data: each floating input in turn holds huge values (a quarter of
//!   the dtype's range), all zeros, or one constant; no output may be non-finite where the
//!   reference, rounded to the output's dtype, is finite.
//!
//! The reference is the declaration's own f64 reference; the IEEE arithmetic it does in
//! f64 is the model of the math (a norm of a row holding +∞ gives 0 for the finite
//! elements, the limit, and NaN for the infinite one; a −∞ attention logit removes that
//! key). Where an op's reference is not a faithful model for non-finite input this file
//! says so beside the op. Runs on the CPU; `TESSERA_BACKEND=metal-emu` runs it on the
//! emitted MSL under the emulator, and `TESSERA_OPS=a,b` limits it to the ops named.

use std::collections::BTreeMap;
use tessera_runtime::{Context, DType, Tensor};
use tessera_std::decl::{eval_shape, Dims, DtypeRule, HostTensor, OpDecl, ParamValues, RefArgs};
use tessera_std::ops;
use tessera_std::testing::{upload, CaseRng};

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// One call's inputs as stored (rounded to their dtype).
type Host = BTreeMap<String, HostTensor>;
/// Each output's name, our values and the reference rounded to the output's dtype.
/// Each output's name, dtype, values and the reference's values rounded to its dtype.
type Outputs = Vec<(&'static str, DType, Vec<f64>, Vec<f64>)>;
/// A named way of filling an input with finite values.
type Fill = (&'static str, Box<dyn Fn(&mut CaseRng) -> f64>);

/// The dtypes an op is run in: every float dtype its first multi-dtype float input takes
/// (the others follow it through `like`), else the example's.
fn dtypes(op: &OpDecl) -> Vec<DType> {
    op.inputs
        .iter()
        .find_map(|t| match t.dtype {
            DtypeRule::OneOf(list) if list.iter().any(|d| FLOATS.contains(d)) => Some(
                list.iter()
                    .copied()
                    .filter(|d| FLOATS.contains(d))
                    .collect(),
            ),
            _ => None,
        })
        .unwrap_or_else(|| vec![DType::F32])
}

/// The op's example with its float inputs in `dtype` where allowed, values drawn in the
/// declared ranges and rounded to their dtype.
fn example(op: &'static OpDecl, dtype: DType, rng: &mut CaseRng) -> Result<Host, String> {
    let ex = op.example;
    let dims = Dims::from_pairs(ex.dims);
    let mut host = Host::new();
    for t in op.inputs {
        if t.optional && !ex.with.contains(&t.name) {
            continue;
        }
        let d = match t.dtype {
            DtypeRule::OneOf(list) if list.contains(&dtype) => dtype,
            DtypeRule::OneOf(list) => list[0],
            DtypeRule::Like(n) => host.get(n).map(|h| h.dtype).ok_or(format!("{n} first"))?,
            DtypeRule::F32OrLike(_) | DtypeRule::Derived(..) => DType::F32,
        };
        let shape = eval_shape(t.shape, &dims)?;
        let int = !FLOATS.contains(&d);
        let (lo, hi) = range(op, t.name).unwrap_or(if int { (0.0, 16.0) } else { (-1.0, 1.0) });
        let data: Vec<f64> = (0..shape.iter().product::<usize>())
            .map(|_| {
                let v = rng.uniform(lo, hi);
                if int {
                    v.floor()
                } else {
                    v
                }
            })
            .collect();
        host.insert(
            t.name.to_string(),
            HostTensor {
                dtype: d,
                shape,
                data: round(d, &data),
            },
        );
    }
    Ok(host)
}

/// The declared value range of an input, if it has one.
fn range(op: &OpDecl, name: &str) -> Option<(f64, f64)> {
    op.example
        .ranges
        .iter()
        .find(|r| r.0 == name)
        .map(|r| (r.1, r.2))
}

/// Values as a tensor of `dtype` stores them (out of range → ±∞, NaN stays NaN).
fn round(dtype: DType, v: &[f64]) -> Vec<f64> {
    match dtype {
        DType::F32 => v.iter().map(|&x| x as f32 as f64).collect(),
        DType::F16 => v.iter().map(|&x| half::f16::from_f64(x).to_f64()).collect(),
        DType::BF16 => v
            .iter()
            .map(|&x| half::bf16::from_f64(x).to_f64())
            .collect(),
        _ => v.to_vec(),
    }
}

fn largest(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 65504.0,
        DType::BF16 => half::bf16::MAX.to_f64(),
        _ => f32::MAX as f64,
    }
}

/// Inputs that are per-row parameters, not data: a non-finite sampling temperature, top_p,
/// min_p or penalty is out of the parameter's range, so the call must be refused (naming
/// the row) rather than carry the value into the output. (op, the inputs.)
const REFUSED_PARAMETERS: &[(&str, &[&str])] = &[
    ("sample", &["temperature", "top_p", "min_p"]),
    ("apply_penalties", &["repetition", "frequency", "presence"]),
];

/// Whether a non-finite value in `input` must make `op` refuse the call.
fn refuses_non_finite(op: &OpDecl, input: &str) -> bool {
    REFUSED_PARAMETERS
        .iter()
        .any(|(o, i)| *o == op.name && i.contains(&input))
}

/// The inputs that are factors of a dot product the op sums in f32 and returns or
/// exponentiates: attention's q and k (logits), matmul's a and b (the GEMV's x and w), the
/// quantized GEMV's x and the scale and bias its weights are made of, the Gated DeltaNet
/// state's products with q and k (and the q/k norm weights), the selective scan's C·h with
/// h built from B·x, the MoE expert GEMVs' x and weights, the FFT's x (each output a sum
/// of x times twiddles, Bluestein's partial sums longer still).
const DOT_FACTORS: &[(&str, &[&str])] = &[
    ("attention", &["q", "k", "k_cache"]),
    ("matmul", &["a", "b", "x", "w", "w_gate_up"]),
    ("quant", &["x", "scales", "biases"]),
    ("gdn", &["q", "k", "state_in", "h0", "wq", "wk"]),
    ("ssm", &["x", "b", "c", "state_in"]),
    ("moe", &["x", "w", "scales", "biases"]),
    ("fft", &["x"]),
];

/// The magnitude of an input's "huge" values: a quarter of its dtype's range, except for
/// dot-product factors, which go to 1e30 (f16: its range): their products are then huge
/// but fit in f32, where the op computes them. Beyond that the math itself leaves f32
/// (a logit of 1e39 is not an f32).
fn huge(op: &OpDecl, input: &str, dtype: DType) -> f64 {
    let factor = DOT_FACTORS
        .iter()
        .any(|(family, inputs)| op.family == *family && inputs.contains(&input));
    let big = largest(dtype) / 4.0;
    if factor {
        big.min(1e30)
    } else {
        big
    }
}

/// Runs the op on the CPU and its reference; returns (ours, reference rounded to each
/// output's dtype), output by output.
fn run(ctx: &Context, op: &'static OpDecl, host: &Host) -> Result<Outputs, String> {
    let given: Vec<(String, String)> = op
        .example
        .params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let params = ParamValues::parse(op, &given)?;
    let mut inputs: BTreeMap<String, Tensor> = BTreeMap::new();
    for (name, h) in host {
        let (t, _) = upload(ctx, h.dtype, &h.data, &h.shape)?;
        inputs.insert(name.clone(), t);
    }
    let specs = op
        .output_specs(&inputs, &params)
        .map_err(|e| e.to_string())?;
    let mut outputs: BTreeMap<String, Tensor> = BTreeMap::new();
    for s in &specs {
        let t = ctx.full_nan(s.dtype, &s.shape).map_err(|e| e.to_string())?;
        outputs.insert(s.name.to_string(), t);
    }
    op.invoke(ctx, &inputs, &outputs, &params)
        .map_err(|e| format!("the call failed: {e}"))?;
    let want = (op.reference)(&RefArgs {
        op,
        inputs: host,
        params: &params,
    })
    .map_err(|e| format!("reference: {e}"))?;
    specs
        .iter()
        .zip(want)
        .map(|(s, w)| {
            let got = outputs[s.name].to_f64_vec().map_err(|e| e.to_string())?;
            Ok((s.name, s.dtype, got, round(s.dtype, &w)))
        })
        .collect()
}

/// Compares the non-finite masks of every output, and the finite values within the op's
/// declared accuracy one dtype looser than its cases (scaled by the output's largest finite
/// value, for huge data). Returns the number of elements checked.
fn check(op: &OpDecl, outputs: &Outputs, dtype: DType, values_too: bool) -> Result<usize, String> {
    let floats = op.accuracy.of(match dtype {
        DType::F32 => DType::F16,
        _ => DType::BF16,
    });
    let mut checked = 0;
    for (name, out_dtype, got, want) in outputs {
        // Integer outputs (indices, codes) keep the op's code tolerance, unscaled.
        let (tol, scale) = if FLOATS.contains(out_dtype) {
            let largest = want
                .iter()
                .filter(|w| w.is_finite())
                .fold(1.0f64, |m, w| m.max(w.abs()));
            (floats, largest)
        } else {
            (op.accuracy.codes, 1.0)
        };
        if got.len() != want.len() {
            return Err(format!(
                "`{name}`: {} elements, want {}",
                got.len(),
                want.len()
            ));
        }
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            if !w.is_finite() && g.is_finite() {
                return Err(format!("`{name}`[{i}] is {g}: the reference gives {w}"));
            }
            if w.is_finite() && !g.is_finite() {
                return Err(format!("`{name}`[{i}] is {g}: the reference gives {w}"));
            }
            if values_too
                && w.is_finite()
                && (g - w).abs() > (tol.atol + tol.rtol * w.abs()) * scale
            {
                return Err(format!("`{name}`[{i}] is {g}: the reference gives {w}"));
            }
            checked += 1;
        }
    }
    Ok(checked)
}

/// The floating inputs of a call.
fn float_inputs(host: &Host) -> Vec<String> {
    host.iter()
        .filter(|(_, h)| FLOATS.contains(&h.dtype))
        .map(|(n, _)| n.clone())
        .collect()
}

fn poison_op(ctx: &Context, op: &'static OpDecl, rng: &mut CaseRng) -> Result<usize, String> {
    let mut checked = 0;
    for dtype in dtypes(op) {
        let clean = example(op, dtype, rng)?;
        checked += check(op, &run(ctx, op, &clean)?, dtype, true)
            .map_err(|e| format!("{dtype}, finite example: {e}"))?;
        for input in float_inputs(&clean) {
            for poison in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                let mut host = example(op, dtype, rng)?;
                let t = host.get_mut(&input).ok_or("input")?;
                let at = rng.int(0, t.data.len() as u32) as usize;
                t.data[at] = poison;
                if refuses_non_finite(op, &input) {
                    match run(ctx, op, &host) {
                        Err(e) if e.starts_with("the call failed") => continue,
                        Err(e) => return Err(e),
                        Ok(_) => {
                            return Err(format!(
                                "{dtype}, {poison} in the parameter `{input}`[{at}] was not refused"
                            ))
                        }
                    }
                }
                let outputs = run(ctx, op, &host)?;
                checked += check(op, &outputs, dtype, true)
                    .map_err(|e| format!("{dtype}, {poison} in `{input}`[{at}]: {e}"))?;
            }
        }
    }
    Ok(checked)
}

fn adversarial_op(ctx: &Context, op: &'static OpDecl, rng: &mut CaseRng) -> Result<usize, String> {
    let mut checked = 0;
    for dtype in dtypes(op) {
        let clean = example(op, dtype, rng)?;
        if float_inputs(&clean).is_empty() {
            // No float input to fill (byte-quantized weights): the example itself, whose
            // own cases put non-finite scales in the bytes.
            checked += check(op, &run(ctx, op, &clean)?, dtype, true)
                .map_err(|e| format!("{dtype}, the example: {e}"))?;
        }
        for input in float_inputs(&clean) {
            // Inputs whose declared range is a domain (gates, decays, positions: not
            // symmetric about 0) keep it.
            if range(op, &input).is_some_and(|(lo, hi)| lo != -hi) {
                continue;
            }
            let big = huge(op, &input, clean[&input].dtype);
            // A constant inside the declared range (a constant k of 0.75 makes the delta
            // rule diverge, which is the math, not the kernel).
            let constant = 0.75 * range(op, &input).map_or(1.0, |r| r.1);
            let fills: [Fill; 3] = [
                (
                    "huge",
                    Box::new(move |r: &mut CaseRng| r.uniform(-big, big)),
                ),
                ("zero", Box::new(|_: &mut CaseRng| 0.0)),
                ("constant", Box::new(move |_: &mut CaseRng| constant)),
            ];
            for (what, fill) in &fills {
                let mut host = example(op, dtype, rng)?;
                let t = host.get_mut(&input).ok_or("input")?;
                let data: Vec<f64> = (0..t.data.len()).map(|_| fill(rng)).collect();
                t.data = round(t.dtype, &data);
                let outputs = run(ctx, op, &host)?;
                checked += check(op, &outputs, dtype, true)
                    .map_err(|e| format!("{dtype}, {what} `{input}`: {e}"))?;
            }
        }
    }
    Ok(checked)
}

fn every_op(what: &str, f: fn(&Context, &'static OpDecl, &mut CaseRng) -> Result<usize, String>) {
    let seed = std::env::var("TESSERA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0f1_u64);
    // The CPU backend by default; `TESSERA_BACKEND=metal-emu` runs the same sweep on the
    // emitted MSL.
    let ctx = match std::env::var("TESSERA_BACKEND") {
        Ok(name) => Context::by_name(&name).expect("the backend named by TESSERA_BACKEND"),
        Err(_) => Context::cpu(),
    };
    let mut failures = Vec::new();
    let named = std::env::var("TESSERA_OPS").ok();
    let all: Vec<_> = ops()
        .into_iter()
        .filter(|op| {
            named
                .as_deref()
                .is_none_or(|list| list.split(',').any(|n| n.trim() == op.name))
        })
        .collect();
    assert!(!all.is_empty(), "TESSERA_OPS names no registered op");
    for op in &all {
        let mut rng = CaseRng::new(seed);
        let start = std::time::Instant::now();
        match f(&ctx, op, &mut rng) {
            Ok(0) => failures.push(format!("{}: nothing was checked", op.name)),
            Ok(n) => println!(
                "{what} {:<22} {n} elements ({:.1} s)",
                op.name,
                start.elapsed().as_secs_f64()
            ),
            Err(e) => failures.push(format!("{}: {e}", op.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {} ops break the rule:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn a_nan_or_inf_reaches_exactly_the_outputs_it_touches() {
    every_op("poison", poison_op);
}

#[test]
fn adversarial_finite_inputs_give_finite_outputs() {
    every_op("finite", adversarial_op);
}
