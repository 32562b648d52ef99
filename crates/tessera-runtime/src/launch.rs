//! Launches: [`TypedLaunch`], which a `#[kernel]`'s generated `launch(ctx, Args { … })`
//! returns with every argument already bound by position, and [`Launch`], the string-keyed
//! form for dynamic callers (the CLI, tests), whose names are resolved once at run. Both
//! check dtypes, aliasing and geometry against the signature and the device, then run.
//! Error messages are built only when a check fails.

use crate::backend::KernelArg;
use crate::cache::CacheEntry;
use crate::context::Context;
use crate::error::{Result, RuntimeError};
use crate::tensor::Tensor;
use tessera_ir::Scalar as DType;
use tessera_ir::{Kernel, KernelDef, Literal, ParamKind, ParamSig, TypeSig};

/// What is being launched.
pub(crate) enum Source<'a> {
    Def(&'a KernelDef),
    Ir(&'a Kernel),
}

/// One argument of a launch: a tensor or a runtime scalar.
#[derive(Clone, Copy, Debug)]
pub enum BoundArg<'a> {
    Tensor(&'a Tensor),
    Scalar(Literal),
}

/// Where a generic's dtype came from, for the message when another argument disagrees.
#[derive(Clone, Copy)]
enum DtypeFrom<'n> {
    /// Given explicitly, under this name (empty for a typed launcher's field).
    Explicit(&'n str),
    /// The parameter at this index.
    Param(usize),
}

/// A launch's arguments in parameter order, its constexprs in signature order and the
/// dtypes given explicitly per generic: what both launch forms resolve to.
struct Bindings<'a, 'n> {
    args: Vec<BoundArg<'a>>,
    constexprs: Vec<Literal>,
    dtypes: Few<Option<(DType, DtypeFrom<'n>)>, FEW>,
}

/// Up to `N` values on the stack, more on the heap: a launch's per-parameter lists, made
/// without an allocation for kernels of ordinary size.
enum Few<T: Copy, const N: usize> {
    Stack { items: [T; N], len: usize },
    Heap(Vec<T>),
}

/// The most parameters a launch lists on the stack.
const FEW: usize = 8;

impl<T: Copy, const N: usize> Few<T, N> {
    /// The items of `iter`; `fill` only fills the unused stack slots.
    fn collect(fill: T, iter: impl ExactSizeIterator<Item = T>) -> Few<T, N> {
        if iter.len() > N {
            return Few::Heap(iter.collect());
        }
        let mut items = [fill; N];
        let mut len = 0;
        for (slot, item) in items.iter_mut().zip(iter) {
            *slot = item;
            len += 1;
        }
        Few::Stack { items, len }
    }
}

impl<T: Copy, const N: usize> std::ops::DerefMut for Few<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Few::Stack { items, len } => &mut items[..*len],
            Few::Heap(v) => v,
        }
    }
}

impl<T: Copy, const N: usize> std::ops::Deref for Few<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Few::Stack { items, len } => &items[..*len],
            Few::Heap(v) => v,
        }
    }
}

/// One parameter as the launch checks it.
#[derive(Clone, Copy)]
struct ParamView<'a> {
    name: &'a str,
    tensor: bool,
    writable: bool,
    /// Fixed type, or index of the generic it takes.
    ty: TypeSig,
}

/// What both launch forms share: the kernel, the context and the geometry.
struct Core<'a> {
    ctx: &'a Context,
    source: Source<'a>,
    grid: Option<[u32; 3]>,
    group_size: Option<u32>,
    optimize: bool,
}

/// A string-keyed launch being described. Nothing is checked or run until
/// [`Launch::run`]. Library code uses the typed launcher a `#[kernel]` generates instead.
#[must_use = "a launch does nothing until `.run()`"]
pub struct Launch<'a> {
    core: Core<'a>,
    dtypes: Vec<(String, DType)>,
    constexprs: Vec<(String, Literal)>,
    args: Vec<(String, BoundArg<'a>)>,
}

