//! Hand-built kernels that together touch every op class the CUDA emitter handles —
//! simdgroup reductions, scans and shuffles, strided loops with carried values,
//! threadgroup memory and barriers (static and dynamic), f16 / bf16 loads, stores and
//! casts, integer wrap-around, atomics, vector accesses, asynchronous copies — each with the arguments and
//! geometry to run it. The emitter's tests, the NVRTC compile test and the GPU smoke test
//! (CUDA against the CPU reference) all use them.

use tessera_ir::{
    AtomicOp, BinaryOp, Builder, Builtin, FragRole, Inst, IrError, Kernel, Literal, MemRef, Op,
    RowMap, RowReduce, RowsOp, Scalar, ShuffleKind, SimdOp, TileOperand, Type, UnaryOp, Value,
};

/// How a tensor argument starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Uniform random values in `[lo, hi)`, converted to the element type (integers round).
    Uniform(f64, f64),
    /// All zero.
    Zero,
}

/// One argument, in `Kernel::params` order.
#[derive(Clone, Debug, PartialEq)]
pub enum SampleArg {
    Tensor { len: usize, init: Init },
    Scalar(Literal),
}

/// How outputs are compared with the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// Bit-for-bit (NaN matches NaN).
    Exact,
    /// `|a - b| <= abs + rel * |b|`; NaN must match NaN.
    Close { abs: f64, rel: f64 },
}

/// Outputs computed on the host: tensor arguments' initial values in, every tensor's final
/// values out (both in parameter order).
pub type HostReference = fn(&[Vec<f64>]) -> Vec<Vec<f64>>;

/// A kernel with everything needed to run and check it.
#[derive(Clone, Debug)]
pub struct Sample {
    pub name: &'static str,
    pub kernel: Kernel,
    pub args: Vec<SampleArg>,
    pub grid: [u32; 3],
    pub group_size: u32,
    pub check: Check,
    /// Computes the outputs on the host from the tensor arguments' initial values (as f64,
    /// in parameter order), for samples the CPU backend cannot run (it allows less
    /// threadgroup memory than a GPU).
    pub host_reference: Option<HostReference>,
}

type R<T> = Result<T, IrError>;

const CLOSE: Check = Check::Close {
    abs: 1e-5,
    rel: 1e-5,
};

fn t(len: usize, init: Init) -> SampleArg {
    SampleArg::Tensor { len, init }
}

fn rand(len: usize) -> SampleArg {
    t(len, Init::Uniform(-2.0, 2.0))
}

/// Every sample.
pub fn all() -> R<Vec<Sample>> {
    Ok(vec![
        simd_float()?,
        simd_int()?,
        shuffles()?,
        strided_loop()?,
        threadgroup_reduce()?,
        half_casts()?,
        int_semantics()?,
        float_math()?,
        atomics()?,
        vector_access()?,
        dynamic_shared()?,
        fragments()?,
        fragment_rows()?,
        fragment_rounding()?,
        async_copy()?,
        tile_mma()?,
    ])
}

/// Simdgroup reductions and scans on f32: sum, max, min, prefix sums, and an f16 sum.
pub fn simd_float() -> R<Sample> {
    let (mut b, x, out) = Builder::kernel_x_out("simd_float", Scalar::F32);
    let g = b.builtin(Builtin::GlobalId);
    let v = b.load(x, g)?;
    let ops = SimdOp::ARITHMETIC;
    let base = b.binary(BinaryOp::Mul, g, Value::Int(ops.len() as i64 + 1))?;
    for (k, op) in ops.iter().enumerate() {
        // Keep products in range: 32 factors near 1.
        let arg = if *op == SimdOp::Prod {
            let s = b.binary(BinaryOp::Mul, v, Value::Float(0.05))?;
            b.binary(BinaryOp::Add, s, Value::Float(1.0))?
        } else {
            v
        };
        let r = b.simd(*op, arg)?;
        let i = b.binary(BinaryOp::Add, base, Value::Int(k as i64))?;
        b.store(out, i, r)?;
    }
    let h = b.cast(v, Scalar::F16)?;
    let hs = b.simd(SimdOp::Sum, h)?;
    let hf = b.cast(hs, Scalar::F32)?;
    let i = b.binary(BinaryOp::Add, base, Value::Int(ops.len() as i64))?;
    b.store(out, i, hf)?;
    Ok(Sample {
        name: "simd_float",
        kernel: b.finish_kernel()?,
        args: vec![rand(256), t(256 * 7, Init::Zero)],
        grid: [2, 1, 1],
        group_size: 128,
        check: Check::Close {
            abs: 2e-2,
            rel: 1e-3,
        },
        host_reference: None,
    })
}

/// Simdgroup reductions on integers and bools: wrapping sums, signed max / min, bit ops,
/// prefix sums, all / any, and an i8 sum that wraps.
pub fn simd_int() -> R<Sample> {
    let (mut b, x, out) = Builder::kernel_x_out("simd_int", Scalar::I32);
    let g = b.builtin(Builtin::GlobalId);
    let v = b.load(x, g)?;
    let u = b.cast(v, Scalar::U32)?;
    let mut results = Vec::new();
    for op in [SimdOp::Sum, SimdOp::Max, SimdOp::Min, SimdOp::PrefixSum] {
        results.push(b.simd(op, v)?);
    }
    for op in [
        SimdOp::And,
        SimdOp::Or,
        SimdOp::Xor,
        SimdOp::Max,
        SimdOp::PrefixExclusiveSum,
        SimdOp::Prod,
    ] {
        let r = b.simd(op, u)?;
        results.push(b.cast(r, Scalar::I32)?);
    }
    let pos = b.binary(BinaryOp::Gt, v, Value::Int(0))?;
    for op in [SimdOp::All, SimdOp::Any, SimdOp::Xor] {
        let r = b.simd(op, pos)?;
        results.push(b.cast(r, Scalar::I32)?);
    }
    let small = b.cast(v, Scalar::I8)?;
    let s8 = b.simd(SimdOp::Sum, small)?;
    results.push(b.cast(s8, Scalar::I32)?);
    let n = results.len() as i64;
    let base = b.binary(BinaryOp::Mul, g, Value::Int(n))?;
    for (k, r) in results.into_iter().enumerate() {
        let i = b.binary(BinaryOp::Add, base, Value::Int(k as i64))?;
        b.store(out, i, r)?;
    }
    Ok(Sample {
        name: "simd_int",
        kernel: b.finish_kernel()?,
        args: vec![
            t(128, Init::Uniform(-2.0e9, 2.0e9)),
            t(128 * n as usize, Init::Zero),
        ],
        grid: [1, 1, 1],
        group_size: 128,
        check: Check::Exact,
        host_reference: None,
    })
}

