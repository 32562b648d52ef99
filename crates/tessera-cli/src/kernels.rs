//! Looks up registered kernels and parses what the command line says about them: backend
//! names, dtypes, booleans and `name=value` specialisation pairs.

use std::collections::BTreeMap;
use tessera_ir::KernelDef;
use tessera_runtime::{Context, DType};
use tessera_std::{ops, KernelUse};

/// Every registered kernel × specialisation, deduplicated, in registry order.
pub fn all_uses() -> Vec<KernelUse> {
    let mut seen = std::collections::HashSet::new();
    let mut v = Vec::new();
    for op in ops() {
        for u in (op.kernels)() {
            if seen.insert((u.def.name(), u.spec.clone())) {
                v.push(u);
            }
        }
    }
    v
}

/// Every registered kernel definition by name.
pub fn defs() -> BTreeMap<&'static str, &'static KernelDef> {
    all_uses()
        .into_iter()
        .map(|u| (u.def.name(), u.def))
        .collect()
}

pub fn find_def(name: &str) -> Result<&'static KernelDef, String> {
    let defs = defs();
    defs.get(name).copied().ok_or_else(|| {
        let names: Vec<&str> = defs.keys().copied().collect();
        format!(
            "no kernel named `{name}`; registered kernels: {}",
            names.join(", ")
        )
    })
}

pub fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::parse(s).ok_or_else(|| {
        format!("`{s}` is not a dtype; expected f32, f16, bf16, u32, i32, u8, i8 or bool")
    })
}

/// `k=v` → (k, v).
pub fn parse_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("expected name=value, got `{s}`")),
    }
}

/// The context for `--backend`, or the best one present.
pub fn context(backend: Option<&str>) -> Result<Context, String> {
    match backend {
        Some(b) => Context::by_name(b).map_err(|e| e.to_string()),
        None => Context::new().map_err(|e| e.to_string()),
    }
}
