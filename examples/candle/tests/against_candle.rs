//! Tessera's custom ops against the same math written with candle's own tensor ops, on the
//! CPU and (feature `cuda`) on candle's CUDA device, over random inputs.

use candle_core::{DType, Device, Tensor, D};
use rand::{Rng, SeedableRng};
use tessera_candle::{decode_attention, rms_norm};

fn devices() -> Vec<Device> {
    let mut v = vec![Device::Cpu];
    #[cfg(feature = "cuda")]
    v.push(Device::new_cuda(0).expect("the `cuda` build runs where candle sees a GPU"));
    v
}

fn random(dev: &Device, dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect();
    Tensor::from_vec(data, shape, dev)
        .and_then(|t| t.to_dtype(dtype))
        .expect("a host tensor")
}

/// Largest `|got - want| - tol·(1 + |want|)` over the elements: ≤ 0 passes. NaN fails.
fn assert_close(got: &Tensor, want: &Tensor, tol: f32, what: &str) {
    let got: Vec<f32> = got
        .to_dtype(DType::F32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let want: Vec<f32> = want
        .to_dtype(DType::F32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    assert_eq!(got.len(), want.len(), "{what}: element counts");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(
            ok,
            "{what}: element {i} is {g}, candle's ops give {w} (tolerance {tol})"
        );
    }
}

fn tolerance(dtype: DType) -> f32 {
    match dtype {
        DType::BF16 => 1.6e-2,
        DType::F16 => 2e-3,
        _ => 2e-5,
    }
}

#[test]
fn rms_norm_matches_candle() {
    for dev in devices() {
        for (i, dtype) in [DType::F32, DType::F16, DType::BF16]
            .into_iter()
            .enumerate()
        {
            for (rows, n) in [(3usize, 4096usize), (5, 1000), (1, 64)] {
                let x = random(&dev, dtype, &[rows, n], 11 + i as u64);
                let w = random(&dev, dtype, &[n], 23 + i as u64);
                let eps = 1e-6f32;
                let got = rms_norm(&x, &w, eps).unwrap();
                assert_eq!(got.dims(), x.dims());
                assert_eq!(got.dtype(), dtype);
                let x32 = x.to_dtype(DType::F32).unwrap();
                let ms = x32.sqr().unwrap().mean_keepdim(D::Minus1).unwrap();
                let want = x32
                    .broadcast_div(&(ms + eps as f64).unwrap().sqrt().unwrap())
                    .unwrap()
                    .broadcast_mul(&w.to_dtype(DType::F32).unwrap())
                    .unwrap();
                assert_close(
                    &got,
                    &want,
                    tolerance(dtype),
                    &format!("rms_norm {dev:?} {dtype:?} {rows}x{n}"),
                );
            }
        }
    }
}

/// Decode attention with candle's ops in f32: each group of `heads / kv_heads` query heads
/// against its KV head.
fn candle_attention(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64) -> Tensor {
    let (heads, d) = q.dims2().unwrap();
    let kv_heads = k.dims()[0];
    let g = heads / kv_heads;
    let f = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
    let q = f(q).reshape((kv_heads, g, d)).unwrap();
    let s = (q.matmul(&f(k).t().unwrap()).unwrap() * scale).unwrap();
    let m = s.max_keepdim(D::Minus1).unwrap();
    let e = s.broadcast_sub(&m).unwrap().exp().unwrap();
    let p = e.broadcast_div(&e.sum_keepdim(D::Minus1).unwrap()).unwrap();
    p.matmul(&f(v)).unwrap().reshape((heads, d)).unwrap()
}

#[test]
fn decode_attention_matches_candle() {
    for dev in devices() {
        for (i, dtype) in [DType::F32, DType::F16, DType::BF16]
            .into_iter()
            .enumerate()
        {
            // (query heads, kv heads, head_dim, keys): GQA, a long cache that splits, odd lengths.
            for (h, hk, d, n) in [
                (8usize, 2usize, 128usize, 777usize),
                (4, 4, 64, 33),
                (16, 2, 128, 4096),
            ] {
                let q = random(&dev, dtype, &[h, d], 100 + i as u64);
                let k = random(&dev, dtype, &[hk, n, d], 200 + i as u64);
                let v = random(&dev, dtype, &[hk, n, d], 300 + i as u64);
                let got = decode_attention(&q, &k, &v, None).unwrap();
                assert_eq!(got.dims(), &[h, d]);
                let want = candle_attention(&q, &k, &v, 1.0 / (d as f64).sqrt());
                assert_close(
                    &got,
                    &want,
                    tolerance(dtype),
                    &format!("decode {dev:?} {dtype:?} {h}/{hk}x{d}, {n} keys"),
                );
            }
        }
    }
}

#[test]
fn bad_calls_are_errors() {
    for dev in devices() {
        let x = random(&dev, DType::F32, &[4, 256], 1);
        let w = random(&dev, DType::F32, &[128], 2);
        let e = rms_norm(&x, &w, 1e-6).unwrap_err().to_string();
        assert!(e.contains("tessera-rms-norm"), "{e}");
        let strided = x.t().unwrap();
        let w4 = random(&dev, DType::F32, &[4], 3);
        let e = rms_norm(&strided, &w4, 1e-6).unwrap_err().to_string();
        assert!(e.contains("contiguous"), "{e}");
        let ints = Tensor::zeros((4, 256), DType::U32, &dev).unwrap();
        let e = rms_norm(&ints, &ints, 1e-6).unwrap_err().to_string();
        assert!(e.contains("f32, f16 or bf16"), "{e}");
        let q = random(&dev, DType::F32, &[8, 100], 4);
        let kv = random(&dev, DType::F32, &[2, 16, 100], 5);
        let e = decode_attention(&q, &kv, &kv, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("head_dim") || e.contains("100"), "{e}");
    }
}
