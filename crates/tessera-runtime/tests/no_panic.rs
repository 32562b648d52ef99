//! No-panic fuzzing of the verifier, the pass pipeline, the emitters and the CPU
//! interpreter.
//!
//! - Mutated IR: a random valid kernel ([`random_kernel`]) gets random damage — operands
//!   and results pointing at wrong or missing values, wrong value types, swapped ops and
//!   cast targets, barriers and collectives inserted under divergent branches, deleted,
//!   duplicated and reordered instructions, bad memory and fragment references, wrong
//!   yields and block arguments, broken declarations. The verifier must answer with an
//!   error or accept it, never panic; whatever it accepts must then go through the pass
//!   pipeline and both emitters without a panic (errors are fine).
//! - Adversarial launches: a random valid kernel launched on the CPU with a random group
//!   size and grid, missing, extra, mistyped, short or aliased tensors and mistyped
//!   scalars must run or return an error, never panic.
//!
//! proptest drives both and shrinks a failure to the fewest mutations.
//! `TESSERA_FUZZ_CASES` sets the number of cases per property (64 by default).

mod random_kernel;

use proptest::prelude::*;
use random_kernel as rk;
use tessera_compiler::{optimize_with, PassOptions, Target};
use tessera_ir::{
    AtomicOp, BinaryOp, Block, Builtin, FragRole, Inst, Kernel, Literal, MemRef, Occupancy, Op,
    ParamKind, ReduceOp, Scalar, ShuffleKind, SimdOp, Type, UnaryOp, ValueId,
};
use tessera_runtime::{Context, Tensor};

fn cases() -> u32 {
    std::env::var("TESSERA_FUZZ_CASES")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(64)
}

/// The `k`-th block of `kernel` in depth-first order (modulo the number of blocks).
fn nth_block(kernel: &mut Kernel, k: u64) -> &mut Block {
    fn walk<'a>(b: &'a mut Block, k: &mut u64) -> Option<&'a mut Block> {
        if *k == 0 {
            return Some(b);
        }
        *k -= 1;
        for inst in &mut b.insts {
            for inner in inst.op.blocks_mut() {
                if let Some(found) = walk(inner, k) {
                    return Some(found);
                }
            }
        }
        None
    }
    let mut nested = 0u64;
    kernel
        .body
        .block
        .walk(&mut |i| nested += i.op.blocks().len() as u64);
    let mut k = k % (nested + 1);
    walk(&mut kernel.body.block, &mut k).expect("k is below the number of blocks")
}

fn scalar_of(x: u64) -> Scalar {
    Scalar::ALL[(x % Scalar::ALL.len() as u64) as usize]
}

fn type_of(x: u64) -> Type {
    let s = scalar_of(x);
    match (x >> 8) % 4 {
        0 => Type::Vector(s, [2, 4, 8, 3][((x >> 12) % 4) as usize]),
        _ => Type::Scalar(s),
    }
}

/// A value id: usually an existing one, sometimes one past the end.
fn value_id(kernel: &Kernel, x: u64) -> ValueId {
    let n = kernel.body.values.len() as u64 + 4;
    ValueId((x % n) as u32)
}

fn mem_ref(x: u64) -> MemRef {
    let i = ((x >> 4) % 16) as u32;
    match x % 4 {
        0 => MemRef::Param(i),
        1 => MemRef::Shared(i),
        2 => MemRef::Local(i),
        _ => MemRef::Arg(i),
    }
}

/// A collective or a fragment op to drop somewhere it may not belong.
fn collective(kernel: &Kernel, x: u64) -> Op {
    let v = value_id(kernel, x >> 8);
    match x % 8 {
        0 => Op::Barrier,
        1 => Op::SimdBarrier,
        2 => Op::Simd(SimdOp::Sum, v),
        3 => Op::Shuffle {
            kind: ShuffleKind::Xor,
            value: v,
            arg: value_id(kernel, x >> 16),
        },
        4 => Op::GroupReduce(ReduceOp::Max, v),
        5 => Op::FragMma {
            d: (x >> 20) as u32 % 4,
            a: (x >> 22) as u32 % 4,
            b: (x >> 24) as u32 % 4,
            c: (x >> 26) as u32 % 4,
        },
        6 => Op::FragFill {
            frag: (x >> 20) as u32 % 4,
            value: v,
        },
        _ => Op::Const(Literal::U32((x >> 32) as u32)),
    }
}

