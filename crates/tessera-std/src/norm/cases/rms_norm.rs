//! Cases of the dispatching `rms_norm`: every float dtype over shapes that reach each
//! layout, its rejections, specialisations and benchmark shapes.

use super::*;

pub(crate) fn rms_norm_cases() -> Vec<Case> {
    let shapes = [(4, 4096), (16, 64), (2, 3000), (3, 640)];
    variant_cases("rms_norm", rms_norm, &shapes, any_shape, &[])
}

pub(crate) fn rms_norm_kernels() -> Vec<KernelUse> {
    let mut v = vec_specs(&[64, 128, 640, 4096, 8192]);
    v.extend(specs(&rms_norm_small_kernel::DEF, &[640]));
    v.extend(specs(&rms_norm_wide_kernel::DEF, &[]));
    v
}

pub(crate) fn rms_norm_benches() -> Vec<BenchCase> {
    let shapes = [
        ("rms_norm_vec_kernel", [64, 4096], true),
        ("rms_norm_rows_kernel", [256, 128], true),
        ("rms_norm_vec_kernel", [1, 4096], false),
        ("rms_norm_vec_kernel", [8192, 4096], false),
        ("rms_norm_rows_kernel", [32768, 128], false),
        ("rms_norm_vec_kernel", [4096, 8192], false),
    ];
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        for (kernel, shape, quick) in shapes {
            v.push(rms_bench(
                ("rms_norm", kernel),
                rms_norm,
                t,
                shape,
                quick,
                "",
            ));
        }
    }
    v
}
