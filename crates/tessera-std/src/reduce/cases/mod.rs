//! Registered cases of the reduce family, one file per op, around what they share here:
//! random rows and the per-dtype kernel uses.

mod cumsum;
mod row_reduce;
mod sort;
mod topk;

pub(super) use cumsum::{cumsum_benches, cumsum_cases, cumsum_kernels};
pub(super) use row_reduce::{row_reduce_benches, row_reduce_cases, row_reduce_kernels};
pub(super) use sort::{
    argsort_benches, argsort_cases, argsort_kernels, sort_benches, sort_cases, sort_kernels,
};
pub(super) use topk::{topk_benches, topk_cases, topk_kernels};

use super::reference;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, Outcome, PreparedBench};
use crate::testing::{accuracy, err, kernel_use, random_tensor, rejection, upload, zeros, Refused};
use crate::validate::FLOAT_DTYPES;
use tessera_runtime::{Context, DType, Tensor};