/// Applies one mutation, chosen by `kind`, with `x` as its random parameter.
fn mutate(kernel: &mut Kernel, kind: u8, x: u64) {
    let y = x.rotate_left(29);
    let v = value_id(kernel, y);
    // Mutations of the kernel's declarations.
    match kind % 20 {
        13 => {
            let len = (y as usize) % (kernel.body.values.len() + 1);
            kernel.body.values.truncate(len);
            return;
        }
        14 => {
            if !kernel.body.values.is_empty() {
                let i = (y as usize) % kernel.body.values.len();
                kernel.body.values[i] = type_of(y >> 3);
            }
            return;
        }
        15 => {
            if !kernel.params.is_empty() {
                let i = (y as usize) % kernel.params.len();
                kernel.params[i].kind = if y.is_multiple_of(3) {
                    ParamKind::Scalar(scalar_of(y >> 4))
                } else {
                    ParamKind::Tensor {
                        elem: scalar_of(y >> 4),
                        writable: y.is_multiple_of(2),
                    }
                };
            }
            return;
        }
        16 => {
            let len = [0, 1, 3, u32::MAX / 2, u32::MAX][(y % 5) as usize];
            if let Some(d) = kernel.body.shared.first_mut() {
                d.len = len;
            } else if let Some(d) = kernel.body.locals.first_mut() {
                d.len = len;
            }
            return;
        }
        17 => {
            kernel.occupancy = Some(Occupancy {
                group_size: [0, 1, 31, 1024, 1025, u32::MAX][(y % 6) as usize],
                groups_per_core: (y >> 8) as u32 % 3,
            });
            return;
        }
        18 => {
            if let Some(f) = kernel.body.frags.first_mut() {
                f.elem = scalar_of(y);
                f.role = [FragRole::A, FragRole::B, FragRole::Acc][(y >> 8) as usize % 3];
            }
            return;
        }
        _ => {}
    }
    let inserted = collective(kernel, y);
    // Mutations of one instruction or block.
    let block = nth_block(kernel, x);
    let n = block.insts.len();
    let at = if n == 0 { 0 } else { (y % n as u64) as usize };
    match kind % 20 {
        0 if n > 0 => {
            let (mut k, pick) = (0, (x >> 40) % 3);
            block.insts[at].op.map_operands(|old| {
                k += 1;
                if k % 3 == pick {
                    v
                } else {
                    old
                }
            });
        }
        1 if n > 0 => match block.insts[at].results.first_mut() {
            Some(r) => *r = v,
            None => block.insts[at].results.push(v),
        },
        2 if n > 0 => {
            block.insts[at].results.push(v);
        }
        3 if n > 0 => match &mut block.insts[at].op {
            Op::Unary(op, _) => *op = UnaryOp::ALL[(y % 17) as usize],
            Op::Binary(op, ..) => *op = BinaryOp::ALL[(y % 19) as usize],
            Op::Cast(_, to) => *to = scalar_of(y),
            Op::Simd(op, _) => *op = SimdOp::ALL[(y % 11) as usize],
            Op::Shuffle { kind, .. } => *kind = ShuffleKind::ALL[(y % 4) as usize],
            Op::GroupReduce(op, _) => *op = ReduceOp::ALL[(y % 3) as usize],
            Op::Atomic { op, .. } => *op = AtomicOp::ALL[(y % 6) as usize],
            Op::Const(l) => *l = Literal::zero(scalar_of(y)),
            Op::Builtin(b) => *b = Builtin::ALL[(y % 12) as usize],
            Op::Param(i) => *i = (y % 20) as u32,
            _ => {}
        },
        5 if n > 0 => {
            block.insts.remove(at);
        }
        6 if n > 0 => {
            let dup = block.insts[at].clone();
            block.insts.insert(at, dup);
        }
        7 if n > 0 => {
            if let Some(mem) = block.insts[at].op.mem_mut() {
                *mem = mem_ref(y);
            }
        }
        8 => {
            if y.is_multiple_of(2) {
                block.yields.push(v);
            } else {
                block.yields.pop();
            }
        }
        9 => {
            if y.is_multiple_of(2) {
                block.args.push(v);
            } else {
                block.args.pop();
            }
        }
        10 if n > 0 => match &mut block.insts[at].op {
            Op::FragFill { frag, .. }
            | Op::FragScale { frag, .. }
            | Op::FragLoad { frag, .. }
            | Op::FragStore { frag, .. } => *frag = (y % 6) as u32,
            Op::FragMma { d, a, .. } => {
                *d = (y % 6) as u32;
                *a = (y >> 8) as u32 % 6;
            }
            Op::VecLoad { width, .. } => *width = (y % 10) as u8,
            Op::Extract(_, lane) => *lane = (y % 10) as u8,
            Op::Pack(vs) => vs.push(v),
            _ => {}
        },
        11 if n > 1 => {
            let other = (x >> 48) as usize % n;
            block.insts.swap(at, other);
        }
        12 if n > 0 => {
            // Move an instruction into the first block nested after it.
            let inst = block.insts.remove(at);
            let target = block
                .insts
                .iter_mut()
                .skip(at)
                .flat_map(|i| i.op.blocks_mut())
                .next();
            if let Some(target) = target {
                target.insts.insert(0, inst);
            }
        }
        _ => {
            // A collective, fragment op or constant where it may not belong (under a
            // divergent branch, before its operands, with a stray result).
            let results = if matches!(
                inserted,
                Op::Simd(..) | Op::Shuffle { .. } | Op::GroupReduce(..) | Op::Const(_)
            ) {
                vec![v]
            } else {
                vec![]
            };
            block.insts.insert(
                at,
                Inst {
                    op: inserted,
                    results,
                    loc: None,
                },
            );
        }
    }
}

