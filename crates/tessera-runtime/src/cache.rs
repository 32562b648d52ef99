//! The in-memory compile cache: building, optimising and backend compilation happen once
//! per (kernel name, specialisation, backend).

use crate::backend::{BackendKind, CompiledKernel};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tessera_ir::Specialization;

/// Cache key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    pub kernel: String,
    pub spec: Specialization,
    pub backend: BackendKind,
}

/// A compiled kernel and the facts launches check against.
#[derive(Clone)]
pub(crate) struct CacheEntry {
    pub compiled: Arc<dyn CompiledKernel>,
    /// The kernel (before or after optimisation) uses simdgroup collectives or group reductions.
    pub needs_simd_multiple: bool,
    /// Threadgroup memory of the optimised kernel, in bytes.
    pub shared_bytes: usize,
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
