//! The f64 references of the reduce family, written from the math: row sums, means and
//! extremes (NaN anywhere gives NaN), the k largest of a row (NaN above +∞, ties to the
//! lowest index) by a full sort of the row, and running sums.

use std::cmp::Ordering;

/// Each row's sum, mean, max or min (`reduction` one of "sum", "mean", "max", "min").
pub fn row_reduce(x: &[f64], n: usize, reduction: &str) -> Vec<f64> {
    x.chunks(n)
        .map(|row| {
            if row.iter().any(|v| v.is_nan()) {
                return f64::NAN;
            }
            let sum: f64 = row.iter().sum();
            match reduction {
                "mean" => sum / n as f64,
                "max" => row.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                "min" => row.iter().copied().fold(f64::INFINITY, f64::min),
                _ => sum,
            }
        })
        .collect()
}

/// Descending order with NaN above everything, equal values (−0 = +0) by lower index.
fn descending(row: &[f64], a: usize, b: usize) -> Ordering {
    let (x, y) = (row[a], row[b]);
    let by_value = match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => y.partial_cmp(&x).unwrap_or(Ordering::Equal),
    };
    by_value.then(a.cmp(&b))
}

/// Each row's k largest values and their indices: (values, indices), each `[rows, k]`.
pub fn topk(x: &[f64], n: usize, k: usize) -> (Vec<f64>, Vec<f64>) {
    let mut values = Vec::new();
    let mut indices = Vec::new();
    for row in x.chunks(n) {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| descending(row, a, b));
        for &i in &order[..k] {
            values.push(row[i]);
            indices.push(i as f64);
        }
    }
    (values, indices)
}

/// Each row's inclusive prefix sums.
pub fn cumsum(x: &[f64], n: usize) -> Vec<f64> {
    x.chunks(n)
        .flat_map(|row| {
            row.iter().scan(0.0, |acc, &v| {
                *acc += v;
                Some(*acc)
            })
        })
        .collect()
}
