//! Output cut off by its reader (`tessera list | head -1`) ends a command quietly: no
//! panic message, exit status 0, for every subcommand that prints.

#![cfg(unix)]

use std::process::Command;

/// Runs `tessera ARGS` with stdout a pipe whose reader has already exited (the command
/// starts a second after `true` closed the read end, so its first write fails with
/// `EPIPE`); returns its exit status and stderr.
fn into_closed_pipe(args: &[&str]) -> (i32, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"{ sleep 1; "$0" "$@"; echo "status=$?" >&2; } | true"#)
        .arg(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env("TESSERA_BACKEND", "cpu")
        .output()
        .expect("sh runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let status = stderr
        .lines()
        .find_map(|l| l.strip_prefix("status="))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no status line in stderr: {stderr}"));
    (status, stderr)
}

#[test]
fn a_closed_pipe_ends_every_printing_command_quietly() {
    for args in [
        &["list"][..],
        &["check", "--backend", "cpu", "--filter", "add"],
        &["bench", "--list-shapes"],
        &["run", "--list"],
    ] {
        let (status, stderr) = into_closed_pipe(args);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "tessera {args:?} into a closed pipe: {stderr}"
        );
        assert_eq!(status, 0, "tessera {args:?}: {stderr}");
    }
}
