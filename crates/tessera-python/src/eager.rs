//! The eager path of `tessera.ops.<name>` on PyTorch CUDA tensors, in one native call:
//! each tensor read from PyTorch in one call (its DLPack description: address, device,
//! dtype, shape, strides), the stream from `torch._C._cuda_getCurrentRawStream`, the
//! parameters taken as Python values (parsed once per distinct set, see [`ParamKey`]),
//! missing outputs made with `torch.empty`, and the op called as [`crate::cuda`] calls it.
//!
//! The path declines — returns `None`, and the Python side takes the general path, which
//! raises or converts as before — whenever it is not plainly this case: a value that is
//! not exactly a `torch.Tensor` (or `Parameter`) on one CUDA device, a dtype Tessera does
//! not run, strides that are not row-major, an address that is not 16-byte aligned, a
//! parameter of another Python type than its schema's, or, when it would make an output, a
//! call the `torch.library` op must see (a dispatch or function mode, a JIT trace, a
//! functorch wrapper, an input that needs a gradient), a tensor of more than
//! [`dlpack::MAX_DIMS`] dimensions or an op of more than [`MAX_OUTPUTS`] outputs.
//! Everything the op and the runtime check on a call is checked on every call; only the
//! driver is not asked where the memory lives, since PyTorch already says it is this
//! device's. A repeat of the same tensors, parameters and stream reuses what the last call
//! bound ([`Memo`]): nothing a check reads differs from a fresh binding.

use crate::call::{check_inputs, params_of, ParamText};
use crate::dlpack::{self, Dims, TensorView};
use crate::errors::{invalid, op_error};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use tessera_runtime::{DType, Tensor};
use tessera_std::decl::{DtypeRule, ParamKind, ParamValues};
use tessera_std::OpDecl;

/// The PyTorch objects the path calls, handed over once when the package imports torch.
struct Torch {
    tensor: Py<PyType>,
    parameter: Py<PyType>,
    /// `tessera._decl.Default`: a parameter left at its declared default.
    default: Py<PyType>,
    to_dlpack: PyObject,
    current_stream: PyObject,
    empty: PyObject,
    /// The torch dtype an output of each Tessera dtype is made as.
    dtypes: Vec<(DType, PyObject)>,
    grad_enabled: PyObject,
    dispatch_modes: PyObject,
    function_modes: PyObject,
    tracing_state: PyObject,
    wrapped: PyObject,
}

static TORCH: GILOnceCell<Torch> = GILOnceCell::new();

/// Hands the path the PyTorch objects it calls (`hooks`: a dict by name). Called once by
/// the package when PyTorch imports; without it every call declines.
#[pyfunction]
pub fn enable_torch_eager(py: Python<'_>, hooks: &Bound<'_, PyDict>) -> PyResult<()> {
    let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        hooks
            .get_item(k)?
            .ok_or_else(|| invalid(format!("enable_torch_eager: no `{k}`")))
    };
    let ty = |k: &str| -> PyResult<Py<PyType>> { Ok(get(k)?.downcast_into::<PyType>()?.unbind()) };
    let mut dtypes = Vec::new();
    for (name, value) in get("dtypes")?.downcast::<PyDict>()?.iter() {
        let name: String = name.extract()?;
        dtypes.push((crate::errors::dtype(&name)?, value.unbind()));
    }
    let torch = Torch {
        tensor: ty("tensor")?,
        parameter: ty("parameter")?,
        default: ty("default")?,
        to_dlpack: get("to_dlpack")?.unbind(),
        current_stream: get("current_stream")?.unbind(),
        empty: get("empty")?.unbind(),
        dtypes,
        grad_enabled: get("grad_enabled")?.unbind(),
        dispatch_modes: get("dispatch_modes")?.unbind(),
        function_modes: get("function_modes")?.unbind(),
        tracing_state: get("tracing_state")?.unbind(),
        wrapped: get("wrapped")?.unbind(),
    };
    // A second call (a reload) keeps the first objects: they are the same torch.
    let _ = TORCH.set(py, torch);
    Ok(())
}

/// One op as its generated Python function passes its arguments: inputs in the function's
/// order, parameters and outputs in declaration order.
#[pyclass(frozen, module = "tessera._tessera")]
pub struct EagerOp {
    op: &'static OpDecl,
    inputs: Vec<&'static str>,
    /// The last successful call's bindings with every output given (see [`Memo`]).
    memo: Mutex<Option<Box<Memo>>>,
}

