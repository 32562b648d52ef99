//! `tessera bench --list-shapes`: the registered benchmark shapes (after the filters) with
//! their parameters parsed from the shape string, so that peer scripts time exactly the
//! shapes tessera times.

use serde::Serialize;
use serde_json::{Map, Value};
use tessera_std::BenchCase;

/// One shape, as `--list-shapes --json` writes it.
#[derive(Serialize)]
pub struct Shape {
    pub op: String,
    pub kernel: String,
    pub shape: String,
    pub dtype: String,
    pub bytes: u64,
    pub flops: u64,
    pub quick: bool,
    /// `key=value` pairs of the shape string (numbers where they parse, lists for
    /// `[a, b]`), and bare words as `true`: `{"hq": 32, "causal": true}`.
    pub params: Map<String, Value>,
}

/// Parses `hq=32 hkv=8 n_kv=1024 d=128 causal` or `lens=[4, 9] state=f32`.
pub fn params(shape: &str) -> Map<String, Value> {
    let mut m = Map::new();
    // Join list values that contain spaces (`lens=[4, 9]`) back into one token.
    let mut tokens: Vec<String> = Vec::new();
    for t in shape.split_whitespace() {
        match tokens.last_mut() {
            Some(last) if last.contains('[') && !last.contains(']') => {
                last.push(' ');
                last.push_str(t);
            }
            _ => tokens.push(t.to_string()),
        }
    }
    for t in tokens {
        match t.split_once('=') {
            Some((k, v)) => {
                m.insert(k.to_string(), value(v));
            }
            None => {
                m.insert(t, Value::Bool(true));
            }
        }
    }
    m
}

fn value(v: &str) -> Value {
    if let Ok(i) = v.parse::<i64>() {
        return Value::from(i);
    }
    if let Ok(f) = v.parse::<f64>() {
        return Value::from(f);
    }
    if let Some(inner) = v.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        return Value::Array(
            inner
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(value)
                .collect(),
        );
    }
    Value::String(v.to_string())
}

pub fn shape(c: &BenchCase) -> Shape {
    Shape {
        op: c.op.to_string(),
        kernel: c.kernel.to_string(),
        shape: c.shape.clone(),
        dtype: c.dtype.name().to_string(),
        bytes: c.bytes,
        flops: c.flops,
        quick: c.quick,
        params: params(&c.shape),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_strings_parse_into_params() {
        let p = params("hq=32 hkv=8 n_kv=1024 d=128 causal");
        assert_eq!(p["hq"], Value::from(32));
        assert_eq!(p["causal"], Value::Bool(true));
        let p = params("lens=[4, 9] Hk=16 state=f32");
        assert_eq!(
            p["lens"],
            Value::Array(vec![Value::from(4), Value::from(9)])
        );
        assert_eq!(p["Hk"], Value::from(16));
        assert_eq!(p["state"], Value::from("f32"));
    }
}
