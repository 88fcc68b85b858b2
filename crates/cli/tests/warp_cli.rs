//! The WARP commands as a user runs them: an emulator in its own process, and
//! write / trigger / read from another.

use radiohost_iq::sigmf::{self, Samples};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_radiohost");

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn radiohost(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run radiohost")
}

#[test]
fn emulator_process_serves_write_trigger_read() {
    let ports = ["--base-port", "23000", "--trigger-port", "23900"];
    let emu = Command::new(BIN)
        .args(["warp", "emulate", "--nodes", "3", "--duration", "30"])
        .args(ports)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start emulator");
    let _emu = Killed(emu);

    // The emulator needs a moment to bind; retry the write until it answers.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut args = vec![
        "warp",
        "write",
        "--nodes",
        "0-2",
        "--samples",
        "5000",
        "--retries",
        "1",
    ];
    args.extend(ports);
    loop {
        let out = radiohost(&args);
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "write never succeeded: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut trig = vec!["warp", "trigger"];
    trig.extend(ports);
    assert!(radiohost(&trig).status.success());
    std::thread::sleep(Duration::from_millis(200));

    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let mut read = vec![
        "warp",
        "read",
        "--nodes",
        "0-2",
        "--samples",
        "5000",
        "--out",
        out_dir,
    ];
    read.extend(ports);
    let out = radiohost(&read);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("total") && stdout.contains("3 nodes"),
        "{stdout}"
    );

    for id in 0..3u16 {
        let rec = sigmf::read(&dir.path().join(format!("node{id}_rfA"))).unwrap();
        let Samples::Ci16(got) = rec.samples else {
            panic!("ci16 expected")
        };
        assert_eq!(got.len(), 5000);
        // What was written is the node's Fix_16_15 test tone; what comes back is its
        // Fix_14_13 loopback, i.e. the same samples with the two low bits cleared.
        let nonzero = got.iter().filter(|s| s.re != 0 || s.im != 0).count();
        assert!(nonzero > 4000, "node {id} returned mostly zeros");
        assert!(got.iter().all(|s| s.re & 3 == 0 && s.im & 3 == 0));
    }
}

#[test]
fn a_missing_emulator_gives_an_actionable_error() {
    let out = radiohost(&[
        "warp",
        "read",
        "--nodes",
        "0",
        "--samples",
        "100",
        "--retries",
        "1",
        "--timeout-ms",
        "5",
        "--base-port",
        "23500",
        "--trigger-port",
        "23501",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node 0 (127.0.0.1:23500)") && err.contains("radiohost warp emulate"),
        "{err}"
    );
}

#[test]
fn every_command_has_help() {
    for args in [
        vec!["--help"],
        vec!["demo", "--help"],
        vec!["warp", "--help"],
        vec!["warp", "emulate", "--help"],
        vec!["warp", "bench", "--help"],
        vec!["warp", "read", "--help"],
        vec!["testbed", "relay", "--help"],
    ] {
        let out = radiohost(&args);
        assert!(out.status.success(), "{args:?}");
        assert!(!out.stdout.is_empty());
    }
}

#[test]
fn bad_arguments_are_explained() {
    let out = radiohost(&["warp", "read", "--buffer", "Z"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not one of A, B, C, D"));
    let out = radiohost(&[
        "warp",
        "emulate",
        "--link",
        "1G,wobble=3",
        "--duration",
        "0",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("wobble"));
}
