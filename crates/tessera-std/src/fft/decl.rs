//! The declaration of `fft`.

#[cfg(feature = "cases")]
use super::{cases, reference};
use super::{FftNorm, FftPlan};
use crate::decl::{
    Accuracy, Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault,
    ParamKind, ParamValues, Rejection, TensorDecl, Tolerance, Workspace, WorkspaceDecl, F32,
};
use crate::error::OpError;
use tessera_runtime::{Context, DType};

/// The call's normalisation.
fn norm_of(p: &ParamValues) -> Result<FftNorm, OpError> {
    let name = p.choice("norm")?;
    FftNorm::from_name(name)
        .ok_or_else(|| OpError::invalid("fft", format!("unknown norm `{name}`")))
}

/// The plan for the call's n (dimension −2 of x), made before the call.
fn plan(ctx: &Context, a: &OpArgs) -> Result<Workspace, OpError> {
    let shape = a.input("x")?.shape();
    let n = match shape {
        [.., n, _] => *n,
        _ => {
            return Err(OpError::invalid(
                "fft",
                format!("`x` must be [rows…, n, 2], got shape {shape:?}"),
            ))
        }
    };
    Ok(Box::new(FftPlan::new(ctx, n)?))
}

/// f32 only. An FFT's rounding scales with the row, not with each output: `rtol` is
/// relative to the rms of the output row, |got − ref| ≤ atol + rtol·rms(row). Measured on
/// random rows: at most ~6.5e-7·rms for m = 8192 (5e-8·log2 m) and ~8e-7·rms through
/// Bluestein's three transforms; `atol` covers outputs near zero in rows of rms ≤ 1.
pub(super) const ACCURACY: Accuracy = Accuracy {
    f32: Tolerance {
        atol: 2e-6,
        rtol: 2e-6,
    },
    keyed_by:
        "f32 only; rtol relative to the rms of the output row, the scale of an FFT's rounding",
    ..Accuracy::STANDARD
};

inventory::submit! {
    OpDecl {
        name: "fft",
        family: "fft",
        summary: "FFT over rows of complex f32 ([rows…, n, 2] as (re, im)), forward or inverse with torch.fft's norms; powers of two ≤ 8192 in one in-threadgroup Stockham pass over memory, any other n ≤ 4096 by Bluestein's chirp-z fused into the same one kernel",
        accuracy: ACCURACY,
        inputs: &[TensorDecl::new("x", &["rows…", "n", "2"], DtypeRule::OneOf(F32), "rows of n complex numbers, (re, im) pairs (torch.view_as_real of complex64)")],
        outputs: &[OutputDecl::like("x", "out", &["rows…", "n", "2"], DtypeRule::Like("x"), "scale · Σ_j x_j·exp(∓2πi·jk/n), (re, im) pairs")],
        params: &[
            ParamDecl {
                name: "inverse",
                kind: ParamKind::Bool,
                default: ParamDefault::Value("false"),
                doc: "the inverse transform (exponent +2πi·jk/n), as torch.fft.ifft",
            },
            ParamDecl {
                name: "norm",
                kind: ParamKind::Choice(&["backward", "ortho", "forward"]),
                default: ParamDefault::Value("backward"),
                doc: "torch's: backward scales the inverse by 1/n, forward the forward transform, ortho both by 1/√n",
            },
        ],
        invariants: &[
            "x is f32 [rows…, n, 2], not empty, its element count fits u32; out is like x and does not alias it",
            "n is from 1 to 4096, or a power of two up to 8192",
            "the plan is for x's n",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::F16), reason: "`x` must be f32" },
            Rejection { invariant: 0, by: Break::Alias("out", "x"), reason: "aliases `x`" },
            Rejection { invariant: 1, by: Break::Dim("n", 4097), reason: "must be from 1 to 4096, or a power of two up to 8192" },
            Rejection { invariant: 1, by: Break::Dim("n", 16_384), reason: "must be from 1 to 4096, or a power of two up to 8192" },
        ],
        variants: &[],
        example: Example { dims: &[("rows", 3), ("n", 12)], params: &[("norm", "ortho")], ranges: &[], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: "(Bluestein's chirp and kernel spectrum, made once per n by FftPlan::new; m = 2n − 1 rounded up to a power of two) 8·(n + m) for n not a power of two, else 0", make: plan }),
        call: |ctx, a| {
            super::fft(
                ctx,
                a.input("x")?,
                a.workspace::<FftPlan>()?,
                a.params.bool("inverse")?,
                norm_of(a.params)?,
                a.output("out")?,
            )
        },
        #[cfg(feature = "cases")]
        reference: |r| {
            let n = r.dim("n")?;
            let inverse = r.params.bool("inverse")?;
            let scale = norm_of(r.params)?.scale(n, inverse);
            Ok(vec![reference::fft(r.data("x")?, n, inverse, scale)])
        },
        #[cfg(feature = "cases")]
        kernels: cases::fft_kernels,
        #[cfg(feature = "cases")]
        cases: cases::fft_cases,
        #[cfg(feature = "cases")]
        benches: cases::fft_benches,
    }
}
