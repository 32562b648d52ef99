//! The device's measured copy bandwidth: the peak a memory-bound kernel is compared with.

use crate::error::{runtime, OpError};
use std::time::Instant;
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, RuntimeError, Tensor};

/// Copies `n` u32 words, four consecutive words per thread (one 16-byte access).
#[kernel]
pub fn copy_words(src: Tensor<u32>, mut dst: Tensor<u32>, n: u32) {
    let i = global_id() * 4;
    if i + 3 < n {
        let a = load(src[i]);
        let b = load(src[i + 1]);
        let c = load(src[i + 2]);
        let d = load(src[i + 3]);
        store(dst[i], a);
        store(dst[i + 1], b);
        store(dst[i + 2], c);
        store(dst[i + 3], d);
    }
}

fn launch(ctx: &Context, src: &Tensor, dst: &Tensor, words: u32) -> Result<(), RuntimeError> {
    let groups = (words / 4).div_ceil(256);
    copy_words::launch(ctx, copy_words::Args { src, dst, n: words })
        .grid([groups, 1, 1])
        .group_size(256)
        .run()
}

/// Measures device-to-device copy bandwidth in GB/s (bytes read + written per second)
/// over buffers of `bytes` bytes each.
pub fn copy_bandwidth(ctx: &Context, bytes: usize, iters: u32) -> Result<f64, OpError> {
    const OP: &str = "copy_bandwidth";
    let words = u32::try_from(bytes / 4 / 4 * 4)
        .map_err(|_| OpError::invalid(OP, format!("{bytes} bytes is above the u32 index limit")))?;
    let src = ctx
        .zeros(DType::U32, &[words as usize])
        .map_err(runtime(OP))?;
    let dst = ctx
        .zeros(DType::U32, &[words as usize])
        .map_err(runtime(OP))?;
    launch(ctx, &src, &dst, words).map_err(runtime(OP))?;
    ctx.synchronize().map_err(runtime(OP))?;
    let mut f = || launch(ctx, &src, &dst, words);
    let device_time = ctx
        .backend()
        .time_launches(&mut f, iters)
        .map_err(runtime(OP))?;
    let secs = match device_time {
        Some(d) => d.as_secs_f64(),
        None => {
            let t = Instant::now();
            for _ in 0..iters {
                launch(ctx, &src, &dst, words).map_err(runtime(OP))?;
            }
            ctx.synchronize().map_err(runtime(OP))?;
            t.elapsed().as_secs_f64()
        }
    };
    Ok(2.0 * words as f64 * 4.0 * iters as f64 / secs / 1e9)
}
