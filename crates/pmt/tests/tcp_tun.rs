//! The kernel TCP baseline harness: two network namespaces per receiver joined by TUN
//! devices with the link model in user space. Needs root: where namespaces or TUN are
//! refused each test prints `SKIPPED: <why>` and returns, unless
//! `RADIOHOST_REQUIRE_PRIVILEGED=1` is set (as CI, which runs as root, does): then a
//! refusal fails the test, so the harness cannot pass without having run.

use radiohost_pmt::app::{compare, parse_links, Clock, CompareConfig, CompareStep, MIN_TCP_RUNS};
use radiohost_pmt::tcp::run_tcp;
use radiohost_pmt::tun::probe;
use radiohost_testbed::link::LinkConfig;

/// True when namespaces and TUN work here; otherwise says why (or fails, see above).
fn privileged(test: &str) -> bool {
    match probe() {
        Ok(()) => true,
        Err(e) if std::env::var_os("RADIOHOST_REQUIRE_PRIVILEGED").is_some_and(|v| v == "1") => {
            panic!("{test}: RADIOHOST_REQUIRE_PRIVILEGED=1 but {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: {test}: {e}");
            false
        }
    }
}

#[test]
fn tcp_reno_through_emulated_links_delivers_and_reports_cwnd() {
    if !privileged("tcp_reno_through_emulated_links_delivers_and_reports_cwnd") {
        return;
    }
    let links = [
        LinkConfig::parse("4Mbit,1%,delay=5ms").unwrap(),
        LinkConfig::parse("2Mbit,5%,delay=10ms").unwrap(),
    ];
    let go = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let out = run_tcp(60_000, &links, 1, 40.0, "reno", &go).expect("harness runs");
    for (i, r) in out.receivers.iter().enumerate() {
        assert!(r.intact, "receiver {i}: {r:?}");
        let secs = r.seconds.expect("finished");
        // Physically impossible to beat the floor through the emulated link.
        assert!(
            secs >= r.floor_seconds * 0.9,
            "receiver {i} beat its link: {secs} s"
        );
        assert!(
            !out.cwnd[i].is_empty(),
            "no TCP_INFO samples for receiver {i}"
        );
        assert!(out.cwnd[i].iter().all(|&(_, c)| c >= 1));
    }
}

/// `pmt compare` with the TCP baseline: at least five real-time TCP runs, every row
/// labelled with its clock, a median and a min-max spread per receiver, and PMT's
/// ratio to TCP flagged as mixing virtual and real time.
#[test]
fn compare_runs_tcp_five_times_and_labels_real_time() {
    if !privileged("compare_runs_tcp_five_times_and_labels_real_time") {
        return;
    }
    let c = CompareConfig {
        size: 20_000,
        tcp_size: 20_000,
        links: parse_links("8Mbit,1%;4Mbit,2%", None).unwrap(),
        runs: 1,
        tcp_runs: MIN_TCP_RUNS,
        seed: 5,
        tcp: true,
        limit_factor: 200.0,
        window: 8,
        groups: 2,
    };
    let mut started = Vec::new();
    let go = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let r = compare(&c, &go, |s| {
        if let CompareStep::TcpStarting { run, .. } = s {
            started.push(run)
        }
    })
    .expect("comparison runs");
    assert!(!r.interrupted);
    assert_eq!(r.tcp_error, None);
    assert_eq!(started, (0..MIN_TCP_RUNS).collect::<Vec<_>>());
    let tcp: Vec<_> = r.rows.iter().filter(|x| x.protocol == "tcp-reno").collect();
    assert_eq!(tcp.len() as u64, MIN_TCP_RUNS * 2);
    assert!(tcp.iter().all(|x| x.clock == Clock::Real && x.intact));
    assert!(r
        .rows
        .iter()
        .filter(|x| x.protocol != "tcp-reno")
        .all(|x| x.clock == Clock::Virtual));
    for s in r.summary.iter().filter(|s| s.protocol == "tcp-reno") {
        assert_eq!(s.runs as u64, MIN_TCP_RUNS);
        assert!(s.min_s <= s.median_s && s.median_s <= s.max_s, "{s:?}");
        assert!(s.max_s.is_finite(), "{s:?}");
    }
    let mixed: Vec<_> = r
        .ratios
        .iter()
        .filter(|x| x.baseline == "tcp-reno")
        .collect();
    assert_eq!(mixed.len(), 2);
    assert!(mixed.iter().all(|x| x.mixed_clocks && x.median_ratio > 0.0));
}
