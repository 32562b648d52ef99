//! Host arrays in and out of `.npy` (through npyz) and `.safetensors` files: the dtype,
//! shape and little-endian bytes of one array, with errors that name the file.

use half::{bf16, f16};
use safetensors::tensor::{Dtype as StDtype, SafeTensors, TensorView};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;
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
        npyz::DType::Plain(t) => t.to_string(),
        other => {
            return Err(format!(
                "`{path}`: structured dtype {other:?} is not supported; use f32, f16, u32 or i32"
            ))
        }
    };
    let bad = |e: std::io::Error| format!("`{path}`: cannot read the data: {e}");
    let (dtype, bytes) = match descr.as_str() {
        "<f4" => (
            DType::F32,
            bytemuck::cast_slice(&npy.into_vec::<f32>().map_err(bad)?).to_vec(),
        ),
        "<f2" => (
            DType::F16,
            bytemuck::cast_slice(&npy.into_vec::<f16>().map_err(bad)?).to_vec(),
        ),
        "<u4" => (
            DType::U32,
            bytemuck::cast_slice(&npy.into_vec::<u32>().map_err(bad)?).to_vec(),
        ),
        "<i4" => (
            DType::I32,
            bytemuck::cast_slice(&npy.into_vec::<i32>().map_err(bad)?).to_vec(),
        ),
        other => {
            return Err(format!(
                "`{path}`: dtype `{other}` is not supported; use <f4, <f2, <u4 or <i4 (bf16 through .safetensors)"
            ))
        }
    };
    Ok(HostArray {
        dtype,
        shape,
        bytes,
    })
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
    let dtype = match view.dtype() {
        StDtype::F32 => DType::F32,
        StDtype::F16 => DType::F16,
        StDtype::BF16 => DType::BF16,
        StDtype::U32 => DType::U32,
        StDtype::I32 => DType::I32,
        other => {
            return Err(format!(
                "`{path}:{key}`: dtype {other:?} is not supported; use F32, F16, BF16, U32 or I32"
            ))
        }
    };
    Ok(HostArray {
        dtype,
        shape: view.shape().to_vec(),
        bytes: view.data().to_vec(),
    })
}

/// Writes `a` to `path` (.npy or .safetensors under the tensor name `name`). A .npy file
/// has no bf16: bf16 is widened to f32 there.
pub fn save(path: &str, name: &str, a: &HostArray) -> Result<(), String> {
    if path.ends_with(".safetensors") {
        let dtype = match a.dtype {
            DType::F32 => StDtype::F32,
            DType::F16 => StDtype::F16,
            DType::BF16 => StDtype::BF16,
            DType::U32 => StDtype::U32,
            DType::I32 => StDtype::I32,
            other => return Err(format!("cannot write a {other} tensor")),
        };
        let view = TensorView::new(dtype, a.shape.clone(), &a.bytes)
            .map_err(|e| format!("`{path}`: {e}"))?;
        return safetensors::tensor::serialize_to_file([(name, view)], None, Path::new(path))
            .map_err(|e| format!("`{path}`: cannot write: {e}"));
    }
    if !path.ends_with(".npy") {
        return Err(format!(
            "`{path}`: outputs are written as .npy or .safetensors"
        ));
    }
    let file = File::create(path).map_err(|e| format!("`{path}`: cannot create: {e}"))?;
    let shape: Vec<u64> = a.shape.iter().map(|&d| d as u64).collect();
    let w = BufWriter::new(file);
    let io = |e: std::io::Error| format!("`{path}`: cannot write: {e}");
    match a.dtype {
        DType::F32 => write_npy::<f32>(w, &shape, &pods(&a.bytes)).map_err(io),
        DType::F16 => write_npy::<f16>(w, &shape, &pods(&a.bytes)).map_err(io),
        DType::BF16 => {
            let wide: Vec<f32> = pods::<bf16>(&a.bytes).iter().map(|x| x.to_f32()).collect();
            write_npy::<f32>(w, &shape, &wide).map_err(io)
        }
        DType::U32 => write_npy::<u32>(w, &shape, &pods(&a.bytes)).map_err(io),
        DType::I32 => write_npy::<i32>(w, &shape, &pods(&a.bytes)).map_err(io),
        other => Err(format!("cannot write a {other} tensor")),
    }
}

fn write_npy<T: npyz::AutoSerialize + Copy>(
    w: BufWriter<File>,
    shape: &[u64],
    data: &[T],
) -> std::io::Result<()> {
    use npyz::WriterBuilder;
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(w)
        .begin_nd()?;
    writer.extend(data.iter().copied())?;
    writer.finish()
}

/// Little-endian bytes as values, whatever their alignment.
fn pods<T: bytemuck::Pod>(b: &[u8]) -> Vec<T> {
    b.chunks_exact(std::mem::size_of::<T>())
        .map(bytemuck::pod_read_unaligned)
        .collect()
}
