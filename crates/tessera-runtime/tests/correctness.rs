//! The CPU backend against plain-Rust references on random inputs: loops, reductions,
//! simdgroup collectives, threadgroup memory with barriers, atomics and half types.

mod common;

use common::{assert_close, Rng};
use half::{bf16, f16};
use tessera_ir::{
    AtomicOp, BinaryOp, Builder, Builtin, Kernel, ReduceOp, Scalar, ShuffleKind, SimdOp, Value,
};
use tessera_runtime::{Context, DType, Tensor};

/// A fresh seed per run (TESSERA_SEED repeats one), printed so a failure can be rerun.
fn seed() -> u64 {
    let s = std::env::var("TESSERA_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(7)
        });
    eprintln!("seed {s} (TESSERA_SEED={s} reruns it)");
    s
}

/// out[row] = sum(x[row, :]) with a strided per-thread loop and a group reduction.
fn row_sum_kernel(reduce: ReduceOp) -> Kernel {
    let (mut b, x, out) = Builder::kernel_x_out("row_sum", Scalar::F32);
    let n = b.scalar_param("n", Scalar::U32);
    let row = b.builtin(Builtin::GroupIdX);
    let t = b.builtin(Builtin::ThreadId);
    let gs = b.builtin(Builtin::GroupSize);
    let base = b.binary(BinaryOp::Mul, row, n).unwrap();
    let init = match reduce {
        ReduceOp::Sum => Value::Float(0.0),
        ReduceOp::Max => Value::Float(f64::NEG_INFINITY),
        ReduceOp::Min => Value::Float(f64::INFINITY),
    };
    let (i, c) = b.begin_for(t, n, gs, &[init]).unwrap();
    let idx = b.binary(BinaryOp::Add, base, i).unwrap();
    let v = b.load(x, idx).unwrap();
    let op = match reduce {
        ReduceOp::Sum => BinaryOp::Add,
        ReduceOp::Max => BinaryOp::Max,
        ReduceOp::Min => BinaryOp::Min,
    };
    let acc = b.binary(op, c[0], v).unwrap();
    let r = b.end_for(&[acc]).unwrap();
    let s = b.group_reduce(reduce, r[0]).unwrap();
    let first = b.binary(BinaryOp::Eq, t, Value::Int(0)).unwrap();
    b.begin_if(first).unwrap();
    b.store(out, row, s).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.finish_kernel().unwrap()
}

#[test]
fn strided_loop_and_group_reductions_match_the_reference() {
    let ctx = Context::cpu();
    let mut rng = Rng::new(seed());
    let (rows, n) = (7usize, 1000usize);
    let x = rng.vec_f32(rows * n);
    let xt = ctx.tensor(&x, &[rows, n]).unwrap();
    for reduce in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
        let out = ctx.full_nan(DType::F32, &[rows]).unwrap();
        ctx.launch_ir(&row_sum_kernel(reduce))
            .no_optimize()
            .arg("x", &xt)
            .arg("out", &out)
            .scalar("n", n as u32)
            .grid([rows as u32, 1, 1])
            .group_size(256)
            .run()
            .unwrap();
        let want: Vec<f64> = x
            .chunks(n)
            .map(|r| {
                let it = r.iter().map(|&v| v as f64);
                match reduce {
                    ReduceOp::Sum => it.sum(),
                    ReduceOp::Max => it.fold(f64::NEG_INFINITY, f64::max),
                    ReduceOp::Min => it.fold(f64::INFINITY, f64::min),
                }
            })
            .collect();
        assert_close(&out.to_f64_vec().unwrap(), &want, 1e-4);
    }
}

