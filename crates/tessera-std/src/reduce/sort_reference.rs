//! The f64 reference of `sort` and `argsort`, written from the math: a stable sort of each
//! row, NaN above +∞ (last ascending, first descending), −0 equal to +0, equal values in
//! index order either way.

use std::cmp::Ordering;

/// Ascending order with every NaN above every number; −0 and +0 are equal.
fn ascending(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// Each row of `x` (rows of `n`) sorted: (values, indices), each of x's length.
pub fn sort(x: &[f64], n: usize, descending: bool) -> (Vec<f64>, Vec<f64>) {
    let mut values = Vec::with_capacity(x.len());
    let mut indices = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let mut order: Vec<usize> = (0..row.len()).collect();
        // `sort_by` is stable: equal values keep their index order.
        if descending {
            order.sort_by(|&a, &b| ascending(row[b], row[a]));
        } else {
            order.sort_by(|&a, &b| ascending(row[a], row[b]));
        }
        for i in order {
            values.push(row[i]);
            indices.push(i as f64);
        }
    }
    (values, indices)
}
