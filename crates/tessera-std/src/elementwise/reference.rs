//! The f64 references of the elementwise ops, written from the math.

/// `a + b` in f64.
pub fn add(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}