/// Every simdgroup op and shuffle over u32 lanes (exact), writing one output per op.
#[test]
fn simd_reductions_scans_and_shuffles_match_the_reference() {
    type SimdBuild = Box<dyn Fn(&mut Builder, Value) -> Value>;
    let ops: Vec<(&str, SimdBuild)> = vec![
        ("sum", Box::new(|b, v| b.simd(SimdOp::Sum, v).unwrap())),
        ("max", Box::new(|b, v| b.simd(SimdOp::Max, v).unwrap())),
        ("min", Box::new(|b, v| b.simd(SimdOp::Min, v).unwrap())),
        ("xor", Box::new(|b, v| b.simd(SimdOp::Xor, v).unwrap())),
        (
            "prefix",
            Box::new(|b, v| b.simd(SimdOp::PrefixSum, v).unwrap()),
        ),
        (
            "prefix_excl",
            Box::new(|b, v| b.simd(SimdOp::PrefixExclusiveSum, v).unwrap()),
        ),
        (
            "shfl_idx5",
            Box::new(|b, v| b.shuffle(ShuffleKind::Index, v, Value::Int(5)).unwrap()),
        ),
        (
            "shfl_xor3",
            Box::new(|b, v| b.shuffle(ShuffleKind::Xor, v, Value::Int(3)).unwrap()),
        ),
        (
            "shfl_up2",
            Box::new(|b, v| b.shuffle(ShuffleKind::Up, v, Value::Int(2)).unwrap()),
        ),
        (
            "shfl_down7",
            Box::new(|b, v| b.shuffle(ShuffleKind::Down, v, Value::Int(7)).unwrap()),
        ),
    ];
    let ctx = Context::cpu();
    let mut rng = Rng::new(seed());
    let n = 128usize;
    let x: Vec<u32> = (0..n).map(|_| rng.u32_below(1000)).collect();
    let xt = ctx.tensor(&x, &[n]).unwrap();
    for (name, op) in &ops {
        let mut b = Builder::kernel(name);
        let xp = b.tensor_param("x", Scalar::U32, false);
        let out = b.tensor_param("out", Scalar::U32, true);
        let g = b.builtin(Builtin::GlobalId);
        let v = b.load(xp, g).unwrap();
        let r = op(&mut b, v);
        b.store(out, g, r).unwrap();
        let k = b.finish_kernel().unwrap();
        let o = ctx.full_nan(DType::U32, &[n]).unwrap();
        ctx.launch_ir(&k)
            .no_optimize()
            .arg("x", &xt)
            .arg("out", &o)
            .grid([2, 1, 1])
            .group_size(64)
            .run()
            .unwrap();
        let got = o.to_vec::<u32>().unwrap();
        for (sg, lanes) in x.chunks(32).enumerate() {
            for lane in 0..32 {
                let want = match *name {
                    "sum" => lanes.iter().sum(),
                    "max" => *lanes.iter().max().unwrap(),
                    "min" => *lanes.iter().min().unwrap(),
                    "xor" => lanes.iter().fold(0, |a, b| a ^ b),
                    "prefix" => lanes[..=lane].iter().sum(),
                    "prefix_excl" => lanes[..lane].iter().sum(),
                    "shfl_idx5" => lanes[5],
                    "shfl_xor3" => lanes[lane ^ 3],
                    "shfl_up2" => lanes[if lane >= 2 { lane - 2 } else { lane }],
                    "shfl_down7" => lanes[if lane + 7 < 32 { lane + 7 } else { lane }],
                    _ => unreachable!(),
                };
                assert_eq!(
                    got[sg * 32 + lane],
                    want,
                    "{name}: simdgroup {sg} lane {lane}"
                );
            }
        }
    }
}

#[test]
fn simd_sum_of_floats_matches_the_reference() {
    let (mut b, xp, out) = Builder::kernel_x_out("simd_fsum", Scalar::F32);
    let g = b.builtin(Builtin::GlobalId);
    let v = b.load(xp, g).unwrap();
    let s = b.simd(SimdOp::Sum, v).unwrap();
    b.store(out, g, s).unwrap();
    let k = b.finish_kernel().unwrap();
    let ctx = Context::cpu();
    let x = Rng::new(seed()).vec_f32(256);
    let xt = ctx.tensor(&x, &[256]).unwrap();
    let o = ctx.full_nan(DType::F32, &[256]).unwrap();
    ctx.launch_ir(&k)
        .no_optimize()
        .arg("x", &xt)
        .arg("out", &o)
        .grid([1, 1, 1])
        .group_size(256)
        .run()
        .unwrap();
    let want: Vec<f64> = (0..256)
        .map(|i| {
            x[i / 32 * 32..i / 32 * 32 + 32]
                .iter()
                .map(|&v| v as f64)
                .sum()
        })
        .collect();
    assert_close(&o.to_f64_vec().unwrap(), &want, 1e-5);
}

