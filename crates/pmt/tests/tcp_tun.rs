//! The kernel TCP baseline harness: two network namespaces per receiver joined by TUN
//! devices with the link model in user space. Needs root; skips (and says why)
//! where namespaces or TUN are not permitted.

use radiohost_pmt::tcp::run_tcp;
use radiohost_pmt::tun::probe;
use radiohost_testbed::link::LinkConfig;

#[test]
fn tcp_reno_through_emulated_links_delivers_and_reports_cwnd() {
    if let Err(e) = probe() {
        eprintln!("SKIPPED tcp_reno_through_emulated_links: {e}");
        return;
    }
    let links = [
        LinkConfig::parse("4Mbit,1%,delay=5ms").unwrap(),
        LinkConfig::parse("2Mbit,5%,delay=10ms").unwrap(),
    ];
    let out = run_tcp(60_000, &links, 1, 40.0, "reno").expect("harness runs");
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
