//! Every command fed its edge values (0, negative, huge, wrong unit, missing
//! unit, bad link specs, bad output paths): each must be refused at once with
//! exit code 2 (usage error), a short message naming the problem, and no
//! panic. The cases are refused while parsing or before any work, so the
//! whole table runs in seconds.

use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_radiohost");

/// (command line, text the error must contain).
const CASES: &[(&str, &str)] = &[
    // warp
    ("warp emulate --nodes 0", "1.."),
    ("warp emulate --nodes -1", "-1 is not in 1..=254"),
    ("warp emulate --nodes 100000", "100000"),
    ("warp emulate --link-rate 1GB", "unknown unit"),
    ("warp emulate --link-rate 1000", "missing its unit"),
    ("warp emulate --link-rate -1G", "-1"),
    ("warp read --samples 0", "0"),
    ("warp write --samples 0", "0"),
    ("warp read --timeout 20", "missing its unit"),
    ("warp bench --nodes 0", "1.."),
    ("warp bench --calls 0", "0"),
    ("warp bench --samples -5", "-5 is not in 1..=32768"),
    ("warp trigger --base-port -1", "-1 is not in"),
    // relay
    ("relay run --delta 5", "missing its unit"),
    ("relay run --delta -5us", "-5"),
    ("relay run --bursts -3", "-3 is not in 1..=100000000"),
    ("relay run --target -3", "-3 is not in 0..=100"),
    ("relay run --bursts 0", "1..=100000000"),
    ("relay run --bursts 1e12", "1e12"),
    ("relay run --relays 0", "1..=8"),
    ("relay run --relays 9", "1..=8"),
    ("relay run --period 0s", "zero"),
    ("relay run --rate 2GS/s", "1S/s..=1GS/s"),
    ("relay run --burst-samples 0", "1..=16000"),
    ("relay run --link delay=1", "missing its unit"),
    ("relay run --link 1GB", "unknown unit"),
    ("relay run --target 101", "0..=100"),
    ("relay run --target nan", "0..=100"),
    ("relay run --priority 0", "1..=99"),
    ("relay run --cpu x", "x"),
    ("relay run --delta 10us", "shorter than the burst"),
    (
        "relay run --svg /nonexistent-dir/on_time.svg",
        "does not exist",
    ),
    // testbed
    (
        "testbed relay --listen 127.0.0.1:0 --to 127.0.0.1:9 --link delay=1",
        "missing its unit",
    ),
    (
        "testbed relay --listen 127.0.0.1:0 --to 127.0.0.1:9 --link 1GB",
        "unknown unit",
    ),
    (
        "testbed relay --listen 127.0.0.1:0 --to 127.0.0.1:9 --duration 0s",
        "zero",
    ),
    // rt
    ("rt check --priority 0", "1..=99"),
    ("rt check --priority 100", "1..=99"),
    ("rt probe --interval 0s", "10us..=10s"),
    ("rt probe --interval 1", "missing its unit"),
    ("rt probe --duration 1e30s", "too large"),
    ("rt probe --duration 100h", "unknown unit"),
    ("rt probe --duration 1000000s", "1ms..=24h"),
    ("rt probe --priority 100", "0..=99"),
    ("rt probe --prefault 1GB", "0B..=64MiB"),
    ("rt probe --cpu ''", "empty"),
    ("rt probe --svg /nonexistent-dir/p.svg", "does not exist"),
    ("rt bench --rounds 0", "1..=100"),
    ("rt bench --rounds -2", "-2 is not in 1..=100"),
    ("rt probe --priority -1", "-1 is not in 0..=99"),
    ("rt probe --interval -1ms", "negative"),
    ("rt bench --interval 5", "missing its unit"),
    ("rt load --duration 0s", "1ms..=24h"),
    ("rt echo --max-duration -1s", "range 1ms..=24h"),
    // pmt
    ("pmt compare --runs 0", "1..=10000"),
    ("pmt compare --runs -4", "-4 is not in 1..=10000"),
    ("pmt compare --seed -1", "-1 is not in 0.."),
    ("pmt compare --tcp-runs 1", "5..=1000"),
    ("pmt compare --size 0B", "1B..=1GB"),
    ("pmt compare --size 5", "missing its unit"),
    ("pmt compare --size 1TB", "unknown unit"),
    ("pmt compare --limit-factor 0", "1..=1000"),
    ("pmt compare --window 0", "1..=1024"),
    ("pmt compare --groups 0", "1..=16"),
    ("pmt compare --links delay=1", "missing its unit"),
    (
        "pmt compare --out /nonexistent-dir/rows.json",
        "does not exist",
    ),
    ("pmt send /dev/null --to 127.0.0.1:1 --window 0", "1..=1024"),
    (
        "pmt send /dev/null --to 127.0.0.1:1 --segment 0",
        "1..=9000",
    ),
    (
        "pmt send /dev/null --to 127.0.0.1:1 --segment 65535",
        "1..=9000",
    ),
    (
        "pmt send /dev/null --to 127.0.0.1:1 --fail-timeout 15",
        "missing its unit",
    ),
    (
        "pmt recv --listen 127.0.0.1:0 --out x --buffer 0",
        "1..=65536",
    ),
    (
        "pmt recv --listen 127.0.0.1:0 --out /nonexistent-dir/x",
        "does not exist",
    ),
    // station, chanemu, chdr, phy (ranges owned by their modules)
    ("station simulate --antennas 100000", "1..=1024"),
    ("station simulate --devices 0", "1..=1024"),
    ("station run --config 8x2 --frames 0", "0 is not in"),
    ("station run --config 8x2 --parts 0", "0 is not in 1..=1200"),
    ("station bench --frames 0", "0 is not in"),
    ("station bench --frames -1", "-1 is not in 1..=10000000"),
    ("station run --config 8x2 --max-miss -1%", "negative"),
    ("station run --config 8x2 --max-miss 101%", "0% to 100%"),
    ("station simulate --frames -1", "-1 is not in 1..=10000000"),
    ("station simulate --antennas -4", "-4 is not in 1..=1024"),
    ("station calibrate --frames -1", "-1 is not in"),
    ("chanemu run --doppler 1e12Hz", "out of range"),
    ("chanemu bench --blocks 0", "1..=100000000"),
    ("chanemu bench --taps -1", "-1 is not in 1..=1048576"),
    ("chanemu bench --file-runs 0", "0 is not in 1..=100"),
    ("chanemu bench --gnuradio-samples -1", "-1 is not in 1..="),
    ("chanemu run --sinusoids 0", "0 is not in 1..=4096"),
    ("chanemu run --update-blocks -1", "-1 is not in 1..=1000000"),
    ("chanemu run --decay-db nan", "0..=200"),
    ("chanemu run --length 0", "0 is not in 1..=65536"),
    ("chanemu run --spp -1", "-1 is not in 1..=16000"),
    ("chanemu run --packets 0", "0 is not in 1..=100000000"),
    ("chanemu run --batch 0", "0 is not in 1..=1024"),
    ("chanemu run --doppler -5Hz", "negative"),
    (
        "chanemu file --input a --output b --model-taps 0",
        "0 is not in 1..=65536",
    ),
    (
        "chanemu file --input a --output b --crossfade-blocks -1",
        "-1 is not in 1..=65536",
    ),
    (
        "chdr emulate --host 127.0.0.1:1 --packets -1",
        "-1 is not in 1..=100000000",
    ),
    ("chdr bench --spp 100000", "100000 is not in 1..=16000"),
    ("chdr bench --packets -1", "-1 is not in 1..=100000000"),
    ("chdr emulate --host 127.0.0.1:1 --spp 0", "1..=16000"),
    ("chdr emulate --host 127.0.0.1:1 --ports 17", "1..=16"),
    ("chdr passthrough --rate 0S/s", "zero"),
    (
        "phy ldpc encode --zc 384 --rate 2 --input a --output b",
        "(0, 1]",
    ),
    (
        "phy ldpc encode --zc 384 --rate x --input a --output b",
        "not a fraction",
    ),
    ("warp emulate --base-port 65535 --nodes 2", "65535"),
    ("chanemu run --block 0", "1..=16000"),
    ("chanemu file --input a --output b --block 0", "1..=1048576"),
    ("chdr chanemu --block 0", "1..=16000"),
    ("phy uplink --config c.json --frames 0", "1..=100000"),
    (
        "phy downlink --config c.json --frames -1",
        "-1 is not in 1..=100000",
    ),
    (
        "phy generate --config c.json --out o --frames -1",
        "-1 is not in 1..=1000",
    ),
    ("phy bench --per-kernel -1s", "negative"),
    (
        "phy ldpc decode --zc -2 --input a --output b",
        "-2 is not in 2..=384",
    ),
    ("phy ldpc encode --zc 0 --input a --output b", "2..=384"),
    ("gpu bench --runs 0", "1..=1000000"),
    ("gpu bench --runs -1", "-1 is not in 1..=1000000"),
    (
        "gpu bench --config crates/phy/configs/64x16.json --downlink",
        "cannot be used with",
    ),
    // demo
    ("demo --nodes 0", "1..=64"),
    ("demo --nodes 300", "1..=64"),
    ("demo --nodes -1", "-1 is not in 1..=64"),
    ("demo --snr-db -30", "-20..=100"),
    ("demo --paths-per-node 5", "1..=4"),
    ("demo --users 0", "1..=256"),
    ("demo --users 17", "at most as many users as antennas"),
    ("demo --frames 0", "1..=100000"),
    ("demo --receivers 0", "1..=64"),
    ("demo --snr-db nan", "-20..=100"),
    ("demo --deadline 100", "missing its unit"),
    ("demo --deadline 0s", "1us..=1h"),
    ("demo --max-miss-pct 200", "0..=100"),
    ("demo --workers 0", "1..=256"),
    ("demo --svg /nonexistent-dir/t.svg", "does not exist"),
];

