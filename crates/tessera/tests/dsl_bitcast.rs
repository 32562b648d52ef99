//! `x.bitcast::<T>()` in the DSL: a value's bits read as another type of the same width,
//! every pattern kept (NaN payloads, −0, subnormals) on the CPU and the Metal emulator;
//! another width is refused when the kernel is built, with the reason.

use tessera::prelude::*;

/// `out[i]` = the bits of `x[i]` as `T`, and `back[i]` = those bits again as u32 through
/// i32 (so a signed bitcast sits in the chain).
#[kernel]
fn reinterpret<T>(x: Tensor<u32>, mut out: Tensor<T>, mut back: Tensor<u32>, n: u32) {
    let i = global_id();
    if i < n {
        let v = load(x[i]).bitcast::<T>();
        store(out[i], v);
        store(back[i], v.bitcast::<i32>().bitcast::<u32>());
    }
}

fn patterns() -> Vec<u32> {
    let mut v = vec![
        0x3f80_0000, // 1.0
        0x8000_0000, // -0.0
        0x0000_0001, // the smallest subnormal
        0x7f80_0000, // +inf
        0xffc0_1234, // a NaN with a payload
        0x7fa0_0001, // a signalling NaN
        u32::MAX,
    ];
    let mut s = 0x9e37_79b9u32;
    for _ in 0..57 {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        v.push(s);
    }
    v
}

fn check(ctx: &Context) {
    let bits = patterns();
    let n = bits.len();
    let x = ctx.tensor(&bits, &[n]).unwrap();
    let out = ctx.zeros(DType::F32, &[n]).unwrap();
    let back = ctx.zeros(DType::U32, &[n]).unwrap();
    reinterpret::launch(
        ctx,
        reinterpret::Args {
            x: &x,
            out: &out,
            back: &back,
            n: n as u32,
        },
    )
    .grid([1, 1, 1])
    .group_size(64)
    .run()
    .unwrap();
    let got: Vec<u32> = out
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|f| f.to_bits())
        .collect();
    assert_eq!(got, bits, "f32 from u32 bits on {ctx:?}");
    assert_eq!(back.to_vec::<u32>().unwrap(), bits, "round trip on {ctx:?}");
}

#[test]
fn bitcast_keeps_every_pattern_on_the_cpu_and_metal_emulator() {
    check(&Context::cpu());
    match Context::by_name("metal-emu") {
        Ok(ctx) => check(&ctx),
        Err(e) => eprintln!("metal-emu skipped: {e}"),
    }
}

#[test]
fn bitcast_to_another_width_is_refused_with_the_reason() {
    let ctx = Context::cpu();
    let x = ctx.tensor(&[1u32], &[1]).unwrap();
    let out = ctx.zeros(DType::F16, &[1]).unwrap();
    let back = ctx.zeros(DType::U32, &[1]).unwrap();
    let e = reinterpret::launch(
        &ctx,
        reinterpret::Args {
            x: &x,
            out: &out,
            back: &back,
            n: 1,
        },
    )
    .grid([1, 1, 1])
    .group_size(32)
    .run()
    .unwrap_err()
    .to_string();
    assert!(e.contains("keeps the width"), "{e}");
}