/// A launch from a `#[kernel]`'s typed launcher: arguments, constexprs and the dtypes no
/// argument carries are bound by position. Nothing is checked or run until
/// [`TypedLaunch::run`].
#[must_use = "a launch does nothing until `.run()`"]
pub struct TypedLaunch<'a> {
    core: Core<'a>,
    args: Vec<BoundArg<'a>>,
    constexprs: Vec<Literal>,
    dtypes: Vec<(usize, DType)>,
}

/// The geometry setters of both launch forms, which keep their geometry in `core`.
macro_rules! geometry_setters {
    () => {
        /// Threadgroups per grid axis (x, y, z); each must be at least 1.
        pub fn grid(mut self, grid: [u32; 3]) -> Self {
            self.core.grid = Some(grid);
            self
        }

        /// Threads per threadgroup.
        pub fn group_size(mut self, n: u32) -> Self {
            self.core.group_size = Some(n);
            self
        }
    };
}

impl<'a> TypedLaunch<'a> {
    /// For generated launchers: `args` in the signature's parameter order, `constexprs` in
    /// its constexpr order, `dtypes` as (generic index, dtype).
    #[doc(hidden)]
    pub fn new(
        ctx: &'a Context,
        def: &'a KernelDef,
        args: Vec<BoundArg<'a>>,
        constexprs: Vec<Literal>,
        dtypes: Vec<(usize, DType)>,
    ) -> TypedLaunch<'a> {
        TypedLaunch {
            core: Core::new(ctx, Source::Def(def)),
            args,
            constexprs,
            dtypes,
        }
    }

    geometry_setters!();

    /// Checks everything, compiles (or takes from the cache) and runs.
    pub fn run(self) -> Result<()> {
        let params = self.core.params();
        let n_generics = self.core.generics().len();
        let n_constexprs = self.core.constexpr_count();
        if self.args.len() != params.len() || self.constexprs.len() != n_constexprs {
            return Err(self.core.reject(format!(
                "internal: the launcher binds {} arguments and {} constexprs, the signature \
                 declares {} and {}",
                self.args.len(),
                self.constexprs.len(),
                params.len(),
                n_constexprs
            )));
        }
        let mut dtypes = Few::collect(None, (0..n_generics).map(|_| None));
        for &(g, dt) in &self.dtypes {
            match dtypes.get_mut(g) {
                Some(slot) => *slot = Some((dt, DtypeFrom::Explicit(""))),
                None => {
                    return Err(self.core.reject(format!(
                        "internal: the launcher gives a dtype for generic {g} of {n_generics}"
                    )))
                }
            }
        }
        let bindings = Bindings {
            args: self.args,
            constexprs: self.constexprs,
            dtypes,
        };
        self.core.execute(&params, bindings)
    }
}

impl<'a> Launch<'a> {
    pub(crate) fn new(ctx: &'a Context, source: Source<'a>) -> Launch<'a> {
        Launch {
            core: Core::new(ctx, source),
            dtypes: Vec::new(),
            constexprs: Vec::new(),
            args: Vec::new(),
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
        self.args.push((name.to_string(), BoundArg::Tensor(tensor)));
        self
    }

    /// Binds the runtime scalar parameter `name`.
    pub fn scalar(mut self, name: &str, value: impl Into<Literal>) -> Self {
        self.args
            .push((name.to_string(), BoundArg::Scalar(value.into())));
        self
    }

    geometry_setters!();

    /// For [`Context::launch_ir`]: run the IR as given, without the compiler's pipeline.
    pub fn no_optimize(mut self) -> Self {
        self.core.optimize = false;
        self
    }

