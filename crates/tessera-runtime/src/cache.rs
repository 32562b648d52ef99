//! The in-memory compile cache: building, optimising and backend compilation happen once
//! per (kernel definition, specialisation, backend, compiler version). Every launch looks
//! its kernel up here, so the lookup is kept cheap: the key is hashed by the definition's
//! builder address and the specialisation (not its strings), and an entry is shared, not
//! copied.

use crate::backend::{BackendKind, CompiledKernel};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::{Arc, Mutex};
use tessera_ir::{KernelDef, Literal, Scalar, Specialization};

/// Cache key: the kernel's full identity. Two kernels of one name in different modules
/// differ in `path`; hand-built definitions (no path) differ in their build function.
/// Equality compares every field, the builder first (it differs first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CacheKey {
    /// The address of the definition's IR builder.
    pub build: usize,
    pub spec: Specialization,
    pub backend: BackendKind,
    /// The Rust path `#[kernel]` records for the definition.
    pub path: &'static str,
    pub name: &'static str,
    /// The version of the compiler that produced the code.
    pub compiler: &'static str,
}

/// Hashes what tells keys apart in practice (the builder and the specialisation); keys
/// that are equal hash alike, since equality compares these too.
impl Hash for CacheKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.build.hash(state);
        self.spec.hash(state);
        self.backend.hash(state);
    }
}

impl CacheKey {
    /// The key of `def` specialised as `spec` (taken, not copied) on `backend`.
    pub fn new(def: &KernelDef, spec: Specialization, backend: BackendKind) -> CacheKey {
        CacheKey {
            build: def.build as usize,
            spec,
            backend,
            path: def.signature.path,
            name: def.signature.name,
            compiler: env!("CARGO_PKG_VERSION"),
        }
    }
}

/// A multiply-rotate hasher for the cache's small keys: the map is process-internal (no
/// hostile keys), and SipHash's cost showed in every launch.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A compiled kernel and the facts launches check against.
#[derive(Clone)]
pub(crate) struct CacheEntry {
    pub compiled: Arc<dyn CompiledKernel>,
    /// The kernel (before or after optimisation) uses simdgroup collectives or group reductions.
    pub needs_simd_multiple: bool,
    /// The kernel multiplies tiles on warpgroups: its group size is a multiple of 128.
    pub needs_warpgroups: bool,
    /// Threadgroup memory of the optimised kernel, in bytes.
    pub shared_bytes: usize,
    /// For each parameter of the compiled kernel, its position among the launch's
    /// arguments (the signature's parameters).
    pub arg_order: Vec<usize>,
}

/// How many recently launched entries [`CompileCache::recent`] compares before the map.
const RECENT: usize = 8;

#[derive(Default)]
pub(crate) struct CompileCache {
    entries: Mutex<HashMap<CacheKey, Arc<CacheEntry>, BuildHasherDefault<KeyHasher>>>,
    /// The last entries found or compiled, replaced in turn: a decode step launches a few
    /// kernels over and over, and comparing their keys as slices skips building a key.
    recent: Mutex<Recent>,
}

#[derive(Default)]
struct Recent {
    slots: [Option<(CacheKey, Arc<CacheEntry>)>; RECENT],
    next: usize,
}

impl CompileCache {
    /// The entry of `def` specialised as `(dtypes, constexprs)` on `backend`, if it is one
    /// of the last few found: every field of the key is compared, as the map compares it.
    pub fn recent(
        &self,
        def: &KernelDef,
        dtypes: &[Scalar],
        constexprs: &[Literal],
        backend: BackendKind,
    ) -> Option<Arc<CacheEntry>> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.slots.iter().flatten().find_map(|(k, e)| {
            (k.build == def.build as usize
                && k.backend == backend
                && k.spec.dtypes == dtypes
                && k.spec.constexprs == constexprs
                && k.path == def.signature.path
                && k.name == def.signature.name
                && k.compiler == env!("CARGO_PKG_VERSION"))
            .then(|| e.clone())
        })
    }

    /// Keeps `key`'s entry among the recent ones (unless it is already).
    pub fn remember(&self, key: CacheKey, entry: Arc<CacheEntry>) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.slots.iter().flatten().any(|(k, _)| *k == key) {
            return;
        }
        let i = recent.next % RECENT;
        recent.slots[i] = Some((key, entry));
        recent.next = (i + 1) % RECENT;
    }

    pub fn get(&self, key: &CacheKey) -> Option<Arc<CacheEntry>> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    pub fn insert(&self, key: CacheKey, entry: Arc<CacheEntry>) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, entry);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}
