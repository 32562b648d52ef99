//! What a `#[kernel]` declares — its generics, parameters and constexprs — and the
//! specialisations (concrete dtypes and constexpr values) a kernel is built for.

use crate::error::IrError;
use crate::kernel::Kernel;
use crate::literal::Literal;
use crate::types::Scalar;

/// An element or scalar type in a signature: fixed, or one of the kernel's generics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeSig {
    Fixed(Scalar),
    /// Index into [`KernelSignature::generics`].
    Generic(usize),
}

/// One runtime parameter of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamSig {
    Tensor {
        name: &'static str,
        elem: TypeSig,
        writable: bool,
    },
    Scalar {
        name: &'static str,
        ty: TypeSig,
    },
}

impl ParamSig {
    pub fn name(&self) -> &'static str {
        match self {
            ParamSig::Tensor { name, .. } | ParamSig::Scalar { name, .. } => name,
        }
    }
}

/// A `#[constexpr]` parameter: baked into the generated code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConstexprSig {
    pub name: &'static str,
    pub ty: Scalar,
}

/// Everything a `#[kernel]` function declares.
#[derive(Clone, Copy, Debug)]
pub struct KernelSignature {
    pub name: &'static str,
    /// Where the kernel is defined: the Rust path `#[kernel]` records (`module_path!()` of
    /// its definition), so two kernels of one name in different modules stay apart.
    /// Hand-built signatures may leave it empty.
    pub path: &'static str,
    /// The first line of the kernel's doc comment.
    pub doc: &'static str,
    /// Generic dtype parameters, e.g. `["T"]`.
    pub generics: &'static [&'static str],
    /// Tensors and runtime scalars, in declaration order.
    pub params: &'static [ParamSig],
    pub constexprs: &'static [ConstexprSig],
}

/// A kernel as the registry and the runtime see it: its signature and how to build its IR.
#[derive(Clone, Copy, Debug)]
pub struct KernelDef {
    pub signature: KernelSignature,
    pub build: fn(&Specialization) -> Result<Kernel, IrError>,
}

impl KernelDef {
    /// Builds the kernel's IR for a specialisation, checking it against the signature first.
    pub fn build(&self, spec: &Specialization) -> Result<Kernel, IrError> {
        spec.check(&self.signature)?;
        (self.build)(spec)
    }

    pub fn name(&self) -> &'static str {
        self.signature.name
    }
}

/// Concrete dtypes for a kernel's generics and values for its constexprs, in signature order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Specialization {
    pub dtypes: Vec<Scalar>,
    pub constexprs: Vec<Literal>,
}

impl Specialization {
    pub fn new(dtypes: Vec<Scalar>, constexprs: Vec<Literal>) -> Self {
        Specialization { dtypes, constexprs }
    }

    /// Checks counts and constexpr types against `sig`.
    pub fn check(&self, sig: &KernelSignature) -> Result<(), IrError> {
        let err = |message: String| IrError::Specialization {
            kernel: sig.name.to_string(),
            message,
        };
        if self.dtypes.len() != sig.generics.len() {
            return Err(err(format!(
                "expected {} dtype(s) for generics [{}], got {}",
                sig.generics.len(),
                sig.generics.join(", "),
                self.dtypes.len()
            )));
        }
        if self.constexprs.len() != sig.constexprs.len() {
            let names: Vec<_> = sig.constexprs.iter().map(|c| c.name).collect();
            return Err(err(format!(
                "expected {} constexpr value(s) for [{}], got {}",
                names.len(),
                names.join(", "),
                self.constexprs.len()
            )));
        }
        for (c, v) in sig.constexprs.iter().zip(&self.constexprs) {
            if c.ty != v.ty() {
                return Err(err(format!(
                    "constexpr `{}` is {}, got a {} value ({v})",
                    c.name,
                    c.ty,
                    v.ty()
                )));
            }
        }
        Ok(())
    }