#[pymethods]
impl EagerOp {
    /// `inputs`: the op's input names in the order the function passes them.
    #[new]
    fn new(op: &str, inputs: Vec<String>) -> PyResult<EagerOp> {
        let op = crate::call::op_named(op)?;
        let mut names = Vec::with_capacity(inputs.len());
        for n in &inputs {
            let decl = op
                .input(n)
                .ok_or_else(|| invalid(format!("`{}` has no input `{n}`", op.name)))?;
            names.push(decl.name);
        }
        if names.len() != op.inputs.len() {
            return Err(invalid(format!(
                "`{}` takes {} inputs, {} named",
                op.name,
                op.inputs.len(),
                names.len()
            )));
        }
        Ok(EagerOp {
            op,
            inputs: names,
            memo: Mutex::new(None),
        })
    }

    /// The op on PyTorch CUDA tensors, arguments flat: the inputs in this handle's order,
    /// the parameters and the outputs in declaration order (None or `Default`: not given).
    /// Returns [`call_torch`]'s result: the outputs, or None where the general path must
    /// take the call.
    #[pyo3(signature = (*args))]
    fn __call__<'py>(
        slf: &Bound<'py, EagerOp>,
        args: &Bound<'py, PyTuple>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let eager = slf.get();
        let n = eager.inputs.len() + eager.op.params.len() + eager.op.outputs.len();
        if args.len() != n {
            return Err(invalid(format!(
                "`{}`'s eager call takes {n} arguments, {} given",
                eager.op.name,
                args.len()
            )));
        }
        call(slf.py(), eager, &Args::Flat(args))
    }
}

/// A parameter as given, by its Python value: what decides its text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ParamKey {
    Bool(bool),
    Int(i64),
    /// The value's bits (so -0.0 and 0.0, or two NaNs, are told apart as their texts are).
    Float(u64),
    Str(String),
    List(Vec<i64>),
}

/// The given parameters, by declaration index, of one call.
type ParamSet = Vec<(usize, ParamKey)>;

/// A parameter set's `tessera run` text and its parse.
struct Parsed {
    text: ParamText,
    values: Arc<ParamValues>,
}

/// More distinct parameter sets than this empty the cache rather than grow it.
const MAX_PARAM_SETS: usize = 4096;

type ParsedCache = HashMap<(usize, ParamSet), Arc<Parsed>>;

/// The parameters' key (`value(i)`: the value of declaration `i`), or `None` where one has
/// another type than its schema's.
fn param_set<'py>(
    torch: &Torch,
    op: &OpDecl,
    value: impl Fn(usize) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Option<ParamSet>> {
    let mut set = Vec::new();
    for (i, p) in op.params.iter().enumerate() {
        let v = value(i)?;
        if v.is_none() || v.get_type().is(torch.default.bind(v.py())) {
            continue;
        }
        let key = match p.kind {
            ParamKind::Bool if v.is_exact_instance_of::<PyBool>() => ParamKey::Bool(v.is_truthy()?),
            ParamKind::UInt { .. } if v.is_exact_instance_of::<PyInt>() => match v.extract() {
                Ok(n) => ParamKey::Int(n),
                Err(_) => return Ok(None),
            },
            ParamKind::Float if v.is_exact_instance_of::<PyFloat>() => {
                ParamKey::Float(v.extract::<f64>()?.to_bits())
            }
            ParamKind::Choice(_) if v.is_exact_instance_of::<PyString>() => {
                ParamKey::Str(v.extract()?)
            }
            ParamKind::UIntList
                if v.is_exact_instance_of::<PyList>() || v.is_exact_instance_of::<PyTuple>() =>
            {
                let mut items = Vec::new();
                for item in v.try_iter()? {
                    let item = item?;
                    if !item.is_exact_instance_of::<PyInt>() {
                        return Ok(None);
                    }
                    match item.extract() {
                        Ok(n) => items.push(n),
                        Err(_) => return Ok(None),
                    }
                }
                ParamKey::List(items)
            }
            _ => return Ok(None),
        };
        set.push((i, key));
    }
    Ok(Some(set))
}

