//! Launch validation: every check gives its error with the allowed values, and a
//! rejected launch writes nothing. Also dtype inference, the compile cache and dumps.

use tessera_ir::{
    BinaryOp, Builder, Builtin, ConstexprSig, IrError, Kernel, KernelDef, KernelSignature, Literal,
    ParamSig, Scalar, SimdOp, Specialization, TypeSig, Value,
};
use tessera_runtime::{Context, DType, RuntimeError, Tensor};

/// `out[g] = simd_sum(x[g]) * scale + n` (when `simd`), or `x[g] * scale + n`.
fn build(spec: &Specialization, simd: bool, shared: u32) -> Result<Kernel, IrError> {
    build_for(spec, simd, shared, None)
}

/// [`build`], declaring an occupancy `(group_size, groups_per_core)` when given.
fn build_for(
    spec: &Specialization,
    simd: bool,
    shared: u32,
    occupancy: Option<(u32, u32)>,
) -> Result<Kernel, IrError> {
    let t = spec.dtypes[0];
    let mut b = Builder::kernel(if simd { "scaled_sum" } else { "scaled" });
    if let Some((gs, per_core)) = occupancy {
        b.occupancy(gs, per_core)?;
    }
    b.generic("T", t);
    let x = b.tensor_param("x", t, false);
    let out = b.tensor_param("out", t, true);
    let scale = b.scalar_param("scale", Scalar::F32);
    let n = b.constexpr("n", spec.constexprs[0]);
    if shared > 0 {
        b.shared_array("big", Scalar::F32, Value::Int(shared as i64))?;
    }
    let g = b.builtin(Builtin::GlobalId);
    let v = b.load(x, g)?;
    let f = b.cast(v, Scalar::F32)?;
    let f = if simd { b.simd(SimdOp::Sum, f)? } else { f };
    let m = b.binary(BinaryOp::Mul, f, scale)?;
    let nf = b.cast(n, Scalar::F32)?;
    let r = b.binary(BinaryOp::Add, m, nf)?;
    let r = b.cast(r, t)?;
    b.store(out, g, r)?;
    b.finish_kernel()
}

const PARAMS: &[ParamSig] = &[
    ParamSig::Tensor {
        name: "x",
        elem: TypeSig::Generic(0),
        writable: false,
    },
    ParamSig::Tensor {
        name: "out",
        elem: TypeSig::Generic(0),
        writable: true,
    },
    ParamSig::Scalar {
        name: "scale",
        ty: TypeSig::Fixed(Scalar::F32),
    },
];

const fn sig(name: &'static str) -> KernelSignature {
    KernelSignature {
        name,
        path: "",
        doc: "test kernel",
        generics: &["T"],
        params: PARAMS,
        constexprs: &[ConstexprSig {
            name: "n",
            ty: Scalar::U32,
        }],
    }
}

static SCALED: KernelDef = KernelDef {
    signature: sig("scaled"),
    build: |s| build(s, false, 0),
};

fn simd_def() -> KernelDef {
    KernelDef {
        signature: sig("scaled_sum"),
        build: |s| build(s, true, 0),
    }
}

fn big_shared_def() -> KernelDef {
    KernelDef {
        signature: sig("scaled_big"),
        build: |s| build(s, false, 64 * 1024),
    }
}

fn bounded_def() -> KernelDef {
    KernelDef {
        signature: sig("scaled_bounded"),
        build: |s| build_for(s, false, 0, Some((32, 4))),
    }
}

struct Setup {
    ctx: Context,
    x: Tensor,
    out: Tensor,
}

fn setup() -> Setup {
    let ctx = Context::cpu();
    let xs: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let x = ctx.tensor(&xs, &[64]).unwrap();
    let out = ctx.full_nan(DType::F32, &[64]).unwrap();
    Setup { ctx, x, out }
}

/// Runs a launch that must be rejected; checks its message and that `out` is untouched.
fn rejected(s: &Setup, r: Result<(), RuntimeError>, needles: &[&str]) {
    match r {
        Err(e @ RuntimeError::InvalidLaunch { .. }) => {
            let msg = e.to_string();
            for n in needles {
                assert!(msg.contains(n), "`{msg}` lacks `{n}`");
            }
        }
        other => panic!("expected a rejected launch, got {other:?}"),
    }
    assert!(
        s.out.to_vec::<f32>().unwrap().iter().all(|v| v.is_nan()),
        "a rejected launch wrote its output"
    );
}

