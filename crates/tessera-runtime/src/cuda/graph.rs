//! A recorded CUDA graph, instantiated and uploaded, replayed on the stream it was
//! recorded from: the CUDA backend's [`DeviceGraph`].

use crate::backend::{BackendKind, DeviceGraph};
use crate::error::{Result, RuntimeError};
use cudarc::driver::CudaGraph;

/// An instantiated graph of one backend's stream.
pub(super) struct CudaDeviceGraph {
    graph: CudaGraph,
}

impl CudaDeviceGraph {
    /// Uploads `graph`'s resources to the device, so the first replay costs no setup.
    pub(super) fn new(graph: CudaGraph) -> Result<CudaDeviceGraph> {
        graph.upload().map_err(|e| RuntimeError::Backend {
            backend: BackendKind::Cuda,
            message: format!("uploading a recorded graph: {e}"),
        })?;
        Ok(CudaDeviceGraph { graph })
    }
}

impl DeviceGraph for CudaDeviceGraph {
    fn replay(&self) -> Result<()> {
        self.graph.launch().map_err(|e| RuntimeError::Backend {
            backend: BackendKind::Cuda,
            message: format!("replaying a recorded graph: {e}"),
        })
    }
}
