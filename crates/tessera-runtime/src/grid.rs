//! The launch-grid limits every backend enforces alike: CUDA's grid bounds (x up to
//! 2³¹ − 1 threadgroups, y and z up to 65535) and a global thread index `group_id_x ·
//! group_size + thread_id` that fits in the u32 `global_id()` returns.

use crate::error::{Result, RuntimeError};

/// The most threadgroups along each grid axis (x, y, z).
pub const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

/// Rejects a grid outside [`MAX_GRID`] or one whose threads along x outnumber the u32
/// range of `global_id()`.
pub fn check_grid(kernel: &str, grid: [u32; 3], group_size: u32) -> Result<()> {
    let reject = |message: String| RuntimeError::InvalidLaunch {
        kernel: kernel.to_string(),
        message,
    };
    for (axis, (&g, &max)) in grid.iter().zip(&MAX_GRID).enumerate() {
        if g == 0 || g > max {
            return Err(reject(format!(
                "grid {grid:?}: axis {} must be in 1..={max}",
                ["x", "y", "z"][axis]
            )));
        }
    }
    let threads = u64::from(grid[0]) * u64::from(group_size);
    if threads > 1u64 << 32 {
        return Err(reject(format!(
            "grid x = {} threadgroups of {group_size} threads is {threads} threads along x; \
             global_id() is a u32, so at most 2^32 = {}: use fewer threadgroups along x \
             (and loop, or spread the work over grid y and z)",
            grid[0],
            1u64 << 32
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_limits_and_the_global_id_range() {
        assert!(check_grid("k", [1, 1, 1], 1024).is_ok());
        assert!(check_grid("k", [i32::MAX as u32, 65535, 65535], 1).is_ok());
        assert!(check_grid("k", [1 << 22, 1, 1], 1024).is_ok());
        assert!(check_grid("k", [u32::MAX, 1, 1], 1).is_err());
        assert!(check_grid("k", [1, 65536, 1], 32).is_err());
        assert!(check_grid("k", [1, 1, 65536], 32).is_err());
        assert!(check_grid("k", [0, 1, 1], 32).is_err());
        let e = check_grid("k", [(1 << 22) + 1, 1, 1], 1024).unwrap_err();
        assert!(e.to_string().contains("global_id() is a u32"), "{e}");
    }
}
