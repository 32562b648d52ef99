//! The file conventions of `tessera run`, on the file layer itself: bf16 `.npy` exactly as
//! NumPy writes an `ml_dtypes.bfloat16` array, integers of any width narrowed with a range
//! check, output paths refused before any work, and outputs written all or none.

#[allow(dead_code)]
#[path = "../src/run/files.rs"]
mod files;

use files::HostArray;
use std::path::{Path, PathBuf};
use tessera_runtime::DType;

mod common;

use common::npy_bytes;

fn dir(name: &str) -> PathBuf {
    common::dir("files", name)
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The bytes `np.save(f, np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16))` writes
/// (NumPy 2.4, ml_dtypes 0.6): a `<V2` descr and the raw little-endian bf16 values.
fn numpy_bf16_file() -> Vec<u8> {
    let b = npy_bytes("<V2", "(3,)", &[0xc0, 0x3f, 0x00, 0xc0, 0x50, 0x40]);
    assert_eq!(b.len(), 128 + 6, "NumPy's header is 128 bytes here");
    b
}

fn bf16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
        .collect()
}

#[test]
fn bf16_npy_from_ml_dtypes_reads_as_bf16_and_writes_back_the_same() {
    let d = dir("bf16");
    let src = d.join("x.npy");
    std::fs::write(&src, numpy_bf16_file()).expect("write");
    let a = files::load(&s(&src), "x").expect("loads");
    assert_eq!(a.dtype, DType::BF16);
    assert_eq!(a.shape, vec![3]);
    assert_eq!(a.bytes, bf16_bytes(&[1.5, -2.0, 3.25]));

    // Written as bf16 (never widened): a `<V2` descr over the same two bytes a value,
    // which reads back as the same array.
    let out = d.join("y.npy");
    files::save_all(&[(s(&out).as_str(), "y", a)]).expect("writes");
    let written = std::fs::read(&out).expect("written");
    let header_len = u16::from_le_bytes([written[8], written[9]]) as usize;
    let header = String::from_utf8_lossy(&written[10..10 + header_len]);
    assert!(header.contains("'descr': '<V2'"), "{header}");
    assert_eq!(
        &written[10 + header_len..],
        &bf16_bytes(&[1.5, -2.0, 3.25])[..]
    );
    let back = files::load(&s(&out), "y").expect("reads back");
    assert_eq!((back.dtype, back.shape), (DType::BF16, vec![3]));
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn bf16_is_never_converted_to_another_float() {
    let a = HostArray {
        dtype: DType::BF16,
        shape: vec![2],
        bytes: bf16_bytes(&[1.0, 2.0]),
    };
    let e = files::to_dtype(a, DType::F32).err().expect("refused");
    assert!(e.contains("is bf16, the op takes f32"), "{e}");
    let a = HostArray {
        dtype: DType::F32,
        shape: vec![1],
        bytes: 1.0f32.to_le_bytes().to_vec(),
    };
    let e = files::to_dtype(a, DType::BF16).err().expect("refused");
    assert!(e.contains("ml_dtypes.bfloat16"), "{e}");
}

fn i64_npy(path: &Path, values: &[i64]) {
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(
        path,
        npy_bytes("<i8", &format!("({},)", values.len()), &data),
    )
    .expect("write");
}

fn u32s(a: &HostArray) -> Vec<u32> {
    a.bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn wide_integers_narrow_with_a_range_check() {
    let d = dir("ints");
    // `np.arange(5)`: i64 in the file, u32 positions for the op.
    let p = d.join("pos.npy");
    i64_npy(&p, &[0, 1, 2, 3, 4_000_000_000]);
    let a = files::load(&s(&p), "pos").expect("loads");
    assert_eq!(a.dtype, DType::U32);
    assert_eq!(u32s(&a), vec![0, 1, 2, 3, 4_000_000_000]);
    let same = files::to_dtype(a, DType::U32).expect("already u32");
    assert_eq!(u32s(&same), vec![0, 1, 2, 3, 4_000_000_000]);
    // The same values do not all fit i32: the first that does not is named.
    let e = files::to_dtype(same, DType::I32)
        .err()
        .expect("out of range");
    assert!(
        e.contains("value 4000000000 at index 4 does not fit i32"),
        "{e}"
    );

    // Negative values load as i32, and refuse u32 at the first negative one.
    i64_npy(&p, &[5, -3, 7]);
    let a = files::load(&s(&p), "pos").expect("loads");
    assert_eq!(a.dtype, DType::I32);
    let e = files::to_dtype(a, DType::U32).err().expect("negative");
    assert!(e.contains("value -3 at index 1 does not fit u32"), "{e}");

    // A value past every 32-bit integer is refused at load, naming the file.
    i64_npy(&p, &[1, 1 << 40]);
    let e = files::load(&s(&p), "pos").err().expect("too wide");
    assert!(
        e.contains("pos.npy") && e.contains("value 1099511627776 at index 1"),
        "{e}"
    );

    // u8 ↔ u32 both ways, within range.
    let a = HostArray {
        dtype: DType::U8,
        shape: vec![3],
        bytes: vec![0, 7, 255],
    };
    let wide = files::to_dtype(a, DType::U32).expect("widens");
    assert_eq!(u32s(&wide), vec![0, 7, 255]);
    let back = files::to_dtype(wide, DType::U8).expect("fits u8");
    assert_eq!(back.bytes, vec![0, 7, 255]);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn bool_npy_round_trips() {
    let d = dir("bool");
    let p = d.join("m.npy");
    std::fs::write(&p, npy_bytes("|b1", "(3,)", &[1, 0, 1])).expect("write");
    let a = files::load(&s(&p), "m").expect("loads");
    assert_eq!((a.dtype, a.bytes.clone()), (DType::Bool, vec![1, 0, 1]));
    let out = d.join("o.npy");
    files::save_all(&[(s(&out).as_str(), "m", a)]).expect("writes");
    let back = files::load(&s(&out), "m").expect("reads back");
    assert_eq!((back.dtype, back.bytes), (DType::Bool, vec![1, 0, 1]));
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn output_paths_are_checked_before_any_work() {
    let d = dir("check");
    let ok = s(&d.join("out.npy"));
    files::check_outputs([ok.as_str()]).expect("a writable folder");
    assert_eq!(
        std::fs::read_dir(&d).expect("dir").count(),
        0,
        "the check leaves nothing behind"
    );
    let missing = s(&d.join("no-such-folder").join("out.npy"));
    let e = files::check_outputs([missing.as_str()]).unwrap_err();
    assert!(e.contains("does not exist"), "{e}");
    let e = files::check_outputs([ok.as_str(), ok.as_str()]).unwrap_err();
    assert!(e.contains("given for two outputs"), "{e}");
    let e = files::check_outputs([s(&d.join("out.txt")).as_str()]).unwrap_err();
    assert!(e.contains(".npy or .safetensors"), "{e}");
    let e = files::check_outputs([s(&d).as_str()]).unwrap_err();
    assert!(e.contains(".npy or .safetensors"), "{e}");
    std::fs::create_dir(d.join("sub.npy")).expect("mkdir");
    let e = files::check_outputs([s(&d.join("sub.npy")).as_str()]).unwrap_err();
    assert!(e.contains("is a folder"), "{e}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn two_outputs_land_together_or_not_at_all() {
    let d = dir("pair");
    let first = d.join("first.npy");
    let second = d.join("gone").join("second.npy");
    let array = || HostArray {
        dtype: DType::F32,
        shape: vec![2],
        bytes: [1.0f32, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect(),
    };
    let e = files::save_all(&[
        (s(&first).as_str(), "a", array()),
        (s(&second).as_str(), "b", array()),
    ])
    .unwrap_err();
    assert!(e.contains("second.npy"), "{e}");
    let left: Vec<_> = std::fs::read_dir(&d)
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "nothing left behind: {left:?}");
    // Both writable: both land.
    let second = d.join("second.safetensors");
    files::save_all(&[
        (s(&first).as_str(), "a", array()),
        (s(&second).as_str(), "b", array()),
    ])
    .expect("writes");
    assert_eq!(
        files::load(&s(&first), "a").expect("a").bytes,
        array().bytes
    );
    assert_eq!(
        files::load(&s(&second), "b").expect("b").bytes,
        array().bytes
    );
    std::fs::remove_dir_all(&d).ok();
}