/// Binds the scaled kernels' `x`, `out` and `scale`.
fn scaled_args<'a>(
    l: tessera_runtime::Launch<'a>,
    (x, out): (&'a Tensor, &'a Tensor),
    scale: f32,
) -> tessera_runtime::Launch<'a> {
    l.arg("x", x).arg("out", out).scalar("scale", scale)
}

#[test]
fn a_valid_launch_runs_infers_the_dtype_and_is_cached() {
    let s = setup();
    for _ in 0..2 {
        scaled_args(
            s.ctx.launch(&SCALED).constexpr("n", 3u32),
            (&s.x, &s.out),
            2.0,
        )
        .grid([2, 1, 1])
        .group_size(32)
        .run()
        .unwrap();
    }
    let want: Vec<f32> = (0..64).map(|i| i as f32 * 2.0 + 3.0).collect();
    assert_eq!(s.out.to_vec::<f32>().unwrap(), want);
    assert_eq!(s.ctx.cached_kernels(), 1);
    // A new constexpr value is a new specialisation.
    let l = s.ctx.launch(&SCALED).dtype("T", DType::F32);
    scaled_args(l.constexpr("n", 4u32), (&s.x, &s.out), 2.0)
        .grid([1, 1, 1])
        .group_size(64)
        .run()
        .unwrap();
    assert_eq!(s.ctx.cached_kernels(), 2);
}

#[test]
fn more_specialisations_than_the_recent_launches_each_run_their_own_kernel() {
    // The cache compares the last few launches' keys before its map; cycling through more
    // specialisations (constexprs, dtypes, and two kernels of one signature) than it keeps,
    // in an order that changes, every launch must still run its own kernel.
    let s = setup();
    let xh = s
        .ctx
        .tensor(
            &(0..64)
                .map(|i| half::f16::from_f32(i as f32))
                .collect::<Vec<_>>(),
            &[64],
        )
        .unwrap();
    let outh = s.ctx.full_nan(DType::F16, &[64]).unwrap();
    let other = KernelDef {
        signature: sig("scaled"),
        build: |sp| build(sp, true, 0),
    };
    let order: Vec<u32> = (0..12)
        .chain((0..12).rev())
        .chain((0..12).step_by(5))
        .collect();
    for (round, &n) in order.iter().enumerate() {
        let half = round % 3 == 0;
        let simd = round % 4 == 1;
        let def = if simd { &other } else { &SCALED };
        let (x, out) = if half { (&xh, &outh) } else { (&s.x, &s.out) };
        scaled_args(s.ctx.launch(def).constexpr("n", n), (x, out), 0.5)
            .grid([2, 1, 1])
            .group_size(32)
            .run()
            .unwrap();
        let got: Vec<f64> = if half {
            out.to_vec::<half::f16>()
                .unwrap()
                .iter()
                .map(|v| v.to_f64())
                .collect()
        } else {
            out.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|&v| f64::from(v))
                .collect()
        };
        for (i, g) in got.iter().enumerate() {
            // simd: the group's sum of x (32 per group) times the scale, plus n.
            let group = (i / 32 * 32) as f64;
            let sum: f64 = (0..32).map(|j| group + j as f64).sum();
            let want = if simd { sum } else { i as f64 } * 0.5 + f64::from(n);
            assert!(
                (g - want).abs() <= want.abs() * 2e-3,
                "round {round}: [{i}] {g} != {want}"
            );
        }
    }
}

#[test]
fn a_kernel_with_a_declared_occupancy_runs_at_its_group_size() {
    let s = setup();
    let bounded = bounded_def();
    scaled_args(
        s.ctx.launch(&bounded).constexpr("n", 1u32),
        (&s.x, &s.out),
        -1.0,
    )
    .grid([2, 1, 1])
    .group_size(32)
    .run()
    .unwrap();
    let want: Vec<f32> = (0..64).map(|i| 1.0 - i as f32).collect();
    assert_eq!(s.out.to_vec::<f32>().unwrap(), want);
}

