//! Registered cases of the pipelined RMSNorm: correctness with grids that make every
//! threadgroup walk several rows (and a partial last step), the specialisations, and the
//! benchmark shapes with the grid at several resident-threadgroup counts.

use super::{common_rejections, length_rejection, rms_bench, rms_case, row_layout_uses, RmsFn};
use crate::error::OpError;
use crate::norm::rms_norm_pipe::{rms_norm_pipe, rms_norm_pipe_kernel, rms_norm_pipe_on};
use crate::norm::rms_norm_vec::rms_norm_vec;
use crate::registry::{BenchCase, Case, KernelUse};
use crate::validate::FLOAT_DTYPES;
use tessera_runtime::{Context, Tensor};

fn pipe_g3(c: &Context, x: &Tensor, w: &Tensor, o: &Tensor, e: f32) -> Result<(), OpError> {
    rms_norm_pipe_on(c, x, w, o, e, Some(3))
}

fn pipe_g1(c: &Context, x: &Tensor, w: &Tensor, o: &Tensor, e: f32) -> Result<(), OpError> {
    rms_norm_pipe_on(c, x, w, o, e, Some(1))
}

fn per_unit(c: &Context, k: u32) -> Option<u32> {
    Some(c.info().compute_units.max(1) * k)
}

fn pipe_u2(c: &Context, x: &Tensor, w: &Tensor, o: &Tensor, e: f32) -> Result<(), OpError> {
    rms_norm_pipe_on(c, x, w, o, e, per_unit(c, 2))
}

fn pipe_u4(c: &Context, x: &Tensor, w: &Tensor, o: &Tensor, e: f32) -> Result<(), OpError> {
    rms_norm_pipe_on(c, x, w, o, e, per_unit(c, 4))
}

fn pipe_u16(c: &Context, x: &Tensor, w: &Tensor, o: &Tensor, e: f32) -> Result<(), OpError> {
    rms_norm_pipe_on(c, x, w, o, e, per_unit(c, 16))
}

/// The pipelined kernel's specialisations for row lengths `ns` in every float dtype.
fn pipe_specs(ns: &[u32]) -> Vec<KernelUse> {
    row_layout_uses(&rms_norm_pipe_kernel::DEF, ns)
}

pub(crate) fn pipe_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        for (rows, n) in [(7, 4096), (5, 8192), (11, 512), (1, 1024)] {
            v.push(rms_case("rms_norm_pipe", rms_norm_pipe, t, rows, n));
            v.push(rms_case("rms_norm_pipe", pipe_g3, t, rows, n));
        }
        v.push(rms_case("rms_norm_pipe", pipe_g1, t, 6, 4096));
    }
    v.extend(common_rejections("rms_norm_pipe", rms_norm_pipe));
    v.push(length_rejection(
        "rms_norm_pipe",
        rms_norm_pipe,
        3000,
        "is not a whole number of 16-byte accesses",
    ));
    v
}

pub(crate) fn pipe_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    let variants: [(RmsFn, &str); 5] = [
        (rms_norm_pipe, ""),
        (pipe_u2, " g=2/SM"),
        (pipe_u4, " g=4/SM"),
        (pipe_u16, " g=16/SM"),
        (rms_norm_vec, " one row per group"),
    ];
    for t in FLOAT_DTYPES {
        for (rows, n) in [(8192, 4096), (4096, 8192), (64, 4096)] {
            for (f, tag) in variants {
                let names = ("rms_norm_pipe", "rms_norm_pipe_kernel");
                v.push(rms_bench(names, f, t, [rows, n], false, tag));
            }
        }
    }
    v
}

pub(crate) fn rms_norm_pipe_kernels() -> Vec<KernelUse> {
    pipe_specs(&[512, 1024, 4096, 8192])
}
