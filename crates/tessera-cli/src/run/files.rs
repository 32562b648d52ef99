//! Host arrays in and out of `.npy` (through npyz) and `.safetensors` files: the dtype,
//! shape and little-endian bytes of one array, with errors that name the file.
//!
//! The conventions a NumPy user expects: bf16 `.npy` files are what NumPy writes for an
//! `ml_dtypes.bfloat16` array (a two-byte void, descr `<V2`), read and written as bf16,
//! never widened; integers of any width load when their values fit a 32-bit integer
//! ([`to_dtype`] then narrows them to the op's integer dtype, checking the range); outputs
//! are checked writable before an op runs ([`check_output`]) and land all together or
//! not at all ([`save_all`]).

use half::{bf16, f16};
use npyz::{TypeChar, TypeStr};
use safetensors::tensor::{Dtype as StDtype, SafeTensors, TensorView};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use tessera_runtime::DType;

/// One array on the host.
pub struct HostArray {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

/// `path` or `path:key` (a tensor inside a .safetensors file).
pub fn load(spec: &str, default_key: &str) -> Result<HostArray, String> {
    let (path, key) = match spec.rsplit_once(':') {
        Some((p, k)) if p.ends_with(".safetensors") => (p, Some(k)),
        _ => (spec, None),
    };
    if path.ends_with(".npy") {
        load_npy(path)
    } else if path.ends_with(".safetensors") {
        load_safetensors(path, key, default_key)
    } else {
        Err(format!(
            "`{path}`: expected a .npy or .safetensors file (optionally `file.safetensors:tensor`)"
        ))
    }
}

/// The `.npy` descr of bf16: what NumPy writes for `ml_dtypes.bfloat16`, which it knows
/// only as two opaque bytes.
const BF16_DESCR: &str = "<V2";

fn load_npy(path: &str) -> Result<HostArray, String> {
    let file = File::open(path).map_err(|e| format!("`{path}`: cannot open: {e}"))?;
    let npy = npyz::NpyFile::new(BufReader::new(file))
        .map_err(|e| format!("`{path}`: not a valid .npy file: {e}"))?;
    if npy.order() != npyz::Order::C {
        return Err(format!(
            "`{path}`: Fortran-ordered arrays are not supported; save it C-contiguous (np.ascontiguousarray)"
        ));
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = match npy.dtype() {
        npyz::DType::Plain(t) => t,
        other => {
            return Err(format!(
                "`{path}`: structured dtype {other:?} is not supported; use a plain float or integer array"
            ))
        }
    };
    let bad = |e: std::io::Error| format!("`{path}`: cannot read the data: {e}");
    let too_wide = |(i, v): (usize, i128)| {
        format!("`{path}`: value {v} at index {i} does not fit a 32-bit integer")
    };
    let (dtype, bytes) = match (descr.type_char(), descr.size_field()) {
        (TypeChar::Float, 4) => (DType::F32, bytes_of(npy.into_vec::<f32>().map_err(bad)?)),
        (TypeChar::Float, 2) => (DType::F16, bytes_of(npy.into_vec::<f16>().map_err(bad)?)),
        (TypeChar::RawData, 2) => {
            let raw = npy.into_vec::<npyz::FixedSizeBytes<2>>().map_err(bad)?;
            (DType::BF16, raw.iter().flat_map(|b| b.0).collect())
        }
        (TypeChar::Bool, 1) => {
            let flags = npy.into_vec::<bool>().map_err(bad)?;
            (DType::Bool, flags.into_iter().map(u8::from).collect())
        }
        (TypeChar::Uint, 1) => (DType::U8, bytes_of(npy.into_vec::<u8>().map_err(bad)?)),
        (TypeChar::Int, 1) => (DType::I8, bytes_of(npy.into_vec::<i8>().map_err(bad)?)),
        (TypeChar::Uint, 4) => (DType::U32, bytes_of(npy.into_vec::<u32>().map_err(bad)?)),
        (TypeChar::Int, 4) => (DType::I32, bytes_of(npy.into_vec::<i32>().map_err(bad)?)),
        (TypeChar::Uint, 2) => narrow(npy.into_vec::<u16>().map_err(bad)?).map_err(too_wide)?,
        (TypeChar::Int, 2) => narrow(npy.into_vec::<i16>().map_err(bad)?).map_err(too_wide)?,
        (TypeChar::Uint, 8) => narrow(npy.into_vec::<u64>().map_err(bad)?).map_err(too_wide)?,
        (TypeChar::Int, 8) => narrow(npy.into_vec::<i64>().map_err(bad)?).map_err(too_wide)?,
        _ => {
            return Err(format!(
                "`{path}`: dtype `{descr}` is not supported; use float32, float16, \
                 ml_dtypes.bfloat16 (descr {BF16_DESCR}), an integer type or bool"
            ))
        }
    };
    Ok(HostArray {
        dtype,
        shape,
        bytes,
    })
}

/// An integer array of a width tessera has no dtype for, as u32 when every value is
/// non-negative and fits (the indices, positions and lengths ops take), else as i32; the
/// first value that fits neither is the error.
fn narrow<T: Copy + Into<i128>>(values: Vec<T>) -> Result<(DType, Vec<u8>), (usize, i128)> {
    let all_unsigned = values.iter().all(|&v| v.into() >= 0);
    let to = if all_unsigned { DType::U32 } else { DType::I32 };
    let bytes = encode_ints(values.iter().map(|&v| v.into()), to)?;
    Ok((to, bytes))
}

/// `values` as little-endian `to` (an integer dtype), or the first (index, value) out of
/// its range.
fn encode_ints(values: impl Iterator<Item = i128>, to: DType) -> Result<Vec<u8>, (usize, i128)> {
    let mut out = Vec::with_capacity(values.size_hint().0 * to.size_bytes());
    for (i, v) in values.enumerate() {
        let fits = match to {
            DType::U8 => u8::try_from(v).map(|x| out.push(x)).is_ok(),
            DType::I8 => i8::try_from(v).map(|x| out.extend(x.to_le_bytes())).is_ok(),
            DType::U32 => u32::try_from(v)
                .map(|x| out.extend(x.to_le_bytes()))
                .is_ok(),
            DType::I32 => i32::try_from(v)
                .map(|x| out.extend(x.to_le_bytes()))
                .is_ok(),
            _ => false,
        };
        if !fits {
            return Err((i, v));
        }
    }
    Ok(out)
}

/// The values of an integer array, widened.
fn decode_ints(a: &HostArray) -> Vec<i128> {
    match a.dtype {
        DType::U8 => a.bytes.iter().map(|&b| b as i128).collect(),
        DType::I8 => a.bytes.iter().map(|&b| b as i8 as i128).collect(),
        DType::U32 => pods::<u32>(&a.bytes).into_iter().map(i128::from).collect(),
        DType::I32 => pods::<i32>(&a.bytes).into_iter().map(i128::from).collect(),
        _ => Vec::new(),
    }
}

/// `a` as the dtype an op takes. Integers convert to any integer dtype their values fit
/// (the first that does not is the error: `np.arange` positions, i64 in the file, become
/// u32); every other pair must already match, since converting floats would change the
/// numbers the op sees (bf16 is never widened to f32, nor f32 rounded to f16).
pub fn to_dtype(a: HostArray, want: DType) -> Result<HostArray, String> {
    if a.dtype == want {
        return Ok(a);
    }
    if a.dtype.is_int() && want.is_int() {
        let bytes = encode_ints(decode_ints(&a).into_iter(), want).map_err(|(i, v)| {
            format!(
                "value {v} at index {i} does not fit {want}, the op's dtype for it ({})",
                int_range(want)
            )
        })?;
        return Ok(HostArray {
            dtype: want,
            shape: a.shape,
            bytes,
        });
    }
    Err(format!(
        "is {}, the op takes {want}; convert it first (numpy: `x.astype({})`)",
        a.dtype,
        numpy_name(want)
    ))
}

fn int_range(t: DType) -> String {
    match t {
        DType::U8 => format!("0..={}", u8::MAX),
        DType::I8 => format!("{}..={}", i8::MIN, i8::MAX),
        DType::U32 => format!("0..={}", u32::MAX),
        DType::I32 => format!("{}..={}", i32::MIN, i32::MAX),
        _ => String::new(),
    }
}

fn numpy_name(t: DType) -> &'static str {
    match t {
        DType::F32 => "np.float32",
        DType::F16 => "np.float16",
        DType::BF16 => "ml_dtypes.bfloat16",
        DType::U32 => "np.uint32",
        DType::I32 => "np.int32",
        DType::U8 => "np.uint8",
        DType::I8 => "np.int8",
        DType::Bool => "np.bool_",
    }
}

fn load_safetensors(path: &str, key: Option<&str>, default_key: &str) -> Result<HostArray, String> {
    let buf = std::fs::read(path).map_err(|e| format!("`{path}`: cannot read: {e}"))?;
    let st = SafeTensors::deserialize(&buf)
        .map_err(|e| format!("`{path}`: not a valid .safetensors file: {e}"))?;
    let names = st.names();
    let key = match key {
        Some(k) => k.to_string(),
        None if names.contains(&default_key) => default_key.to_string(),
        None if names.len() == 1 => names[0].to_string(),
        None => {
            return Err(format!(
                "`{path}` holds {names:?}; name one as `{path}:NAME`"
            ))
        }
    };
    let view = st
        .tensor(&key)
        .map_err(|e| format!("`{path}`: no tensor `{key}`: {e}"))?;
    let too_wide = |(i, v): (usize, i128)| {
        format!("`{path}:{key}`: value {v} at index {i} does not fit a 32-bit integer")
    };
    let data = view.data();
    let (dtype, bytes) = match view.dtype() {
        StDtype::F32 => (DType::F32, data.to_vec()),
        StDtype::F16 => (DType::F16, data.to_vec()),
        StDtype::BF16 => (DType::BF16, data.to_vec()),
        StDtype::U32 => (DType::U32, data.to_vec()),
        StDtype::I32 => (DType::I32, data.to_vec()),
        StDtype::U8 => (DType::U8, data.to_vec()),
        StDtype::I8 => (DType::I8, data.to_vec()),
        StDtype::BOOL => (DType::Bool, data.to_vec()),
        StDtype::U16 => narrow(pods::<u16>(data)).map_err(too_wide)?,
        StDtype::I16 => narrow(pods::<i16>(data)).map_err(too_wide)?,
        StDtype::U64 => narrow(pods::<u64>(data)).map_err(too_wide)?,
        StDtype::I64 => narrow(pods::<i64>(data)).map_err(too_wide)?,
        other => {
            return Err(format!(
                "`{path}:{key}`: dtype {other:?} is not supported; use F32, F16, BF16, an integer type or BOOL"
            ))
        }
    };
    Ok(HostArray {
        dtype,
        shape: view.shape().to_vec(),
        bytes,
    })
}

/// Refuses output paths before any work is done: one given twice, or any that
/// [`check_output`] refuses.
pub fn check_outputs<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for path in paths {
        if !seen.insert(path) {
            return Err(format!("`{path}` is given for two outputs"));
        }
        check_output(path)?;
    }
    Ok(())
}