#[test]
fn half_tensors_specialise_the_generic() {
    let ctx = Context::cpu();
    let xs: Vec<half::f16> = (0..32).map(|i| half::f16::from_f32(i as f32)).collect();
    let x = ctx.tensor(&xs, &[32]).unwrap();
    let out = ctx.full_nan(DType::F16, &[32]).unwrap();
    scaled_args(ctx.launch(&SCALED).constexpr("n", 1u32), (&x, &out), 0.5)
        .grid([1, 1, 1])
        .group_size(32)
        .run()
        .unwrap();
    let got = out.to_f64_vec().unwrap();
    let want: Vec<f64> = (0..32).map(|i| i as f64 * 0.5 + 1.0).collect();
    assert_eq!(got, want);
}

fn base<'a>(s: &'a Setup, def: &'a KernelDef) -> tessera_runtime::Launch<'a> {
    s.ctx.launch(def).constexpr("n", 3u32)
}

/// One binding-error check's bindings, on a launch of `SCALED`.
type Bind = for<'a> fn(tessera_runtime::Launch<'a>, &'a Setup) -> tessera_runtime::Launch<'a>;

#[test]
fn binding_errors_name_the_parameters() {
    let s = setup();
    let launch = |l: tessera_runtime::Launch<'_>| l.grid([2, 1, 1]).group_size(32).run();
    let checks: [(Bind, &[&str]); 6] = [
        // Unknown name.
        (
            |l, s| {
                l.arg("x", &s.x)
                    .arg("out", &s.out)
                    .scalar("scale", 1.0f32)
                    .scalar("eps", 1.0f32)
            },
            &["`eps`", "x (tensor)", "out (mut tensor)", "scale (scalar)"],
        ),
        // Missing.
        (
            |l, s| l.arg("x", &s.x).arg("out", &s.out),
            &["`scale` is not bound", ".scalar(\"scale\""],
        ),
        // Twice.
        (
            |l, s| {
                l.arg("x", &s.x)
                    .arg("x", &s.x)
                    .arg("out", &s.out)
                    .scalar("scale", 1.0f32)
            },
            &["`x` is bound twice"],
        ),
        // Tensor for a scalar, scalar for a tensor.
        (
            |l, s| l.arg("x", &s.x).arg("out", &s.out).arg("scale", &s.x),
            &["`scale` is a scalar"],
        ),
        (
            |l, s| {
                l.scalar("x", 1.0f32)
                    .arg("out", &s.out)
                    .scalar("scale", 1.0f32)
            },
            &["`x` is a tensor"],
        ),
        // Scalar of the wrong type.
        (
            |l, s| l.arg("x", &s.x).arg("out", &s.out).scalar("scale", 1u32),
            &["`scale` must be f32, got u32"],
        ),
    ];
    for (bind, needles) in checks {
        rejected(&s, launch(bind(base(&s, &SCALED), &s)), needles);
    }
}

#[test]
fn dtype_errors_are_reported() {
    let s = setup();
    let xh = s.ctx.zeros(DType::F16, &[64]).unwrap();
    let launch = |l: tessera_runtime::Launch<'_>| {
        l.scalar("scale", 1.0f32)
            .grid([2, 1, 1])
            .group_size(32)
            .run()
    };
    // Conflicting generic.
    rejected(
        &s,
        launch(base(&s, &SCALED).arg("x", &xh).arg("out", &s.out)),
        &["generic `T` is f16", "`out` is f32"],
    );
    // Explicit dtype against the tensors; an unknown generic.
    for (generic, dtype, needles) in [
        ("T", DType::BF16, &["generic `T`", "bf16", "f32"][..]),
        ("U", DType::F32, &["names no generic", "[T]"]),
    ] {
        let l = base(&s, &SCALED).dtype(generic, dtype);
        rejected(&s, launch(l.arg("x", &s.x).arg("out", &s.out)), needles);
    }
    // Constexprs: missing, wrong type, unknown.
    rejected(
        &s,
        launch(s.ctx.launch(&SCALED).arg("x", &s.x).arg("out", &s.out)),
        &["constexpr `n` (u32) is not given"],
    );
    rejected(
        &s,
        launch(
            s.ctx
                .launch(&SCALED)
                .constexpr("n", 3i32)
                .arg("x", &s.x)
                .arg("out", &s.out),
        ),
        &["constexpr `n` must be u32"],
    );
    rejected(
        &s,
        launch(
            base(&s, &SCALED)
                .constexpr("m", 3u32)
                .arg("x", &s.x)
                .arg("out", &s.out),
        ),
        &["`.constexpr(\"m\"", "n: u32"],
    );
    let _ = Literal::U32(0);
}