    /// Resolves every name against the signature, once each.
    fn resolve<'n>(&'n self, params: &[ParamView]) -> Result<Bindings<'a, 'n>> {
        let core = &self.core;
        let mut slots: Vec<Option<BoundArg<'a>>> = vec![None; params.len()];
        for (name, b) in &self.args {
            let Some(pos) = params.iter().position(|p| p.name == name) else {
                return Err(core.reject(format!(
                    "no parameter is named `{name}`; the parameters are [{}]",
                    describe_params(params)
                )));
            };
            if slots[pos].replace(*b).is_some() {
                return Err(core.reject(format!("parameter `{name}` is bound twice")));
            }
        }
        let mut args = Vec::with_capacity(params.len());
        for (p, slot) in params.iter().zip(slots) {
            match slot {
                Some(b) => args.push(b),
                None => {
                    let how = if p.tensor { ".arg" } else { ".scalar" };
                    return Err(core.reject(format!(
                        "parameter `{}` is not bound; add `{how}(\"{}\", …)`",
                        p.name, p.name
                    )));
                }
            }
        }

        let generics = core.generics();
        let mut dtypes: Few<Option<(DType, DtypeFrom<'n>)>, FEW> =
            Few::collect(None, (0..generics.len()).map(|_| None));
        for (name, dt) in &self.dtypes {
            let Some(g) = generics.iter().position(|g| g == name) else {
                return Err(core.reject(format!(
                    "`.dtype(\"{name}\", …)` names no generic; the kernel's generics are [{}]",
                    generics.join(", ")
                )));
            };
            if let Some((prev, _)) = dtypes[g].replace((*dt, DtypeFrom::Explicit(name))) {
                return Err(core.reject(format!(
                    "generic `{name}` is given twice (`{prev}` and `{dt}`)"
                )));
            }
        }

        let constexprs = match &core.source {
            Source::Def(d) => {
                let sig = d.signature.constexprs;
                let mut values: Vec<Option<Literal>> = vec![None; sig.len()];
                for (name, v) in &self.constexprs {
                    let Some(i) = sig.iter().position(|c| c.name == name) else {
                        let allowed: Vec<String> = sig
                            .iter()
                            .map(|c| format!("{}: {}", c.name, c.ty))
                            .collect();
                        return Err(core.reject(format!(
                            "`.constexpr(\"{name}\", …)` names no constexpr; expected one of [{}]",
                            allowed.join(", ")
                        )));
                    };
                    if values[i].replace(*v).is_some() {
                        return Err(
                            core.reject(format!("constexpr `{name}` is given more than once"))
                        );
                    }
                }
                let mut resolved = Vec::with_capacity(sig.len());
                for (c, v) in sig.iter().zip(values) {
                    match v {
                        Some(v) => resolved.push(v),
                        None => {
                            return Err(core.reject(format!(
                                "constexpr `{}` ({}) is not given; add `.constexpr(\"{}\", …)`",
                                c.name, c.ty, c.name
                            )))
                        }
                    }
                }
                resolved
            }
            Source::Ir(_) => {
                if let Some((name, _)) = self.constexprs.first() {
                    return Err(core.reject(format!(
                        "`.constexpr(\"{name}\", …)` on prebuilt IR: its constexprs are already \
                         constants in the body"
                    )));
                }
                Vec::new()
            }
        };
        Ok(Bindings {
            args,
            constexprs,
            dtypes,
        })
    }

    /// Checks everything, compiles (or takes from the cache) and runs.
    pub fn run(self) -> Result<()> {
        let params = self.core.params();
        let bindings = self.resolve(&params)?;
        self.core.execute(&params, bindings)
    }
}

/// `x (tensor), out (mut tensor), n (scalar)`, for messages.
fn describe_params(params: &[ParamView]) -> String {
    let names: Vec<String> = params
        .iter()
        .map(|p| {
            let kind = match (p.tensor, p.writable) {
                (true, true) => "mut tensor",
                (true, false) => "tensor",
                (false, _) => "scalar",
            };
            format!("{} ({kind})", p.name)
        })
        .collect();
    names.join(", ")
}

impl<'a> Core<'a> {
    fn new(ctx: &'a Context, source: Source<'a>) -> Core<'a> {
        Core {
            ctx,
            source,
            grid: None,
            group_size: None,
            optimize: true,
        }
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

