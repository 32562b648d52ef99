//! `tessera bench` through a pipe: the header and each row printed once, as measured, in
//! aligned columns, with a non-zero TFLOP/s for a GEMM; the JSON holds every row printed,
//! so a run stopped after its first row keeps that row.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn json_path(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-bench-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d.join("bench.json")
}

fn bench(json: &PathBuf, filters: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    c.args(["bench", "--backend", "cpu", "--quick", "--json"])
        .arg(json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for f in filters {
        c.args(["--filter", f]);
    }
    c
}

fn rows(json: &PathBuf) -> Vec<Value> {
    let text = std::fs::read_to_string(json).expect("json written");
    let v: Value = serde_json::from_str(&text).expect("one whole JSON report");
    v["rows"].as_array().expect("rows").clone()
}

#[test]
fn rows_print_once_in_aligned_columns_and_reach_the_json() {
    let json = json_path("once");
    let out = bench(&json, &["add", "matmul_bt"])
        .args(["--dtype", "f16"])
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let headers: Vec<&&str> = lines.iter().filter(|l| l.starts_with("op ")).collect();
    assert_eq!(headers.len(), 1, "one header:\n{stdout}");
    let table: Vec<&&str> = lines
        .iter()
        .filter(|l| l.starts_with("add ") || l.starts_with("matmul_bt "))
        .collect();
    assert_eq!(table.len(), 2, "each row once:\n{stdout}");
    assert!(lines
        .last()
        .is_some_and(|l| l.starts_with("2 passed, 0 failed")));

    // Every row's dtype, µs and TFLOP/s cells sit under their headers.
    let col = |line: &str, field: &str| {
        line.find(field)
            .map(|b| line[..b].chars().count())
            .unwrap_or_else(|| panic!("`{field}` not in `{line}`"))
    };
    let dtype_at = col(headers[0], "dtype");
    for row in &table {
        assert_eq!(col(row, " f16 ") + 1, dtype_at, "dtype column:\n{stdout}");
    }
    let cells =
        |line: &str| -> Vec<String> { line.split_whitespace().map(str::to_string).collect() };
    let matmul = cells(
        table
            .iter()
            .find(|l| l.starts_with("matmul_bt"))
            .expect("row"),
    );
    // op kernel M= N= K= dtype µs GB/s TFLOP/s
    let tflops: f64 = matmul[8].parse().expect("a number");
    assert!(tflops > 0.0, "TFLOP/s of a GEMM: {:?}", matmul);

    let rows = rows(&json);
    assert_eq!(rows.len(), 2);
    let gemm = rows
        .iter()
        .find(|r| r["op"] == "matmul_bt")
        .expect("gemm row");
    assert!(gemm["tflops"].as_f64().is_some_and(|t| t > 0.0), "{gemm}");
    assert!(rows.iter().all(|r| r["ok"] == true));
    std::fs::remove_dir_all(json.parent().expect("dir")).ok();
}

#[test]
fn a_run_stopped_after_its_first_row_keeps_it() {
    let json = json_path("cut");
    let mut child = bench(&json, &["add", "rms_norm"]).spawn().expect("runs");
    let stdout = child.stdout.take().expect("stdout");
    let mut first_row = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("utf-8");
        if line.starts_with("add ") {
            first_row = Some(line);
            break;
        }
    }
    // Stopped while later rows are still being measured.
    child.kill().expect("kill");
    child.wait().expect("reaped");
    let first_row = first_row.expect("a row printed before the run ended");
    let rows = rows(&json);
    assert!(!rows.is_empty(), "the printed row is in the JSON");
    assert_eq!(rows[0]["op"], "add");
    assert!(first_row.contains(rows[0]["dtype"].as_str().expect("dtype")));
    std::fs::remove_dir_all(json.parent().expect("dir")).ok();
}