/// Lane shuffles on f16 and u32: index, xor, up / down by constants and by runtime deltas
/// (including one of 32 or more, where every lane keeps its own value).
pub fn shuffles() -> R<Sample> {
    let (mut b, x, out) = Builder::kernel_x_out("shuffles", Scalar::F16);
    let outu = b.tensor_param("outu", Scalar::U32, true);
    let d = b.scalar_param("d", Scalar::U32);
    let far = b.scalar_param("far", Scalar::U32);
    let g = b.builtin(Builtin::GlobalId);
    let lane = b.builtin(Builtin::SimdLane);
    let v = b.load(x, g)?;
    let rev = b.binary(BinaryOp::Sub, Value::Int(31), lane)?;
    let shuffled = [
        b.shuffle(ShuffleKind::Index, v, rev)?,
        b.shuffle(ShuffleKind::Xor, v, Value::Int(5))?,
        b.shuffle(ShuffleKind::Up, v, Value::Int(3))?,
        b.shuffle(ShuffleKind::Down, v, Value::Int(7))?,
        b.shuffle(ShuffleKind::Up, v, d)?,
        b.shuffle(ShuffleKind::Down, v, d)?,
        b.shuffle(ShuffleKind::Up, v, far)?,
        b.shuffle(ShuffleKind::Down, v, far)?,
    ];
    let base = b.binary(BinaryOp::Mul, g, Value::Int(shuffled.len() as i64))?;
    for (k, s) in shuffled.into_iter().enumerate() {
        let i = b.binary(BinaryOp::Add, base, Value::Int(k as i64))?;
        b.store(out, i, s)?;
    }
    let id = b.builtin(Builtin::ThreadId);
    let ud = b.shuffle(ShuffleKind::Down, id, d)?;
    let ux = b.shuffle(ShuffleKind::Xor, id, Value::Int(31))?;
    let packed = b.binary(BinaryOp::Shl, ud, Value::Int(16))?;
    let both = b.binary(BinaryOp::Or, packed, ux)?;
    b.store(outu, g, both)?;
    Ok(Sample {
        name: "shuffles",
        kernel: b.finish_kernel()?,
        args: vec![
            rand(128),
            t(128 * 8, Init::Zero),
            t(128, Init::Zero),
            SampleArg::Scalar(Literal::U32(9)),
            SampleArg::Scalar(Literal::U32(40)),
        ],
        grid: [2, 1, 1],
        group_size: 64,
        check: Check::Exact,
        host_reference: None,
    })
}

/// A strided loop over a runtime length with a runtime step, carrying a sum, a max and a
/// swapped pair, with an `if` yielding values inside it, and an i32 loop counting down
/// through negative bounds.
pub fn strided_loop() -> R<Sample> {
    let mut b = Builder::kernel("strided_loop");
    let x = b.tensor_param("x", Scalar::BF16, false);
    let out = b.tensor_param("out", Scalar::F32, true);
    let n = b.scalar_param("n", Scalar::U32);
    let step = b.scalar_param("step", Scalar::U32);
    let tid = b.builtin(Builtin::ThreadId);
    let init = [
        Value::Float(0.0),
        Value::Float(f64::NEG_INFINITY),
        Value::Float(1.0),
        Value::Float(2.0),
    ];
    let (i, c) = b.begin_for(tid, n, step, &init)?;
    let xi = b.load(x, i)?;
    let xf = b.cast(xi, Scalar::F32)?;
    let pos = b.binary(BinaryOp::Gt, xf, Value::Float(0.0))?;
    b.begin_if(pos)?;
    let sq = b.binary(BinaryOp::Mul, xf, xf)?;
    b.begin_else(&[sq])?;
    let neg = b.unary(UnaryOp::Neg, xf)?;
    let r = b.end_if(&[neg])?;
    let sum = b.binary(BinaryOp::Add, c[0], r[0])?;
    let mx = b.binary(BinaryOp::Max, c[1], xf)?;
    // The pair swaps every iteration: yields read the block arguments crosswise.
    let done = b.end_for(&[sum, mx, c[3], c[2]])?;
    // Count down from 5 - tid to -3 with an i32 loop (runs only for small tids).
    let tid_i = b.cast(tid, Scalar::I32)?;
    let lo = b.binary(BinaryOp::Sub, Value::Int(-3), Value::Int(0))?;
    let hi = b.binary(BinaryOp::Sub, Value::Int(5), tid_i)?;
    let zero_i = b.lit(Literal::I32(0));
    let (j, cc) = b.begin_for(lo, hi, Value::Int(2), &[zero_i])?;
    let acc = b.binary(BinaryOp::Add, cc[0], j)?;
    let counted = b.end_for(&[acc])?;
    let cf = b.cast(counted[0], Scalar::F32)?;
    let base = b.binary(BinaryOp::Mul, tid, Value::Int(5))?;
    for (k, v) in [done[0], done[1], done[2], done[3], cf]
        .into_iter()
        .enumerate()
    {
        let o = b.binary(BinaryOp::Add, base, Value::Int(k as i64))?;
        b.store(out, o, v)?;
    }
    Ok(Sample {
        name: "strided_loop",
        kernel: b.finish_kernel()?,
        args: vec![
            rand(1000),
            t(96 * 5, Init::Zero),
            SampleArg::Scalar(Literal::U32(1000)),
            SampleArg::Scalar(Literal::U32(96)),
        ],
        grid: [1, 1, 1],
        group_size: 96,
        check: CLOSE,
        host_reference: None,
    })
}

/// A threadgroup reduction written out by hand: simd sums into a threadgroup array,
/// a barrier, simdgroup 0 combines; plus a reversal through threadgroup memory.
pub fn threadgroup_reduce() -> R<Sample> {
    let (mut b, x, out) = Builder::kernel_x_out("threadgroup_reduce", Scalar::F32);
    let rev_out = b.tensor_param("rev", Scalar::F32, true);
    let partial = b.shared_array("partial", Scalar::F32, Value::Int(32))?;
    let stage = b.shared_array("stage", Scalar::F32, Value::Int(256))?;
    let tid = b.builtin(Builtin::ThreadId);
    let gs = b.builtin(Builtin::GroupSize);
    let g = b.builtin(Builtin::GlobalId);
    let grp = b.builtin(Builtin::GroupIdX);
    let lane = b.builtin(Builtin::SimdLane);
    let sid = b.builtin(Builtin::SimdId);
    let nsg = b.builtin(Builtin::SimdGroups);
    let v = b.load(x, g)?;
    b.store(stage, tid, v)?;
    let s = b.simd(SimdOp::Sum, v)?;
    let first = b.binary(BinaryOp::Eq, lane, Value::Int(0))?;
    b.begin_if(first)?;
    b.store(partial, sid, s)?;
    b.begin_else(&[])?;
    b.end_if(&[])?;
    b.barrier();
    let last = b.binary(BinaryOp::Sub, gs, Value::Int(1))?;
    let mirror = b.binary(BinaryOp::Sub, last, tid)?;
    let m = b.load(stage, mirror)?;
    b.store(rev_out, g, m)?;
    let in_first = b.binary(BinaryOp::Eq, sid, Value::Int(0))?;
    b.begin_if(in_first)?;
    let have = b.binary(BinaryOp::Lt, lane, nsg)?;
    // Lanes past the simdgroup count read slot 0 and discard it with `select`.
    let slot = b.select(have, lane, Value::Int(0))?;
    let p = b.load(partial, slot)?;
    let pv = b.select(have, p, Value::Float(0.0))?;
    let total = b.simd(SimdOp::Sum, pv)?;
    let is0 = b.binary(BinaryOp::Eq, lane, Value::Int(0))?;
    b.begin_if(is0)?;
    b.store(out, grp, total)?;
    b.begin_else(&[])?;
    b.end_if(&[])?;
    b.begin_else(&[])?;
    b.end_if(&[])?;
    Ok(Sample {
        name: "threadgroup_reduce",
        kernel: b.finish_kernel()?,
        args: vec![rand(4 * 256), t(4, Init::Zero), t(4 * 256, Init::Zero)],
        grid: [4, 1, 1],
        group_size: 256,
        check: Check::Close {
            abs: 1e-4,
            rel: 1e-5,
        },
        host_reference: None,
    })
}

