//! The declarations of the rotary-embedding ops: `rope` and the fused per-head q/k RMSNorm
//! + RoPE, with the frequency table's configuration as parameters.

#[cfg(feature = "cases")]
use super::{cases, reference};
use super::{RopeConfig, RopeLayout, RopeScaling, RopeTable};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault, ParamKind,
    ParamValues, Rejection, ShapeFrom, TensorDecl, Workspace, WorkspaceDecl, U32,
};
use crate::error::OpError;
use tessera_runtime::{Context, DType};

const fn float(name: &'static str, default: &'static str, doc: &'static str) -> ParamDecl {
    ParamDecl {
        name,
        kind: ParamKind::Float,
        default: ParamDefault::Value(default),
        doc,
    }
}

/// The frequency table's parameters, shared by both ops.
const TABLE_PARAMS: [ParamDecl; 10] = [
    float(
        "theta",
        "10000",
        "frequency base (10000 Llama-2, 500000 Llama-3, 1000000 Qwen3); above 1",
    ),
    ParamDecl {
        name: "layout",
        kind: ParamKind::Choice(&["neox", "interleaved"]),
        default: ParamDefault::Value("neox"),
        doc: "which elements rotate together: (i, i + rot_dim/2) or (2i, 2i+1)",
    },
    ParamDecl {
        name: "rot_dim",
        kind: ParamKind::UInt {
            min: 2,
            max: u32::MAX as u64,
        },
        default: ParamDefault::Auto("head_dim"),
        doc: "rotated dims, even and at most head_dim; the rest pass through",
    },
    ParamDecl {
        name: "scaling",
        kind: ParamKind::Choice(&["none", "llama3", "yarn"]),
        default: ParamDefault::Value("none"),
        doc: "long-context frequency scaling",
    },
    float(
        "factor",
        "1",
        "context extension factor (llama3, yarn); ≥ 1",
    ),
    float(
        "original_max_position",
        "8192",
        "the pre-training context (llama3, yarn)",
    ),
    float(
        "low_freq_factor",
        "1",
        "llama3: wavelengths above original/low are scaled",
    ),
    float(
        "high_freq_factor",
        "4",
        "llama3: wavelengths below original/high are kept",
    ),
    float(
        "beta_fast",
        "32",
        "yarn: pairs turning more often than this are kept",
    ),
    float(
        "beta_slow",
        "1",
        "yarn: pairs turning less often than this are interpolated",
    ),
];

const TABLE_INVARIANTS: [&str; 3] = [
    "rot_dim is even, positive and at most head_dim; theta is finite and above 1",
    "llama3: factor ≥ 1, 0 < low_freq_factor < high_freq_factor, original_max_position > 0; yarn: factor ≥ 1, beta_fast > beta_slow > 0",
    "positions is u32 [tokens]",
];

fn config(p: &ParamValues, head_dim: usize) -> Result<RopeConfig, OpError> {
    let layout = match p.choice("layout")? {
        "interleaved" => RopeLayout::Interleaved,
        _ => RopeLayout::NeoX,
    };
    let factor = p.f64("factor")?;
    let original_max_position = p.f64("original_max_position")?;
    let scaling_name = p.choice("scaling")?;
    // A scaling parameter the chosen scaling does not read would be silently ignored.
    let reads: &[&str] = match scaling_name {
        "llama3" => &[
            "factor",
            "original_max_position",
            "low_freq_factor",
            "high_freq_factor",
        ],
        "yarn" => &["factor", "original_max_position", "beta_fast", "beta_slow"],
        _ => &[],
    };
    for name in [
        "factor",
        "original_max_position",
        "low_freq_factor",
        "high_freq_factor",
        "beta_fast",
        "beta_slow",
    ] {
        if p.is_given(name) && !reads.contains(&name) {
            return Err(OpError::invalid(
                "rope",
                format!(
                    "`{name}` is given but scaling={scaling_name} does not use it; choose the \
                     scaling it belongs to (llama3 or yarn) or leave it out"
                ),
            ));
        }
    }
    let scaling = match scaling_name {
        "llama3" => RopeScaling::Llama3 {
            factor,
            low_freq_factor: p.f64("low_freq_factor")?,
            high_freq_factor: p.f64("high_freq_factor")?,
            original_max_position,
        },
        "yarn" => RopeScaling::Yarn {
            factor,
            original_max_position,
            beta_fast: p.f64("beta_fast")?,
            beta_slow: p.f64("beta_slow")?,
        },
        _ => RopeScaling::None,
    };
    Ok(RopeConfig {
        layout,
        theta: p.f64("theta")?,
        rot_dim: p.opt_uint("rot_dim")?.map_or(Ok(head_dim), |r| {
            usize::try_from(r).map_err(|_| OpError::invalid("rope", "rot_dim is too large"))
        })?,
        scaling,
    })
}

