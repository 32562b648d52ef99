//! Walks the registry and runs every op through `tessera run` on the CPU on its declared
//! example: random inputs (a fresh seed each run, printed on failure) written as .npy,
//! every output read back and checked for its declared shape, finiteness, and agreement
//! with the op's f64 reference. The tolerance is one dtype looser than the op's own cases
//! (some f32 paths stage through f16): this walk proves that every declaration reaches
//! the right wrapper with the right parameters; the cases pin precision.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera_runtime::DType;
use tessera_std::decl::{eval_shape, Dims, DtypeRule, HostTensor, OpDecl, ParamValues, RefArgs};
use tessera_std::ops;
use tessera_std::testing::{compare, CaseRng};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-every-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn write_npy<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[usize], data: &[T]) {
    use npyz::WriterBuilder;
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let f = std::fs::File::create(path).expect("create");
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&shape)
        .writer(std::io::BufWriter::new(f))
        .begin_nd()
        .expect("npy header");
    w.extend(data.iter().copied()).expect("npy data");
    w.finish().expect("npy finish");
}

/// Writes `data` (already rounded to `dtype`) as a .npy of that dtype.
fn write(path: &Path, dtype: DType, shape: &[usize], data: &[f64]) -> Result<(), String> {
    match dtype {
        DType::F32 => write_npy(
            path,
            shape,
            &data.iter().map(|&v| v as f32).collect::<Vec<_>>(),
        ),
        DType::F16 => write_npy(
            path,
            shape,
            &data
                .iter()
                .map(|&v| half::f16::from_f64(v))
                .collect::<Vec<_>>(),
        ),
        DType::U32 => write_npy(
            path,
            shape,
            &data.iter().map(|&v| v as u32).collect::<Vec<_>>(),
        ),
        DType::I32 => write_npy(
            path,
            shape,
            &data.iter().map(|&v| v as i32).collect::<Vec<_>>(),
        ),
        DType::U8 => write_npy(
            path,
            shape,
            &data.iter().map(|&v| v as u8).collect::<Vec<_>>(),
        ),
        other => return Err(format!("the walk writes no {other} inputs")),
    }
    Ok(())
}

/// An output file's shape and values.
/// An npy file's shape, its elements as f64, and whether they are integers.
fn read(path: &Path) -> Result<(Vec<usize>, Vec<f64>, bool), String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let npy = npyz::NpyFile::new(std::io::BufReader::new(f)).map_err(|e| e.to_string())?;
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => return Err(format!("unexpected dtype {other:?}")),
    };
    let data = match descr.as_str() {
        "<f4" => widened::<_, f32>(npy)?,
        "<f2" => widened::<_, half::f16>(npy)?,
        "<u4" => widened::<_, u32>(npy)?,
        "<i4" => widened::<_, i32>(npy)?,
        "|u1" => widened::<_, u8>(npy)?,
        "|i1" => widened::<_, i8>(npy)?,
        other => return Err(format!("unexpected output dtype {other}")),
    };
    let integer = !matches!(descr.as_str(), "<f4" | "<f2");
    Ok((shape, data, integer))
}

/// The elements of an npy file whose elements are `T`, each as f64.
fn widened<R: std::io::Read, T: npyz::Deserialize + Into<f64>>(
    npy: npyz::NpyFile<R>,
) -> Result<Vec<f64>, String> {
    let values = npy.into_vec::<T>().map_err(|e| e.to_string())?;
    Ok(values.into_iter().map(Into::into).collect())
}

fn looser(dtype: DType) -> DType {
    match dtype {
        DType::F32 => DType::F16,
        _ => DType::BF16,
    }
}

