//! What a declared op's call and reference receive: the tensors by name and the parsed
//! parameters; and the output shapes and dtypes a declaration derives from its inputs.

use super::{eval_shape, Dims, DtypeRule, OpDecl, ParamValues, ShapeFrom, Workspace};
use crate::error::OpError;
use std::collections::BTreeMap;
use tessera_runtime::{DType, Tensor};

/// The tensors and parameters of one call of a declared op.
pub struct OpArgs<'a> {
    pub op: &'static OpDecl,
    pub inputs: &'a BTreeMap<String, Tensor>,
    pub outputs: &'a BTreeMap<String, Tensor>,
    pub params: &'a ParamValues,
    /// The workspace [`OpDecl::invoke`] made for this call, when the op takes one.
    pub workspace: Option<&'a Workspace>,
}

fn missing(op: &'static str, what: &str, name: &str) -> OpError {
    OpError::invalid(op, format!("the {what} `{name}` is not given"))
}

impl<'a> OpArgs<'a> {
    pub fn input(&self, name: &str) -> Result<&'a Tensor, OpError> {
        self.inputs
            .get(name)
            .ok_or_else(|| missing(self.op.name, "input", name))
    }

    pub fn optional(&self, name: &str) -> Option<&'a Tensor> {
        self.inputs.get(name)
    }

    pub fn output(&self, name: &str) -> Result<&'a Tensor, OpError> {
        self.outputs
            .get(name)
            .ok_or_else(|| missing(self.op.name, "output", name))
    }

    /// The call's workspace as the op's own type.
    pub fn workspace<T: 'static>(&self) -> Result<&'a T, OpError> {
        self.workspace
            .and_then(|w| w.downcast_ref::<T>())
            .ok_or_else(|| {
                OpError::invalid(
                    self.op.name,
                    "the call has no workspace of its type; run it through OpDecl::invoke",
                )
            })
    }

    /// The named dimensions bound from the given inputs' shapes.
    pub fn dims(&self) -> Dims {
        let mut d = Dims::default();
        for t in self.op.inputs {
            if let Some(x) = self.inputs.get(t.name) {
                d.bind(t.shape, x.shape());
            }
        }
        d
    }

    /// The last dimension of an input (head_dim, row length).
    pub fn last_dim(&self, name: &str) -> Result<usize, OpError> {
        self.input(name)?.shape().last().copied().ok_or_else(|| {
            OpError::invalid(self.op.name, format!("`{name}` must have a dimension"))
        })
    }
}

/// The dtype and shape of one output, derived from the inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputSpec {
    pub name: &'static str,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl OpDecl {
    /// Refuses unknown tensors and reports a missing required one.
    pub fn check_input_names<'n>(
        &self,
        given: impl IntoIterator<Item = &'n str>,
    ) -> Result<(), String> {
        let given: Vec<&str> = given.into_iter().collect();
        for g in &given {
            if self.input(g).is_none() {
                let known: Vec<&str> = self.inputs.iter().map(|t| t.name).collect();
                return Err(format!(
                    "`{}` takes no input `{g}`; its inputs: {}",
                    self.name,
                    known.join(", ")
                ));
            }
        }
        for t in self.inputs.iter().filter(|t| !t.optional) {
            if !given.contains(&t.name) {
                return Err(format!(
                    "`{}`: missing --input {}=FILE: {} {}",
                    self.name,
                    t.name,
                    super::shape_text(t.shape),
                    t.doc
                ));
            }
        }
        Ok(())
    }

    /// Every output's dtype and shape for these inputs and parameters.
    pub fn output_specs(
        &'static self,
        inputs: &BTreeMap<String, Tensor>,
        params: &ParamValues,
    ) -> Result<Vec<OutputSpec>, OpError> {
        let none = BTreeMap::new();
        let args = OpArgs {
            op: self,
            inputs,
            outputs: &none,
            params,
            workspace: None,
        };
        let dims = args.dims();
        self.outputs
            .iter()
            .map(|o| {
                let dtype = match o.dtype {
                    DtypeRule::OneOf(list) => list.first().copied().unwrap_or(DType::F32),
                    DtypeRule::Like(n) => args.input(n)?.dtype(),
                    DtypeRule::F32OrLike(n) => args.optional(n).map_or(DType::F32, Tensor::dtype),
                    DtypeRule::Derived(f, _) => f(&args)?,
                };
                let shape = match o.shape_from {
                    ShapeFrom::Like(n) => args.input(n)?.shape().to_vec(),
                    ShapeFrom::Dims => eval_shape(o.shape, &dims).map_err(|e| {
                        OpError::invalid(self.name, format!("output `{}`: {e}", o.name))
                    })?,
                    ShapeFrom::Derived(f) => f(&args)?,
                };
                Ok(OutputSpec {
                    name: o.name,
                    dtype,
                    shape,
                })
            })
            .collect()
    }
}

/// One tensor on the host in f64, for references.
#[derive(Clone, Debug)]
pub struct HostTensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

/// What a declared op's f64 reference receives.
pub struct RefArgs<'a> {
    pub op: &'static OpDecl,
    pub inputs: &'a BTreeMap<String, HostTensor>,
    pub params: &'a ParamValues,
}

impl<'a> RefArgs<'a> {
    pub fn input(&self, name: &str) -> Result<&'a HostTensor, OpError> {
        self.inputs
            .get(name)
            .ok_or_else(|| missing(self.op.name, "input", name))
    }

    pub fn data(&self, name: &str) -> Result<&'a [f64], OpError> {
        Ok(&self.input(name)?.data)
    }

    pub fn optional(&self, name: &str) -> Option<&'a [f64]> {
        self.inputs.get(name).map(|t| t.data.as_slice())
    }

    pub fn shape(&self, name: &str) -> Result<&'a [usize], OpError> {
        Ok(&self.input(name)?.shape)
    }

    /// A named dimension bound from the inputs' shapes.
    pub fn dim(&self, name: &str) -> Result<usize, OpError> {
        let mut d = Dims::default();
        for t in self.op.inputs {
            if let Some(x) = self.inputs.get(t.name) {
                d.bind(t.shape, &x.shape);
            }
        }
        d.get(name).ok_or_else(|| {
            OpError::invalid(self.op.name, format!("the dimension `{name}` is not known"))
        })
    }
}