/// out = transpose(x) through a 32x32 threadgroup tile with a barrier.
#[test]
fn threadgroup_transpose_with_barrier_matches_the_reference() {
    let (mut b, x, out) = Builder::kernel_x_out("transpose", Scalar::F32);
    let w = b.scalar_param("w", Scalar::U32);
    let h = b.scalar_param("h", Scalar::U32);
    let tile = b
        .shared_array("tile", Scalar::F32, Value::Int(32 * 33))
        .unwrap();
    let t = b.builtin(Builtin::ThreadId);
    let bx = b.builtin(Builtin::GroupIdX);
    let by = b.builtin(Builtin::GroupIdY);
    let r = b.binary(BinaryOp::Div, t, Value::Int(32)).unwrap();
    let c = b.binary(BinaryOp::Rem, t, Value::Int(32)).unwrap();
    // x[(by*32 + r) * w + bx*32 + c] -> tile[r*33 + c]
    let by32 = b.binary(BinaryOp::Mul, by, Value::Int(32)).unwrap();
    let bx32 = b.binary(BinaryOp::Mul, bx, Value::Int(32)).unwrap();
    let row = b.binary(BinaryOp::Add, by32, r).unwrap();
    let rw = b.binary(BinaryOp::Mul, row, w).unwrap();
    let col = b.binary(BinaryOp::Add, bx32, c).unwrap();
    let src = b.binary(BinaryOp::Add, rw, col).unwrap();
    let v = b.load(x, src).unwrap();
    let r33 = b.binary(BinaryOp::Mul, r, Value::Int(33)).unwrap();
    let ti = b.binary(BinaryOp::Add, r33, c).unwrap();
    b.store(tile, ti, v).unwrap();
    b.barrier();
    // out[(bx*32 + r) * h + by*32 + c] = tile[c*33 + r]
    let c33 = b.binary(BinaryOp::Mul, c, Value::Int(33)).unwrap();
    let tj = b.binary(BinaryOp::Add, c33, r).unwrap();
    let tv = b.load(tile, tj).unwrap();
    let orow = b.binary(BinaryOp::Add, bx32, r).unwrap();
    let orh = b.binary(BinaryOp::Mul, orow, h).unwrap();
    let ocol = b.binary(BinaryOp::Add, by32, c).unwrap();
    let dst = b.binary(BinaryOp::Add, orh, ocol).unwrap();
    b.store(out, dst, tv).unwrap();
    let k = b.finish_kernel().unwrap();

    let ctx = Context::cpu();
    let (hh, ww) = (64usize, 96usize);
    let xs = Rng::new(seed()).vec_f32(hh * ww);
    let xt = ctx.tensor(&xs, &[hh, ww]).unwrap();
    let o = ctx.full_nan(DType::F32, &[ww, hh]).unwrap();
    ctx.launch_ir(&k)
        .no_optimize()
        .arg("x", &xt)
        .arg("out", &o)
        .scalar("w", ww as u32)
        .scalar("h", hh as u32)
        .grid([(ww / 32) as u32, (hh / 32) as u32, 1])
        .group_size(1024)
        .run()
        .unwrap();
    let got = o.to_vec::<f32>().unwrap();
    for i in 0..hh {
        for j in 0..ww {
            assert_eq!(got[j * hh + i], xs[i * ww + j], "({i}, {j})");
        }
    }
}