/// Runs one op on its example and compares every output with the reference.
fn run_one(op: &'static OpDecl, rng: &mut CaseRng) -> Result<usize, String> {
    let ex = op.example;
    let dims = Dims::from_pairs(ex.dims);
    let d = dir(op.name);
    let mut host: BTreeMap<String, HostTensor> = BTreeMap::new();
    let mut args: Vec<String> = vec![
        "run".into(),
        op.name.into(),
        "--backend".into(),
        "cpu".into(),
    ];
    for t in op.inputs {
        if t.optional && !ex.with.contains(&t.name) {
            continue;
        }
        let dtype = match t.dtype {
            DtypeRule::OneOf(list) => list[0],
            DtypeRule::Like(n) => host.get(n).map(|h| h.dtype).ok_or(format!("{n} first"))?,
            DtypeRule::F32OrLike(_) | DtypeRule::Derived(..) => DType::F32,
        };
        let shape = eval_shape(t.shape, &dims).map_err(|e| format!("input `{}`: {e}", t.name))?;
        let int = matches!(dtype, DType::U32 | DType::U8);
        let (lo, hi) = ex
            .ranges
            .iter()
            .find(|r| r.0 == t.name)
            .map_or(if int { (0.0, 16.0) } else { (-1.0, 1.0) }, |r| (r.1, r.2));
        let data: Vec<f64> = (0..shape.iter().product::<usize>())
            .map(|_| {
                let v = rng.uniform(lo, hi);
                match dtype {
                    DType::U32 | DType::I32 | DType::U8 => v.floor(),
                    DType::F16 => half::f16::from_f64(v).to_f64(),
                    _ => v as f32 as f64,
                }
            })
            .collect();
        let path = d.join(format!("{}.npy", t.name));
        write(&path, dtype, &shape, &data)?;
        args.push("--input".into());
        args.push(format!("{}={}", t.name, path.display()));
        host.insert(t.name.to_string(), HostTensor { dtype, shape, data });
    }
    for (k, v) in ex.params {
        args.push("--param".into());
        args.push(format!("{k}={v}"));
    }
    for o in op.outputs {
        args.push("--output".into());
        args.push(format!(
            "{}={}",
            o.name,
            d.join(format!("out_{}.npy", o.name)).display()
        ));
    }
    let given: Vec<(String, String)> = ex
        .params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let params = ParamValues::parse(op, &given)?;
    let want = (op.reference)(&RefArgs {
        op,
        inputs: &host,
        params: &params,
    })
    .map_err(|e| format!("reference: {e}"))?;
    let r = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(&args)
        .output()
        .map_err(|e| e.to_string())?;
    if !r.status.success() {
        return Err(format!(
            "tessera {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&r.stderr)
        ));
    }
    let mut checked = 0;
    for (o, want) in op.outputs.iter().zip(&want) {
        let (shape, got, integer) = read(&d.join(format!("out_{}.npy", o.name)))?;
        let declared =
            eval_shape(o.shape, &dims).map_err(|e| format!("output `{}`: {e}", o.name))?;
        if shape != declared {
            return Err(format!(
                "output `{}` is {shape:?}; declared {declared:?}",
                o.name
            ));
        }
        let dtype = match o.dtype {
            DtypeRule::OneOf(list) => list[0],
            DtypeRule::Derived(..) => DType::F32,
            DtypeRule::Like(n) | DtypeRule::F32OrLike(n) => {
                host.get(n).map_or(DType::F32, |h| h.dtype)
            }
        };
        // Integer outputs (indices, codes) take the op's code tolerance.
        let tol = if integer {
            op.accuracy.codes
        } else {
            op.accuracy.of(looser(dtype))
        };
        let outcome = compare(&got, want, tol).map_err(|e| format!("output `{}`: {e}", o.name))?;
        checked += outcome.checked;
    }
    std::fs::remove_dir_all(&d).ok();
    Ok(checked)
}

