//! Environment knobs: `TESSERA_BACKEND` picks the backend, `TESSERA_DUMP` writes each
//! kernel's IR when first compiled. One test, so no other test sees the variables.

use tessera_ir::{BinaryOp, Builder, Builtin, ConstexprSig, KernelDef, KernelSignature, ParamSig};
use tessera_ir::{Scalar, TypeSig};
use tessera_runtime::{BackendKind, Context, DType, RuntimeError};

static ADD_ONE: KernelDef = KernelDef {
    signature: KernelSignature {
        name: "add_one",
        path: "",
        doc: "out = x + 1",
        generics: &["T"],
        params: &[
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
        ],
        constexprs: &[ConstexprSig {
            name: "n",
            ty: Scalar::U32,
        }],
    },
    build: |spec| {
        let t = spec.dtypes[0];
        let mut b = Builder::kernel("add_one");
        b.generic("T", t);
        let x = b.tensor_param("x", t, false);
        let out = b.tensor_param("out", t, true);
        let _n = b.constexpr("n", spec.constexprs[0]);
        let g = b.builtin(Builtin::GlobalId);
        let v = b.load(x, g)?;
        let r = b.binary(BinaryOp::Add, v, tessera_ir::Value::Float(1.0))?;
        b.store(out, g, r)?;
        b.finish_kernel()
    },
};

#[test]
fn backend_and_dump_come_from_the_environment() {
    std::env::set_var("TESSERA_BACKEND", "cpu");
    assert_eq!(Context::new().unwrap().kind(), BackendKind::Cpu);
    std::env::set_var("TESSERA_BACKEND", "quantum");
    assert!(matches!(
        Context::new(),
        Err(RuntimeError::UnknownBackend { .. })
    ));
    std::env::remove_var("TESSERA_BACKEND");

    let dir = std::env::temp_dir().join(format!("tessera-dump-{}", std::process::id()));
    std::env::set_var("TESSERA_DUMP", &dir);
    let ctx = Context::cpu();
    std::env::remove_var("TESSERA_DUMP");
    let x = ctx.tensor(&[1.0f32; 32], &[32]).unwrap();
    let out = ctx.zeros(DType::F32, &[32]).unwrap();
    ctx.launch(&ADD_ONE)
        .constexpr("n", 32u32)
        .arg("x", &x)
        .arg("out", &out)
        .grid([1, 1, 1])
        .group_size(32)
        .run()
        .unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![2.0; 32]);
    let ir = std::fs::read_to_string(dir.join("add_one[T=f32, n=32u32].ir")).unwrap();
    assert!(ir.starts_with("kernel add_one[T=f32, n=32u32]"), "{ir}");
    let _ = std::fs::remove_dir_all(&dir);
}
