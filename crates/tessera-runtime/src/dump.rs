//! `TESSERA_DUMP=dir`: writes each kernel's IR and generated sources when first compiled.

use crate::backend::CompiledKernel;
use crate::error::{Result, RuntimeError};
use std::path::{Path, PathBuf};
use tessera_ir::Kernel;

/// The dump directory from `TESSERA_DUMP`, if set and non-empty.
pub(crate) fn dump_dir_from_env() -> Option<PathBuf> {
    std::env::var_os("TESSERA_DUMP")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// A file-name-safe form of a specialised kernel name.
fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|' => '_',
            c => c,
        })
        .collect()
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|source| RuntimeError::Dump {
        path: path.display().to_string(),
        source,
    })
}

/// Writes `<specialized name>.ir` (the optimised IR) and one file per generated source.
pub(crate) fn dump(dir: &Path, kernel: &Kernel, compiled: &dyn CompiledKernel) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| RuntimeError::Dump {
        path: dir.display().to_string(),
        source,
    })?;
    let stem = file_stem(&kernel.specialized_name());
    write(&dir.join(format!("{stem}.ir")), &kernel.to_string())?;
    for (ext, text) in compiled.sources() {
        write(&dir.join(format!("{stem}.{ext}")), &text)?;
    }
    Ok(())
}