#[test]
fn every_registered_op_runs_through_tessera_run_and_matches_its_reference() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |t| t.as_nanos() as u64);
    let mut rng = CaseRng::new(seed);
    let all = ops();
    assert!(all.len() >= 28, "the registry holds {} ops", all.len());
    let mut failures = Vec::new();
    for op in &all {
        match run_one(op, &mut rng) {
            Ok(0) => failures.push(format!("{}: nothing was compared", op.name)),
            Ok(n) => println!("{:<22} {n} elements match the reference", op.name),
            Err(e) => failures.push(format!("{}: {e}", op.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {} ops failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

/// `tessera list --json` names every registered op with its tensors and parameters.
#[test]
fn the_json_schema_lists_every_op() {
    let r = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["list", "--json"])
        .output()
        .expect("runs");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).expect("valid JSON");
    assert_eq!(v["schema"], "tessera-ops/1");
    let listed: Vec<&str> = v["ops"]
        .as_array()
        .expect("ops array")
        .iter()
        .filter_map(|o| o["name"].as_str())
        .collect();
    let registered: Vec<&str> = ops().iter().map(|o| o.name).collect();
    assert_eq!(listed, registered);
    let pipe = v["ops"]
        .as_array()
        .and_then(|a| a.iter().find(|o| o["name"] == "sdpa_decode_split"))
        .expect("sdpa_decode_split");
    let splits = pipe["params"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "splits"))
        .expect("splits");
    assert_eq!(splits["type"], "uint");
    assert_eq!(splits["required"], true);
    assert_eq!(splits["max"], 1024);
}

/// Parameters are checked against the declaration before any input is read.
#[test]
fn bad_parameters_are_refused_with_the_declarations_words() {
    let run = |args: &[&str]| {
        let r = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .output()
            .expect("runs");
        assert!(!r.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&r.stderr).to_string()
    };
    let e = run(&[
        "run",
        "rope",
        "-p",
        "spin=3",
        "-i",
        "x=x.npy",
        "-o",
        "out=o.npy",
    ]);
    assert!(
        e.contains("takes no parameter `spin`") && e.contains("theta"),
        "{e}"
    );
    // One bad parameter each and no inputs at all: the parameter is what is refused.
    for (op, param, words) in [
        ("rope", "layout=sideways", "one of neox, interleaved"),
        ("sdpa_prefill", "causal=yes", "true, false, 1 or 0"),
        ("sdpa_decode_split", "splits=0", "1..=1024"),
        ("sdpa_decode_split", "kv_len=4", "needs --param splits"),
        ("rms_norm", "eps=abc", "a finite number"),
    ] {
        let e = run(&["run", op, "-p", param, "-o", "out=o.npy"]);
        assert!(e.contains(words), "{op} -p {param}: {e}");
    }
    let e = run(&["run", "rms_norm", "-i", "x=x.npy", "-o", "out=o.npy"]);
    assert!(e.contains("missing --input w=FILE"), "{e}");
}

/// Every declaration is whole: names unique, every `like` and range names one of its
/// inputs, the example parses and gives every tensor a shape, and every declared
/// rejection points at one of its invariants.
#[test]
fn every_declaration_is_consistent() {
    use tessera_std::decl::ShapeFrom;
    for op in ops() {
        let n = op.name;
        let mut names: Vec<&str> = op.inputs.iter().map(|t| t.name).collect();
        names.extend(op.outputs.iter().map(|t| t.name));
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{n}: a tensor name is repeated");
        let is_input = |x: &str| op.inputs.iter().any(|t| t.name == x);
        let dtypes = op
            .inputs
            .iter()
            .map(|t| t.dtype)
            .chain(op.outputs.iter().map(|t| t.dtype));
        for d in dtypes {
            if let DtypeRule::Like(x) | DtypeRule::F32OrLike(x) = d {
                assert!(is_input(x), "{n}: dtype like `{x}`, which is no input");
            }
        }
        for o in op.outputs {
            if let ShapeFrom::Like(x) = o.shape_from {
                assert!(is_input(x), "{n}: `{}` shaped like `{x}`, no input", o.name);
            }
        }
        let ex = op.example;
        for (x, lo, hi) in ex.ranges {
            assert!(is_input(x) && lo < hi, "{n}: bad range for `{x}`");
        }
        for x in ex.with {
            assert!(
                op.inputs.iter().any(|t| t.name == *x && t.optional),
                "{n}: `{x}`"
            );
        }
        let dims = Dims::from_pairs(ex.dims);
        for shape in op
            .inputs
            .iter()
            .map(|t| t.shape)
            .chain(op.outputs.iter().map(|t| t.shape))
        {
            eval_shape(shape, &dims).unwrap_or_else(|e| panic!("{n}: {e}"));
        }
        let given: Vec<(String, String)> = ex
            .params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ParamValues::parse(op, &given).unwrap_or_else(|e| panic!("{n}: {e}"));
        assert!(!op.invariants.is_empty(), "{n} declares no invariant");
        assert!(!op.rejections.is_empty(), "{n} declares no rejection");
        for r in op.rejections {
            assert!(r.invariant < op.invariants.len(), "{n}: {r:?}");
        }
    }
}
