//! The CUDA backend: IR → CUDA C (`tessera_compiler::cuda`) → PTX (NVRTC, loaded
//! dynamically) → module load and launch through the CUDA driver (`cudarc`, loaded
//! dynamically). A binary with this backend builds and runs on machines with no CUDA
//! toolkit and no driver: opening the backend there is a clear `Err`, never a panic.

pub mod nvrtc;
#[cfg(test)]
mod nvrtc_tests;