/// The text `tessera._decl.param_text` gives the same values (a float as its `repr`).
fn param_text<'py>(
    op: &OpDecl,
    set: &ParamSet,
    value: impl Fn(usize) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<ParamText> {
    let mut text = Vec::with_capacity(set.len());
    for (i, key) in set {
        let value = match key {
            ParamKey::Bool(b) => (if *b { "true" } else { "false" }).to_string(),
            ParamKey::Int(n) => n.to_string(),
            ParamKey::Float(_) => value(*i)?.repr()?.to_string(),
            ParamKey::Str(s) => s.clone(),
            ParamKey::List(items) => {
                let items: Vec<String> = items.iter().map(i64::to_string).collect();
                items.join(",")
            }
        };
        text.push((op.params[*i].name.to_string(), value));
    }
    Ok(text)
}

/// The parsed parameters of this set, parsed on its first call (errors are not kept).
fn parsed<'py>(
    op: &'static OpDecl,
    set: ParamSet,
    value: impl Fn(usize) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Arc<Parsed>> {
    static CACHE: Mutex<Option<ParsedCache>> = Mutex::new(None);
    let key = (op as *const OpDecl as usize, set);
    if let Some(p) = CACHE
        .lock()
        .ok()
        .and_then(|c| c.as_ref().and_then(|c| c.get(&key).cloned()))
    {
        return Ok(p);
    }
    let text = param_text(op, &key.1, value)?;
    let values = params_of(op, text.clone())?;
    let p = Arc::new(Parsed { text, values });
    if let Ok(mut c) = CACHE.lock() {
        let c = c.get_or_insert_with(HashMap::new);
        if c.len() >= MAX_PARAM_SETS {
            c.clear();
        }
        c.insert(key, p.clone());
    }
    Ok(p)
}

/// The dtype Tessera reads a tensor of this declared rule as: int32 is u32 where the rule
/// takes u32 and not i32 (as `tessera._arrays.tessera_dtype_of_torch` reads it).
fn declared_dtype(rule: DtypeRule, got: DType) -> DType {
    if got == DType::I32 {
        if let DtypeRule::OneOf(list) = rule {
            let ints = [DType::U32, DType::I32, DType::U8, DType::I8];
            let takes_ints = list.iter().any(|d| ints.contains(d));
            if takes_ints && !list.contains(&DType::I32) && list.contains(&DType::U32) {
                return DType::U32;
            }
        }
    }
    got
}

/// One tensor of the call as the path takes it.
struct Given {
    device: usize,
    dtype: DType,
    address: u64,
    shape: Dims,
}

/// One tensor of the call, read; `None` where the path declines it (not exactly a tensor,
/// not CUDA memory, a dtype Tessera does not run, not row-major contiguous, not 16-byte
/// aligned: the general path copies or refuses those).
fn read(torch: &Torch, x: &Bound<'_, PyAny>) -> Option<Given> {
    let py = x.py();
    let ty = x.get_type();
    if !(ty.is(torch.tensor.bind(py)) || ty.is(torch.parameter.bind(py))) {
        return None;
    }
    let capsule = torch.to_dlpack.bind(py).call1((x,)).ok()?;
    let TensorView {
        address,
        cuda_device,
        dtype,
        shape,
        contiguous,
    } = dlpack::read(&capsule)?;
    (contiguous && address % 16 == 0).then_some(Given {
        device: cuda_device?,
        dtype: dtype?,
        address,
        shape,
    })
}

/// Whether the `torch.library` op would only run the eager call: no dispatch or function
/// mode, no JIT trace, no functorch wrapper, no input that needs a gradient.
fn plain_eager<'a, 'py: 'a>(
    py: Python<'py>,
    torch: &Torch,
    inputs: impl Iterator<Item = &'a Bound<'py, PyAny>>,
) -> Option<bool> {
    if torch
        .dispatch_modes
        .bind(py)
        .call0()
        .ok()?
        .is_truthy()
        .ok()?
        || torch
            .function_modes
            .bind(py)
            .call0()
            .ok()?
            .is_truthy()
            .ok()?
        || !torch.tracing_state.bind(py).call0().ok()?.is_none()
    {
        return Some(false);
    }
    let grad = torch.grad_enabled.bind(py).call0().ok()?.is_truthy().ok()?;
    for x in inputs {
        if grad && x.getattr("requires_grad").ok()?.is_truthy().ok()? {
            return Some(false);
        }
        if torch.wrapped.bind(py).call1((x,)).ok()?.is_truthy().ok()? {
            return Some(false);
        }
    }
    Some(true)
}

