//! Cases of the explicit RMSNorm layouts (`rms_norm_vec`, `_tpg4`, `_small`, `_wide`):
//! each on the shapes it accepts, a rejection of those it does not, and its
//! specialisations.

use super::*;

pub(crate) fn vec_cases() -> Vec<Case> {
    // One row per threadgroup (one and two accesses per thread), several rows per
    // threadgroup with a partial last threadgroup.
    let shapes = [(3, 4096), (2, 8192), (2, 256), (13, 128), (9, 64), (5, 32)];
    let lengths = [(3000, "is not a layout of 16-byte accesses")];
    let fits = |t: DType, n: usize| vec_layout(t, n as u32).is_some();
    variant_cases("rms_norm_vec", rms_norm_vec, &shapes, fits, &lengths)
}

pub(crate) fn tpg4_cases() -> Vec<Case> {
    let lengths = [(192, "must be a multiple of 128"), (8192, "at most 4096")];
    let shapes = [(3, 128), (5, 1024), (2, 4096)];
    variant_cases("rms_norm_tpg4", rms_norm_tpg4, &shapes, any_shape, &lengths)
}

pub(crate) fn small_cases() -> Vec<Case> {
    let lengths = [(96, "must be a multiple of 64"), (4096, "at most 2048")];
    let shapes = [(7, 64), (3, 256)];
    variant_cases(
        "rms_norm_small",
        rms_norm_small,
        &shapes,
        any_shape,
        &lengths,
    )
}

pub(crate) fn wide_cases() -> Vec<Case> {
    let shapes = [(3, 100), (2, 5376), (1, 33)];
    variant_cases("rms_norm_wide", rms_norm_wide, &shapes, any_shape, &[])
}

pub(crate) fn rms_norm_vec_kernels() -> Vec<KernelUse> {
    vec_specs(&[32, 64, 128, 256, 4096, 8192])
}

pub(crate) fn rms_norm_tpg4_kernels() -> Vec<KernelUse> {
    specs(&rms_norm_tpg4_kernel::DEF, &[128, 1024, 4096])
}

pub(crate) fn rms_norm_small_kernels() -> Vec<KernelUse> {
    specs(&rms_norm_small_kernel::DEF, &[64, 256])
}

pub(crate) fn rms_norm_wide_kernels() -> Vec<KernelUse> {
    specs(&rms_norm_wide_kernel::DEF, &[])
}