/// f16 and bf16 loads, stores and math, and every cast direction between floats and
/// integers, including saturation of huge values, infinities and NaN.
pub fn half_casts() -> R<Sample> {
    let mut b = Builder::kernel("half_casts");
    let x = b.tensor_param("x", Scalar::F32, false);
    let h = b.tensor_param("h", Scalar::F16, false);
    let oh = b.tensor_param("oh", Scalar::F16, true);
    let ob = b.tensor_param("ob", Scalar::BF16, true);
    let oi = b.tensor_param("oi", Scalar::I32, true);
    let g = b.builtin(Builtin::GlobalId);
    let xv = b.load(x, g)?;
    let hv = b.load(h, g)?;
    // f16 math rounds after each op.
    let hx = b.cast(xv, Scalar::F16)?;
    let hsum = b.binary(BinaryOp::Add, hv, hx)?;
    let hm = b.binary(BinaryOp::Mul, hsum, hv)?;
    b.store(oh, g, hm)?;
    // bf16 from f32 and from f16, with a fused multiply-add.
    let bx = b.cast(xv, Scalar::BF16)?;
    let bh = b.cast(hv, Scalar::BF16)?;
    let bf = b.fma(bx, bh, bx)?;
    b.store(ob, g, bf)?;
    // Float → int: truncation, saturation, infinities and NaN.
    let big = b.binary(BinaryOp::Mul, xv, Value::Float(3.0e9))?;
    let zero = b.binary(BinaryOp::Sub, xv, xv)?;
    let nan = b.binary(BinaryOp::Div, zero, zero)?;
    let inf = b.binary(BinaryOp::Div, xv, zero)?;
    let scaled = b.binary(BinaryOp::Mul, xv, Value::Float(100.0))?;
    let hbig = b.cast(scaled, Scalar::F16)?;
    let cast_results = [
        b.cast(xv, Scalar::I32)?,
        b.cast(big, Scalar::I32)?,
        {
            let u = b.cast(big, Scalar::U32)?;
            b.cast(u, Scalar::I32)?
        },
        b.cast(nan, Scalar::I32)?,
        b.cast(inf, Scalar::I32)?,
        {
            let u = b.cast(scaled, Scalar::U8)?;
            b.cast(u, Scalar::I32)?
        },
        {
            let u = b.cast(scaled, Scalar::I8)?;
            b.cast(u, Scalar::I32)?
        },
        b.cast(hbig, Scalar::I32)?,
        {
            let bb = b.cast(xv, Scalar::Bool)?;
            b.cast(bb, Scalar::I32)?
        },
        {
            // int → f16 → int goes through f32 rounding both ways.
            let k = b.cast(big, Scalar::I32)?;
            let kh = b.cast(k, Scalar::BF16)?;
            let back = b.cast(kh, Scalar::F32)?;
            let small = b.binary(BinaryOp::Mul, back, Value::Float(1.0e-6))?;
            b.cast(small, Scalar::I32)?
        },
    ];
    let n = cast_results.len() as i64;
    let base = b.binary(BinaryOp::Mul, g, Value::Int(n))?;
    for (k, r) in cast_results.into_iter().enumerate() {
        let i = b.binary(BinaryOp::Add, base, Value::Int(k as i64))?;
        b.store(oi, i, r)?;
    }
    Ok(Sample {
        name: "half_casts",
        kernel: b.finish_kernel()?,
        args: vec![
            rand(256),
            rand(256),
            t(256, Init::Zero),
            t(256, Init::Zero),
            t(256 * n as usize, Init::Zero),
        ],
        grid: [2, 1, 1],
        group_size: 128,
        check: Check::Exact,
        host_reference: None,
    })
}

/// Integer semantics: wrapping i32 / u32 / i8 / u8 arithmetic, INT_MIN / -1, shifts by
/// amounts past the width, negation, abs and not.
pub fn int_semantics() -> R<Sample> {
    let mut b = Builder::kernel("int_semantics");
    let x = b.tensor_param("x", Scalar::I32, false);
    let y = b.tensor_param("y", Scalar::I32, false);
    let out = b.tensor_param("out", Scalar::I32, true);
    let g = b.builtin(Builtin::GlobalId);
    let a = b.load(x, g)?;
    let c = b.load(y, g)?;
    let d = b.binary(BinaryOp::Or, c, Value::Int(1))?; // never zero
    let zero = b.binary(BinaryOp::And, a, Value::Int(0))?;
    let min = b.binary(BinaryOp::Or, zero, Value::Int(i32::MIN as i64))?;
    let minus1 = b.binary(BinaryOp::Sub, zero, Value::Int(1))?;
    let au = b.cast(a, Scalar::U32)?;
    let cu = b.cast(c, Scalar::U32)?;
    let du = b.cast(d, Scalar::U32)?;
    let a8 = b.cast(a, Scalar::I8)?;
    let c8 = b.cast(c, Scalar::I8)?;
    let au8 = b.cast(a, Scalar::U8)?;
    let cu8 = b.cast(c, Scalar::U8)?;
    let mut r: Vec<Value> = Vec::new();
    for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul] {
        r.push(b.binary(op, a, c)?);
    }
    r.push(b.binary(BinaryOp::Div, a, d)?);
    r.push(b.binary(BinaryOp::Rem, a, d)?);
    r.push(b.binary(BinaryOp::Div, min, minus1)?);
    r.push(b.binary(BinaryOp::Rem, min, minus1)?);
    r.push(b.binary(BinaryOp::Shl, a, c)?);
    r.push(b.binary(BinaryOp::Shr, a, c)?);
    r.push(b.binary(BinaryOp::Min, a, c)?);
    r.push(b.binary(BinaryOp::Max, a, c)?);
    r.push(b.unary(UnaryOp::Neg, min)?);
    r.push(b.unary(UnaryOp::Abs, a)?);
    r.push(b.unary(UnaryOp::Not, a)?);
    let lt = b.binary(BinaryOp::Lt, a, c)?;
    r.push(b.cast(lt, Scalar::I32)?);
    for op in [
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::Shr,
        BinaryOp::Shl,
        BinaryOp::Sub,
    ] {
        let rhs = if matches!(op, BinaryOp::Div | BinaryOp::Rem) {
            du
        } else {
            cu
        };
        let v = b.binary(op, au, rhs)?;
        r.push(b.cast(v, Scalar::I32)?);
    }
    let d8 = b.binary(BinaryOp::Or, c8, Value::Int(1))?;
    for (op, rhs) in [
        (BinaryOp::Add, c8),
        (BinaryOp::Mul, c8),
        (BinaryOp::Div, d8),
        (BinaryOp::Shr, c8),
        (BinaryOp::Shl, c8),
    ] {
        let v = b.binary(op, a8, rhs)?;
        r.push(b.cast(v, Scalar::I32)?);
    }
    let n8 = b.unary(UnaryOp::Neg, a8)?;
    r.push(b.cast(n8, Scalar::I32)?);
    let ab8 = b.unary(UnaryOp::Abs, a8)?;
    r.push(b.cast(ab8, Scalar::I32)?);
    for op in [BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Shr, BinaryOp::Max] {
        let v = b.binary(op, au8, cu8)?;
        r.push(b.cast(v, Scalar::I32)?);
    }
    let n = r.len() as i64;
    let base = b.binary(BinaryOp::Mul, g, Value::Int(n))?;
    for (k, v) in r.into_iter().enumerate() {
        let i = b.binary(BinaryOp::Add, base, Value::Int(k as i64))?;
        b.store(out, i, v)?;
    }
    Ok(Sample {
        name: "int_semantics",
        kernel: b.finish_kernel()?,
        args: vec![
            t(128, Init::Uniform(-2.1e9, 2.1e9)),
            t(128, Init::Uniform(-300.0, 300.0)),
            t(128 * n as usize, Init::Zero),
        ],
        grid: [1, 1, 1],
        group_size: 128,
        check: Check::Exact,
        host_reference: None,
    })
}