/// The frequency table of a call on `x`, made (and uploaded) before the call: a RoPE call
/// takes its table like any op takes its workspace.
fn table(ctx: &Context, a: &OpArgs, x: &str) -> Result<Workspace, OpError> {
    Ok(Box::new(RopeTable::new(
        ctx,
        config(a.params, a.last_dim(x)?)?,
    )?))
}

const TABLE_BYTES: &str =
    "4 per rotated pair: the inverse frequencies RopeTable::new uploads, once per configuration";

#[cfg(feature = "cases")]
fn positions(r: &RefArgs) -> Result<Vec<u32>, OpError> {
    Ok(r.data("positions")?.iter().map(|&p| p as u32).collect())
}

const POSITIONS: TensorDecl = TensorDecl::new(
    "positions",
    &["tokens"],
    DtypeRule::OneOf(U32),
    "each token's position",
);

inventory::submit! {
    OpDecl {
        name: "rope",
        family: "rope",
        summary: "rotary embedding, interleaved or NeoX, partial rot_dim, Llama-3 / YaRN scaled frequency tables",
        inputs: &[
            TensorDecl::float("x", &["tokens", "heads", "head_dim"], "queries or keys"),
            POSITIONS,
        ],
        outputs: &[OutputDecl { name: "out", shape: &["tokens", "heads", "head_dim"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Like("x"), doc: "x rotated" }],
        params: &TABLE_PARAMS,
        invariants: &[
            TABLE_INVARIANTS[0],
            TABLE_INVARIANTS[1],
            TABLE_INVARIANTS[2],
            "x is a non-empty float [tokens, heads, head_dim]; out is like x and does not alias x or positions",
            "heads ≤ 65535; the element count fits u32",
        ],
        rejections: &[Rejection { invariant: 0, by: Break::Param("rot_dim", "7"), reason: "must be even" }, Rejection { invariant: 0, by: Break::Param("rot_dim", "40"), reason: "the table rotates rot_dim = 40" }, Rejection { invariant: 1, by: Break::Param("factor", "0.5"), reason: "is out of range" }, Rejection { invariant: 2, by: Break::Dtype("positions", DType::F32), reason: "`positions` must be u32" }, Rejection { invariant: 3, by: Break::Alias("out", "x"), reason: "aliases `x`" }],
        variants: &[],
        example: Example {
            dims: &[("tokens", 5), ("heads", 3), ("head_dim", 32)],
            params: &[("layout", "interleaved"), ("rot_dim", "24"), ("scaling", "yarn"), ("factor", "4"), ("original_max_position", "64")],
            ranges: &[("positions", 0.0, 200.0)],
            with: &[],
        },
        workspace: Some(WorkspaceDecl { bytes: TABLE_BYTES, make: |ctx, a| table(ctx, a, "x") }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            let t = a.workspace::<RopeTable>()?;
            super::rope(ctx, a.input("x")?, a.input("positions")?, t, a.output("out")?)
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let s = r.shape("x")?;
            let cfg = config(r.params, s[2])?;
            Ok(vec![reference::rope(r.data("x")?, &positions(r)?, s[1], s[2], &cfg)])
        },
        #[cfg(feature = "cases")]
        kernels: cases::rope_uses,
        #[cfg(feature = "cases")]
        cases: cases::rope_cases,
        #[cfg(feature = "cases")]
        benches: cases::rope_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "qk_norm_rope",
        family: "rope",
        summary: "fused per-head q/k RMSNorm + RoPE (Qwen3), head_dim a multiple of 32",
        inputs: &[
            TensorDecl::float("q", &["tokens", "hq", "head_dim"], "queries"),
            TensorDecl::new("k", &["tokens", "hk", "head_dim"], DtypeRule::Like("q"), "keys"),
            TensorDecl::new("q_w", &["head_dim"], DtypeRule::Like("q"), "q's RMSNorm weight"),
            TensorDecl::new("k_w", &["head_dim"], DtypeRule::Like("q"), "k's RMSNorm weight"),
            POSITIONS,
        ],
        outputs: &[
            OutputDecl { name: "q_out", shape: &["tokens", "hq", "head_dim"], dtype: DtypeRule::Like("q"), shape_from: ShapeFrom::Like("q"), doc: "q normalised per head, then rotated" },
            OutputDecl { name: "k_out", shape: &["tokens", "hk", "head_dim"], dtype: DtypeRule::Like("q"), shape_from: ShapeFrom::Like("k"), doc: "k normalised per head, then rotated" },
        ],
        params: &[
            ParamDecl { name: "eps", kind: ParamKind::Float, default: ParamDefault::Value("1e-6"), doc: "RMSNorm epsilon; finite, ≥ 0" },
            TABLE_PARAMS[0], TABLE_PARAMS[1], TABLE_PARAMS[2], TABLE_PARAMS[3], TABLE_PARAMS[4],
            TABLE_PARAMS[5], TABLE_PARAMS[6], TABLE_PARAMS[7], TABLE_PARAMS[8], TABLE_PARAMS[9],
        ],
        invariants: &[
            TABLE_INVARIANTS[0],
            TABLE_INVARIANTS[1],
            TABLE_INVARIANTS[2],
            "q and k share one float dtype, tokens and head_dim; head_dim is a multiple of 32, at most 1024",
            "q_w and k_w are [head_dim] in q's dtype",
            "q_out and k_out are separate from each other and from q and k",
            "everything is validated before either launch",
        ],
        rejections: &[Rejection { invariant: 3, by: Break::Dim("head_dim", 48), reason: "must be a multiple of 32" }, Rejection { invariant: 4, by: Break::InputDim("k_w", "head_dim", 32), reason: "the norm weight` must have shape" }, Rejection { invariant: 5, by: Break::Alias("q_out", "k"), reason: "must be separate" }, Rejection { invariant: 3, by: Break::Dtype("k", DType::F16), reason: "`k` must be f32" }],
        variants: &[],
        example: Example {
            dims: &[("tokens", 4), ("hq", 4), ("hk", 2), ("head_dim", 64)],
            params: &[("scaling", "llama3"), ("factor", "8"), ("original_max_position", "64")],
            ranges: &[("positions", 0.0, 500.0)],
            with: &[],
        },
        workspace: Some(WorkspaceDecl { bytes: TABLE_BYTES, make: |ctx, a| table(ctx, a, "q") }),
        accuracy: crate::decl::Accuracy::STANDARD,
        call: |ctx, a| {
            let t = a.workspace::<RopeTable>()?;
            super::qk_norm_rope(
                ctx,
                a.input("q")?,
                a.input("k")?,
                a.input("q_w")?,
                a.input("k_w")?,
                a.input("positions")?,
                t,
                a.output("q_out")?,
                a.output("k_out")?,
                a.params.f32("eps")?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let (qs, ks) = (r.shape("q")?, r.shape("k")?);
            let d = qs[2];
            let cfg = config(r.params, d)?;
            let pos = positions(r)?;
            let eps = r.params.f64("eps")?;
            Ok(vec![
                #[cfg(feature = "cases")]
                reference::norm_rope(r.data("q")?, r.data("q_w")?, &pos, qs[1], d, eps, &cfg),
                #[cfg(feature = "cases")]
                reference::norm_rope(r.data("k")?, r.data("k_w")?, &pos, ks[1], d, eps, &cfg),
            ])
        },
        #[cfg(feature = "cases")]
        kernels: cases::rope_uses,
        #[cfg(feature = "cases")]
        cases: cases::qk_cases,
        #[cfg(feature = "cases")]
        benches: cases::qk_benches,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::find_op;

    fn params(given: &[(&str, &str)]) -> ParamValues {
        let op = find_op("rope").expect("registered");
        let given: Vec<(String, String)> = given
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ParamValues::parse(op, &given).expect("parses")
    }

    #[test]
    fn a_scaling_parameter_the_scaling_does_not_read_is_refused() {
        let e = config(&params(&[("factor", "8"), ("scaling", "none")]), 64)
            .expect_err("factor without a scaling");
        assert!(
            e.to_string().contains("`factor` is given but scaling=none"),
            "{e}"
        );
        let e = config(&params(&[("scaling", "llama3"), ("beta_fast", "16")]), 64)
            .expect_err("a yarn parameter under llama3");
        assert!(e.to_string().contains("`beta_fast`"), "{e}");
        let c = config(&params(&[("scaling", "yarn"), ("factor", "4")]), 64).expect("yarn");
        assert!(matches!(c.scaling, RopeScaling::Yarn { factor, .. } if factor == 4.0));
        assert!(config(&params(&[]), 64).is_ok(), "defaults alone are fine");
    }
}