#[test]
fn device_and_threadgroup_atomics_match_the_reference() {
    let mut b = Builder::kernel("atomics");
    let x = b.tensor_param("x", Scalar::U32, false);
    let f = b.tensor_param("f", Scalar::F32, false);
    let hist = b.tensor_param("hist", Scalar::U32, true);
    let total = b.tensor_param("total", Scalar::F32, true);
    let maxes = b.tensor_param("maxes", Scalar::I32, true);
    let counts = b.tensor_param("counts", Scalar::U32, true);
    let cnt = b.shared_array("cnt", Scalar::U32, Value::Int(1)).unwrap();
    let t = b.builtin(Builtin::ThreadId);
    let g = b.builtin(Builtin::GlobalId);
    let gid = b.builtin(Builtin::GroupIdX);
    let first = b.binary(BinaryOp::Eq, t, Value::Int(0)).unwrap();
    b.begin_if(first).unwrap();
    b.store(cnt, Value::Int(0), Value::Int(0)).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.barrier();
    let v = b.load(x, g).unwrap();
    let bin = b.binary(BinaryOp::Rem, v, Value::Int(16)).unwrap();
    b.atomic(AtomicOp::Add, hist, bin, Value::Int(1)).unwrap();
    let fv = b.load(f, g).unwrap();
    b.atomic(AtomicOp::Add, total, Value::Int(0), fv).unwrap();
    let signed = b.cast(v, Scalar::I32).unwrap();
    let neg = b.binary(BinaryOp::Sub, Value::Int(500), signed).unwrap();
    b.atomic(AtomicOp::Max, maxes, Value::Int(0), neg).unwrap();
    b.atomic(AtomicOp::Min, maxes, Value::Int(1), neg).unwrap();
    let odd = b.binary(BinaryOp::And, v, Value::Int(1)).unwrap();
    let is_odd = b.binary(BinaryOp::Eq, odd, Value::Int(1)).unwrap();
    b.begin_if(is_odd).unwrap();
    b.atomic(AtomicOp::Add, cnt, Value::Int(0), Value::Int(1))
        .unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    b.barrier();
    b.begin_if(first).unwrap();
    let c = b.load(cnt, Value::Int(0)).unwrap();
    b.store(counts, gid, c).unwrap();
    b.begin_else(&[]).unwrap();
    b.end_if(&[]).unwrap();
    let k = b.finish_kernel().unwrap();

    let ctx = Context::cpu();
    let mut rng = Rng::new(seed());
    let (groups, gs) = (8usize, 128usize);
    let n = groups * gs;
    let xs: Vec<u32> = (0..n).map(|_| rng.u32_below(1000)).collect();
    let fs: Vec<f32> = (0..n).map(|_| rng.u32_below(100) as f32 * 0.25).collect();
    let xt = ctx.tensor(&xs, &[n]).unwrap();
    let ft = ctx.tensor(&fs, &[n]).unwrap();
    let hist = ctx.zeros(DType::U32, &[16]).unwrap();
    let total = ctx.zeros(DType::F32, &[1]).unwrap();
    let maxes = ctx.tensor(&[i32::MIN, i32::MAX], &[2]).unwrap();
    let counts = ctx.full_nan(DType::U32, &[groups]).unwrap();
    ctx.launch_ir(&k)
        .no_optimize()
        .arg("x", &xt)
        .arg("f", &ft)
        .arg("hist", &hist)
        .arg("total", &total)
        .arg("maxes", &maxes)
        .arg("counts", &counts)
        .grid([groups as u32, 1, 1])
        .group_size(gs as u32)
        .run()
        .unwrap();
    let mut want_hist = vec![0u32; 16];
    xs.iter().for_each(|v| want_hist[(v % 16) as usize] += 1);
    assert_eq!(hist.to_vec::<u32>().unwrap(), want_hist);
    // Quarter-integers below 2^24 add exactly in any order.
    let want_total: f32 = fs.iter().sum();
    assert_eq!(total.to_vec::<f32>().unwrap(), vec![want_total]);
    let negs: Vec<i32> = xs.iter().map(|&v| 500 - v as i32).collect();
    assert_eq!(
        maxes.to_vec::<i32>().unwrap(),
        vec![*negs.iter().max().unwrap(), *negs.iter().min().unwrap()]
    );
    let want_counts: Vec<u32> = xs
        .chunks(gs)
        .map(|c| c.iter().filter(|&&v| v % 2 == 1).count() as u32)
        .collect();
    assert_eq!(counts.to_vec::<u32>().unwrap(), want_counts);
}

