//! The CUDA backend: IR → CUDA C (`tessera_compiler::cuda`) → PTX (NVRTC, loaded
//! dynamically, cached in memory and on disk) → module load and launch through the CUDA
//! driver (`cudarc`, loaded dynamically). A binary with this backend builds and runs on
//! machines with no CUDA toolkit and no driver: opening the backend there is a clear
//! `Err`, never a panic.

mod backend;
mod buffer;
pub mod disk_cache;
mod driver;
mod graph;
pub mod nvrtc;
#[cfg(test)]
mod nvrtc_tests;
pub mod selftest;

pub use backend::{CompileTimes, CudaBackend, CudaKernel, PtxOrigin};
pub use buffer::CudaBuffer;
/// The `cudarc` this backend is built on, so a caller hands its streams over in the same
/// version's types ([`crate::Context::on_cuda_stream`]).
pub use cudarc;

use crate::backend::Backend;
use crate::error::Result;
use std::sync::Arc;

/// Opens CUDA device `ordinal` as a runtime backend.
pub fn open(ordinal: usize) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(CudaBackend::new(ordinal)?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn opening_without_a_gpu_is_an_error_not_a_panic() {
        // On a machine with a GPU this opens it; elsewhere it must say why it cannot.
        match super::CudaBackend::new(0) {
            Ok(b) => assert!(crate::Backend::info(&b).max_threads_per_group >= 32),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("cuda backend is not available"), "{msg}");
            }
        }
        let e = super::CudaBackend::new(4096).unwrap_err().to_string();
        assert!(e.contains("not available"), "{e}");
    }
}