/// Float math: transcendental functions, rounding, min / max with NaN, select, fma,
/// remainder and power.
pub fn float_math() -> R<Sample> {
    let (mut b, x, out) = Builder::kernel_x_out("float_math", Scalar::F32);
    let g = b.builtin(Builtin::GlobalId);
    let v = b.load(x, g)?;
    let a = b.unary(UnaryOp::Abs, v)?;
    let pa = b.binary(BinaryOp::Add, a, Value::Float(0.5))?;
    let mut r = Vec::new();
    for op in [
        UnaryOp::Exp,
        UnaryOp::Exp2,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Neg,
        UnaryOp::Recip,
    ] {
        r.push(b.unary(op, v)?);
    }
    for op in [UnaryOp::Log, UnaryOp::Log2, UnaryOp::Sqrt, UnaryOp::Rsqrt] {
        r.push(b.unary(op, pa)?);
    }
    r.push(b.binary(BinaryOp::Pow, pa, v)?);
    r.push(b.binary(BinaryOp::Rem, v, Value::Float(0.7))?);
    let zero = b.binary(BinaryOp::Sub, v, v)?;
    let nan = b.binary(BinaryOp::Div, zero, zero)?;
    r.push(b.binary(BinaryOp::Max, nan, v)?);
    r.push(b.binary(BinaryOp::Min, v, nan)?);
    r.push(b.fma(v, v, Value::Float(-1.0))?);
    let isn = b.unary(UnaryOp::IsNan, nan)?;
    let inf = b.binary(BinaryOp::Div, v, zero)?;
    let isi = b.unary(UnaryOp::IsInf, inf)?;
    let both = b.binary(BinaryOp::And, isn, isi)?;
    r.push(b.select(both, v, Value::Float(7.0))?);
    let silu = b.silu(v)?;
    r.push(silu);
    let sp = b.softplus(v)?;
    r.push(sp);
    let n = r.len() as i64;
    let base = b.binary(BinaryOp::Mul, g, Value::Int(n))?;
    for (k, val) in r.into_iter().enumerate() {
        let i = b.binary(BinaryOp::Add, base, Value::Int(k as i64))?;
        b.store(out, i, val)?;
    }
    Ok(Sample {
        name: "float_math",
        kernel: b.finish_kernel()?,
        args: vec![rand(128), t(128 * n as usize, Init::Zero)],
        grid: [1, 1, 1],
        group_size: 128,
        check: Check::Close {
            abs: 1e-5,
            rel: 1e-5,
        },
        host_reference: None,
    })
}

/// Atomics on device and threadgroup memory: f32 and u32 adds, i32 max / min, bit ops
/// and an exchange.
pub fn atomics() -> R<Sample> {
    let mut b = Builder::kernel("atomics");
    let x = b.tensor_param("x", Scalar::F32, false);
    let sums = b.tensor_param("sums", Scalar::F32, true);
    let counts = b.tensor_param("counts", Scalar::U32, true);
    let ext = b.tensor_param("ext", Scalar::I32, true);
    let tg = b.shared_array("tg", Scalar::U32, Value::Int(1))?;
    let tid = b.builtin(Builtin::ThreadId);
    let g = b.builtin(Builtin::GlobalId);
    let grp = b.builtin(Builtin::GroupIdX);
    let v = b.load(x, g)?;
    // Quantise so float sums are exact whatever the order.
    let q = b.binary(BinaryOp::Mul, v, Value::Float(64.0))?;
    let qf = b.unary(UnaryOp::Floor, q)?;
    let bucket = b.binary(BinaryOp::Rem, g, Value::Int(8))?;
    b.atomic(AtomicOp::Add, sums, bucket, qf)?;
    b.atomic(AtomicOp::Add, counts, bucket, Value::Int(1))?;
    let vi = b.cast(q, Scalar::I32)?;
    b.atomic(AtomicOp::Max, ext, Value::Int(0), vi)?;
    b.atomic(AtomicOp::Min, ext, Value::Int(1), vi)?;
    let bit = b.binary(BinaryOp::Rem, tid, Value::Int(31))?;
    let mask = b.binary(BinaryOp::Shl, Value::Int(1), bit)?;
    let mask_i = b.cast(mask, Scalar::I32)?;
    b.atomic(AtomicOp::Or, ext, Value::Int(2), mask_i)?;
    b.atomic(AtomicOp::And, ext, Value::Int(3), mask_i)?;
    let is0 = b.binary(BinaryOp::Eq, tid, Value::Int(0))?;
    b.begin_if(is0)?;
    b.store(tg, Value::Int(0), Value::Int(0))?;
    b.begin_else(&[])?;
    b.end_if(&[])?;
    b.barrier();
    b.atomic(AtomicOp::Add, tg, Value::Int(0), tid)?;
    b.barrier();
    let total = b.load(tg, Value::Int(0))?;
    b.begin_if(is0)?;
    let slot = b.binary(BinaryOp::Add, grp, Value::Int(8))?;
    b.store(counts, slot, total)?;
    let old = b.atomic(AtomicOp::Exchange, ext, Value::Int(4), Value::Int(77))?;
    let dummy = b.binary(BinaryOp::Mul, old, Value::Int(0))?;
    b.atomic(AtomicOp::Add, ext, Value::Int(5), dummy)?;
    b.begin_else(&[])?;
    b.end_if(&[])?;
    Ok(Sample {
        name: "atomics",
        kernel: b.finish_kernel()?,
        args: vec![
            rand(512),
            t(8, Init::Zero),
            t(12, Init::Zero),
            t(6, Init::Zero),
        ],
        grid: [4, 1, 1],
        group_size: 128,
        check: Check::Exact,
        host_reference: None,
    })
}