/// Borrows a tensor PyTorch says is a contiguous CUDA tensor of the call's device.
fn borrow(
    ctx: &tessera_runtime::Context,
    what: &str,
    name: &str,
    address: u64,
    dtype: DType,
    shape: &[usize],
) -> PyResult<Tensor> {
    // SAFETY: PyTorch describes `address` as `shape` elements of `dtype`, contiguous, in
    // CUDA memory of the context's device, held by the caller's tensor for the whole call;
    // the work is issued on PyTorch's current stream, in whose order its caching allocator
    // reuses the memory. The tensor made here is dropped before the call returns.
    unsafe { ctx.borrow_device_memory_vouched(address, dtype, shape) }
        .map_err(|e| invalid(format!("{what} `{name}`: {e}")))
}

/// Where the call's values are: the three tuples of [`call_torch`], or the flat argument
/// tuple of an [`EagerOp`] call (inputs, then parameters, then outputs).
enum Args<'a, 'py> {
    Parts {
        inputs: &'a Bound<'py, PyTuple>,
        params: &'a Bound<'py, PyTuple>,
        outputs: &'a Bound<'py, PyTuple>,
    },
    Flat(&'a Bound<'py, PyTuple>),
}

impl<'py> Args<'_, 'py> {
    /// The three lengths, inputs, parameters and outputs.
    fn lens(&self, op: &EagerOp) -> (usize, usize, usize) {
        match self {
            Args::Parts {
                inputs,
                params,
                outputs,
            } => (inputs.len(), params.len(), outputs.len()),
            // `__call__` checked the total.
            Args::Flat(all) => {
                let (ni, np) = (op.inputs.len(), op.op.params.len());
                (ni, np, all.len().saturating_sub(ni + np))
            }
        }
    }

    fn input(&self, i: usize) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Args::Parts { inputs, .. } => inputs.get_item(i),
            Args::Flat(all) => all.get_item(i),
        }
    }

    fn param(&self, op: &EagerOp, i: usize) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Args::Parts { params, .. } => params.get_item(i),
            Args::Flat(all) => all.get_item(op.inputs.len() + i),
        }
    }

    fn output(&self, op: &EagerOp, i: usize) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Args::Parts { outputs, .. } => outputs.get_item(i),
            Args::Flat(all) => all.get_item(op.inputs.len() + op.op.params.len() + i),
        }
    }
}

/// One tensor bound by a call: which of the op's tensors it is (an input's index in the
/// [`EagerOp`]'s order, or the input count plus an output's declaration index), and what
/// the borrowed tensor was made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bound1 {
    slot: usize,
    dtype: DType,
    address: u64,
    shape: Dims,
}

/// What the last successful call of an op with every output given bound, kept for the
/// next call: its parameters' parse, its context, and its borrowed tensors in their name
/// maps. A repeat reuses only what is the same by construction: the parse of the same
/// parameter values, the context of the same (device, stream), the tensors made of the same
/// (address, dtype, shape) — a borrowed tensor is nothing but that description. Every
/// check of the op and the launch still runs on every call.
struct Memo {
    params: ParamSet,
    parsed: Arc<Parsed>,
    place: (usize, usize),
    ctx: tessera_runtime::Context,
    bound: Vec<Bound1>,
    ins: BTreeMap<String, Tensor>,
    outs: BTreeMap<String, Tensor>,
}

/// Runs `op` on PyTorch CUDA tensors and returns its outputs (one alone, else a tuple),
/// or `None` where the general path must take the call (see the module docs).
/// `inputs` in the [`EagerOp`]'s order (None: not given), `params` and `outputs` in
/// declaration order (None or `Default`: not given).
#[pyfunction]
pub fn call_torch<'py>(
    py: Python<'py>,
    op: &Bound<'py, EagerOp>,
    inputs: &Bound<'py, PyTuple>,
    params: &Bound<'py, PyTuple>,
    outputs: &Bound<'py, PyTuple>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    call(
        py,
        op.get(),
        &Args::Parts {
            inputs,
            params,
            outputs,
        },
    )
}

