//! How one benchmark shape is timed: its input sets rotated so the L2 cache does not hold
//! them between launches, a warm-up, then the median of several samples taken by replaying
//! a recorded device graph (every shape, where the backend records graphs: no launch gaps
//! in any time), by device events around plain launches where recording fails or the
//! backend has no graphs, or by the wall clock where it has no device timers either.

use std::time::{Duration, Instant};
use tessera_runtime::{Context, RuntimeError};
use tessera_std::registry::PreparedBench;

/// At most this many input sets per shape (small shapes then stay in the L2 cache; the
/// row says so).
pub const MAX_SETS: usize = 64;

/// Samples whose median is reported.
const SAMPLES: usize = 9;

/// How a time was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Graph,
    Events,
    Wall,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Graph => "graph",
            Method::Events => "events",
            Method::Wall => "wall",
        }
    }
}

/// The per-launch median and how it was taken.
pub struct Timing {
    pub per_launch: Duration,
    pub method: Method,
    /// Why graph timing was not used where it was tried, if it failed.
    pub graph_note: Option<String>,
}

/// How many input sets a shape of `bytes` per launch needs so that the sets together are
/// at least twice the L2 cache (`l2 = 0`: one). Shapes whose arithmetic dominates (more
/// than `20` flops a byte) get one: their time does not depend on where the inputs sit,
/// and their f64 references are slow to compute again.
pub fn sets_for(bytes: u64, flops: u64, l2: usize) -> usize {
    if l2 == 0 || bytes == 0 || flops > 20 * bytes {
        return 1;
    }
    ((2 * l2 as u64).div_ceil(bytes) as usize).clamp(1, MAX_SETS)
}

fn wrap(ctx: &Context, r: Result<(), String>) -> Result<(), RuntimeError> {
    r.map_err(|message| RuntimeError::Backend {
        backend: ctx.kind(),
        message,
    })
}

/// Times one launch of `sets` (rotated: launch `i` uses set `i % sets.len()`) within
/// about `budget` of device time.
pub fn time(
    ctx: &Context,
    sets: &mut [PreparedBench],
    budget: Duration,
    graphs: bool,
) -> Result<Timing, String> {
    let n = sets.len().max(1);
    // Warm-up: every set once (compiles, touches every buffer), then a first estimate
    // over one rotation.
    for s in sets.iter_mut() {
        (s.launch)()?;
    }
    ctx.synchronize().map_err(|e| e.to_string())?;
    let mut next = 0usize;
    let mut rotate = || {
        let i = next % n;
        next += 1;
        wrap(ctx, (sets[i].launch)())
    };
    let t = Instant::now();
    let estimate = match ctx
        .backend()
        .time_launches(&mut rotate, n as u32)
        .map_err(|e| e.to_string())?
    {
        Some(d) => d / n as u32,
        None => {
            ctx.synchronize().map_err(|e| e.to_string())?;
            t.elapsed() / n as u32
        }
    }
    .max(Duration::from_nanos(200));
    let per_sample = budget / SAMPLES as u32;
    let iters = ((per_sample.as_secs_f64() / estimate.as_secs_f64()) as u32).clamp(1, 4000);
    let mut graph_note = None;
    if graphs {
        // A graph of whole rotations, replayed so that a sample lasts about `per_sample`.
        let launches = (iters.clamp(1, 400) as usize).next_multiple_of(n) as u32;
        let replays = (iters / launches).clamp(1, 50);
        let mut samples = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            match ctx.backend().time_graph(&mut rotate, launches, replays) {
                Ok(Some(d)) => samples.push(d / (launches * replays)),
                Ok(None) => break,
                Err(e) => {
                    graph_note = Some(e.to_string());
                    break;
                }
            }
        }
        if samples.len() == SAMPLES {
            samples.sort();
            return Ok(Timing {
                per_launch: samples[SAMPLES / 2],
                method: Method::Graph,
                graph_note: None,
            });
        }
    }
    let mut samples = Vec::with_capacity(SAMPLES);
    let mut method = Method::Events;
    for _ in 0..SAMPLES {
        let elapsed = match ctx
            .backend()
            .time_launches(&mut rotate, iters)
            .map_err(|e| e.to_string())?
        {
            Some(d) => d,
            None => {
                method = Method::Wall;
                let t = Instant::now();
                for _ in 0..iters {
                    rotate().map_err(|e| e.to_string())?;
                }
                ctx.synchronize().map_err(|e| e.to_string())?;
                t.elapsed()
            }
        };
        samples.push(elapsed / iters);
    }
    samples.sort();
    Ok(Timing {
        per_launch: samples[SAMPLES / 2],
        method,
        graph_note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_exceed_twice_the_l2() {
        assert_eq!(sets_for(1 << 20, 0, 50 << 20), 64);
        assert_eq!(sets_for(10 << 20, 0, 50 << 20), 10);
        assert_eq!(sets_for(128 << 20, 0, 50 << 20), 1);
        assert_eq!(sets_for(10 << 20, 0, 0), 1);
        // Arithmetic-bound shapes keep one set.
        assert_eq!(sets_for(10 << 20, 1 << 40, 50 << 20), 1);
    }
}
