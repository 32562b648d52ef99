//! NVRTC, NVIDIA's runtime CUDA C compiler, loaded dynamically: CUDA C in, PTX out. It
//! needs no GPU and no CUDA toolkit — the `nvidia-cuda-nvrtc` Python wheel's
//! `libnvrtc.so` is enough — which is how CI compiles every kernel's CUDA.
//!
//! Where the library is looked for, in order:
//! 1. `TESSERA_NVRTC_PATH`: the library file itself, or a directory holding it
//!    (`scripts/install-nvrtc.sh` prints one);
//! 2. `CUDA_PATH` / `CUDA_HOME` / `/usr/local/cuda*` `lib64` directories;
//! 3. the `nvidia/cu13/lib` and `nvidia/cuda_nvrtc/lib` directories of the Python
//!    installs it can find (`VIRTUAL_ENV`, `~/.local`, `/usr/local`, `/usr`);
//! 4. the system loader's search path (`libnvrtc.so.13`, `.so.12`, `.so`).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use thiserror::Error;

/// What went wrong loading NVRTC or compiling with it.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum NvrtcError {
    #[error(
        "NVRTC not found (searched: {searched}); install it with `scripts/install-nvrtc.sh` \
         and set TESSERA_NVRTC_PATH to the directory it prints, or install the CUDA toolkit"
    )]
    NotFound { searched: String },
    #[error("NVRTC at `{path}` could not be used: {message}")]
    Load { path: String, message: String },
    #[error("NVRTC failed to compile `{name}` for {arch}: {message}\n--- NVRTC log ---\n{log}")]
    Compile {
        name: String,
        arch: String,
        message: String,
        log: String,
    },
    #[error("NVRTC: {0}")]
    Other(String),
}

type NvrtcProgram = *mut c_void;
type NvrtcResult = c_int;

type FnVersion = unsafe extern "C" fn(*mut c_int, *mut c_int) -> NvrtcResult;
type FnCreate = unsafe extern "C" fn(
    *mut NvrtcProgram,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> NvrtcResult;
type FnCompile = unsafe extern "C" fn(NvrtcProgram, c_int, *const *const c_char) -> NvrtcResult;
type FnSize = unsafe extern "C" fn(NvrtcProgram, *mut usize) -> NvrtcResult;
type FnGet = unsafe extern "C" fn(NvrtcProgram, *mut c_char) -> NvrtcResult;
type FnDestroy = unsafe extern "C" fn(*mut NvrtcProgram) -> NvrtcResult;
type FnErrorString = unsafe extern "C" fn(NvrtcResult) -> *const c_char;
type FnNumArchs = unsafe extern "C" fn(*mut c_int) -> NvrtcResult;
type FnArchs = unsafe extern "C" fn(*mut c_int) -> NvrtcResult;

/// A loaded NVRTC library.
pub struct Nvrtc {
    path: PathBuf,
    version: (i32, i32),
    create: FnCreate,
    compile: FnCompile,
    log_size: FnSize,
    log: FnGet,
    ptx_size: FnSize,
    ptx: FnGet,
    destroy: FnDestroy,
    error_string: FnErrorString,
    archs: Vec<i32>,
    // Keep the function pointers above valid; dropped last.
    _lib: libloading::Library,
    _builtins: Option<libloading::Library>,
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Nvrtc({}.{} at {})",
            self.version.0,
            self.version.1,
            self.path.display()
        )
    }
}

/// PTX text and NVRTC's log (warnings) for one compilation.
#[derive(Clone, Debug)]
pub struct Ptx {
    pub text: String,
    pub log: String,
}

const LIB_NAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

fn is_nvrtc_file(p: &Path) -> bool {
    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
        n.starts_with("libnvrtc.so") && !n.contains("builtins") && !n.contains(".alt.")
    })
}

/// The NVRTC library files in `dir`, newest name first.
fn in_dir(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| is_nvrtc_file(p))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.reverse();
    found
}

/// The entries of `dir` whose names start with `prefix`, sorted; none where `dir` cannot
/// be read.
fn entries_named(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    found.sort();
    found
}