/// The call of [`call_torch`] and [`EagerOp`]'s `__call__`.
fn call<'py>(
    py: Python<'py>,
    eager: &EagerOp,
    args: &Args<'_, 'py>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some(torch) = TORCH.get(py) else {
        return Ok(None);
    };
    let op = eager.op;
    let n_in = eager.inputs.len();
    if args.lens(eager) != (n_in, op.params.len(), op.outputs.len()) {
        return Ok(None);
    }
    // Every tensor read first: the path declines before it does anything. `bound` holds
    // the given inputs, then the given outputs; `given_out` the outputs' Python objects.
    let mut device = None;
    let mut bound: Vec<Bound1> = Vec::with_capacity(n_in + op.outputs.len());
    let mut read_one = |slot: usize, x: &Bound<'py, PyAny>, rule: DtypeRule| {
        let g = read(torch, x)?;
        (*device.get_or_insert(g.device) == g.device).then_some(())?;
        bound.push(Bound1 {
            slot,
            dtype: declared_dtype(rule, g.dtype),
            address: g.address,
            shape: g.shape,
        });
        Some(())
    };
    if op.outputs.len() > MAX_OUTPUTS {
        return Ok(None);
    }
    for i in 0..n_in {
        let x = args.input(i)?;
        if x.is_none() {
            continue;
        }
        let rule = op
            .input(eager.inputs[i])
            .map_or(DtypeRule::OneOf(&[]), |d| d.dtype);
        if read_one(i, &x, rule).is_none() {
            return Ok(None);
        }
    }
    let mut given_out: [Option<Bound<'py, PyAny>>; MAX_OUTPUTS] = Default::default();
    for (i, decl) in op.outputs.iter().enumerate() {
        let o = args.output(eager, i)?;
        if o.is_none() {
            continue;
        }
        if read_one(n_in + i, &o, decl.dtype).is_none() {
            return Ok(None);
        }
        given_out[i] = Some(o);
    }
    let Some(ordinal) = device else {
        return Ok(None);
    };
    let n_given_in = bound.iter().take_while(|b| b.slot < n_in).count();
    let all_given = bound.len() - n_given_in == op.outputs.len();
    if bound.len() == n_given_in {
        // No output given: the call makes them, and must be one the custom op would only
        // run eagerly.
        let inputs = (0..n_in).filter_map(|i| args.input(i).ok().filter(|x| !x.is_none()));
        let inputs: Vec<Bound<'py, PyAny>> = inputs.collect();
        if plain_eager(py, torch, inputs.iter()) != Some(true) {
            return Ok(None);
        }
    }
    let param = |i: usize| args.param(eager, i);
    let Some(set) = param_set(torch, op, param)? else {
        return Ok(None);
    };
    check_inputs(op, bound[..n_given_in].iter().map(|b| eager.inputs[b.slot]))?;
    let stream: usize = torch.current_stream.bind(py).call1((ordinal,))?.extract()?;

    // The last call's bindings, taken out while this call runs (a call on another thread
    // meanwhile binds its own).
    let mut memo = eager.memo.lock().ok().and_then(|mut m| m.take());
    let place = (ordinal, stream);
    let parsed = match &memo {
        Some(m) if m.params == set => m.parsed.clone(),
        _ => parsed(op, set.clone(), param)?,
    };
    let ctx = match &memo {
        Some(m) if m.place == place => m.ctx.clone(),
        _ => crate::cuda::context_on(ordinal, stream)?,
    };
    let reused = all_given
        && memo
            .as_ref()
            .is_some_and(|m| m.place == place && m.bound == bound);
    if !reused {
        let mut ins = BTreeMap::new();
        let mut outs = BTreeMap::new();
        for b in &bound {
            if b.slot < n_in {
                let name = eager.inputs[b.slot];
                let t = borrow(&ctx, "input", name, b.address, b.dtype, b.shape.as_slice())?;
                ins.insert(name.to_string(), t);
            } else {
                let name = op.outputs[b.slot - n_in].name;
                let t = borrow(&ctx, "output", name, b.address, b.dtype, b.shape.as_slice())?;
                outs.insert(name.to_string(), t);
            }
        }
        let returned = &mut given_out[..op.outputs.len()];
        make_outputs(
            py, torch, op, &ctx, ordinal, &ins, &parsed, &mut outs, returned,
        )?;
        let fresh = Memo {
            params: Vec::new(),
            parsed: parsed.clone(),
            place,
            ctx: ctx.clone(),
            bound: Vec::new(),
            ins,
            outs,
        };
        match &mut memo {
            Some(m) => **m = fresh,
            None => memo = Some(Box::new(fresh)),
        }
    }
    let Some(mut m) = memo else {
        return Err(invalid("internal: the eager call lost its bindings".into()));
    };
    py.allow_threads(|| {
        crate::cache::invoke(
            op,
            &ctx,
            place,
            &m.ins,
            &m.outs,
            &parsed.values,
            &parsed.text,
        )
    })
    .map_err(op_error)?;
    if all_given {
        // Kept only after a call that ran with every output given: an error keeps nothing,
        // and outputs made here are new tensors each call. The kept tensors outlive the
        // memory they describe (PyTorch may free it); nothing reads, writes or frees it
        // through them, and they are launched again only by a call that passes tensors of
        // exactly their (address, dtype, shape) on the same device and stream — memory
        // that call's caller holds, as if borrowed afresh.
        m.params = set;
        m.parsed = parsed;
        m.bound = bound;
        if let Ok(mut slot) = eager.memo.lock() {
            *slot = Some(m);
        }
    }
    let n_out = op.outputs.len();
    if n_out == 1 {
        return Ok(given_out[0].take());
    }
    let returned: Vec<Bound<'py, PyAny>> = given_out[..n_out]
        .iter_mut()
        .flatten()
        .map(|o| o.clone())
        .collect();
    Ok(Some(PyTuple::new(py, returned)?.into_any()))
}