#[test]
fn aliasing_a_written_tensor_is_rejected() {
    let s = setup();
    let r = base(&s, &SCALED)
        .arg("x", &s.out)
        .arg("out", &s.out)
        .scalar("scale", 1.0f32)
        .grid([2, 1, 1])
        .group_size(32)
        .run();
    rejected(&s, r, &["`out` shares its buffer with `x`"]);
}

#[test]
fn geometry_errors_list_the_allowed_values() {
    let s = setup();
    let go = |def: &KernelDef, grid: [u32; 3], gs: u32| {
        base(&s, def)
            .arg("x", &s.x)
            .arg("out", &s.out)
            .scalar("scale", 1.0f32)
            .grid(grid)
            .group_size(gs)
            .run()
    };
    rejected(
        &s,
        go(&SCALED, [2, 0, 1], 32),
        &["zero dimension", "[2, 0, 1]"],
    );
    rejected(&s, go(&SCALED, [1, 1, 1], 0), &["group size 0", "1..=1024"]);
    rejected(
        &s,
        go(&SCALED, [1, 1, 1], 2048),
        &["group size 2048", "1..=1024"],
    );
    let simd = simd_def();
    rejected(
        &s,
        go(&simd, [1, 1, 1], 48),
        &["group size 48", "multiple of 32", "1024"],
    );
    let big = big_shared_def();
    rejected(&s, go(&big, [1, 1, 1], 64), &["262144 bytes", "232448"]);
    // A kernel compiled for at most 32 threads per group.
    let bounded = bounded_def();
    rejected(
        &s,
        go(&bounded, [1, 1, 1], 64),
        &["group size 64", "at most 32", "group_size = 32"],
    );
    // No grid / group size at all.
    let r = base(&s, &SCALED)
        .arg("x", &s.x)
        .arg("out", &s.out)
        .scalar("scale", 1.0f32)
        .run();
    rejected(&s, r, &["no grid"]);
}

#[test]
fn tensors_check_dtypes_and_lengths() {
    let ctx = Context::cpu();
    assert!(matches!(
        ctx.tensor(&[1.0f32, 2.0], &[3]),
        Err(RuntimeError::LengthMismatch {
            expected: 3,
            got: 2,
            ..
        })
    ));
    let t = ctx.tensor(&[1u32, 2, 3], &[3]).unwrap();
    assert!(matches!(
        t.to_vec::<f32>(),
        Err(RuntimeError::DTypeMismatch { .. })
    ));
    assert!(matches!(
        t.write(&[1u32]),
        Err(RuntimeError::LengthMismatch { .. })
    ));
    assert_eq!(t.to_f64_vec().unwrap(), vec![1.0, 2.0, 3.0]);
    let i8s = ctx.tensor(&[-3i8, 4], &[2]).unwrap();
    assert_eq!(i8s.to_f64_vec().unwrap(), vec![-3.0, 4.0]);
    let z = ctx.zeros(DType::BF16, &[2, 2]).unwrap();
    assert_eq!(z.to_f64_vec().unwrap(), vec![0.0; 4]);
    assert!(ctx
        .full_nan(DType::F16, &[3])
        .unwrap()
        .to_f64_vec()
        .unwrap()
        .iter()
        .all(|v| v.is_nan()));
    assert!(matches!(
        ctx.zeros(DType::F32, &[usize::MAX, 2]),
        Err(RuntimeError::InvalidShape { .. })
    ));
}

#[test]
fn backends_are_chosen_by_name() {
    assert!(Context::by_name("cpu").is_ok());
    match Context::by_name("tpu") {
        Err(e @ RuntimeError::UnknownBackend { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("cpu") && msg.contains("metal-emu"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
}
