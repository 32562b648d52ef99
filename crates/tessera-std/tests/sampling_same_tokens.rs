//! The same seed gives the same token on every backend: the DSL Philox4x32-10 gives
//! Random123's published known answers on the CPU and under the Metal emulator (the
//! emitted MSL), and `sample` and `argmax` draw the same tokens on both for many random
//! rows, every float dtype and random per-row parameters.

use tessera_runtime::{Context, DType, Tensor};
use tessera_std::sampling::philox::{philox4x32_10, philox_kernel};
use tessera_std::sampling::{argmax, sample, SamplingParams};
use tessera_std::testing::{upload, CaseRng};

/// Random123's kat_vectors for philox4x32, 10 rounds: (counter, key, output).
const KNOWN_ANSWERS: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
    (
        [0; 4],
        [0; 2],
        [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
    ),
    (
        [u32::MAX; 4],
        [u32::MAX; 2],
        [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
    ),
    (
        [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
        [0xa409_3822, 0x299f_31d0],
        [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
    ),
];

fn backends() -> Vec<(&'static str, Context)> {
    let mut v = vec![("cpu", Context::cpu())];
    match Context::by_name("metal-emu") {
        Ok(c) => v.push(("metal-emu", c)),
        Err(e) => panic!("the metal-emu backend is needed here (g++): {e}"),
    }
    v
}

/// The known answers, then 64 random blocks against the host form.
#[test]
fn dsl_philox_gives_the_known_answers_on_every_backend() {
    let mut rng = CaseRng::new(0x9e11);
    let mut blocks: Vec<([u32; 4], [u32; 2])> =
        KNOWN_ANSWERS.iter().map(|(c, k, _)| (*c, *k)).collect();
    for _ in 0..64 {
        let mut w = || rng.int(0, u32::MAX);
        blocks.push(([w(), w(), w(), w()], [w(), w()]));
    }
    let n = blocks.len();
    let counters: Vec<u32> = blocks.iter().flat_map(|b| b.0).collect();
    let keys: Vec<u32> = blocks.iter().flat_map(|b| b.1).collect();
    for (name, ctx) in backends() {
        let c = ctx.tensor(&counters, &[4 * n]).expect("counters");
        let k = ctx.tensor(&keys, &[2 * n]).expect("keys");
        let words = ctx.zeros(DType::U32, &[4 * n]).expect("words");
        philox_kernel::launch(
            &ctx,
            philox_kernel::Args {
                counters: &c,
                keys: &k,
                words: &words,
                n: n as u32,
            },
        )
        .grid([(n as u32).div_ceil(64), 1, 1])
        .group_size(64)
        .run()
        .expect("philox kernel");
        let got = words.to_vec::<u32>().expect("read back");
        for (i, (counter, key)) in blocks.iter().enumerate() {
            let want = match KNOWN_ANSWERS.get(i) {
                Some(ka) => ka.2,
                None => philox4x32_10(*counter, *key),
            };
            assert_eq!(got[4 * i..4 * i + 4], want, "{name}: block {i}");
        }
        for (counter, key, want) in KNOWN_ANSWERS {
            assert_eq!(philox4x32_10(counter, key), want);
        }
    }
}

fn tensor(ctx: &Context, dtype: DType, v: &[f64], shape: &[usize]) -> Tensor {
    upload(ctx, dtype, v, shape).expect("upload").0
}

/// `batch` rows of random logits and parameters sampled on one backend: the tokens of
/// `sample`, then of `argmax`.
fn tokens(
    ctx: &Context,
    dtype: DType,
    seed: u64,
    batch: usize,
    vocab: usize,
) -> (Vec<i32>, Vec<i32>) {
    let mut rng = CaseRng::new(seed);
    let logits: Vec<f64> = (0..batch * vocab).map(|_| rng.uniform(-6.0, 6.0)).collect();
    let mut t = Vec::new();
    let mut k = Vec::new();
    let mut p = Vec::new();
    let mut mp = Vec::new();
    let mut s = Vec::new();
    let mut off = Vec::new();
    for r in 0..batch {
        t.push(if r % 9 == 0 {
            0.0
        } else {
            rng.uniform(0.2, 2.0)
        });
        k.push([0.0, 1.0, 7.0, 50.0, 400.0][rng.int(0, 5) as usize]);
        p.push(if rng.int(0, 2) == 0 {
            1.0
        } else {
            rng.uniform(0.05, 1.0)
        });
        mp.push(if rng.int(0, 3) == 0 {
            rng.uniform(0.0, 0.3)
        } else {
            0.0
        });
        s.extend([
            f64::from(rng.int(0, u32::MAX)),
            f64::from(rng.int(0, u32::MAX)),
        ]);
        off.push(f64::from(rng.int(0, u32::MAX)));
    }
    let x = tensor(ctx, dtype, &logits, &[batch, vocab]);
    let params = [
        tensor(ctx, DType::F32, &t, &[batch]),
        tensor(ctx, DType::I32, &k, &[batch]),
        tensor(ctx, DType::F32, &p, &[batch]),
        tensor(ctx, DType::F32, &mp, &[batch]),
        tensor(ctx, DType::U32, &s, &[batch, 2]),
        tensor(ctx, DType::U32, &off, &[batch]),
    ];
    let sp = SamplingParams {
        temperature: &params[0],
        top_k: &params[1],
        top_p: &params[2],
        min_p: &params[3],
        seed: &params[4],
        offset: &params[5],
    };
    let token = ctx.full_nan(DType::I32, &[batch]).expect("token");
    sample(ctx, &x, &sp, &token).expect("sample");
    let greedy = ctx.full_nan(DType::I32, &[batch]).expect("greedy");
    argmax(ctx, &x, &greedy).expect("argmax");
    (
        token.to_vec::<i32>().expect("tokens"),
        greedy.to_vec::<i32>().expect("greedy tokens"),
    )
}

#[test]
fn cpu_and_metal_emu_draw_the_same_tokens() {
    let all = backends();
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for (seed, batch, vocab) in [(11u64, 64, 1000), (12, 32, 4099), (13, 2, 151_936)] {
            let runs: Vec<_> = all
                .iter()
                .map(|(name, ctx)| (*name, tokens(ctx, dtype, seed, batch, vocab)))
                .collect();
            let (first, want) = &runs[0];
            assert!(want.0.iter().all(|&t| t >= 0 && (t as usize) < vocab));
            for (name, got) in &runs[1..] {
                assert_eq!(
                    got, want,
                    "{dtype} batch={batch} vocab={vocab}: {name} vs {first}"
                );
            }
        }
    }
}