/// Refuses an output path before any work is done: not .npy / .safetensors, its folder
/// missing or not writable, or the path itself a folder or a read-only file.
pub fn check_output(path: &str) -> Result<(), String> {
    if !path.ends_with(".npy") && !path.ends_with(".safetensors") {
        return Err(format!(
            "`{path}`: outputs are written as .npy or .safetensors"
        ));
    }
    let p = Path::new(path);
    let dir = folder_of(p);
    if !dir.is_dir() {
        return Err(format!(
            "`{path}`: the folder `{}` does not exist",
            dir.display()
        ));
    }
    if p.is_dir() {
        return Err(format!("`{path}` is a folder"));
    }
    if p.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(p)
            .map_err(|e| format!("`{path}`: cannot write: {e}"))?;
    }
    // A file created and removed again: the only portable test that the folder takes
    // new files (permissions, read-only mounts).
    let probe = partial_path(p, "probe");
    File::create(&probe)
        .map_err(|e| format!("`{path}`: cannot create files in `{}`: {e}", dir.display()))?;
    std::fs::remove_file(&probe).ok();
    Ok(())
}

/// Writes every `(path, tensor name, array)`, all or none: each goes to a temporary file
/// beside its destination, and only when every one is written are they renamed into
/// place. On an error the temporary files are removed and no destination is touched.
pub fn save_all(outputs: &[(&str, &str, HostArray)]) -> Result<(), String> {
    let mut written: Vec<(PathBuf, &str)> = Vec::new();
    for (path, name, a) in outputs {
        let partial = partial_path(Path::new(path), "partial");
        if let Err(e) = save_to(&partial, path, name, a) {
            std::fs::remove_file(&partial).ok();
            for (p, _) in &written {
                std::fs::remove_file(p).ok();
            }
            return Err(e);
        }
        written.push((partial, path));
    }
    for (partial, path) in &written {
        std::fs::rename(partial, path).map_err(|e| format!("`{path}`: cannot write: {e}"))?;
    }
    Ok(())
}