fn push(k: &mut Kernel, op: Op, ty: Option<Type>) -> tessera_ir::ValueId {
    let results = match ty {
        Some(t) => vec![k.body.new_value(t)],
        None => vec![],
    };
    let r = results.first().copied();
    k.body.block.insts.push(Inst {
        op,
        results,
        loc: None,
    });
    r.unwrap_or(tessera_ir::ValueId(u32::MAX))
}

/// Vector accesses as the vectorize pass produces them: f32x4 and bf16x8 loads and
/// stores, `extract` and `pack`.
pub fn vector_access() -> R<Sample> {
    let mut b = Builder::kernel("vector_access");
    let x = b.tensor_param("x", Scalar::F32, false);
    let y = b.tensor_param("y", Scalar::BF16, false);
    let _o = b.tensor_param("out", Scalar::F32, true);
    let _ob = b.tensor_param("outb", Scalar::BF16, true);
    let g = b.builtin(Builtin::GlobalId);
    let i4 = b.binary(BinaryOp::Mul, g, Value::Int(4))?;
    let i8 = b.binary(BinaryOp::Mul, g, Value::Int(8))?;
    let two = b.lit(Literal::F32(2.0));
    let (Value::Id(i4), Value::Id(i8), Value::Id(two)) = (i4, i8, two) else {
        return Err(b.error("sample: expected SSA values"));
    };
    let (MemRef::Param(px), MemRef::Param(py)) = (x.mem, y.mem) else {
        return Err(b.error("sample: expected tensor parameters"));
    };
    let mut k = b.finish_kernel()?;
    let (po, pob) = (2u32, 3u32);
    let f4 = Type::Vector(Scalar::F32, 4);
    let v = push(
        &mut k,
        Op::VecLoad {
            mem: MemRef::Param(px),
            index: i4,
            width: 4,
        },
        Some(f4),
    );
    let lanes: Vec<_> = (0..4)
        .map(|l| push(&mut k, Op::Extract(v, l), Some(Scalar::F32.into())))
        .collect();
    let scaled: Vec<_> = lanes
        .iter()
        .map(|&e| {
            push(
                &mut k,
                Op::Binary(BinaryOp::Mul, e, two),
                Some(Scalar::F32.into()),
            )
        })
        .collect();
    let packed = push(
        &mut k,
        Op::Pack(vec![scaled[3], scaled[2], scaled[1], scaled[0]]),
        Some(f4),
    );
    push(
        &mut k,
        Op::VecStore {
            mem: MemRef::Param(po),
            index: i4,
            value: packed,
        },
        None,
    );
    let b8 = Type::Vector(Scalar::BF16, 8);
    let vb = push(
        &mut k,
        Op::VecLoad {
            mem: MemRef::Param(py),
            index: i8,
            width: 8,
        },
        Some(b8),
    );
    let mut outs = Vec::new();
    for l in 0..8u8 {
        let e = push(&mut k, Op::Extract(vb, l), Some(Scalar::BF16.into()));
        let f = push(&mut k, Op::Cast(e, Scalar::F32), Some(Scalar::F32.into()));
        let m = push(
            &mut k,
            Op::Binary(BinaryOp::Mul, f, two),
            Some(Scalar::F32.into()),
        );
        outs.push(push(
            &mut k,
            Op::Cast(m, Scalar::BF16),
            Some(Scalar::BF16.into()),
        ));
    }
    outs.reverse();
    let pb = push(&mut k, Op::Pack(outs), Some(b8));
    push(
        &mut k,
        Op::VecStore {
            mem: MemRef::Param(pob),
            index: i8,
            value: pb,
        },
        None,
    );
    Ok(Sample {
        name: "vector_access",
        kernel: k,
        args: vec![
            rand(4 * 128),
            rand(8 * 128),
            t(4 * 128, Init::Zero),
            t(8 * 128, Init::Zero),
        ],
        grid: [2, 1, 1],
        group_size: 64,
        check: Check::Exact,
        host_reference: None,
    })
}

/// 64 KiB of threadgroup memory (above the 48 KiB static limit, so declared dynamic and
/// opted into at launch): each thread fills a strided slice, then reads another's.
pub fn dynamic_shared() -> R<Sample> {
    const LEN: i64 = 16384;
    let (mut b, x, out) = Builder::kernel_x_out("dynamic_shared", Scalar::F32);
    let big = b.shared_array("big", Scalar::F32, Value::Int(LEN))?;
    let small = b.shared_array("small", Scalar::U32, Value::Int(256))?;
    let tid = b.builtin(Builtin::ThreadId);
    let gs = b.builtin(Builtin::GroupSize);
    let grp = b.builtin(Builtin::GroupIdX);
    let off = b.binary(BinaryOp::Mul, grp, Value::Int(LEN))?;
    let (i, _) = b.begin_for(tid, Value::Int(LEN), gs, &[])?;
    let gi = b.binary(BinaryOp::Add, off, i)?;
    let v = b.load(x, gi)?;
    b.store(big, i, v)?;
    b.end_for(&[])?;
    b.store(small, tid, tid)?;
    b.barrier();
    let (i, c) = b.begin_for(tid, Value::Int(LEN), gs, &[Value::Float(0.0)])?;
    let j = b.binary(BinaryOp::Sub, Value::Int(LEN - 1), i)?;
    let v = b.load(big, j)?;
    let acc = b.binary(BinaryOp::Add, c[0], v)?;
    let gi = b.binary(BinaryOp::Add, off, i)?;
    b.store(out, gi, v)?;
    let s = b.end_for(&[acc])?;
    let rt = b.binary(BinaryOp::Sub, Value::Int(255), tid)?;
    let other = b.load(small, rt)?;
    let of = b.cast(other, Scalar::F32)?;
    let r = b.binary(BinaryOp::Add, s[0], of)?;
    let tail = b.binary(BinaryOp::Mul, grp, Value::Int(256))?;
    let ti = b.binary(BinaryOp::Add, tail, tid)?;
    let ti = b.binary(BinaryOp::Add, ti, Value::Int(2 * LEN))?;
    b.store(out, ti, r)?;
    Ok(Sample {
        name: "dynamic_shared",
        kernel: b.finish_kernel()?,
        args: vec![
            rand(2 * LEN as usize),
            t(2 * LEN as usize + 512, Init::Zero),
        ],
        grid: [2, 1, 1],
        group_size: 256,
        check: Check::Close {
            abs: 1e-4,
            rel: 1e-5,
        },
        host_reference: Some(dynamic_shared_reference),
    })
}

/// What [`dynamic_shared`] computes, from `x`: each group's slice reversed, then per thread
/// the sum of the values it read plus the index the mirrored thread stored.
fn dynamic_shared_reference(inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
    const LEN: usize = 16384;
    let x = &inputs[0];
    let mut out = vec![0.0; 2 * LEN + 512];
    for grp in 0..2 {
        let off = grp * LEN;
        for i in 0..LEN {
            out[off + i] = x[off + LEN - 1 - i];
        }
        for tid in 0..256 {
            let mut acc = 0.0f32;
            for i in (tid..LEN).step_by(256) {
                acc += x[off + LEN - 1 - i] as f32;
            }
            out[2 * LEN + grp * 256 + tid] = (acc + (255 - tid) as f32) as f64;
        }
    }
    vec![x.clone(), out]
}