fn scale_kernel(ty: Scalar) -> Kernel {
    let mut b = Builder::kernel("scale_half");
    b.generic("T", ty);
    let x = b.tensor_param("x", ty, false);
    let out = b.tensor_param("out", ty, true);
    let g = b.builtin(Builtin::GlobalId);
    let v = b.load(x, g).unwrap();
    // In T: x * 3 - 0.5 (computed in f32, rounded to T at each op).
    let m = b.binary(BinaryOp::Mul, v, Value::Float(3.0)).unwrap();
    let s = b.binary(BinaryOp::Sub, m, Value::Float(0.5)).unwrap();
    // Through f32 and back.
    let f = b.cast(s, Scalar::F32).unwrap();
    let e = b.unary(tessera_ir::UnaryOp::Exp, f).unwrap();
    let back = b.cast(e, ty).unwrap();
    b.store(out, g, back).unwrap();
    b.finish_kernel().unwrap()
}

#[test]
fn f16_and_bf16_round_trip_and_math_match_the_reference_exactly() {
    let ctx = Context::cpu();
    let mut rng = Rng::new(seed());
    let xs = rng.vec_f32(256);
    // f16
    let xh: Vec<f16> = xs.iter().map(|&v| f16::from_f32(v)).collect();
    let xt = ctx.tensor(&xh, &[256]).unwrap();
    assert_eq!(xt.to_vec::<f16>().unwrap(), xh);
    let o = ctx.full_nan(DType::F16, &[256]).unwrap();
    ctx.launch_ir(&scale_kernel(Scalar::F16))
        .no_optimize()
        .arg("x", &xt)
        .arg("out", &o)
        .grid([4, 1, 1])
        .group_size(64)
        .run()
        .unwrap();
    let want: Vec<f16> = xh
        .iter()
        .map(|v| {
            let m = f16::from_f32(v.to_f32() * 3.0);
            let s = f16::from_f32(m.to_f32() - 0.5);
            f16::from_f32(s.to_f32().exp())
        })
        .collect();
    assert_eq!(o.to_vec::<f16>().unwrap(), want);
    // bf16
    let xb: Vec<bf16> = xs.iter().map(|&v| bf16::from_f32(v)).collect();
    let xt = ctx.tensor(&xb, &[256]).unwrap();
    assert_eq!(xt.to_vec::<bf16>().unwrap(), xb);
    let o = ctx.full_nan(DType::BF16, &[256]).unwrap();
    ctx.launch_ir(&scale_kernel(Scalar::BF16))
        .no_optimize()
        .arg("x", &xt)
        .arg("out", &o)
        .grid([4, 1, 1])
        .group_size(64)
        .run()
        .unwrap();
    let want: Vec<bf16> = xb
        .iter()
        .map(|v| {
            let m = bf16::from_f32(v.to_f32() * 3.0);
            let s = bf16::from_f32(m.to_f32() - 0.5);
            bf16::from_f32(s.to_f32().exp())
        })
        .collect();
    assert_eq!(o.to_vec::<bf16>().unwrap(), want);
    let f64s = o.to_f64_vec().unwrap();
    assert_eq!(f64s[3], want[3].to_f64());
}