    fn params(&self) -> Few<ParamView<'a>, FEW> {
        let fill = ParamView {
            name: "",
            tensor: false,
            writable: false,
            ty: TypeSig::Generic(0),
        };
        match self.source {
            Source::Def(d) => Few::collect(
                fill,
                d.signature.params.iter().map(|p| match *p {
                    ParamSig::Tensor {
                        name,
                        elem,
                        writable,
                    } => ParamView {
                        name,
                        tensor: true,
                        writable,
                        ty: elem,
                    },
                    ParamSig::Scalar { name, ty } => ParamView {
                        name,
                        tensor: false,
                        writable: false,
                        ty,
                    },
                }),
            ),
            Source::Ir(k) => Few::collect(
                fill,
                k.params.iter().map(|p| match p.kind {
                    ParamKind::Tensor { elem, writable } => ParamView {
                        name: &p.name,
                        tensor: true,
                        writable,
                        ty: TypeSig::Fixed(elem),
                    },
                    ParamKind::Scalar(ty) => ParamView {
                        name: &p.name,
                        tensor: false,
                        writable: false,
                        ty: TypeSig::Fixed(ty),
                    },
                }),
            ),
        }
    }

    fn generics(&self) -> &'static [&'static str] {
        match &self.source {
            Source::Def(d) => d.signature.generics,
            Source::Ir(_) => &[],
        }
    }

    fn constexpr_count(&self) -> usize {
        match &self.source {
            Source::Def(d) => d.signature.constexprs.len(),
            Source::Ir(_) => 0,
        }
    }

    /// Each argument is of its parameter's kind and lives on this context.
    fn check_kinds(&self, params: &[ParamView], args: &[BoundArg<'a>]) -> Result<()> {
        for (p, b) in params.iter().zip(args) {
            match (p.tensor, b) {
                (true, BoundArg::Scalar(v)) => {
                    return Err(self.reject(format!(
                        "parameter `{}` is a tensor, got the scalar {v}; bind it with `.arg`",
                        p.name
                    )))
                }
                (false, BoundArg::Tensor(t)) => {
                    return Err(self.reject(format!(
                        "parameter `{}` is a scalar, got a {}{:?} tensor; bind it with `.scalar`",
                        p.name,
                        t.dtype(),
                        t.shape()
                    )))
                }
                (true, BoundArg::Tensor(t)) if !t.is_on(self.ctx.backend()) => {
                    return Err(self.reject(format!(
                        "tensor `{}` was created by another context; create it with the \
                         context that launches the kernel",
                        p.name
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Resolves the specialisation: explicit dtypes, then dtypes inferred from arguments.
    fn specialization(
        &self,
        params: &[ParamView],
        args: &[BoundArg<'a>],
        mut dtypes: Few<Option<(DType, DtypeFrom<'_>)>, FEW>,
        constexprs: Vec<Literal>,
    ) -> Result<(Few<DType, FEW>, Vec<Literal>)> {
        let generics = self.generics();
        for (i, (p, b)) in params.iter().zip(args).enumerate() {
            let TypeSig::Generic(g) = p.ty else { continue };
            let got = arg_dtype(b);
            match dtypes[g] {
                None => dtypes[g] = Some((got, DtypeFrom::Param(i))),
                Some((have, from)) if have != got => {
                    let from = match from {
                        DtypeFrom::Explicit("") => "the launcher's dtype field".to_string(),
                        DtypeFrom::Explicit(name) => format!("`.dtype(\"{name}\", {have})`"),
                        DtypeFrom::Param(j) => {
                            format!("{} `{}` ({have})", kind_word(&params[j]), params[j].name)
                        }
                    };
                    return Err(self.reject(format!(
                        "generic `{}` is {have} from {from}, but {} `{}` is {got}; \
                         bind arguments of one dtype or convert them",
                        generics[g],
                        kind_word(p),
                        p.name
                    )));
                }
                Some(_) => {}
            }
        }
        if let Some(g) = dtypes.iter().position(Option::is_none) {
            return Err(self.reject(format!(
                "cannot infer generic `{}`: no argument of that type is bound; give it \
                 with `.dtype(\"{}\", DType::F32)` (one of f32, f16, bf16)",
                generics[g], generics[g]
            )));
        }
        let resolved = Few::collect(
            DType::F32,
            dtypes.iter().map(|d| d.map_or(DType::F32, |(dt, _)| dt)),
        );
        if let Source::Def(d) = &self.source {
            for (c, v) in d.signature.constexprs.iter().zip(&constexprs) {
                if v.ty() != c.ty {
                    return Err(self.reject(format!(
                        "constexpr `{}` must be {}, got {v} ({}); pass a {} value",
                        c.name,
                        c.ty,
                        v.ty(),
                        c.ty
                    )));
                }
            }
        }
        Ok((resolved, constexprs))
    }

    fn check_types(
        &self,
        params: &[ParamView],
        args: &[BoundArg<'a>],
        generic_dtypes: &[DType],
    ) -> Result<()> {
        for (p, b) in params.iter().zip(args) {
            let want = match p.ty {
                TypeSig::Fixed(t) => t,
                TypeSig::Generic(g) => generic_dtypes[g],
            };
            let got = arg_dtype(b);
            if got != want {
                return Err(self.reject(format!(
                    "{} `{}` must be {want}, got {got}",
                    kind_word(p),
                    p.name
                )));
            }
        }
        // A written tensor must not share its buffer with any other argument.
        for (i, (p, b)) in params.iter().zip(args).enumerate() {
            let BoundArg::Tensor(t) = b else { continue };
            if !p.writable {
                continue;
            }
            for (j, (q, c)) in params.iter().zip(args).enumerate() {
                if i == j {
                    continue;
                }
                if let BoundArg::Tensor(u) = c {
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
        if entry.needs_warpgroups && !gs.is_multiple_of(128) {
            return Err(self.reject(format!(
                "group size {gs} is not allowed: the kernel multiplies tiles on warpgroups \
                 (`matrix_mma_tiles`), so it needs a multiple of 128 (128, 256, … {})",
                max / 128 * 128
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

    /// Checks the bound arguments, compiles (or takes from the cache) and runs.
    fn execute(&self, params: &[ParamView], bindings: Bindings<'a, '_>) -> Result<()> {
        let Bindings {
            args,
            constexprs,
            dtypes,
        } = bindings;
        self.check_kinds(params, &args)?;
        let (generic_dtypes, constexprs) =
            self.specialization(params, &args, dtypes, constexprs)?;
        self.check_types(params, &args, &generic_dtypes)?;
        let entry = match &self.source {
            Source::Def(d) => self.ctx.compiled_parts(d, &generic_dtypes, constexprs)?,
            Source::Ir(k) => std::sync::Arc::new(self.ctx.compile_ir((*k).clone(), self.optimize)?),
        };
        let (grid, gs) = self.check_geometry(&entry)?;
        // The compiled kernel's parameters, as positions in the signature (resolved once,
        // when the kernel was compiled).
        if let Some(&pos) = entry.arg_order.iter().find(|&&pos| pos >= args.len()) {
            return Err(self.reject(format!(
                "internal: the compiled kernel takes parameter {pos}, the launch binds {}",
                args.len()
            )));
        }
        let kernel_args: Few<KernelArg, FEW> = Few::collect(
            KernelArg::Scalar(Literal::U32(0)),
            entry.arg_order.iter().map(|&pos| match args[pos] {
                BoundArg::Tensor(t) => KernelArg::Buffer(&**t.buffer()),
                BoundArg::Scalar(l) => KernelArg::Scalar(l),
            }),
        );
        self.ctx
            .keep_if_recording(args.iter().filter_map(|a| match a {
                BoundArg::Tensor(t) => Some(*t),
                BoundArg::Scalar(_) => None,
            }));
        self.ctx
            .backend()
            .launch(&*entry.compiled, &kernel_args, grid, gs)
    }
}

fn arg_dtype(b: &BoundArg) -> DType {
    match b {
        BoundArg::Tensor(t) => t.dtype(),
        BoundArg::Scalar(l) => l.ty(),
    }
}

fn kind_word(p: &ParamView) -> &'static str {
    if p.tensor {
        "tensor"
    } else {
        "scalar"
    }
}