/// Matrix fragments read from threadgroup memory in all four layouts (A plain and
/// transposed, B plain and transposed: every `ldmatrix` form), from an unaligned index
/// (the element-gather fallback), and accumulators stored in pairs: `out0 = a·b`,
/// `out1 = aᵀ·bᵀ`, `out2` = the product of the tiles one element further on. One
/// simdgroup; `a` and `b` are 16×17 bf16 tiles.
pub fn fragments() -> R<Sample> {
    let mut b = Builder::kernel("fragments");
    let a = b.tensor_param("a", Scalar::BF16, false);
    let bt = b.tensor_param("b", Scalar::BF16, false);
    let outs: Vec<_> = (0..3)
        .map(|i| b.tensor_param(&format!("out{i}"), Scalar::F32, true))
        .collect();
    let sa = b.shared_array("sa", Scalar::BF16, Value::Int(272))?;
    let sb = b.shared_array("sb", Scalar::BF16, Value::Int(272))?;
    let tid = b.builtin(Builtin::ThreadId);
    for e in 0..9 {
        let i = b.binary(BinaryOp::Add, tid, Value::Int(32 * e))?;
        let c = b.binary(BinaryOp::Lt, i, Value::Int(272))?;
        let ic = b.select(c, i, Value::Int(0))?;
        let x = b.load(a, ic)?;
        b.store(sa, ic, x)?;
        let y = b.load(bt, ic)?;
        b.store(sb, ic, y)?;
    }
    b.barrier();
    let fa = b.frag("fa", FragRole::A, Scalar::BF16)?;
    let fb = b.frag("fb", FragRole::B, Scalar::BF16)?;
    let acc = b.frag("acc", FragRole::Acc, Scalar::F32)?;
    for (k, (index, stride, transpose)) in [(0, 16, false), (0, 16, true), (1, 17, false)]
        .into_iter()
        .enumerate()
    {
        let zero = b.lit(Literal::F32(0.0));
        b.frag_fill(acc, zero)?;
        b.frag_load(fa, sa, Value::Int(index), Value::Int(stride), transpose)?;
        b.frag_load(fb, sb, Value::Int(index), Value::Int(stride), transpose)?;
        b.frag_mma(acc, fa, fb, acc)?;
        b.frag_store(acc, outs[k], Value::Int(0), Value::Int(16))?;
    }
    Ok(Sample {
        name: "fragments",
        kernel: b.finish_kernel()?,
        args: vec![
            rand(272),
            rand(272),
            t(256, Init::Zero),
            t(256, Init::Zero),
            t(256, Init::Zero),
        ],
        grid: [1, 1, 1],
        group_size: 32,
        check: Check::Close {
            abs: 1e-3,
            rel: 1e-3,
        },
        host_reference: None,
    })
}

/// One online-softmax step on fragments, with every row op and fragment arrays indexed
/// by a loop: 16×32 scores `s` masked per tile `t` (`c − r ≥ 5 − 16t` or `c ≥ 27 − 16t`),
/// their row max raised over the max of `2 prev` (added as two accumulators) when past it
/// by more than `margin`, the
/// weights `exp2(x − max)` converted to bf16 A operands and multiplied into `v` (32×16
/// bf16), the output divided by the row sums; the row vectors (new max, raised max,
/// rescale factor, sum) as 16×16 tiles in `rows`. One simdgroup.
pub fn fragment_rows() -> R<Sample> {
    let mut b = Builder::kernel("fragment_rows");
    let s = b.tensor_param("s", Scalar::F32, false);
    let prev = b.tensor_param("prev", Scalar::F32, false);
    let v = b.tensor_param("v", Scalar::BF16, false);
    let margin = b.scalar_param("margin", Scalar::F32);
    let out = b.tensor_param("out", Scalar::F32, true);
    let rows = b.tensor_param("rows", Scalar::F32, true);
    let old = b.frag("old", FragRole::Acc, Scalar::F32)?;
    let rv = b.frag_array("rv", FragRole::Rows, Scalar::F32, Value::Int(4))?;
    let m_old = b.frag("m_old", FragRole::Rows, Scalar::F32)?;
    let l = b.frag("l", FragRole::Rows, Scalar::F32)?;
    let one = b.frag("one", FragRole::Rows, Scalar::F32)?;
    let inv = b.frag("inv", FragRole::Rows, Scalar::F32)?;
    let sc = b.frag_array("sc", FragRole::Acc, Scalar::F32, Value::Int(2))?;
    let fp = b.frag("fp", FragRole::A, Scalar::BF16)?;
    let fv = b.frag("fv", FragRole::B, Scalar::BF16)?;
    let o = b.frag("o", FragRole::Acc, Scalar::F32)?;
    let tile = b.frag("tile", FragRole::Acc, Scalar::F32)?;
    let ninf = Value::Float(f64::NEG_INFINITY);
    let (zero, sixteen) = (Value::Int(0), Value::Int(16));
    b.frag_load(old, prev, zero, sixteen, false)?;
    b.frag_load(tile, prev, zero, sixteen, false)?;
    b.frag_add(old, old, tile)?;
    b.frag_fill(m_old, ninf)?;
    b.frag_row_reduce(RowReduce::Max, m_old, old)?;
    b.frag_row_map(RowMap::Exp2Sub, old, m_old)?;
    b.frag_fill(l, Value::Float(0.0))?;
    b.frag_row_reduce(RowReduce::Sum, l, old)?;
    b.frag_fill(one, Value::Float(1.0))?;
    let mx = rv.frags[0];
    b.frag_fill(mx, ninf)?;
    let (ti, _) = b.begin_for(zero, Value::Int(2), Value::Int(1), &[])?;
    let at = b.binary(BinaryOp::Mul, ti, sixteen)?;
    let shift = b.cast(at, Scalar::I32)?;
    let diag = b.binary(BinaryOp::Sub, Value::Int(5), shift)?;
    let cap = b.binary(BinaryOp::Sub, Value::Int(27), shift)?;
    b.frag_pick(&[(&sc, ti)], &mut |b, f| {
        b.frag_load(f[0], s, at, Value::Int(32), false)?;
        b.frag_mask(f[0], diag, cap, ninf)?;
        b.frag_row_reduce(RowReduce::Max, mx, f[0])
    })?;
    b.end_for(&[])?;
    let (mn, fr, sum) = (rv.frags[1], rv.frags[2], rv.frags[3]);
    b.frag_rows_raise(mn, m_old, mx, margin)?;
    b.frag_rows(RowsOp::Exp2Diff, fr, m_old, mn)?;
    b.frag_rows(RowsOp::Mul, l, l, fr)?;
    b.frag_fill(o, Value::Float(0.0))?;
    let (ti, _) = b.begin_for(zero, Value::Int(2), Value::Int(1), &[])?;
    let at = b.binary(BinaryOp::Mul, ti, Value::Int(256))?;
    b.frag_pick(&[(&sc, ti)], &mut |b, f| {
        b.frag_row_map(RowMap::Exp2Sub, f[0], mn)?;
        b.frag_row_reduce(RowReduce::Sum, l, f[0])?;
        b.frag_convert(fp, f[0])?;
        b.frag_load(fv, v, at, sixteen, false)?;
        b.frag_mma(o, fp, fv, o)
    })?;
    b.end_for(&[])?;
    b.frag_rows(RowsOp::Add, sum, l, l)?;
    b.frag_rows(RowsOp::Div, inv, one, l)?;
    b.frag_row_map(RowMap::Scale, o, inv)?;
    b.frag_store(o, out, zero, sixteen)?;
    for (k, &r) in rv.frags.iter().enumerate() {
        b.frag_fill(tile, Value::Float(1.0))?;
        b.frag_row_map(RowMap::Scale, tile, r)?;
        b.frag_store(tile, rows, Value::Int(256 * k as i64), sixteen)?;
    }
    Ok(Sample {
        name: "fragment_rows",
        kernel: b.finish_kernel()?,
        args: vec![
            t(512, Init::Uniform(-4.0, 4.0)),
            t(256, Init::Uniform(-4.0, 4.0)),
            rand(512),
            SampleArg::Scalar(Literal::F32(0.5)),
            t(256, Init::Zero),
            t(1024, Init::Zero),
        ],
        grid: [1, 1, 1],
        group_size: 32,
        check: Check::Close {
            abs: 1e-3,
            rel: 1e-2,
        },
        host_reference: None,
    })
}

