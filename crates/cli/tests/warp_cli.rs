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

/// Starts `warp emulate` with `args` and waits until node 0 answers a 1-sample read.
fn emulator(args: &[&str], base_port: &str, trigger_port: &str) -> Killed {
    let emu = Command::new(BIN)
        .args(["warp", "emulate", "--duration", "60s"])
        .args(args)
        .args(["--base-port", base_port, "--trigger-port", trigger_port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start emulator");
    let emu = Killed(emu);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut read = vec!["warp", "read", "--nodes", "0", "--samples", "1"];
    read.extend(args.iter().filter(|a| **a == "--standard"));
    read.extend(["--base-port", base_port, "--trigger-port", trigger_port]);
    while !radiohost(&read).status.success() {
        assert!(Instant::now() < deadline, "the emulator never answered");
        std::thread::sleep(Duration::from_millis(100));
    }
    emu
}

/// Edge values are refused before any work, with the range, exit 2.
#[test]
fn edge_values_are_refused_with_their_range() {
    for (args, needle) in [
        (vec!["warp", "emulate", "--nodes", "0"], "1..=254"),
        (vec!["warp", "emulate", "--nodes", "300"], "1..=254"),
        (
            vec!["warp", "emulate", "--nodes", "2", "--base-port", "65535"],
            "beyond 65535",
        ),
        (
            vec!["warp", "read", "--nodes", "0-1", "--base-port", "65535"],
            "beyond 65535",
        ),
        (vec!["warp", "read", "--samples", "0"], "1..=32768"),
        (vec!["warp", "read", "--samples", "40000"], "1..=32768"),
        (
            vec!["warp", "read", "--start", "32000", "--samples", "1000"],
            "start + samples at most 32768",
        ),
        (vec!["warp", "write", "--samples", "0"], "1..=32768"),
        (vec!["warp", "write", "--samples", "-5"], "'-5'"),
        (vec!["warp", "bench", "--nodes", "0,16"], "1..=254"),
        (vec!["warp", "bench", "--calls", "0"], "--calls"),
    ] {
        let out = radiohost(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("checksums verified"), "{args:?}: {stdout}");
    }
}

/// With nothing listening, a write says that no node answered, where, and for how
/// long it waited; it does not blame checksums.
#[test]
fn a_write_to_no_emulator_says_no_node_answered() {
    let out = radiohost(&[
        "warp",
        "write",
        "--nodes",
        "0",
        "--samples",
        "100",
        "--retries",
        "1",
        "--timeout",
        "5ms",
        "--base-port",
        "24600",
        "--trigger-port",
        "24601",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node 0 (127.0.0.1:24600)")
            && err.contains("no answer from the node")
            && err.contains("timeout")
            && !err.contains("checksum"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("checksums verified"));
}

/// A node that cannot serve a request answers with an error and keeps serving: a
/// raw zero-sample READ_IQ (what `warp read --samples 0` once sent, and what killed
/// the emulator's thread) gets a refusal, and the next read succeeds.
#[test]
fn an_emulated_node_refuses_what_it_cannot_serve_and_stays_up() {
    use radiohost_warp::wire::{self, Message, NodeRefusal, PacketType, ReadIqRequest};
    let _emu = emulator(&["--nodes", "1"], "24700", "24701");
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let header = wire::TransportHeader {
        dest_id: 0,
        src_id: 0xFFFE,
        pkt_type: PacketType::HostToNode,
        seq_num: 7,
        flags: 0,
    };
    let empty = ReadIqRequest {
        buffers: 1,
        start: 0,
        num_samples: 0,
        bytes_per_packet: 8928,
        num_packets: 0,
    };
    let mut buf = [0u8; 64];
    let n = wire::encode_read_request(&mut buf, &header, &empty).unwrap();
    sock.send_to(&buf[..n], "127.0.0.1:24700").unwrap();
    let mut reply = vec![0u8; 9000];
    let (len, _) = sock.recv_from(&mut reply).expect("the node answers");
    assert_eq!(
        wire::decode(&reply[..len]).unwrap().message,
        Message::Refused {
            command: wire::CMD_READ_IQ,
            reason: NodeRefusal::Empty
        }
    );
    let read = ["warp", "read", "--nodes", "0", "--samples", "3000"];
    let ports = ["--base-port", "24700", "--trigger-port", "24701"];
    let out = radiohost(&[&read[..], &ports[..]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A host asking for jumbo packets from standard-frame nodes is refused by the node
/// and says so (non-zero exit), instead of timing out or saving empty recordings.
#[test]
fn a_refused_read_is_reported_not_saved() {
    let _emu = emulator(&["--nodes", "1", "--standard"], "24800", "24801");
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("c");
    let out = radiohost(&[
        "warp",
        "read",
        "--nodes",
        "0",
        "--samples",
        "5000",
        "--base-port",
        "24800",
        "--trigger-port",
        "24801",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node 0 (127.0.0.1:24800) refused READ_IQ")
            && err.contains("larger than the node's frames"),
        "{err}"
    );
    assert!(!out_dir.exists(), "nothing saved for a failed read");
}
