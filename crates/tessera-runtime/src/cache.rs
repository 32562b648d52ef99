//! The in-memory compile cache: building, optimising and backend compilation happen once
//! per (kernel definition, specialisation, backend, compiler version).

use crate::backend::{BackendKind, CompiledKernel};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tessera_ir::{KernelDef, Specialization};

/// Cache key: the kernel's full identity. Two kernels of one name in different modules
/// differ in `path`; hand-built definitions (no path) differ in their build function.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    /// The Rust path `#[kernel]` records for the definition.
    pub path: &'static str,
    pub name: &'static str,
    /// The address of the definition's IR builder.
    pub build: usize,
    pub spec: Specialization,
    pub backend: BackendKind,
    /// The version of the compiler that produced the code.
    pub compiler: &'static str,
}

impl CacheKey {
    pub fn new(def: &KernelDef, spec: &Specialization, backend: BackendKind) -> CacheKey {
        CacheKey {
            path: def.signature.path,
            name: def.signature.name,
            build: def.build as usize,
            spec: spec.clone(),
            backend,
            compiler: env!("CARGO_PKG_VERSION"),
        }
    }
}

/// A compiled kernel and the facts launches check against.
#[derive(Clone)]
pub(crate) struct CacheEntry {
    pub compiled: Arc<dyn CompiledKernel>,
    /// The kernel (before or after optimisation) uses simdgroup collectives or group reductions.
    pub needs_simd_multiple: bool,
    /// Threadgroup memory of the optimised kernel, in bytes.
    pub shared_bytes: usize,
    /// For each parameter of the compiled kernel, its position among the launch's
    /// arguments (the signature's parameters).
    pub arg_order: Vec<usize>,
}

#[derive(Default)]
pub(crate) struct CompileCache {
    entries: Mutex<HashMap<CacheKey, CacheEntry>>,
}

impl CompileCache {
    pub fn get(&self, key: &CacheKey) -> Option<CacheEntry> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    pub fn insert(&self, key: CacheKey, entry: CacheEntry) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, entry);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}