/// An accumulator loaded from 16-bit memory, scaled in place and stored rounded into
/// 16-bit memory: `acc = s·(a·b + c)` for 16×16 bf16 tiles `a`, `b` and an f16 tile `c`
/// (widened on load), then `out_pair` (bf16, even index and stride: the paired path),
/// `out_gather` (f16, index 1 and row stride 17: element by element) and a threadgroup f16
/// array copied out as f32 to `out_shared`. One simdgroup.
pub fn fragment_rounding() -> R<Sample> {
    let mut b = Builder::kernel("fragment_rounding");
    let a = b.tensor_param("a", Scalar::BF16, false);
    let bt = b.tensor_param("b", Scalar::BF16, false);
    let c = b.tensor_param("c", Scalar::F16, false);
    let s = b.scalar_param("s", Scalar::F32);
    let out_pair = b.tensor_param("out_pair", Scalar::BF16, true);
    let out_gather = b.tensor_param("out_gather", Scalar::F16, true);
    let out_shared = b.tensor_param("out_shared", Scalar::F32, true);
    let sa = b.shared_array("sa", Scalar::BF16, Value::Int(256))?;
    let sb = b.shared_array("sb", Scalar::BF16, Value::Int(256))?;
    let sh = b.shared_array("sh", Scalar::F16, Value::Int(256))?;
    let tid = b.builtin(Builtin::ThreadId);
    for e in 0..8 {
        let i = b.binary(BinaryOp::Add, tid, Value::Int(32 * e))?;
        let x = b.load(a, i)?;
        b.store(sa, i, x)?;
        let y = b.load(bt, i)?;
        b.store(sb, i, y)?;
    }
    b.barrier();
    let fa = b.frag("fa", FragRole::A, Scalar::BF16)?;
    let fb = b.frag("fb", FragRole::B, Scalar::BF16)?;
    let acc = b.frag("acc", FragRole::Acc, Scalar::F32)?;
    b.frag_load(acc, c, Value::Int(0), Value::Int(16), false)?;
    b.frag_load(fa, sa, Value::Int(0), Value::Int(16), false)?;
    b.frag_load(fb, sb, Value::Int(0), Value::Int(16), false)?;
    b.frag_mma(acc, fa, fb, acc)?;
    b.frag_scale(acc, s)?;
    b.frag_store(acc, out_pair, Value::Int(0), Value::Int(16))?;
    b.frag_store(acc, out_gather, Value::Int(1), Value::Int(17))?;
    b.frag_store(acc, sh, Value::Int(0), Value::Int(16))?;
    b.barrier();
    for e in 0..8 {
        let i = b.binary(BinaryOp::Add, tid, Value::Int(32 * e))?;
        let x = b.load(sh, i)?;
        let x = b.cast(x, Scalar::F32)?;
        b.store(out_shared, i, x)?;
    }
    Ok(Sample {
        name: "fragment_rounding",
        kernel: b.finish_kernel()?,
        args: vec![
            rand(256),
            rand(256),
            rand(256),
            SampleArg::Scalar(Literal::F32(-0.75)),
            t(256, Init::Zero),
            t(1 + 16 * 17, Init::Zero),
            t(256, Init::Zero),
        ],
        grid: [1, 1, 1],
        group_size: 32,
        check: Check::Close {
            abs: 1e-3,
            rel: 1e-2,
        },
        host_reference: None,
    })
}

/// The threadgroup's tile product: a 64×64 tile A and a 32×64 tile B (bf16) stored from
/// `a` and `b` into swizzled threadgroup arrays (element `(r, k)` at
/// `tessera_ir::swizzled_128b(r, k)`, the second tile 512 elements in), then each of the
/// four simdgroups adds its 16 rows of `A·Bᵀ` to two accumulators loaded from `c` (64×32
/// f32), then adds the product of those sums, rounded to bf16 as A operands in registers
/// (accumulator `i % 2` as the operand of K columns `16i …`), with tile B again
/// (asynchronously, then waited for), and stores them to `out`. One warpgroup: `wgmma`
/// on sm_90a, `mma.sync` elsewhere.
pub fn tile_mma() -> R<Sample> {
    let mut b = Builder::kernel("tile_mma");
    let a = b.tensor_param("a", Scalar::BF16, false);
    let bt = b.tensor_param("b", Scalar::BF16, false);
    let c = b.tensor_param("c", Scalar::F32, false);
    let out = b.tensor_param("out", Scalar::F32, true);
    let sa = b.shared_array("sa", Scalar::BF16, Value::Int(64 * 64))?;
    let sb = b.shared_array("sb", Scalar::BF16, Value::Int(512 + 32 * 64))?;
    let tid = b.builtin(Builtin::ThreadId);
    // Element i = 64 r + k of a row-major tile goes to 64 r + 8 ((k / 8) ^ (r % 8)) + k % 8.
    let swizzle = |b: &mut Builder, i: Value| -> R<Value> {
        let r = b.binary(BinaryOp::Div, i, Value::Int(64))?;
        let k = b.binary(BinaryOp::Rem, i, Value::Int(64))?;
        let chunk = b.binary(BinaryOp::Shr, k, Value::Int(3))?;
        let r7 = b.binary(BinaryOp::And, r, Value::Int(7))?;
        let x = b.binary(BinaryOp::Xor, chunk, r7)?;
        let x8 = b.binary(BinaryOp::Shl, x, Value::Int(3))?;
        let k7 = b.binary(BinaryOp::And, k, Value::Int(7))?;
        let r64 = b.binary(BinaryOp::Mul, r, Value::Int(64))?;
        let y = b.binary(BinaryOp::Add, r64, x8)?;
        b.binary(BinaryOp::Add, y, k7)
    };
    for e in 0..32 {
        let i = b.binary(BinaryOp::Add, tid, Value::Int(128 * e))?;
        let at = swizzle(&mut b, i)?;
        let x = b.load(a, i)?;
        b.store(sa, at, x)?;
        if e < 16 {
            let y = b.load(bt, i)?;
            let at = b.binary(BinaryOp::Add, at, Value::Int(512))?;
            b.store(sb, at, y)?;
        }
    }
    // Elements 0 … 511 of `sb` are never read; written so that nothing is uninitialised.
    for e in 0..4 {
        let i = b.binary(BinaryOp::Add, tid, Value::Int(128 * e))?;
        let zero = b.lit(Literal::BF16(tessera_ir::half::bf16::ZERO));
        b.store(sb, i, zero)?;
    }
    b.barrier();
    let acc = b.frag_array("acc", FragRole::Acc, Scalar::F32, Value::Int(2))?;
    let sid = b.builtin(Builtin::SimdId);
    let row = b.binary(BinaryOp::Mul, sid, Value::Int(16 * 32))?;
    for (j, &f) in acc.frags.iter().enumerate() {
        let at = b.binary(BinaryOp::Add, row, Value::Int(16 * j as i64))?;
        b.frag_load(f, c, at, Value::Int(32), false)?;
    }
    b.frag_mma_tiles(
        &acc,
        TileOperand::Tile(sa, Value::Int(0)),
        (sb, Value::Int(512)),
        (false, false),
    )?;
    // Then A from registers: the sums so far, rounded, as the four operands of K.
    let pa = b.frag_array("pa", FragRole::A, Scalar::BF16, Value::Int(4))?;
    for (i, &f) in pa.frags.iter().enumerate() {
        b.frag_convert(f, acc.frags[i % 2])?;
    }
    b.frag_mma_tiles(
        &acc,
        TileOperand::Frags(&pa),
        (sb, Value::Int(512)),
        (true, false),
    )?;
    let pending = Value::Int(0);
    b.frag_mma_wait(&acc, pending)?;
    for (j, &f) in acc.frags.iter().enumerate() {
        let at = b.binary(BinaryOp::Add, row, Value::Int(16 * j as i64))?;
        b.frag_store(f, out, at, Value::Int(32))?;
    }
    Ok(Sample {
        name: "tile_mma",
        kernel: b.finish_kernel()?,
        args: vec![
            rand(64 * 64),
            rand(32 * 64),
            rand(64 * 32),
            t(64 * 32, Init::Zero),
        ],
        grid: [1, 1, 1],
        group_size: 128,
        check: Check::Close {
            abs: 1e-3,
            rel: 1e-3,
        },
        host_reference: None,
    })
}