/// Runs everything after the verifier on a kernel it accepted: the pass pipeline (with
/// and without optimisation) and both emitters. Errors are fine; panics are not.
fn downstream(kernel: &Kernel) {
    for options in [PassOptions::none(), PassOptions::default()] {
        if let Ok(k) = optimize_with(kernel.clone(), &options) {
            let _ = tessera_compiler::emit(&k, Target::Cuda);
            let _ = tessera_compiler::emit(&k, Target::Metal);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Damaged IR gets an error from the verifier (or, if still valid, goes through the
    /// compiler), never a panic.
    #[test]
    fn the_verifier_and_compiler_never_panic_on_mutated_ir(
        seed in 0u64..1_000_000,
        mutations in prop::collection::vec((any::<u8>(), any::<u64>()), 1..6),
    ) {
        let mut kernel = rk::gen_kernel(seed).kernel;
        for &(kind, x) in &mutations {
            mutate(&mut kernel, kind, x);
        }
        if tessera_ir::verify_kernel(&kernel).is_ok() {
            let _ = kernel.to_string();
            downstream(&kernel);
        }
    }

    /// A valid kernel under a bad launch runs or gets an error, never a panic.
    #[test]
    fn the_cpu_backend_never_panics_on_adversarial_launches(
        seed in 0u64..1_000_000,
        group in prop::sample::select(vec![0u32, 1, 31, 32, 33, 64, 96, 128, 1024, 1025]),
        grid in (0u32..4, 0u32..3, 0u32..3),
        damage in prop::collection::vec((0u8..8, any::<u64>()), 0..4),
    ) {
        let case = rk::gen_kernel(seed);
        let ctx = Context::cpu();
        let inp = rk::host_inputs(&mut rk::Rng(seed));
        adversarial_launch(&ctx, &case.kernel, &inp, group, [grid.0, grid.1, grid.2], &damage);
    }
}

/// A tensor of `len` elements of `ty` (zeros).
fn zeros(ctx: &Context, ty: Scalar, len: usize) -> Tensor {
    ctx.zeros(ty, &[len]).expect("a small tensor")
}

fn adversarial_launch(
    ctx: &Context,
    kernel: &Kernel,
    inp: &rk::HostInputs,
    group: u32,
    grid: [u32; 3],
    damage: &[(u8, u64)],
) {
    // The arguments a correct launch passes, by name.
    let mut tensors: Vec<(String, Tensor)> = Vec::new();
    for (i, &t) in rk::TYPES.iter().enumerate() {
        tensors.push((format!("in{i}"), zeros(ctx, t, rk::N_IN)));
        tensors.push((
            format!("out{i}"),
            zeros(ctx, t, rk::THREADS * rk::SLOTS as usize),
        ));
    }
    tensors.push((
        "frag_in".into(),
        ctx.tensor(&inp.frag, &[rk::N_IN]).expect("tensor"),
    ));
    tensors.push((
        "approx_out".into(),
        zeros(ctx, Scalar::F32, rk::THREADS * rk::APPROX_SLOTS as usize),
    ));
    tensors.push((
        "frag_out".into(),
        zeros(ctx, Scalar::F32, rk::SIMDGROUPS * rk::FRAG_ELEMS),
    ));
    let mut scalars: Vec<(String, Literal)> = vec![
        ("n".into(), Literal::U32(inp.n)),
        ("s".into(), Literal::F32(inp.s)),
        ("k".into(), Literal::I32(inp.k)),
    ];
    for &(what, x) in damage {
        let pick = |len: usize| (x % len.max(1) as u64) as usize;
        match what {
            0 if !tensors.is_empty() => {
                tensors.remove(pick(tensors.len()));
            }
            1 if !tensors.is_empty() => {
                // A tensor of the wrong dtype or a short one.
                let i = pick(tensors.len());
                let len = [0, 1, 7, 100][(x >> 8) as usize % 4];
                tensors[i].1 = zeros(ctx, Scalar::ALL[(x >> 16) as usize % 8], len.max(1));
            }
            2 if tensors.len() > 1 => {
                // Aliasing: one tensor passed under two names.
                let (a, b) = (pick(tensors.len()), (x >> 20) as usize % tensors.len());
                tensors[a].1 = tensors[b].1.clone();
            }
            3 => tensors.push(("no_such".into(), zeros(ctx, Scalar::F32, 4))),
            4 if !scalars.is_empty() => {
                let i = pick(scalars.len());
                scalars[i].1 = Literal::zero(Scalar::ALL[(x >> 8) as usize % 8]);
            }
            5 if !scalars.is_empty() => {
                scalars.remove(pick(scalars.len()));
            }
            6 => scalars.push(("in0".into(), Literal::U32(1))),
            _ => {
                // A scalar where a tensor goes.
                scalars.push((format!("out{}", x % 5), Literal::U32(0)));
            }
        }
    }
    let mut launch = ctx.launch_ir(kernel);
    for (name, t) in &tensors {
        launch = launch.arg(name, t);
    }
    for (name, v) in &scalars {
        launch = launch.scalar(name, *v);
    }
    let _ = launch.grid(grid).group_size(group).run();
}
