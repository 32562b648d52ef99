//! A Hugging Face checkpoint's tensors: `model.safetensors`, or the shards that
//! `model.safetensors.index.json` names, read into memory and looked up by name (or
//! tensors made in memory, for random weights at a real model's widths). A weight
//! comes out as a device tensor only after its presence, dtype (bf16, f16 or f32, one
//! dtype for the whole model) and exact shape are checked; a failure names the tensor and
//! the file.

use crate::error::ModelError;
use half::{bf16, f16};
use safetensors::tensor::{Dtype as StDtype, SafeTensors};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tessera_runtime::{Context, DType, Tensor};

/// One source of tensors: a `.safetensors` file's bytes (or weights made in memory).
struct Blob {
    /// Named in messages.
    path: PathBuf,
    bytes: Vec<u8>,
}

/// Where a tensor lives: its blob, dtype, shape and byte range.
struct Stored {
    blob: usize,
    dtype: StDtype,
    shape: Vec<usize>,
    range: std::ops::Range<usize>,
}

/// The tensors of a checkpoint folder.
pub struct Checkpoint {
    blobs: Vec<Blob>,
    index: HashMap<String, Stored>,
}

/// A tensor's dtype in Tessera's terms, when it is one a weight may have.
fn weight_dtype(d: StDtype) -> Option<DType> {
    match d {
        StDtype::F32 => Some(DType::F32),
        StDtype::F16 => Some(DType::F16),
        StDtype::BF16 => Some(DType::BF16),
        _ => None,
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ModelError> {
    std::fs::read(path).map_err(|source| ModelError::Io {
        path: path.display().to_string(),
        source,
    })
}

impl Checkpoint {
    /// Opens `dir/model.safetensors.index.json`'s shards if it exists, else
    /// `dir/model.safetensors`.
    pub fn open(dir: &Path) -> Result<Checkpoint, ModelError> {
        let index_path = dir.join("model.safetensors.index.json");
        let files = if index_path.exists() {
            shard_names(&index_path)?
                .into_iter()
                .map(|f| dir.join(f))
                .collect()
        } else {
            vec![dir.join("model.safetensors")]
        };
        let mut ckpt = Checkpoint {
            blobs: Vec::new(),
            index: HashMap::new(),
        };
        for path in files {
            let bytes = read(&path)?;
            let (header, metadata) = SafeTensors::read_metadata(&bytes).map_err(|e| {
                ModelError::weights(format!(
                    "{}: not a valid safetensors file: {e}",
                    path.display()
                ))
            })?;
            let blob = ckpt.blobs.len();
            let start = 8 + header;
            for (name, info) in metadata.tensors() {
                let (a, b) = info.data_offsets;
                let stored = Stored {
                    blob,
                    dtype: info.dtype,
                    shape: info.shape.clone(),
                    range: start + a..start + b,
                };
                ckpt.index.insert(name, stored);
            }
            ckpt.blobs.push(Blob { path, bytes });
        }
        Ok(ckpt)
    }

    /// A checkpoint of tensors made in memory (`name`, dtype, shape, little-endian bytes),
    /// named `source` in messages.
    pub fn in_memory(
        source: &str,
        tensors: Vec<(String, DType, Vec<usize>, Vec<u8>)>,
    ) -> Result<Checkpoint, ModelError> {
        let mut bytes = Vec::new();
        let mut index = HashMap::new();
        for (name, dtype, shape, data) in tensors {
            let st = match dtype {
                DType::F32 => StDtype::F32,
                DType::F16 => StDtype::F16,
                DType::BF16 => StDtype::BF16,
                other => {
                    return Err(ModelError::weights(format!(
                        "`{name}`: {other} is not a weight dtype"
                    )))
                }
            };
            let want = shape.iter().product::<usize>() * dtype.size_bytes();
            if data.len() != want {
                return Err(ModelError::weights(format!(
                    "`{name}`: {} bytes for shape {shape:?} of {dtype} ({want} expected)",
                    data.len()
                )));
            }
            let range = bytes.len()..bytes.len() + data.len();
            bytes.extend_from_slice(&data);
            index.insert(
                name,
                Stored {
                    blob: 0,
                    dtype: st,
                    shape,
                    range,
                },
            );
        }
        Ok(Checkpoint {
            blobs: vec![Blob {
                path: PathBuf::from(source),
                bytes,
            }],
            index,
        })
    }

    /// True if the checkpoint holds a tensor `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// The dtype of tensor `name`, which must be a float weight dtype.
    pub fn dtype(&self, name: &str) -> Result<DType, ModelError> {
        let (path, t) = self.stored(name)?;
        weight_dtype(t.dtype).ok_or_else(|| {
            ModelError::weights(format!(
                "`{name}` in {} is {:?}; weights must be BF16, F16 or F32",
                path.display(),
                t.dtype
            ))
        })
    }

    fn stored(&self, name: &str) -> Result<(&Path, &Stored), ModelError> {
        match self.index.get(name) {
            Some(t) => Ok((&self.blobs[t.blob].path, t)),
            None => {
                let files: Vec<String> = self
                    .blobs
                    .iter()
                    .map(|b| b.path.display().to_string())
                    .collect();
                Err(ModelError::weights(format!(
                    "missing tensor `{name}` (looked in {})",
                    files.join(", ")
                )))
            }
        }
    }

    /// The raw bytes of `name` after checking it is `dtype` of exactly `shape`.
    pub fn bytes(&self, name: &str, dtype: DType, shape: &[usize]) -> Result<&[u8], ModelError> {
        let (path, t) = self.stored(name)?;
        let got = self.dtype(name)?;
        if got != dtype {
            return Err(ModelError::weights(format!(
                "`{name}` in {} is {got}, the model's weights are {dtype}; mixed dtypes are not supported",
                path.display()
            )));
        }
        if t.shape != shape {
            return Err(ModelError::weights(format!(
                "`{name}` in {} has shape {:?}, the config implies {shape:?}",
                path.display(),
                t.shape
            )));
        }
        Ok(&self.blobs[t.blob].bytes[t.range.clone()])
    }

    /// `name` as a device tensor of `shape`: stored as `load.stored`, held as
    /// `load.device` (converted on the host while loading when the two differ).
    pub fn tensor(
        &self,
        ctx: &Context,
        name: &str,
        load: LoadAs,
        shape: &[usize],
    ) -> Result<Tensor, ModelError> {
        let bytes = convert(self.bytes(name, load.stored, shape)?, load);
        Ok(ctx.tensor_from_bytes(load.device, &bytes, shape)?)
    }

    /// The tensors `names`, each `[rows_i, cols]`, stacked along rows into one device
    /// tensor `[Σ rows_i, cols]` (a merged projection, such as gate and up).
    pub fn stacked(
        &self,
        ctx: &Context,
        names: &[(&str, usize)],
        load: LoadAs,
        cols: usize,
    ) -> Result<Tensor, ModelError> {
        let mut bytes = Vec::new();
        for &(name, rows) in names {
            bytes.extend_from_slice(&convert(
                self.bytes(name, load.stored, &[rows, cols])?,
                load,
            ));
        }
        let rows: usize = names.iter().map(|&(_, r)| r).sum();
        Ok(ctx.tensor_from_bytes(load.device, &bytes, &[rows, cols])?)
    }
}

/// The dtype a checkpoint stores its weights in, and the one they are held in on the
/// device (bf16 weights run in f32 to check them against an f32 reference, say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadAs {
    pub stored: DType,
    pub device: DType,
}

/// Little-endian float bytes of `load.stored` as `load.device` (each value rounded to
/// nearest where the target is narrower); borrowed when they are the same.
fn convert(bytes: &[u8], load: LoadAs) -> Cow<'_, [u8]> {
    if load.stored == load.device {
        return Cow::Borrowed(bytes);
    }
    let width = load.stored.size_bytes();
    let value = |b: &[u8]| -> f32 {
        match load.stored {
            DType::BF16 => bf16::from_le_bytes([b[0], b[1]]).to_f32(),
            DType::F16 => f16::from_le_bytes([b[0], b[1]]).to_f32(),
            _ => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        }
    };
    let mut out = Vec::with_capacity(bytes.len() / width * load.device.size_bytes());
    for b in bytes.chunks_exact(width) {
        let x = value(b);
        match load.device {
            DType::BF16 => out.extend_from_slice(&bf16::from_f32(x).to_le_bytes()),
            DType::F16 => out.extend_from_slice(&f16::from_f32(x).to_le_bytes()),
            _ => out.extend_from_slice(&x.to_le_bytes()),
        }
    }
    Cow::Owned(out)
}

/// The shard files an index's `weight_map` names, each once, in order of appearance.
fn shard_names(index_path: &Path) -> Result<Vec<String>, ModelError> {
    let text = String::from_utf8(read(index_path)?)
        .map_err(|_| ModelError::weights(format!("{}: not UTF-8", index_path.display())))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        ModelError::weights(format!("{}: not valid JSON: {e}", index_path.display()))
    })?;
    let map = value
        .get("weight_map")
        .and_then(serde_json::Value::as_object)
        .ok_or_else(|| {
            ModelError::weights(format!("{}: no `weight_map` object", index_path.display()))
        })?;
    let mut files: Vec<String> = Vec::new();
    for (name, file) in map {
        let file = file.as_str().ok_or_else(|| {
            ModelError::weights(format!(
                "{}: the file of `{name}` is not a string",
                index_path.display()
            ))
        })?;
        if file.contains('/') || file.contains('\\') || file.starts_with('.') {
            return Err(ModelError::weights(format!(
                "{}: shard name `{file}` must be a file in the folder",
                index_path.display()
            )));
        }
        if !files.iter().any(|f| f == file) {
            files.push(file.to_string());
        }
    }
    Ok(files)
}