/// Asynchronous copies of every size: a two-stage pipeline over 1000 f16 elements of `x`
/// in tiles of 512 (16-byte copies, the part of the last tile past the end zero-filled
/// without reading it), and 8- and 4-byte copies of `y`. Thread `t` sums the tile elements
/// of thread `63 − t` weighted by tile number + 1, plus that thread's three `y` values.
pub fn async_copy() -> R<Sample> {
    const W: i64 = 8;
    const TILE: i64 = 64 * W;
    let mut b = Builder::kernel("async_copy");
    let x = b.tensor_param("x", Scalar::F16, false);
    let y = b.tensor_param("y", Scalar::F32, false);
    let out = b.tensor_param("out", Scalar::F32, true);
    let n = b.scalar_param("n", Scalar::U32);
    let stages = b.shared_array("stages", Scalar::F16, Value::Int(2 * TILE))?;
    let ys = b.shared_array("ys", Scalar::F32, Value::Int(192))?;
    let tid = b.builtin(Builtin::ThreadId);
    let tw = b.binary(BinaryOp::Mul, tid, Value::Int(W))?;
    let t2 = b.binary(BinaryOp::Mul, tid, Value::Int(2))?;
    b.copy_async(ys, t2, y, t2, Value::Int(2), None)?;
    let t1 = b.binary(BinaryOp::Add, tid, Value::Int(128))?;
    b.copy_async(ys, t1, y, t1, Value::Int(1), None)?;
    let ok = b.binary(BinaryOp::Lt, tw, n)?;
    b.copy_async(stages, tw, x, tw, Value::Int(W), Some(ok))?;
    b.commit_copies();
    let mirror = b.binary(BinaryOp::Sub, Value::Int(63), tid)?;
    let mw = b.binary(BinaryOp::Mul, mirror, Value::Int(W))?;
    let last = b.binary(BinaryOp::Add, n, Value::Int(TILE - 1))?;
    let tiles = b.binary(BinaryOp::Div, last, Value::Int(TILE))?;
    let (j, c) = b.begin_for(Value::Int(0), tiles, Value::Int(1), &[Value::Float(0.0)])?;
    b.wait_copies(Value::Int(0))?;
    b.barrier();
    let next = b.binary(BinaryOp::Add, j, Value::Int(1))?;
    let more = b.binary(BinaryOp::Lt, next, tiles)?;
    b.begin_if(more)?;
    let at = b.binary(BinaryOp::Mul, next, Value::Int(TILE))?;
    let at = b.binary(BinaryOp::Add, at, tw)?;
    let stage = b.binary(BinaryOp::Rem, next, Value::Int(2))?;
    let stage = b.binary(BinaryOp::Mul, stage, Value::Int(TILE))?;
    let stage = b.binary(BinaryOp::Add, stage, tw)?;
    let ok = b.binary(BinaryOp::Lt, at, n)?;
    b.copy_async(stages, stage, x, at, Value::Int(W), Some(ok))?;
    b.begin_else(&[])?;
    b.end_if(&[])?;
    b.commit_copies();
    let cur = b.binary(BinaryOp::Rem, j, Value::Int(2))?;
    let cur = b.binary(BinaryOp::Mul, cur, Value::Int(TILE))?;
    let base = b.binary(BinaryOp::Add, cur, mw)?;
    let weight = b.cast(next, Scalar::F32)?;
    let (e, acc) = b.begin_for(Value::Int(0), Value::Int(W), Value::Int(1), &[c[0]])?;
    let i = b.binary(BinaryOp::Add, base, e)?;
    let v = b.load(stages, i)?;
    let v = b.cast(v, Scalar::F32)?;
    let acc = b.fma(v, weight, acc[0])?;
    let acc = b.end_for(&[acc])?;
    let total = b.end_for(&[acc[0]])?;
    let m2 = b.binary(BinaryOp::Mul, mirror, Value::Int(2))?;
    let mut sum = total[0];
    for k in [0, 1] {
        let i = b.binary(BinaryOp::Add, m2, Value::Int(k))?;
        let v = b.load(ys, i)?;
        sum = b.binary(BinaryOp::Add, sum, v)?;
    }
    let i = b.binary(BinaryOp::Add, mirror, Value::Int(128))?;
    let v = b.load(ys, i)?;
    let sum = b.binary(BinaryOp::Add, sum, v)?;
    b.store(out, tid, sum)?;
    Ok(Sample {
        name: "async_copy",
        kernel: b.finish_kernel()?,
        args: vec![
            rand(1000),
            rand(192),
            t(64, Init::Zero),
            SampleArg::Scalar(Literal::U32(1000)),
        ],
        grid: [1, 1, 1],
        group_size: 64,
        check: CLOSE,
        host_reference: None,
    })
}