/// Python site-package roots that may hold the `nvidia-cuda-nvrtc` wheel.
fn python_roots() -> Vec<PathBuf> {
    let mut bases: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        bases.push(PathBuf::from(v).join("lib"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        bases.push(PathBuf::from(h).join(".local/lib"));
    }
    bases.extend(["/usr/local/lib", "/usr/lib", "/opt/conda/lib"].map(PathBuf::from));
    let mut roots = Vec::new();
    for base in bases {
        for py in entries_named(&base, "python3") {
            roots.push(py.join("site-packages"));
            roots.push(py.join("dist-packages"));
        }
    }
    roots
}

/// Candidate library paths in search order (files that exist, then bare names).
fn candidates() -> (Vec<PathBuf>, Vec<String>) {
    let mut files = Vec::new();
    let mut searched = Vec::new();
    if let Some(p) = std::env::var_os("TESSERA_NVRTC_PATH").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        searched.push(format!("TESSERA_NVRTC_PATH={}", p.display()));
        if p.is_dir() {
            files.extend(in_dir(&p));
        } else {
            files.push(p);
        }
        // An explicit path is the only place looked at.
        return (files, searched);
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(v) = std::env::var_os(var) {
            dirs.push(PathBuf::from(v).join("lib64"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    let mut cudas = entries_named(Path::new("/usr/local"), "cuda-");
    cudas.reverse();
    dirs.extend(cudas.into_iter().map(|c| c.join("lib64")));
    for root in python_roots() {
        dirs.push(root.join("nvidia/cu13/lib"));
        dirs.push(root.join("nvidia/cuda_nvrtc/lib"));
    }
    for d in &dirs {
        files.extend(in_dir(d));
    }
    searched.push(format!(
        "{} directories (CUDA installs, Python site-packages)",
        dirs.len()
    ));
    searched.push(format!("the system loader path ({})", LIB_NAMES.join(", ")));
    files.extend(LIB_NAMES.iter().map(PathBuf::from));
    (files, searched)
}

impl Nvrtc {
    /// The process-wide NVRTC, loaded on first use (the outcome, success or failure, is kept).
    pub fn get() -> Result<&'static Nvrtc, NvrtcError> {
        static NVRTC: OnceLock<Result<Nvrtc, NvrtcError>> = OnceLock::new();
        NVRTC
            .get_or_init(Nvrtc::load)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Finds and loads NVRTC (see the module docs for where it looks).
    pub fn load() -> Result<Nvrtc, NvrtcError> {
        let (files, searched) = candidates();
        let mut last = None;
        for f in &files {
            match Nvrtc::load_from(f) {
                Ok(n) => return Ok(n),
                // A file that exists but fails is worth reporting; a missing bare name is not.
                Err(e) if f.is_absolute() || f.exists() => last = Some(e),
                Err(_) => {}
            }
        }
        Err(last.unwrap_or(NvrtcError::NotFound {
            searched: searched.join("; "),
        }))
    }

    /// Loads the NVRTC library at `path` (a file path, or a bare name for the system loader).
    pub fn load_from(path: &Path) -> Result<Nvrtc, NvrtcError> {
        let err = |message: String| NvrtcError::Load {
            path: path.display().to_string(),
            message,
        };
        // NVRTC opens `libnvrtc-builtins.so.X.Y` by name at compile time; outside the system
        // path (a wheel) that fails unless it is already loaded, so load it first from the
        // same directory. The loader then finds it by its soname.
        let builtins = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .and_then(|d| std::fs::read_dir(d).ok())
            .and_then(|rd| {
                rd.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.starts_with("libnvrtc-builtins.so") && !n.contains(".alt.")
                    })
                })
            })
            // SAFETY: the builtins library has no initialisers with effects beyond itself.
            .and_then(|b| unsafe { libloading::Library::new(b) }.ok());
        // SAFETY: loading NVRTC runs its initialisers, which only set up the library itself.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| err(e.to_string()))?;
        macro_rules! sym {
            ($name:literal, $ty:ty) => {{
                // SAFETY: the symbol is NVRTC's documented C function with this signature.
                let s: libloading::Symbol<$ty> = unsafe { lib.get($name) }
                    .map_err(|e| err(format!("missing {}: {e}", String::from_utf8_lossy($name))))?;
                *s
            }};
        }
        let version_fn = sym!(b"nvrtcVersion", FnVersion);
        let num_archs = sym!(b"nvrtcGetNumSupportedArchs", FnNumArchs);
        let get_archs = sym!(b"nvrtcGetSupportedArchs", FnArchs);
        let (mut major, mut minor) = (0, 0);
        // SAFETY: both pointers are valid for one write each.
        unsafe { version_fn(&mut major, &mut minor) };
        let mut n = 0;
        // SAFETY: `n` is valid for one write; `archs` has room for the `n` values asked for.
        let archs = unsafe {
            let mut archs = Vec::new();
            if num_archs(&mut n) == 0 && n > 0 && n < 1024 {
                archs = vec![0; n as usize];
                if get_archs(archs.as_mut_ptr()) != 0 {
                    archs.clear();
                }
            }
            archs
        };
        Ok(Nvrtc {
            path: path.to_path_buf(),
            version: (major, minor),
            create: sym!(b"nvrtcCreateProgram", FnCreate),
            compile: sym!(b"nvrtcCompileProgram", FnCompile),
            log_size: sym!(b"nvrtcGetProgramLogSize", FnSize),
            log: sym!(b"nvrtcGetProgramLog", FnGet),
            ptx_size: sym!(b"nvrtcGetPTXSize", FnSize),
            ptx: sym!(b"nvrtcGetPTX", FnGet),
            destroy: sym!(b"nvrtcDestroyProgram", FnDestroy),
            error_string: sym!(b"nvrtcGetErrorString", FnErrorString),
            archs,
            _lib: lib,
            _builtins: builtins,
        })
    }

    /// NVRTC's version, e.g. `(13, 0)`.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// Where the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The SM versions this NVRTC can target (`[75, 80, 86, 89, 90, …]`).
    pub fn supported_archs(&self) -> &[i32] {
        &self.archs
    }

    /// The `compute_XX` architecture to compile for an SM version: the SM itself if this
    /// NVRTC knows it, else the newest it knows below it (the driver JITs PTX forward).
    /// sm_90 itself compiles as `compute_90a`, the form with warpgroup MMA (its PTX runs on
    /// sm_90 devices only, which is what it is compiled for).
    pub fn arch_for(&self, sm: i32) -> String {
        let best = if self.archs.is_empty() || self.archs.contains(&sm) {
            sm
        } else {
            self.archs
                .iter()
                .copied()
                .filter(|&a| a <= sm)
                .max()
                .unwrap_or(sm)
        };
        if best == 90 {
            return "compute_90a".to_string();
        }
        format!("compute_{best}")
    }

    fn message(&self, r: NvrtcResult) -> String {
        // SAFETY: nvrtcGetErrorString returns a static NUL-terminated string for any code.
        let p = unsafe { (self.error_string)(r) };
        if p.is_null() {
            return format!("NVRTC error {r}");
        }
        // SAFETY: non-null and NUL-terminated, as documented.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Compiles `source` (named `name` in messages) to PTX for `arch` (`compute_90`), with
    /// extra NVRTC `options`.
    pub fn compile(
        &self,
        source: &str,
        name: &str,
        arch: &str,
        options: &[String],
    ) -> Result<Ptx, NvrtcError> {
        let fail = |message: String, log: String| NvrtcError::Compile {
            name: name.to_string(),
            arch: arch.to_string(),
            message,
            log,
        };
        let c_src = CString::new(source)
            .map_err(|_| fail("the source holds a NUL byte".into(), String::new()))?;
        let c_name = CString::new(format!("{name}.cu"))
            .map_err(|_| fail("the name holds a NUL byte".into(), String::new()))?;
        let mut opts = vec![format!("--gpu-architecture={arch}")];
        opts.extend(options.iter().cloned());
        let c_opts = opts
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| fail("an option holds a NUL byte".into(), String::new()))?;
        let opt_ptrs: Vec<*const c_char> = c_opts.iter().map(|c| c.as_ptr()).collect();

        let mut prog: NvrtcProgram = std::ptr::null_mut();
        // SAFETY: every pointer is a valid NUL-terminated string that outlives the call; no headers.
        let r = unsafe {
            (self.create)(
                &mut prog,
                c_src.as_ptr(),
                c_name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        if r != 0 {
            return Err(fail(
                format!("creating the program: {}", self.message(r)),
                String::new(),
            ));
        }
        // SAFETY: `prog` is a live program; the option pointers outlive the call.
        let compiled = unsafe { (self.compile)(prog, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
        let log = self.read(prog, self.log_size, self.log).unwrap_or_default();
        let result = if compiled != 0 {
            Err(fail(self.message(compiled), log))
        } else if arch.starts_with("sm_") {
            // A real architecture: NVRTC ran ptxas and holds machine code, no PTX; the log
            // is what there is to return.
            Ok(Ptx {
                text: String::new(),
                log,
            })
        } else {
            match self.read(prog, self.ptx_size, self.ptx) {
                Ok(text) => Ok(Ptx { text, log }),
                Err(r) => Err(fail(format!("reading the PTX: {}", self.message(r)), log)),
            }
        };
        // SAFETY: `prog` was created above and is destroyed once.
        unsafe { (self.destroy)(&mut prog) };
        result
    }

    /// Reads a program's log or PTX through its size / get pair.
    fn read(&self, prog: NvrtcProgram, size: FnSize, get: FnGet) -> Result<String, NvrtcResult> {
        let mut n = 0usize;
        // SAFETY: `prog` is live; `n` is valid for one write.
        let r = unsafe { size(prog, &mut n) };
        if r != 0 {
            return Err(r);
        }
        let mut buf = vec![0u8; n.max(1)];
        // SAFETY: `buf` holds the `n` bytes NVRTC said it will write.
        let r = unsafe { get(prog, buf.as_mut_ptr() as *mut c_char) };
        if r != 0 {
            return Err(r);
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        buf.truncate(end);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
}