/// The folder a path lands in (`.` for a bare file name).
fn folder_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `dir/.name.tessera-WHAT-PID`: a hidden file beside `p`, unique to this process.
fn partial_path(p: &Path, what: &str) -> PathBuf {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    folder_of(p).join(format!(".{name}.tessera-{what}-{}", std::process::id()))
}

/// Writes `a` to `file` in the format `path`'s extension names (.npy, or .safetensors
/// under the tensor name `name`).
fn save_to(file: &Path, path: &str, name: &str, a: &HostArray) -> Result<(), String> {
    let io = |e: std::io::Error| format!("`{path}`: cannot write: {e}");
    if path.ends_with(".safetensors") {
        let dtype = match a.dtype {
            DType::F32 => StDtype::F32,
            DType::F16 => StDtype::F16,
            DType::BF16 => StDtype::BF16,
            DType::U32 => StDtype::U32,
            DType::I32 => StDtype::I32,
            DType::U8 => StDtype::U8,
            DType::I8 => StDtype::I8,
            DType::Bool => StDtype::BOOL,
        };
        let view = TensorView::new(dtype, a.shape.clone(), &a.bytes)
            .map_err(|e| format!("`{path}`: {e}"))?;
        return safetensors::tensor::serialize_to_file([(name, view)], None, file)
            .map_err(|e| format!("`{path}`: cannot write: {e}"));
    }
    if !path.ends_with(".npy") {
        return Err(format!(
            "`{path}`: outputs are written as .npy or .safetensors"
        ));
    }
    let w = BufWriter::new(File::create(file).map_err(io)?);
    let shape: Vec<u64> = a.shape.iter().map(|&d| d as u64).collect();
    match a.dtype {
        DType::F32 => write_npy::<f32>(w, &shape, &pods(&a.bytes)),
        DType::F16 => write_npy::<f16>(w, &shape, &pods(&a.bytes)),
        DType::BF16 => {
            let raw: Vec<npyz::FixedSizeBytes<2>> = pods::<bf16>(&a.bytes)
                .iter()
                .map(|x| npyz::FixedSizeBytes(x.to_le_bytes()))
                .collect();
            let descr: TypeStr = BF16_DESCR.parse().map_err(|e| format!("{e}"))?;
            write_npy_as(w, &shape, npyz::DType::Plain(descr), &raw)
        }
        DType::U32 => write_npy::<u32>(w, &shape, &pods(&a.bytes)),
        DType::I32 => write_npy::<i32>(w, &shape, &pods(&a.bytes)),
        DType::U8 => write_npy::<u8>(w, &shape, &a.bytes),
        DType::I8 => write_npy::<i8>(w, &shape, &pods(&a.bytes)),
        DType::Bool => {
            let flags: Vec<bool> = a.bytes.iter().map(|&b| b != 0).collect();
            write_npy::<bool>(w, &shape, &flags)
        }
    }
    .map_err(io)
}

