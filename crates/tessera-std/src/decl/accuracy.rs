//! How close an op's outputs come to its f64 reference, per dtype: declared once per op,
//! the tolerance every correctness case and benchmark check compares against, and the
//! accuracy line of the op's table in docs/kernels.md.

use tessera_runtime::DType;

/// `|got - want| <= atol + rtol * |want|`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
}

/// An op's accuracy against its f64 reference, per dtype of the outputs compared (or, where
/// `keyed_by` says so, of another tensor).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Accuracy {
    pub f32: Tolerance,
    pub f16: Tolerance,
    pub bf16: Tolerance,
    /// Integer outputs (indices, counts, quantized codes): exact unless an op whose codes
    /// round a computed value says how many steps they may move.
    pub codes: Tolerance,
    /// Whose dtype picks the tolerance, and why, when it is not each output's own.
    pub keyed_by: &'static str,
}

impl Accuracy {
    /// Outputs stored in the dtype with f32 accumulation inside: a few units in the last
    /// place of the output dtype, relative, with an absolute floor near zero.
    pub const STANDARD: Accuracy = Accuracy {
        f32: Tolerance {
            atol: 2e-5,
            rtol: 2e-4,
        },
        f16: Tolerance {
            atol: 2e-3,
            rtol: 4e-3,
        },
        bf16: Tolerance {
            atol: 1.5e-2,
            rtol: 1.6e-2,
        },
        codes: Tolerance {
            atol: 0.0,
            rtol: 0.0,
        },
        keyed_by: "",
    };

    /// Outputs that are copies or single correctly rounded conversions of the inputs
    /// (gathers, casts): equal to the reference's value rounded to the output dtype.
    pub const EXACT: Accuracy = Accuracy {
        f32: Tolerance {
            atol: 0.0,
            rtol: 0.0,
        },
        f16: Tolerance {
            atol: 0.0,
            rtol: 0.0,
        },
        bf16: Tolerance {
            atol: 0.0,
            rtol: 0.0,
        },
        codes: Tolerance {
            atol: 0.0,
            rtol: 0.0,
        },
        keyed_by: "",
    };

    /// The tolerance for outputs of `dtype`.
    pub fn of(&self, dtype: DType) -> Tolerance {
        match dtype {
            DType::F16 => self.f16,
            DType::BF16 => self.bf16,
            DType::F32 => self.f32,
            _ => self.codes,
        }
    }

    /// `f32 2e-5 + 2e-4·|ref|, f16 …, bf16 …` for the docs and `tessera list`.
    pub fn text(&self) -> String {
        let one = |name: &str, t: Tolerance| format!("{name} {:e} + {:e}·|ref|", t.atol, t.rtol);
        let mut s = format!(
            "{}, {}, {}",
            one("f32", self.f32),
            one("f16", self.f16),
            one("bf16", self.bf16)
        );
        if self.codes.atol > 0.0 {
            s += &format!(", codes ± {}", self.codes.atol);
        }
        if !self.keyed_by.is_empty() {
            s += &format!(" ({})", self.keyed_by);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_dtype_gets_its_own_tolerance() {
        let a = Accuracy::STANDARD;
        assert_eq!(a.of(DType::F16), a.f16);
        assert_eq!(a.of(DType::BF16), a.bf16);
        assert_eq!(a.of(DType::F32), a.f32);
        assert_eq!(a.of(DType::U8), a.codes);
        assert_eq!(a.codes.atol, 0.0);
        assert!(a.f32.atol < a.f16.atol && a.f16.atol < a.bf16.atol);
        assert_eq!(
            a.text(),
            "f32 2e-5 + 2e-4·|ref|, f16 2e-3 + 4e-3·|ref|, bf16 1.5e-2 + 1.6e-2·|ref|"
        );
    }
}
