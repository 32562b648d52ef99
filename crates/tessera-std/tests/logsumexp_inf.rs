//! logsumexp of rows holding infinities gives what NumPy, SciPy and PyTorch give: −∞ for an
//! all −∞ row, +∞ for a row holding +∞, the finite entries' value where −∞ entries add
//! nothing, NaN only for a row holding NaN; the other rows are unaffected.

use tessera_runtime::{Context, DType};
use tessera_std::norm::logsumexp;
use tessera_std::testing::{upload, CaseRng};

#[test]
fn infinite_rows_give_the_ieee_limits() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0x15e);
    let n = 300;
    let inf = f64::INFINITY;
    // Row 0 all −∞, row 1 +∞ among finite values, row 2 finite with −∞ holes, row 3 NaN,
    // row 4 all +∞, row 5 finite.
    let mut x: Vec<f64> = (0..6 * n).map(|_| rng.uniform(-5.0, 5.0)).collect();
    x[..n].fill(-inf);
    x[n + 17] = inf;
    for i in (2 * n..3 * n).step_by(3) {
        x[i] = -inf;
    }
    x[3 * n + 250] = f64::NAN;
    x[4 * n..5 * n].fill(inf);
    let lse = |row: &[f64]| {
        let s: f64 = row.iter().filter(|v| v.is_finite()).map(|v| v.exp()).sum();
        s.ln()
    };
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let (xt, stored) = upload(&ctx, dtype, &x, &[6, n]).unwrap();
        let out = ctx.zeros(DType::F32, &[6]).unwrap();
        logsumexp(&ctx, &xt, &out).unwrap();
        let got = out.to_f64_vec().unwrap();
        assert_eq!(got[0], -inf, "{dtype:?}: all −∞ row gives {}", got[0]);
        assert_eq!(got[1], inf, "{dtype:?}: a +∞ entry gives {}", got[1]);
        let want2 = lse(&stored[2 * n..3 * n]);
        assert!(
            (got[2] - want2).abs() < 1e-4,
            "{dtype:?}: −∞ holes give {}, want {want2}",
            got[2]
        );
        assert!(got[3].is_nan(), "{dtype:?}: a NaN entry gives {}", got[3]);
        assert_eq!(got[4], inf, "{dtype:?}: all +∞ row gives {}", got[4]);
        let want5 = lse(&stored[5 * n..]);
        assert!(
            (got[5] - want5).abs() < 1e-4,
            "{dtype:?}: finite row gives {}, want {want5}",
            got[5]
        );
    }
}