fn run(line: &str) -> (Option<i32>, String) {
    let args = shell_words(line);
    let out = Command::new(BIN)
        .args(&args)
        .env_remove("RUST_BACKTRACE")
        .env("RADIOHOST_LOG", "warn")
        .output()
        .expect("the radiohost binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Splits on spaces; `''` is an empty argument.
fn shell_words(line: &str) -> Vec<String> {
    line.split(' ')
        .map(|w| {
            if w == "''" {
                String::new()
            } else {
                w.to_string()
            }
        })
        .collect()
}

#[test]
fn every_command_refuses_its_edge_values_with_exit_2() {
    let started = Instant::now();
    let mut failures = Vec::new();
    for (line, expect) in CASES {
        let (code, stderr) = run(line);
        let mut problems = Vec::new();
        if code != Some(2) {
            problems.push(format!("exit {code:?}, expected 2"));
        }
        if stderr.contains("panicked") || stderr.contains("RUST_BACKTRACE") {
            problems.push("panicked".to_string());
        }
        if !stderr.contains(expect) {
            problems.push(format!("message lacks {expect:?}"));
        }
        if stderr.len() > 1500 {
            problems.push(format!("message of {} bytes", stderr.len()));
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{line}: {}\n    {}",
                problems.join(", "),
                stderr.trim()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
    // Refused before any work: the table is quick even on a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}: some case did work before refusing",
        started.elapsed()
    );
}

/// A failing command whose stderr is already closed (`2>&1 | head` after head
/// exited) still exits with its error code, not a panic's 101.
#[test]
fn error_with_stderr_closed_keeps_its_exit_code() {
    use std::process::Stdio;
    let mut child = Command::new(BIN)
        .args(["station", "calibrate", "--config", "7x7"])
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the radiohost binary runs");
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "exit {:?}", status.code());
}

#[test]
fn broken_pipe_ends_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    // `rt check` prints a table; close its stdout at once, as `| head -0` would.
    let mut child = Command::new(BIN)
        .args(["rt", "check", "--allow-critical"])
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the radiohost binary runs");
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_ne!(status.code(), Some(101), "panicked: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert!(
        status.code() == Some(141) || status.success(),
        "exit {:?}: {stderr}",
        status.code()
    );
}