/// The most outputs an op has for the eager path (one with more takes the general path).
const MAX_OUTPUTS: usize = 8;

/// Makes, with `torch.empty`, each output the call was not given, and borrows it.
#[allow(clippy::too_many_arguments)]
fn make_outputs<'py>(
    py: Python<'py>,
    torch: &Torch,
    op: &'static OpDecl,
    ctx: &tessera_runtime::Context,
    ordinal: usize,
    ins: &BTreeMap<String, Tensor>,
    parsed: &Parsed,
    outs: &mut BTreeMap<String, Tensor>,
    returned: &mut [Option<Bound<'py, PyAny>>],
) -> PyResult<()> {
    if returned.iter().all(Option::is_some) {
        return Ok(());
    }
    let specs = op.output_specs(ins, &parsed.values).map_err(op_error)?;
    for (i, decl) in op.outputs.iter().enumerate() {
        if returned[i].is_some() {
            continue;
        }
        let Some(s) = specs.iter().find(|s| s.name == decl.name) else {
            return Err(invalid(format!(
                "`{}`: no spec for output `{}`",
                op.name, decl.name
            )));
        };
        let Some((_, tdt)) = torch.dtypes.iter().find(|(d, _)| *d == s.dtype) else {
            return Err(invalid(format!(
                "`{}`: output `{}` is {}, which PyTorch cannot hold",
                op.name, decl.name, s.dtype
            )));
        };
        let kwargs = PyDict::new(py);
        kwargs.set_item("dtype", tdt.bind(py))?;
        kwargs.set_item("device", ordinal)?;
        let o = torch
            .empty
            .bind(py)
            .call((PyTuple::new(py, &s.shape)?,), Some(&kwargs))?;
        let address: u64 = o.call_method0("data_ptr")?.extract()?;
        let t = borrow(ctx, "output", decl.name, address, s.dtype, &s.shape)?;
        outs.insert(decl.name.to_string(), t);
        returned[i] = Some(o);
    }
    Ok(())
}

/// `(address, CUDA device index or None, dtype name or None, shape, contiguous)`.
type Description = (u64, Option<usize>, Option<String>, Vec<usize>, bool);

/// The description the eager path reads of a tensor, `None` for a value it does not
/// read. For tests of the reader, on any device.
#[pyfunction]
pub fn describe_tensor(py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<Option<Description>> {
    let Some(torch) = TORCH.get(py) else {
        return Ok(None);
    };
    let capsule = torch.to_dlpack.bind(py).call1((x,))?;
    Ok(dlpack::read(&capsule).map(|v| {
        (
            v.address,
            v.cuda_device,
            v.dtype.map(|d| d.name().to_string()),
            v.shape.as_slice().to_vec(),
            v.contiguous,
        )
    }))
}