/// An `.npy` of `data` with NumPy's own descr for `T`.
fn write_npy<T: npyz::AutoSerialize + Copy>(
    w: BufWriter<File>,
    shape: &[u64],
    data: &[T],
) -> std::io::Result<()> {
    write_npy_as(w, shape, T::default_dtype(), data)
}

/// An `.npy` of `data` under the dtype `dtype`.
fn write_npy_as<T: npyz::Serialize + Copy>(
    w: BufWriter<File>,
    shape: &[u64],
    dtype: npyz::DType,
    data: &[T],
) -> std::io::Result<()> {
    use npyz::WriterBuilder;
    let mut writer = npyz::WriteOptions::new()
        .dtype(dtype)
        .shape(shape)
        .writer(w)
        .begin_nd()?;
    writer.extend(data.iter().copied())?;
    writer.finish()
}

fn bytes_of<T: bytemuck::Pod>(v: Vec<T>) -> Vec<u8> {
    bytemuck::cast_slice(&v).to_vec()
}

/// Little-endian bytes as values, whatever their alignment.
fn pods<T: bytemuck::Pod>(b: &[u8]) -> Vec<T> {
    b.chunks_exact(std::mem::size_of::<T>())
        .map(bytemuck::pod_read_unaligned)
        .collect()
}
