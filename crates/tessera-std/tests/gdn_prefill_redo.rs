//! The f16/bf16 Gated DeltaNet prefill redoes in f32 exactly the (sequence, value head)
//! pairs whose chunked outputs were not finite: ordinary data flags nothing (the common
//! path stays the chunked one), a NaN in one value head's v flags that pair alone and its
//! earlier tokens stay finite and right, and an f32 initial state past f16's range gives
//! the recurrence's final state.

use tessera_runtime::{Context, DType, Tensor};
use tessera_std::gdn::reference::{recurrent, GdnInputs, GdnShape};
use tessera_std::gdn::{gdn_chunked_prefill, GdnPrefillWorkspace, PrefillArgs, PrefillShape};
use tessera_std::testing::{upload, CaseRng};

/// One packed prefill's inputs, as tensors and as the values they hold.
struct Data {
    dtype: DType,
    shape: GdnShape,
    cu: Vec<usize>,
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    g: Vec<f64>,
    beta: Vec<f64>,
    h0: Vec<f64>,
}

fn uniform(rng: &mut CaseRng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| rng.uniform(lo, hi)).collect()
}

impl Data {
    fn new(dtype: DType, lens: &[usize], dk: usize, seed: u64) -> Data {
        let mut rng = CaseRng::new(seed);
        let shape = GdnShape {
            hk: 1,
            hv: 2,
            dk,
            dv: 16,
        };
        let mut cu = vec![0];
        for l in lens {
            cu.push(cu[cu.len() - 1] + l);
        }
        let t = cu[cu.len() - 1];
        Data {
            dtype,
            shape,
            q: uniform(&mut rng, t * dk, -0.2, 0.2),
            k: uniform(&mut rng, t * dk, -0.2, 0.2),
            v: uniform(&mut rng, t * shape.hv * shape.dv, -1.0, 1.0),
            g: uniform(&mut rng, t * shape.hv, -0.5, 0.0),
            beta: uniform(&mut rng, t * shape.hv, 0.0, 1.0),
            h0: uniform(&mut rng, lens.len() * shape.state_len(), -0.2, 0.2),
            cu,
        }
    }

    fn tokens(&self) -> usize {
        self.cu[self.cu.len() - 1]
    }

    /// Runs the prefill beside the recurrence on the same rounded data.
    fn run(&self) -> Outcome {
        let ctx = Context::cpu();
        let s = self.shape;
        let (t, n) = (self.tokens(), self.cu.len() - 1);
        let up = |dtype, data: &[f64], dims: &[usize]| -> (Tensor, Vec<f64>) {
            upload(&ctx, dtype, data, dims).unwrap()
        };
        let (q, qh) = up(self.dtype, &self.q, &[t, s.hk, s.dk]);
        let (k, kh) = up(self.dtype, &self.k, &[t, s.hk, s.dk]);
        let (v, vh) = up(self.dtype, &self.v, &[t, s.hv, s.dv]);
        let (g, gh) = up(DType::F32, &self.g, &[t, s.hv]);
        let (beta, bh) = up(DType::F32, &self.beta, &[t, s.hv]);
        let st = [n, s.hv, s.dv, s.dk];
        let (h0, h0h) = up(DType::F32, &self.h0, &st);
        let o = ctx.full_nan(self.dtype, &[t, s.hv, s.dv]).unwrap();
        let fin = ctx.full_nan(DType::F32, &st).unwrap();
        let scale = 1.0 / (s.dk as f32).sqrt();
        let ws = GdnPrefillWorkspace::new(
            &ctx,
            &PrefillShape {
                dtype: self.dtype,
                hv: s.hv,
                dk: s.dk,
                dv: s.dv,
                cu_seqlens: &self.cu,
            },
        )
        .unwrap();
        let args = PrefillArgs {
            q: &q,
            k: &k,
            v: &v,
            g: &g,
            beta: &beta,
            h0: Some(&h0),
            o: &o,
            final_state: &fin,
        };
        gdn_chunked_prefill(&ctx, &args, &ws, scale).unwrap();
        let (want_o, want_fin) = recurrent(&GdnInputs {
            q: &qh,
            k: &kh,
            v: &vh,
            g: &gh,
            beta: &bh,
            h0: Some(&h0h),
            cu_seqlens: &self.cu,
            shape: s,
            scale: scale as f64,
        });
        Outcome {
            o: o.to_f64_vec().unwrap(),
            fin: fin.to_f64_vec().unwrap(),
            redone: ws.redone_chunks(s.hv).unwrap(),
            want_o,
            want_fin,
        }
    }
}

/// A prefill's outputs, the (chunk, value head) pairs it redid, and the recurrence's.
struct Outcome {
    o: Vec<f64>,
    fin: Vec<f64>,
    redone: Vec<(usize, usize)>,
    want_o: Vec<f64>,
    want_fin: Vec<f64>,
}

/// Non-finite exactly where `want` is, and finite values within `rel` of the largest.
fn matches(what: &str, got: &[f64], want: &[f64], rel: f64) {
    let scale = want
        .iter()
        .filter(|w| w.is_finite())
        .fold(0.0f64, |m, x| m.max(x.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.is_finite(), w.is_finite(), "{what}[{i}] is {g}, want {w}");
        if w.is_finite() {
            assert!((g - w).abs() <= rel * scale, "{what}[{i}] is {g}, want {w}");
        }
    }
}

const LENS: [usize; 3] = [30, 100, 5];

#[test]
fn ordinary_data_is_not_redone() {
    for (dtype, dk) in [(DType::F16, 64), (DType::BF16, 128), (DType::F16, 256)] {
        let d = Data::new(dtype, &LENS, dk, 0x9ed0 + dk as u64);
        let r = d.run();
        assert!(
            r.redone.is_empty(),
            "{dtype} Dk {dk}: redone {:?}",
            r.redone
        );
        matches("o", &r.o, &r.want_o, 2e-2);
        matches("final state", &r.fin, &r.want_fin, 2e-2);
    }
}

#[test]
fn a_nan_in_one_heads_v_redoes_that_pair_alone() {
    for dk in [64, 256] {
        let mut d = Data::new(DType::F16, &LENS, dk, 0x9ed1 + dk as u64);
        // Sequence 1 (tokens 30..130, chunks 1 and 2), token 100 (its second chunk, row
        // 6), value head 1, column 3: the chunk's rows before it must stay finite.
        let (t, h, col) = (100, 1, 3);
        d.v[(t * d.shape.hv + h) * d.shape.dv + col] = f64::NAN;
        let r = d.run();
        assert_eq!(r.redone, vec![(2, 1)], "Dk {dk}");
        matches("o", &r.o, &r.want_o, 2e-2);
        matches("final state", &r.fin, &r.want_fin, 2e-2);
        let nan_rows = (0..d.tokens())
            .filter(|&tok| !r.o[(tok * d.shape.hv + h) * d.shape.dv + col].is_finite())
            .count();
        assert_eq!(nan_rows, 30, "Dk {dk}: tokens 100..130 of column {col}");
    }
}

#[test]
fn an_f32_state_past_f16_range_gives_the_recurrence() {
    let mut d = Data::new(DType::F16, &LENS, 64, 0x9ed2);
    d.h0.iter_mut().for_each(|x| *x *= 1e6);
    let r = d.run();
    assert!(!r.redone.is_empty());
    matches("final state", &r.fin, &r.want_fin, 1e-4);
}
