//! The CPU backend refuses a grid past CUDA's limits (x up to 2³¹ − 1, y and z up to
//! 65535) or one whose threads along x overflow the u32 `global_id()`, with an error that
//! says so, before anything runs (it used to accept `[u32::MAX, 1, 1]` and run for hours);
//! a grid inside the limits still runs.

use tessera_ir::{Builder, Builtin, Kernel, Literal, Scalar};
use tessera_runtime::{Context, DType, RuntimeError};

/// `out[global_id()] = 1`.
fn mark_kernel() -> Kernel {
    let mut b = Builder::kernel("mark");
    let out = b.tensor_param("out", Scalar::U32, true);
    let g = b.builtin(Builtin::GlobalId);
    let one = b.lit(Literal::U32(1));
    b.store(out, g, one).expect("store");
    b.finish_kernel().expect("kernel")
}

fn launch(grid: [u32; 3], group: u32) -> Result<(), RuntimeError> {
    let ctx = Context::cpu();
    let out = ctx.zeros(DType::U32, &[64]).unwrap();
    let k = mark_kernel();
    ctx.launch_ir(&k)
        .arg("out", &out)
        .grid(grid)
        .group_size(group)
        .run()
}

#[test]
fn grids_past_the_limits_are_refused() {
    for (grid, group, says) in [
        ([u32::MAX, 1, 1], 1, "axis x must be in 1..=2147483647"),
        ([1, 65536, 1], 32, "axis y must be in 1..=65535"),
        ([1, 1, 70000], 32, "axis z must be in 1..=65535"),
        ([1 << 23, 1, 1], 1024, "global_id() is a u32"),
    ] {
        let e = launch(grid, group).expect_err("an oversized grid ran");
        assert!(
            matches!(e, RuntimeError::InvalidLaunch { .. }) && e.to_string().contains(says),
            "grid {grid:?}: {e}"
        );
    }
}

#[test]
fn a_grid_inside_the_limits_runs() {
    let ctx = Context::cpu();
    let out = ctx.zeros(DType::U32, &[64]).unwrap();
    let k = mark_kernel();
    ctx.launch_ir(&k)
        .arg("out", &out)
        .grid([2, 1, 1])
        .group_size(32)
        .run()
        .unwrap();
    assert_eq!(out.to_vec::<u32>().unwrap(), vec![1; 64]);
}