    /// Builds a specialisation from names and textual values (`T=f16`, `n=4096`), as the
    /// CLI takes them. Every generic and constexpr must be given exactly once.
    pub fn from_named(sig: &KernelSignature, pairs: &[(String, String)]) -> Result<Self, IrError> {
        let err = |message: String| IrError::Specialization {
            kernel: sig.name.to_string(),
            message,
        };
        for (k, _) in pairs {
            let known =
                sig.generics.contains(&k.as_str()) || sig.constexprs.iter().any(|c| c.name == k);
            if !known {
                let mut names: Vec<&str> = sig.generics.to_vec();
                names.extend(sig.constexprs.iter().map(|c| c.name));
                return Err(err(format!(
                    "`{k}` is neither a generic nor a constexpr; expected one of [{}]",
                    names.join(", ")
                )));
            }
        }
        let find = |name: &str| -> Result<&String, IrError> {
            let mut hits = pairs.iter().filter(|(k, _)| k == name);
            match (hits.next(), hits.next()) {
                (Some((_, v)), None) => Ok(v),
                (None, _) => Err(err(format!("missing a value for `{name}`"))),
                (Some(_), Some(_)) => Err(err(format!("`{name}` is given more than once"))),
            }
        };
        let mut dtypes = Vec::new();
        for g in sig.generics {
            let v = find(g)?;
            dtypes.push(Scalar::parse(v).ok_or_else(|| {
                err(format!(
                    "`{g}={v}` is not a dtype; expected one of f32, f16, bf16, u32, i32, u8, i8, bool"
                ))
            })?);
        }
        let mut constexprs = Vec::new();
        for c in sig.constexprs {
            let v = find(c.name)?;
            constexprs.push(
                parse_literal(c.ty, v).ok_or_else(|| {
                    err(format!("`{}={v}` is not a valid {} value", c.name, c.ty))
                })?,
            );
        }
        Ok(Specialization { dtypes, constexprs })
    }

    /// A readable form: `T=f16, n=4096u32`.
    pub fn describe(&self, sig: &KernelSignature) -> String {
        let mut parts: Vec<String> = sig
            .generics
            .iter()
            .zip(&self.dtypes)
            .map(|(g, t)| format!("{g}={t}"))
            .collect();
        parts.extend(
            sig.constexprs
                .iter()
                .zip(&self.constexprs)
                .map(|(c, v)| format!("{}={v}", c.name)),
        );
        parts.join(", ")
    }
}

/// Parses a textual constant of the given type (`4096`, `-1`, `0.125`, `true`).
pub fn parse_literal(ty: Scalar, s: &str) -> Option<Literal> {
    let s = s.trim();
    Some(match ty {
        Scalar::Bool => Literal::Bool(s.parse().ok()?),
        Scalar::I8 => Literal::I8(s.parse().ok()?),
        Scalar::U8 => Literal::U8(s.parse().ok()?),
        Scalar::I32 => Literal::I32(s.parse().ok()?),
        Scalar::U32 => Literal::U32(s.parse().ok()?),
        Scalar::F16 | Scalar::BF16 | Scalar::F32 => Literal::from_f64(ty, s.parse().ok()?),
    })
}

/// Implemented by every `#[func]`: builds the function's IR for its argument dtypes
/// (`None` for an untyped literal argument).
#[diagnostic::on_unimplemented(
    message = "a kernel calls `{Self}`, which is not a Tessera DSL function",
    label = "not a #[func]",
    note = "kernels call DSL builtins (exp, max, select, simd_sum, load, …) and functions marked #[func]; mark this helper #[func] to call it from a kernel"
)]
pub trait DslFunction {
    fn build(
        arg_types: &[crate::builder::ArgInfo],
    ) -> Result<std::sync::Arc<crate::Function>, IrError>;
}

/// The IR builder of the `#[func]` named by value `_f` (the unit struct a `#[func]`
/// declares). Kernels name their helpers through it, so a call of a plain Rust function
/// fails on the missing [`DslFunction`] (with its hint to add `#[func]`) and an unknown
/// name as an unknown value.
pub fn dsl_function<F: DslFunction>(_f: F) -> FunctionBuilder {
    F::build
}

/// What [`DslFunction::build`] is: the function's IR for its argument dtypes.
pub type FunctionBuilder =
    fn(&[crate::builder::ArgInfo]) -> Result<std::sync::Arc<crate::Function>, IrError>;
