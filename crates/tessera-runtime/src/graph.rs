//! Device graphs: [`Context::record`] records the launches of a closure once (a decode
//! step of an engine, say) and [`Recorded::replay`] runs them again as one submission,
//! with none of the host's per-launch work. The graph binds the buffers' addresses, so
//! the caller changes a replay's inputs by writing into the same buffers before it; the
//! [`Recorded`] holds every buffer its launches bind, so none is freed (and its memory
//! reused) while the graph may still run. While recording, ops take their graph-safe
//! forms ([`Context::recording_graph`]): they read no verdict back, and leave it on the
//! device for the caller to take after a replay.

use crate::backend::{DeviceBuffer, DeviceGraph};
use crate::context::Context;
use crate::error::{Result, RuntimeError};
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The buffers the launches of a recording in progress bind, `None` between recordings.
#[derive(Default)]
pub(crate) struct KeptBuffers {
    /// True while a recording collects, so a launch outside one checks only this flag.
    active: AtomicBool,
    buffers: Mutex<Option<Vec<Arc<dyn DeviceBuffer>>>>,
}

/// A recording's collection in progress: stopped when finished or, should the closure
/// panic, dropped, so the context can record again either way.
struct Collecting<'a>(&'a KeptBuffers);

impl Collecting<'_> {
    /// Stops collecting and returns what was collected.
    fn finish(self) -> Vec<Arc<dyn DeviceBuffer>> {
        self.0.active.store(false, Ordering::Release);
        self.0
            .buffers
            .lock()
            .map(|mut b| b.take().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for Collecting<'_> {
    fn drop(&mut self) {
        self.0.active.store(false, Ordering::Release);
        if let Ok(mut b) = self.0.buffers.lock() {
            b.take();
        }
    }
}

/// Launches recorded by [`Context::record`], ready to replay. It keeps alive the buffers
/// they bind and the context whose compiled kernels they run.
pub struct Recorded {
    graph: Box<dyn DeviceGraph>,
    ctx: Context,
    /// Every buffer a recorded launch binds, once each.
    buffers: Vec<Arc<dyn DeviceBuffer>>,
}

impl std::fmt::Debug for Recorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Recorded({:?}, {} buffers)",
            self.ctx,
            self.buffers.len()
        )
    }
}

impl Recorded {
    /// Runs the recorded launches again, stream-ordered after the work issued before:
    /// what the buffers hold now is what they read. Refused while a graph is being
    /// recorded on the context.
    pub fn replay(&self) -> Result<()> {
        if self.ctx.recording_graph() {
            return Err(RuntimeError::Backend {
                backend: self.ctx.kind(),
                message: "a replay while a graph is being recorded: replay it before or after \
                          the recording"
                    .into(),
            });
        }
        self.graph.replay()
    }

    /// How many distinct buffers the recorded launches bind (and this graph keeps alive).
    pub fn buffers(&self) -> usize {
        self.buffers.len()
    }
}

impl Context {
    /// Records the launches `f` issues into a device graph, without running them, for
    /// [`Recorded::replay`]; `Ok(None)`, with `f` not called, where the backend has no
    /// graphs (the CPU interpreter, Metal and its emulator: run the work eagerly there).
    /// `f` may only launch: an allocation, a copy to or from the device or a
    /// synchronisation inside it is an error, returned as it is, and nothing is
    /// recorded. Refused while another recording is in progress on this context.
    pub fn record(&self, mut f: impl FnMut() -> Result<()>) -> Result<Option<Recorded>> {
        let kept = self.kept();
        {
            let mut buffers = kept
                .buffers
                .lock()
                .map_err(|_| self.record_error("the recording's lock is poisoned"))?;
            if buffers.is_some() || self.recording_graph() {
                return Err(self.record_error(
                    "a recording while another is in progress on this context; record them \
                     one after the other",
                ));
            }
            *buffers = Some(Vec::new());
            kept.active.store(true, Ordering::Release);
        }
        let collecting = Collecting(kept);
        let graph = self.backend().record(&mut f);
        let mut buffers = collecting.finish();
        let Some(graph) = graph? else {
            return Ok(None);
        };
        buffers.sort_by_key(|b| Arc::as_ptr(b).cast::<()>() as usize);
        buffers.dedup_by(|a, b| Arc::ptr_eq(a, b));
        Ok(Some(Recorded {
            graph,
            ctx: self.clone(),
            buffers,
        }))
    }

    /// Called by each launch with the tensors it binds: kept if a recording is collecting.
    pub(crate) fn keep_if_recording<'t>(&self, tensors: impl Iterator<Item = &'t Tensor>) {
        let kept = self.kept();
        if !kept.active.load(Ordering::Acquire) {
            return;
        }
        if let Ok(mut buffers) = kept.buffers.lock() {
            if let Some(list) = buffers.as_mut() {
                list.extend(tensors.map(|t| t.buffer().clone()));
            }
        }
    }

    fn record_error(&self, message: &str) -> RuntimeError {
        RuntimeError::Backend {
            backend: self.kind(),
            message: message.into(),
        }
    }
}
