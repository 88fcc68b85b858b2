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
        .args(["warp", "emulate", "--nodes", "3", "--duration", "30s"])
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
        "--timeout",
        "5ms",
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
        "1s",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("wobble"));
}

/// Says why a test cannot run here and returns, or fails it when
/// `RADIOHOST_REQUIRE_PRIVILEGED=1` (root CI), so it cannot pass without running.
fn skip(why: &str) {
    if std::env::var_os("RADIOHOST_REQUIRE_PRIVILEGED").is_some_and(|v| v == "1") {
        panic!("RADIOHOST_REQUIRE_PRIVILEGED=1 but {why}");
    }
    eprintln!("SKIPPED: {why}");
}

/// Real WARPLab addressing (10.0.0.n+1, broadcast triggers) inside a network
/// namespace. Skips, saying why, where namespaces cannot be created.
#[test]
fn warplab_addressing_works_inside_a_namespace() {
    let ns = format!("rh-warp-test-{}", std::process::id());
    let ip = |args: &[&str]| Command::new("ip").args(args).output();
    match ip(&["netns", "add", &ns]) {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return skip(&format!(
                "cannot create a network namespace: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ))
        }
        Err(e) => return skip(&format!("`ip` (iproute2) is not available: {e}")),
    }
    struct Ns(String);
    impl Drop for Ns {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
        }
    }
    let _cleanup = Ns(ns.clone());
    assert!(ip(&["-n", &ns, "link", "set", "lo", "up"])
        .unwrap()
        .status
        .success());
    for host in ["1", "2", "100"] {
        let addr = format!("10.0.0.{host}/24");
        assert!(ip(&["-n", &ns, "addr", "add", &addr, "dev", "lo"])
            .unwrap()
            .status
            .success());
    }
    let in_ns = |args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &ns, BIN])
            .args(args)
            .output()
            .expect("run in namespace")
    };
    let emu = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns,
            BIN,
            "warp",
            "emulate",
            "--nodes",
            "2",
            "--warplab-addressing",
            "--duration",
            "30s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start emulator in namespace");
    let _emu = Killed(emu);
    let common = [
        "--nodes",
        "0-1",
        "--warplab-addressing",
        "--interface",
        "10.0.0.100:0",
    ];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut args = vec!["warp", "write", "--samples", "3000", "--retries", "1"];
        args.extend(common);
        let out = in_ns(&args);
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The broadcast trigger reaches both nodes (they listen on 0.0.0.0:10000).
    assert!(in_ns(&["warp", "trigger", "--warplab-addressing"])
        .status
        .success());
    std::thread::sleep(Duration::from_millis(200));
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "warp",
        "read",
        "--samples",
        "3000",
        "--out",
        dir.path().to_str().unwrap(),
    ];
    args.extend(common);
    let out = in_ns(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for id in 0..2 {
        let rec = sigmf::read(&dir.path().join(format!("node{id}_rfA"))).unwrap();
        let nonzero = rec
            .samples
            .to_cf32()
            .iter()
            .filter(|s| s.norm() > 0.1)
            .count();
        assert!(
            nonzero > 2500,
            "node {id}: the trigger did not copy TX to RX"
        );
    }
}
