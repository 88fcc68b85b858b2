//! Ctrl-C on the long commands: each stops within seconds, prints what it
//! measured, says the results are partial and exits 130 (docs/CLI.md), and
//! never panics.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_radiohost");

/// Runs `args`, sends SIGINT after `after`, and returns the output and how
/// long the command took to end after the signal.
fn interrupt(args: &[&str], after: Duration) -> (Output, Duration) {
    let child = Command::new(BIN)
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the radiohost binary runs");
    std::thread::sleep(after);
    let signalled = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success(), "kill -INT failed");
    let out = child.wait_with_output().expect("the command ends");
    (out, signalled.elapsed())
}

fn assert_partial(what: &str, out: &Output, took: Duration, limit: Duration) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert_eq!(out.status.code(), Some(130), "{what}: {stderr}");
    assert!(
        stderr.contains("interrupted:") && stderr.contains("partial"),
        "{what}: {stderr}"
    );
    assert!(took < limit, "{what}: took {took:?} to stop");
}

#[test]
fn long_commands_stop_on_ctrl_c_with_partial_results() {
    let cases: &[(&str, &[&str], u64, u64)] = &[
        (
            "station simulate",
            &["station", "simulate", "--json"],
            1500,
            20,
        ),
        (
            "phy bench",
            &["phy", "bench", "--per-kernel", "300ms", "--json"],
            1500,
            30,
        ),
        (
            "chanemu bench",
            &[
                "chanemu",
                "bench",
                // 10x the default blocks: the run must outlast the signal (it takes
                // 1.5 s with the default on a quiet machine); a step is not cut
                // short, so the SISO row (~5 s) still ends before the limit.
                "--blocks",
                "1000000",
                "--no-gnuradio",
                "--file-samples",
                "0",
                "--json",
            ],
            1500,
            30,
        ),
    ];
    for &(what, args, after_ms, limit_s) in cases {
        let (out, took) = interrupt(args, Duration::from_millis(after_ms));
        assert_partial(what, &out, took, Duration::from_secs(limit_s));
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e})"));
        assert!(!rows.is_null(), "{what}");
    }
}

#[test]
fn rt_bench_keeps_cyclictest_samples_on_ctrl_c() {
    let available = Command::new("cyclictest")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !available {
        eprintln!("SKIPPED: cyclictest is not installed (apt-get install -y rt-tests)");
        return;
    }
    // One 3 s round per tool: the probe, then cyclictest, interrupted halfway
    // through cyclictest's run.
    let args = [
        "rt",
        "bench",
        "--duration",
        "3s",
        "--rounds",
        "1",
        "--idle-only",
        "--policy",
        "other",
        "--json",
    ];
    let (out, took) = interrupt(&args, Duration::from_millis(4500));
    assert_partial("rt bench", &out, took, Duration::from_secs(10));
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("rt bench printed JSON");
    let samples = |tool: &str| {
        report["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["tool"] == tool)
            .map(|r| r["samples"].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    assert!(samples("radiohost") > 1000, "{report}");
    assert!(
        samples("cyclictest") > 100,
        "cyclictest's samples were lost: {report}"
    );
}
