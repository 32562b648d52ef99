//! The decode ops' workspace is the caller's and is checked before anything runs: one made
//! on another context, or too small for a forced split count, is refused with a message
//! that says how to make the right one, and the output keeps every bit it had, whether the
//! call would have run in one pass or split the keys. A workspace smaller than the plan's
//! own choice caps the split count and the answer still matches the f64 reference.

use tessera_runtime::{Context, DType, Tensor};
use tessera_std::attention::reference;
use tessera_std::attention::{
    sdpa_decode, sdpa_decode_batched, sdpa_decode_split, sdpa_decode_strided, sdpa_multi_query,
    DecodeOptions, DecodeWorkspace,
};
use tessera_std::testing::{qkv, CaseRng};
use tessera_std::OpError;

fn bits(t: &Tensor) -> Vec<u8> {
    t.to_bytes().expect("read back")
}

/// Runs `op`, which must be refused with a message containing `expect`, and checks that
/// `out` is bit for bit what it was.
fn refused(what: &str, out: &Tensor, expect: &str, op: impl FnOnce() -> Result<(), OpError>) {
    let before = bits(out);
    let e = op().expect_err(what);
    let msg = e.to_string();
    assert!(e.is_rejection(), "{what}: not a rejection: {msg}");
    assert!(msg.contains(expect), "{what}: `{msg}` lacks `{expect}`");
    assert_eq!(
        bits(out),
        before,
        "{what}: the refused call wrote its output"
    );
}

const OTHER: &str = "the workspace was made on another context";

#[test]
fn a_workspace_of_another_context_is_refused_by_every_decode_op() {
    let (ctx, other) = (Context::cpu(), Context::cpu());
    let mut rng = CaseRng::new(0xd5);
    for dt in [DType::F32, DType::F16] {
        // 40 keys run in one pass on the CUDA-core path, 1024 keys split; f16 always takes
        // the fragment kernel's split path.
        for n in [40, 1024] {
            let (hq, d) = (4, 64);
            let c = qkv(&ctx, &mut rng, dt, &[hq, d], &[1, n, d]).expect("inputs");
            let foreign = DecodeWorkspace::for_cache(&other, 1, hq, d, n).expect("ws");
            let what = format!("{dt:?} n={n}");
            refused(&format!("sdpa_decode {what}"), &c.out, OTHER, || {
                sdpa_decode(&ctx, &c.q, &c.k, &c.v, &c.out, None, &foreign)
            });
            let o = DecodeOptions::default();
            refused(&format!("strided {what}"), &c.out, OTHER, || {
                sdpa_decode_strided(&ctx, &c.q, &c.k, &c.v, &c.out, n - 3, &o, &foreign)
            });
            refused(&format!("split {what}"), &c.out, OTHER, || {
                sdpa_decode_split(&ctx, &c.q, &c.k, &c.v, &c.out, n, 2, &o, &foreign)
            });
        }
        let (b, hq, d, stride) = (2, 4, 64, 48);
        let c = qkv(&ctx, &mut rng, dt, &[b, hq, d], &[b, 1, stride, d]).expect("inputs");
        let lens = ctx.tensor(&[48u32, 7], &[b]).expect("lens");
        let foreign = DecodeWorkspace::for_cache(&other, b, hq, d, stride).expect("ws");
        refused(&format!("batched {dt:?}"), &c.out, OTHER, || {
            sdpa_decode_batched(
                &ctx,
                &c.q,
                &c.k,
                &c.v,
                &lens,
                &c.out,
                &DecodeOptions::default(),
                &foreign,
            )
        });
        let c = qkv(&ctx, &mut rng, dt, &[b, hq, d], &[1, stride, d]).expect("inputs");
        refused(&format!("multi_query {dt:?}"), &c.out, OTHER, || {
            sdpa_multi_query(
                &ctx,
                &c.q,
                &c.k,
                &c.v,
                &c.out,
                10,
                true,
                &DecodeOptions::default(),
                &foreign,
            )
        });
    }
}

#[test]
fn a_workspace_too_small_for_a_forced_split_is_refused() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0xd6);
    let (hq, d, n) = (4, 64, 256);
    for dt in [DType::F32, DType::BF16] {
        let c = qkv(&ctx, &mut rng, dt, &[hq, d], &[2, n, d]).expect("inputs");
        let ws = DecodeWorkspace::new(&ctx, 1, hq, d, 3).expect("ws");
        refused(
            &format!("split {dt:?}"),
            &c.out,
            "the workspace holds 12 partial outputs, this call needs 16",
            || {
                sdpa_decode_split(
                    &ctx,
                    &c.q,
                    &c.k,
                    &c.v,
                    &c.out,
                    n,
                    4,
                    &Default::default(),
                    &ws,
                )
            },
        );
        // Made for head_dim 32: too narrow for any split of head_dim 64.
        let narrow = DecodeWorkspace::new(&ctx, 1, hq, 32, 1).expect("ws");
        refused(
            &format!("sdpa_decode {dt:?}"),
            &c.out,
            "DecodeWorkspace::for_cache",
            || sdpa_decode(&ctx, &c.q, &c.k, &c.v, &c.out, None, &narrow),
        );
    }
}

#[test]
fn a_small_workspace_caps_the_automatic_split_and_the_answer_holds() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0xd7);
    let (hq, hkv, d, n) = (4, 1, 64, 1024);
    for (dt, tol) in [(DType::F32, 1e-4), (DType::F16, 1e-2)] {
        let c = qkv(&ctx, &mut rng, dt, &[hq, d], &[hkv, n, d]).expect("inputs");
        let want = reference::decode(
            &c.qv,
            &c.kv,
            &c.vv,
            &[(0, n)],
            hq,
            hkv,
            n,
            d,
            1.0 / (d as f64).sqrt(),
            0,
            0,
            None,
        );
        for splits in [1, 2] {
            let ws = DecodeWorkspace::new(&ctx, 1, hq, d, splits).expect("ws");
            sdpa_decode(&ctx, &c.q, &c.k, &c.v, &c.out, None, &ws).expect("decode");
            let got = c.out.to_f64_vec().expect("out");
            let worst = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                .fold(0.0, f64::max);
            assert!(
                worst <= tol,
                "{dt:?} with a workspace of {splits} chunks: max error {worst}"
            );
        }
    }
}