/// Lanes leave `for i in 0..tid` at different times with two carried values, an `if`
/// inside the loop and a nested loop whose bound depends on the outer variable.
#[test]
fn lanes_leaving_loops_at_different_times_keep_their_carried_values() {
    let mut b = Builder::kernel("ragged");
    let out = b.tensor_param("out", Scalar::U32, true);
    let out2 = b.tensor_param("out2", Scalar::U32, true);
    let lens = b.tensor_param("lens", Scalar::U32, false);
    let t = b.builtin(Builtin::ThreadId);
    let len = b.load(lens, t).unwrap();
    let (i, c) = b
        .begin_for(
            Value::Int(0),
            len,
            Value::Int(1),
            &[Value::Int(0), Value::Int(1)],
        )
        .unwrap();
    let odd_i = b.binary(BinaryOp::And, i, Value::Int(1)).unwrap();
    let is_odd = b.binary(BinaryOp::Eq, odd_i, Value::Int(1)).unwrap();
    b.begin_if(is_odd).unwrap();
    let a1 = b.binary(BinaryOp::Add, c[0], i).unwrap();
    b.begin_else(&[a1]).unwrap();
    let a2 = b.binary(BinaryOp::Add, c[0], Value::Int(100)).unwrap();
    let acc = b.end_if(&[a2]).unwrap()[0];
    // Inner loop: for j in i..len step 3, count.
    let (_j, ci) = b.begin_for(i, len, Value::Int(3), &[c[1]]).unwrap();
    let cnt = b.binary(BinaryOp::Add, ci[0], Value::Int(1)).unwrap();
    let inner = b.end_for(&[cnt]).unwrap()[0];
    // Swap-style yields: the carried values come back in a crossed form.
    let r = b.end_for(&[acc, inner]).unwrap();
    b.store(out, t, r[0]).unwrap();
    b.store(out2, t, r[1]).unwrap();
    let k = b.finish_kernel().unwrap();

    let ctx = Context::cpu();
    let mut rng = Rng::new(seed());
    let n = 96usize;
    let ls: Vec<u32> = (0..n).map(|_| rng.u32_below(40)).collect();
    let lt = ctx.tensor(&ls, &[n]).unwrap();
    let o = ctx.full_nan(DType::U32, &[n]).unwrap();
    let o2 = ctx.full_nan(DType::U32, &[n]).unwrap();
    ctx.launch_ir(&k)
        .no_optimize()
        .arg("out", &o)
        .arg("out2", &o2)
        .arg("lens", &lt)
        .grid([1, 1, 1])
        .group_size(n as u32)
        .run()
        .unwrap();
    let (mut w1, mut w2) = (vec![], vec![]);
    for &len in &ls {
        let (mut acc, mut cnt) = (0u32, 1u32);
        for i in 0..len {
            acc += if i % 2 == 1 { i } else { 100 };
            let mut j = i;
            while j < len {
                cnt += 1;
                j += 3;
            }
        }
        w1.push(acc);
        w2.push(cnt);
    }
    assert_eq!(o.to_vec::<u32>().unwrap(), w1);
    assert_eq!(o2.to_vec::<u32>().unwrap(), w2);
}

