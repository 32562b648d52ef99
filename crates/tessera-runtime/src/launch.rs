//! The launch builder: names a kernel's dtypes, constexprs, arguments, grid and group size,
//! checks all of it against the signature and the device, then runs.

use crate::backend::KernelArg;
use crate::cache::CacheEntry;
use crate::context::Context;
use crate::error::{Result, RuntimeError};
use crate::tensor::Tensor;
use tessera_ir::Scalar as DType;
use tessera_ir::{Kernel, KernelDef, Literal, ParamKind, ParamSig, Specialization, TypeSig};

/// What is being launched.
pub(crate) enum Source<'a> {
    Def(&'a KernelDef),
    Ir(&'a Kernel),
}

enum Bound<'a> {
    Tensor(&'a Tensor),
    Scalar(Literal),
}

/// A launch being described. Nothing is checked or run until [`Launch::run`].
#[must_use = "a launch does nothing until `.run()`"]
pub struct Launch<'a> {
    ctx: &'a Context,
    source: Source<'a>,
    dtypes: Vec<(String, DType)>,
    constexprs: Vec<(String, Literal)>,
    args: Vec<(String, Bound<'a>)>,
    grid: Option<[u32; 3]>,
    group_size: Option<u32>,
    optimize: bool,
}

/// One parameter as the launch checks it.
struct ParamView {
    name: String,
    tensor: bool,
    writable: bool,
    /// Fixed type, or index of the generic it takes.
    ty: TypeSig,
}

impl<'a> Launch<'a> {
    pub(crate) fn new(ctx: &'a Context, source: Source<'a>) -> Launch<'a> {
        Launch {
            ctx,
            source,
            dtypes: Vec::new(),
            constexprs: Vec::new(),
            args: Vec::new(),
            grid: None,
            group_size: None,
            optimize: true,
        }
    }

    /// Binds the generic dtype `name` (otherwise inferred from the tensors bound to it).
    pub fn dtype(mut self, name: &str, dtype: DType) -> Self {
        self.dtypes.push((name.to_string(), dtype));
        self
    }

    /// Gives the constexpr `name` its value (a new value is a new specialisation).
    pub fn constexpr(mut self, name: &str, value: impl Into<Literal>) -> Self {
        self.constexprs.push((name.to_string(), value.into()));
        self
    }

    /// Binds the tensor parameter `name`.
    pub fn arg(mut self, name: &str, tensor: &'a Tensor) -> Self {
        self.args.push((name.to_string(), Bound::Tensor(tensor)));
        self
    }

    /// Binds the runtime scalar parameter `name`.
    pub fn scalar(mut self, name: &str, value: impl Into<Literal>) -> Self {
        self.args
            .push((name.to_string(), Bound::Scalar(value.into())));
        self
    }

    /// Threadgroups per grid axis (x, y, z); each must be at least 1.
    pub fn grid(mut self, grid: [u32; 3]) -> Self {
        self.grid = Some(grid);
        self
    }

    /// Threads per threadgroup.
    pub fn group_size(mut self, n: u32) -> Self {
        self.group_size = Some(n);
        self
    }

    /// For [`Context::launch_ir`]: run the IR as given, without the compiler's pipeline.
    pub fn no_optimize(mut self) -> Self {
        self.optimize = false;
        self
    }

    fn kernel_name(&self) -> String {
        match &self.source {
            Source::Def(d) => d.name().to_string(),
            Source::Ir(k) => k.specialized_name(),
        }
    }

    fn reject(&self, message: impl Into<String>) -> RuntimeError {
        RuntimeError::InvalidLaunch {
            kernel: self.kernel_name(),
            message: message.into(),
        }
    }

    fn params(&self) -> Vec<ParamView> {
        match &self.source {
            Source::Def(d) => d
                .signature
                .params
                .iter()
                .map(|p| match *p {
                    ParamSig::Tensor {
                        name,
                        elem,
                        writable,
                    } => ParamView {
                        name: name.to_string(),
                        tensor: true,
                        writable,
                        ty: elem,
                    },
                    ParamSig::Scalar { name, ty } => ParamView {
                        name: name.to_string(),
                        tensor: false,
                        writable: false,
                        ty,
                    },
                })
                .collect(),
            Source::Ir(k) => k
                .params
                .iter()
                .map(|p| match p.kind {
                    ParamKind::Tensor { elem, writable } => ParamView {
                        name: p.name.clone(),
                        tensor: true,
                        writable,
                        ty: TypeSig::Fixed(elem),
                    },
                    ParamKind::Scalar(ty) => ParamView {
                        name: p.name.clone(),
                        tensor: false,
                        writable: false,
                        ty: TypeSig::Fixed(ty),
                    },
                })
                .collect(),
        }
    }

    fn generics(&self) -> Vec<&'static str> {
        match &self.source {
            Source::Def(d) => d.signature.generics.to_vec(),
            Source::Ir(_) => Vec::new(),
        }
    }

    /// Resolves the specialisation: explicit dtypes, then dtypes inferred from tensors.
    fn specialization(&self, params: &[ParamView], bound: &[&Bound<'a>]) -> Result<Specialization> {
        let generics = self.generics();
        let mut dtypes: Vec<Option<(DType, String)>> = vec![None; generics.len()];
        for (name, dt) in &self.dtypes {
            let Some(g) = generics.iter().position(|g| g == name) else {
                return Err(self.reject(format!(
                    "`.dtype(\"{name}\", …)` names no generic; the kernel's generics are [{}]",
                    generics.join(", ")
                )));
            };
            if let Some((prev, _)) = &dtypes[g] {
                return Err(self.reject(format!(
                    "generic `{name}` is given twice (`{prev}` and `{dt}`)"
                )));
            }
            dtypes[g] = Some((*dt, format!("`.dtype(\"{name}\", {dt})`")));
        }
        for (p, b) in params.iter().zip(bound) {
            let TypeSig::Generic(g) = p.ty else { continue };
            let got = match b {
                Bound::Tensor(t) => t.dtype(),
                Bound::Scalar(l) => l.ty(),
            };
            let what = if p.tensor { "tensor" } else { "scalar" };
            match &dtypes[g] {
                None => dtypes[g] = Some((got, format!("{what} `{}` ({got})", p.name))),
                Some((have, from)) if *have != got => {
                    return Err(self.reject(format!(
                        "generic `{}` is {have} from {from}, but {what} `{}` is {got}; \
                         bind arguments of one dtype or convert them",
                        generics[g], p.name
                    )))
                }
                Some(_) => {}
            }
        }
        let mut resolved = Vec::new();
        for (g, d) in dtypes.into_iter().enumerate() {
            match d {
                Some((dt, _)) => resolved.push(dt),
                None => {
                    return Err(self.reject(format!(
                        "cannot infer generic `{}`: no argument of that type is bound; give it \
                         with `.dtype(\"{}\", DType::F32)` (one of f32, f16, bf16)",
                        generics[g], generics[g]
                    )))
                }
            }
        }
        let mut constexprs = Vec::new();
        match &self.source {
            Source::Def(d) => {
                let sig = &d.signature;
                let allowed: Vec<String> = sig
                    .constexprs
                    .iter()
                    .map(|c| format!("{}: {}", c.name, c.ty))
                    .collect();
                for (name, _) in &self.constexprs {
                    if !sig.constexprs.iter().any(|c| c.name == name) {
                        return Err(self.reject(format!(
                            "`.constexpr(\"{name}\", …)` names no constexpr; expected one of [{}]",
                            allowed.join(", ")
                        )));
                    }
                }
                for c in sig.constexprs {
                    let mut hits = self.constexprs.iter().filter(|(n, _)| n == c.name);
                    let v = match (hits.next(), hits.next()) {
                        (Some((_, v)), None) => *v,
                        (None, _) => {
                            return Err(self.reject(format!(
                                "constexpr `{}` ({}) is not given; add `.constexpr(\"{}\", …)`",
                                c.name, c.ty, c.name
                            )))
                        }
                        (Some(_), Some(_)) => {
                            return Err(self
                                .reject(format!("constexpr `{}` is given more than once", c.name)))
                        }
                    };
                    if v.ty() != c.ty {
                        return Err(self.reject(format!(
                            "constexpr `{}` must be {}, got {v} ({}); pass a {} value",
                            c.name,
                            c.ty,
                            v.ty(),
                            c.ty
                        )));
                    }
                    constexprs.push(v);
                }
            }
            Source::Ir(_) => {
                if let Some((name, _)) = self.constexprs.first() {
                    return Err(self.reject(format!(
                        "`.constexpr(\"{name}\", …)` on prebuilt IR: its constexprs are already \
                         constants in the body"
                    )));
                }
            }
        }
        Ok(Specialization::new(resolved, constexprs))
    }

    /// Checks the arguments against the parameters; returns them in parameter order.
    fn bind(&self, params: &[ParamView]) -> Result<Vec<&Bound<'a>>> {
        let names: Vec<String> = params
            .iter()
            .map(|p| {
                let kind = if p.tensor {
                    if p.writable {
                        "mut tensor"
                    } else {
                        "tensor"
                    }
                } else {
                    "scalar"
                };
                format!("{} ({kind})", p.name)
            })
            .collect();
        for (name, _) in &self.args {
            if !params.iter().any(|p| &p.name == name) {
                return Err(self.reject(format!(
                    "no parameter is named `{name}`; the parameters are [{}]",
                    names.join(", ")
                )));
            }
        }
        let mut bound = Vec::new();
        for p in params {
            let mut hits = self.args.iter().filter(|(n, _)| *n == p.name);
            let b = match (hits.next(), hits.next()) {
                (Some((_, b)), None) => b,
                (None, _) => {
                    let how = if p.tensor { ".arg" } else { ".scalar" };
                    return Err(self.reject(format!(
                        "parameter `{}` is not bound; add `{how}(\"{}\", …)`",
                        p.name, p.name
                    )));
                }
                (Some(_), Some(_)) => {
                    return Err(self.reject(format!("parameter `{}` is bound twice", p.name)))
                }
            };
            match (p.tensor, b) {
                (true, Bound::Scalar(v)) => {
                    return Err(self.reject(format!(
                        "parameter `{}` is a tensor, got the scalar {v}; bind it with `.arg`",
                        p.name
                    )))
                }
                (false, Bound::Tensor(t)) => {
                    return Err(self.reject(format!(
                        "parameter `{}` is a scalar, got a {}{:?} tensor; bind it with `.scalar`",
                        p.name,
                        t.dtype(),
                        t.shape()
                    )))
                }
                (true, Bound::Tensor(t)) if !t.is_on(self.ctx.backend()) => {
                    return Err(self.reject(format!(
                        "tensor `{}` was created by another context; create it with the \
                         context that launches the kernel",
                        p.name
                    )));
                }
                _ => {}
            }
            bound.push(b);
        }
        Ok(bound)
    }

    fn check_types(
        &self,
        params: &[ParamView],
        bound: &[&Bound<'a>],
        spec: &Specialization,
    ) -> Result<()> {
        for (p, b) in params.iter().zip(bound) {
            let want = match p.ty {
                TypeSig::Fixed(t) => t,
                TypeSig::Generic(g) => spec.dtypes[g],
            };
            let (got, what) = match b {
                Bound::Tensor(t) => (t.dtype(), "tensor"),
                Bound::Scalar(l) => (l.ty(), "scalar"),
            };
            if got != want {
                return Err(self.reject(format!("{what} `{}` must be {want}, got {got}", p.name)));
            }
        }
        // A written tensor must not share its buffer with any other argument.
        for (i, (p, b)) in params.iter().zip(bound).enumerate() {
            let Bound::Tensor(t) = b else { continue };
            if !p.writable {
                continue;
            }
            for (j, (q, c)) in params.iter().zip(bound).enumerate() {
                if i == j {
                    continue;
                }
                if let Bound::Tensor(u) = c {
                    if t.same_buffer(u) {
                        return Err(self.reject(format!(
                            "the written tensor `{}` shares its buffer with `{}`; pass a \
                             separate output tensor",
                            p.name, q.name
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_geometry(&self, entry: &CacheEntry) -> Result<([u32; 3], u32)> {
        let info = self.ctx.info();
        let Some(grid) = self.grid else {
            return Err(self.reject("no grid given; add `.grid([x, y, z])`"));
        };
        if grid.contains(&0) {
            return Err(self.reject(format!(
                "grid {grid:?} has a zero dimension; every dimension must be at least 1"
            )));
        }
        let Some(gs) = self.group_size else {
            return Err(self.reject("no threadgroup size given; add `.group_size(n)`"));
        };
        let mut max = info.max_threads_per_group;
        if let Some(m) = entry.compiled.max_group_size() {
            max = max.min(m);
        }
        if let Some(o) = entry.compiled.kernel().occupancy {
            if gs > o.group_size {
                return Err(self.reject(format!(
                    "group size {gs} is not allowed: the kernel is compiled for at most {} \
                     threads per group (#[kernel(group_size = {})])",
                    o.group_size, o.group_size
                )));
            }
        }
        let simd = info.simd_width.max(1);
        if entry.needs_simd_multiple {
            if gs == 0 || gs % simd != 0 || gs > max {
                return Err(self.reject(format!(
                    "group size {gs} is not allowed: the kernel uses simdgroup collectives, so it \
                     needs a positive multiple of {simd} up to {max} ({simd}, {}, … {})",
                    2 * simd,
                    max / simd * simd
                )));
            }
        } else if gs == 0 || gs > max {
            return Err(self.reject(format!(
                "group size {gs} is not allowed on {}: it must be in 1..={max}",
                info.name
            )));
        }
        if entry.shared_bytes > info.max_shared_bytes {
            return Err(self.reject(format!(
                "the kernel declares {} bytes of threadgroup memory; {} allows at most {}",
                entry.shared_bytes, info.name, info.max_shared_bytes
            )));
        }
        Ok((grid, gs))
    }

    /// Checks everything, compiles (or takes from the cache) and runs.
    pub fn run(self) -> Result<()> {
        let params = self.params();
        let bound = self.bind(&params)?;
        let spec = self.specialization(&params, &bound)?;
        self.check_types(&params, &bound, &spec)?;
        let entry = match &self.source {
            Source::Def(d) => self.ctx.compiled(d, &spec)?,
            Source::Ir(k) => self.ctx.compile_ir((*k).clone(), self.optimize)?,
        };
        let (grid, gs) = self.check_geometry(&entry)?;
        // Order the arguments as the compiled kernel declares its parameters.
        let kernel = entry.compiled.kernel();
        let mut args = Vec::with_capacity(kernel.params.len());
        for kp in &kernel.params {
            let Some(pos) = params.iter().position(|p| p.name == kp.name) else {
                return Err(self.reject(format!(
                    "internal: the compiled kernel has a parameter `{}` the signature lacks",
                    kp.name
                )));
            };
            args.push(match bound[pos] {
                Bound::Tensor(t) => KernelArg::Buffer(&**t.buffer()),
                Bound::Scalar(l) => KernelArg::Scalar(*l),
            });
        }
        self.ctx.backend().launch(&*entry.compiled, &args, grid, gs)
    }
}
