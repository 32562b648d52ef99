//! The bench table as text: columns sized to the selected shapes before the first row is
//! timed (so rows printed one at a time line up), and numbers at a precision that shows
//! the CPU's small rates as well as a GPU's.

use super::{peers, Row};
use tessera_std::BenchCase;

/// Widths of the text columns, from the header and every selected shape.
pub struct Columns {
    op: usize,
    kernel: usize,
    shape: usize,
}

impl Columns {
    pub fn fit(cases: &[BenchCase]) -> Columns {
        let widest = |title: &str, f: &dyn Fn(&BenchCase) -> usize| {
            cases.iter().map(f).fold(title.chars().count(), usize::max)
        };
        Columns {
            op: widest("op", &|c| c.op.chars().count()),
            kernel: widest("kernel", &|c| c.kernel.chars().count()),
            shape: widest("shape", &|c| c.shape.chars().count()),
        }
    }

    pub fn header(&self) -> String {
        format!(
            "{:<ow$} {:<kw$} {:<sw$} {:<5} {:>9} {:>8} {:>8} {:>6} {:>8}  ok  peers",
            "op",
            "kernel",
            "shape",
            "dtype",
            "µs",
            "GB/s",
            "TFLOP/s",
            "%peak",
            "max err",
            ow = self.op,
            kw = self.kernel,
            sw = self.shape,
        )
    }

    pub fn line(&self, r: &Row) -> String {
        let err = r
            .max_err
            .map(|e| format!("{e:.1e}"))
            .unwrap_or_else(|| "-".into());
        let tflops = if r.tflops > 0.0 {
            significant(r.tflops)
        } else {
            "-".into()
        };
        let mut s = format!(
            "{:<ow$} {:<kw$} {:<sw$} {:<5} {:>9.2} {:>8} {:>8} {:>5.1}% {:>8}  {}{}  {}",
            r.op,
            r.kernel,
            r.shape,
            r.dtype,
            r.us,
            significant(r.gbps),
            tflops,
            r.pct_of_peak,
            err,
            if r.ok { "✓" } else { "✗" },
            if r.l2_resident { "ᴸ²" } else { "  " },
            peers::summary(&r.peers),
            ow = self.op,
            kw = self.kernel,
            sw = self.shape,
        );
        let s_end = s.trim_end().len();
        s.truncate(s_end);
        if let Some(e) = &r.error {
            s.push_str(&format!("\n    ✗ {e}"));
        }
        s
    }
}

/// Three significant digits (`1234`, `12.3`, `0.0123`, `1.23e-5`), so that a rate far
/// below one does not print as zero.
pub fn significant(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    if x.abs() < 1e-3 {
        return format!("{x:.2e}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

#[cfg(test)]
mod tests {
    use super::significant;

    #[test]
    fn small_rates_keep_three_digits() {
        assert_eq!(significant(1234.4), "1234");
        assert_eq!(significant(12.345), "12.3");
        assert_eq!(significant(0.5), "0.500");
        assert_eq!(significant(0.001_234), "0.00123");
        assert_eq!(significant(0.000_123_4), "1.23e-4");
        assert_eq!(significant(0.0), "0");
    }
}