#[test]
fn signed_loops_stack_arrays_and_casts_match_the_reference() {
    let mut b = Builder::kernel("signed");
    let out = b.tensor_param("out", Scalar::I32, true);
    let st = b.local_array("st", Scalar::I32, Value::Int(8)).unwrap();
    let t = b.builtin(Builtin::ThreadId);
    let ti = b.cast(t, Scalar::I32).unwrap();
    let start = b.binary(BinaryOp::Sub, Value::Int(-5), ti).unwrap();
    let zero = b.lit(tessera_ir::Literal::I32(0));
    let (i, c) = b
        .begin_for(start, Value::Int(3), Value::Int(2), &[zero])
        .unwrap();
    let slot = b.binary(BinaryOp::Rem, c[0], Value::Int(8)).unwrap();
    let slot_u = b.cast(slot, Scalar::U32).unwrap();
    b.store(st, slot_u, i).unwrap();
    let nc = b.binary(BinaryOp::Add, c[0], Value::Int(1)).unwrap();
    let r = b.end_for(&[nc]).unwrap();
    // Sum whatever of the stack array was written (count is >= 4 for every thread here).
    let (k2, acc) = b
        .begin_for(Value::Int(0), Value::Int(4), Value::Int(1), &[zero])
        .unwrap();
    let v = b.load(st, k2).unwrap();
    let s = b.binary(BinaryOp::Add, acc[0], v).unwrap();
    let sum = b.end_for(&[s]).unwrap()[0];
    let both = b.binary(BinaryOp::Mul, sum, r[0]).unwrap();
    b.store(out, t, both).unwrap();
    let k = b.finish_kernel().unwrap();
    let ctx = Context::cpu();
    let o = ctx.zeros(DType::I32, &[32]).unwrap();
    ctx.launch_ir(&k)
        .no_optimize()
        .arg("out", &o)
        .grid([1, 1, 1])
        .group_size(32)
        .run()
        .unwrap();
    let want: Vec<i32> = (0..32)
        .map(|t: i32| {
            let mut st = [0i32; 8];
            let mut c = 0;
            let mut i = -5 - t;
            while i < 3 {
                st[(c % 8) as usize] = i;
                c += 1;
                i += 2;
            }
            st[..4].iter().sum::<i32>() * c
        })
        .collect();
    assert_eq!(o.to_vec::<i32>().unwrap(), want);
}

