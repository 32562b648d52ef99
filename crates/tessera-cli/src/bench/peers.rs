//! Peer timings for `tessera bench --compare FILE`: the JSON that bench/peers/ scripts
//! write (schema in docs/bench-json.md), matched to tessera's rows by (op, shape, dtype).

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One peer measurement, as the peer scripts write it.
#[derive(Clone, Debug, Deserialize)]
pub struct PeerRow {
    /// The implementation: `torch_sdpa`, `torch_compile`, `fla_chunk`, `liger`, …
    pub peer: String,
    pub op: String,
    pub shape: String,
    pub dtype: String,
    /// Median µs per call; absent or null where the peer could not run the shape.
    #[serde(default)]
    pub us: Option<f64>,
    /// Why the peer did not run, if it did not.
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct PeerFile {
    #[serde(default)]
    device: String,
    rows: Vec<PeerRow>,
}

/// A peer's time next to one of tessera's rows.
#[derive(Clone, Debug, Serialize)]
pub struct PeerResult {
    pub peer: String,
    pub us: Option<f64>,
    /// Peer µs / tessera µs: above 1 means tessera is faster.
    pub speedup: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Peer rows by (op, shape, dtype).
pub struct Peers {
    pub device: String,
    by_key: HashMap<(String, String, String), Vec<PeerRow>>,
}

impl Peers {
    /// Reads one or more peer files (their rows are merged).
    pub fn load(paths: &[String]) -> Result<Peers, String> {
        let mut by_key: HashMap<_, Vec<PeerRow>> = HashMap::new();
        let mut devices = Vec::new();
        for path in paths {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
            let file: PeerFile = serde_json::from_str(&text)
                .map_err(|e| format!("{path} is not a peer file (docs/bench-json.md): {e}"))?;
            if !file.device.is_empty() && !devices.contains(&file.device) {
                devices.push(file.device);
            }
            for r in file.rows {
                by_key
                    .entry((r.op.clone(), r.shape.clone(), r.dtype.clone()))
                    .or_default()
                    .push(r);
            }
        }
        Ok(Peers {
            device: devices.join(", "),
            by_key,
        })
    }

    /// The peers measured at this row's key, with the speedup against `us`.
    pub fn results(&self, op: &str, shape: &str, dtype: &str, us: f64) -> Vec<PeerResult> {
        let key = (op.to_string(), shape.to_string(), dtype.to_string());
        self.by_key
            .get(&key)
            .map(|rows| {
                rows.iter()
                    .map(|r| PeerResult {
                        peer: r.peer.clone(),
                        us: r.us,
                        speedup: r.us.filter(|_| us > 0.0).map(|p| p / us),
                        error: r.error.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// `torch_sdpa 12.3 µs 1.52×, fla n/a` for the table.
pub fn summary(results: &[PeerResult]) -> String {
    results
        .iter()
        .map(|p| match (p.us, p.speedup) {
            (Some(us), Some(s)) => format!("{} {us:.1} µs {s:.2}×", p.peer),
            _ => format!("{} n/a", p.peer),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_match_by_op_shape_and_dtype() {
        let dir = std::env::temp_dir().join(format!("tessera-peers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.json");
        std::fs::write(
            &path,
            r#"{"device": "gpu", "rows": [
                {"peer": "torch", "op": "rms_norm", "shape": "rows=1 n=4096", "dtype": "bf16", "us": 6.0},
                {"peer": "liger", "op": "rms_norm", "shape": "rows=1 n=4096", "dtype": "bf16", "us": null, "error": "x"}
            ]}"#,
        )
        .unwrap();
        let peers = Peers::load(&[path.to_string_lossy().into_owned()]).unwrap();
        let r = peers.results("rms_norm", "rows=1 n=4096", "bf16", 3.0);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].speedup, Some(2.0));
        assert_eq!(r[1].speedup, None);
        assert!(peers
            .results("rms_norm", "rows=1 n=4096", "f16", 3.0)
            .is_empty());
        assert_eq!(summary(&r), "torch 6.0 µs 2.00×, liger n/a");
        std::fs::remove_dir_all(&dir).ok();
    }
}