/// Results agree bit for bit with `tessera_ir::eval` for every unary and binary op, cast
/// and bitcast on random operands of every type the op is defined on.
#[test]
fn ops_agree_with_eval_bit_for_bit() {
    use tessera_ir::{eval, verify::binary_defined, Literal, UnaryOp};
    let ctx = Context::cpu();
    let mut rng = Rng::new(seed());
    let n = 64usize;
    for ty in Scalar::ALL {
        let rand_bits = |rng: &mut Rng| -> u32 {
            let r = rng.next_u64() as u32;
            match ty {
                Scalar::Bool => r & 1,
                Scalar::I8 | Scalar::U8 => r & 0xFF,
                Scalar::F16 | Scalar::BF16 => r & 0xFFFF,
                // Mostly small floats, some arbitrary bit patterns (NaN, inf, subnormal).
                Scalar::F32 if !r.is_multiple_of(4) => (rng.f32() * 8.0).to_bits(),
                _ => r,
            }
        };
        let a: Vec<u32> = (0..n).map(|_| rand_bits(&mut rng)).collect();
        let bv: Vec<u32> = (0..n)
            .map(|_| {
                let v = rand_bits(&mut rng);
                if ty.is_int() && v == 0 {
                    1
                } else {
                    v
                }
            })
            .collect();
        let to_tensor = |bits: &[u32]| -> Tensor {
            let bytes: Vec<u8> = bits
                .iter()
                .flat_map(|&b| b.to_le_bytes()[..ty.size_bytes()].to_vec())
                .collect();
            ctx.tensor_from_bytes(ty, &bytes, &[n]).unwrap()
        };
        let (ta, tb) = (to_tensor(&a), to_tensor(&bv));
        let read = |t: &Tensor, rt: Scalar| -> Vec<u32> {
            let bytes = t.to_bytes().unwrap();
            bytes
                .chunks(rt.size_bytes())
                .map(|c| {
                    let mut w = [0u8; 4];
                    w[..c.len()].copy_from_slice(c);
                    u32::from_le_bytes(w)
                })
                .collect()
        };
        let check = |name: String,
                     rt: Scalar,
                     build: &dyn Fn(&mut Builder, Value, Value) -> Value,
                     want: &dyn Fn(u32, u32) -> u32| {
            let mut b = Builder::kernel("op");
            let xa = b.tensor_param("a", ty, false);
            let xb = b.tensor_param("b", ty, false);
            let out = b.tensor_param("out", rt, true);
            let g = b.builtin(Builtin::GlobalId);
            let va = b.load(xa, g).unwrap();
            let vb = b.load(xb, g).unwrap();
            let r = build(&mut b, va, vb);
            b.store(out, g, r).unwrap();
            let k = b.finish_kernel().unwrap();
            let o = ctx.zeros(rt, &[n]).unwrap();
            ctx.launch_ir(&k)
                .no_optimize()
                .arg("a", &ta)
                .arg("b", &tb)
                .arg("out", &o)
                .grid([2, 1, 1])
                .group_size(32)
                .run()
                .unwrap();
            let got = read(&o, rt);
            for i in 0..n {
                assert_eq!(
                    got[i],
                    want(a[i], bv[i]),
                    "{name} on {ty}: operands {:#x}, {:#x}",
                    a[i],
                    bv[i]
                );
            }
        };
        for op in BinaryOp::ALL {
            if !binary_defined(op, ty) {
                continue;
            }
            let rt = if op.is_comparison() { Scalar::Bool } else { ty };
            check(
                op.name().to_string(),
                rt,
                &|b, x, y| b.binary(op, x, y).unwrap(),
                &|x, y| {
                    eval::binary(op, Literal::from_bits(ty, x), Literal::from_bits(ty, y))
                        .unwrap()
                        .to_bits()
                },
            );
        }
        for op in UnaryOp::ALL {
            let ok = match op {
                UnaryOp::Not => ty.is_int() || ty == Scalar::Bool,
                UnaryOp::Neg | UnaryOp::Abs => ty.is_numeric(),
                _ => ty.is_float(),
            };
            if !ok {
                continue;
            }
            let rt = if matches!(op, UnaryOp::IsNan | UnaryOp::IsInf) {
                Scalar::Bool
            } else {
                ty
            };
            check(
                op.name().to_string(),
                rt,
                &|b, x, _| b.unary(op, x).unwrap(),
                &|x, _| {
                    eval::unary(op, Literal::from_bits(ty, x))
                        .unwrap()
                        .to_bits()
                },
            );
        }
        for to in Scalar::ALL {
            if to == ty {
                continue;
            }
            check(
                format!("cast to {to}"),
                to,
                &|b, x, _| b.cast(x, to).unwrap(),
                &|x, _| eval::cast(Literal::from_bits(ty, x), to).to_bits(),
            );
        }
        // A bitcast keeps the pattern: the output's bits are the operand's.
        for to in Scalar::ALL {
            if to == ty || !to.is_numeric() || !ty.is_numeric() {
                continue;
            }
            if to.size_bytes() == ty.size_bytes() {
                check(
                    format!("bitcast to {to}"),
                    to,
                    &|b, x, _| b.bitcast(x, to).unwrap(),
                    &|x, _| {
                        let l = eval::bitcast(Literal::from_bits(ty, x), to).unwrap();
                        assert_eq!(l.to_bits(), x, "eval's bitcast of {ty} to {to}");
                        x
                    },
                );
            }
        }
        if ty.is_float() {
            check(
                "fma".into(),
                ty,
                &|b, x, y| b.fma(x, y, x).unwrap(),
                &|x, y| {
                    let (l, m) = (Literal::from_bits(ty, x), Literal::from_bits(ty, y));
                    eval::fma(l, m, l).unwrap().to_bits()
                },
            );
        }
    }
}

/// Scratch has the asked shape and dtype and holds what is written into it; an allocation
/// after one is dropped gets its own size; an overflowing shape is refused.
#[test]
fn scratch_tensors_have_their_shape_and_hold_what_is_written() {
    let ctx = Context::cpu();
    let mut rng = Rng::new(31);
    for n in [1usize, 7, 4096, 100_003] {
        let data = rng.vec_f32(n);
        let t = ctx.scratch(DType::F32, &[n]).unwrap();
        assert_eq!((t.dtype(), t.shape(), t.len()), (DType::F32, &[n][..], n));
        t.write(&data).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), data);
        drop(t);
        let again = ctx.scratch(DType::U32, &[n, 2]).unwrap();
        assert_eq!(again.size_bytes(), n * 8);
    }
    assert!(ctx.scratch(DType::F32, &[usize::MAX, 2]).is_err());
}
