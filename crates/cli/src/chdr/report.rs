//! Printing and plotting a streaming run (radiohost_chdr's reports).

use std::path::Path;

use anyhow::Result;
use radiohost_chdr::live::RunReport;
use radiohost_chdr::radio::RadioReport;
use radiohost_chdr::streamer::StreamerReport;
use radiohost_chdr::totals::EventCounts;
use radiohost_chdr::verify::Verification;
use radiohost_rt::stats::{LatencyHistogram, Summary as LatencySummary};

use crate::plot::{latency_histograms, write_panels};

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e3)
}

fn row(name: &str, s: &LatencySummary) -> String {
    format!(
        "  {name:<34} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        s.samples,
        us(s.min_ns),
        us(s.median_ns),
        us(s.p90_ns),
        us(s.p99_ns),
        us(s.p999_ns),
        us(s.max_ns)
    )
}

pub fn print_latency(streamer: &StreamerReport, radio: Option<&RadioReport>) {
    println!(
        "  {:<34} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "latency (us)", "packets", "min", "median", "p90", "p99", "p99.9", "max"
    );
    println!(
        "{}",
        row("RX->TX (kernel RX stamp -> sent)", &streamer.rx_to_tx)
    );
    println!(
        "{}",
        row("RX->TX (recv return -> sent)", &streamer.user_rx_to_tx)
    );
    if let Some(r) = radio {
        println!("{}", row("end-to-end (RX timestamp -> TX)", &r.end_to_end));
        println!(
            "  (end-to-end includes one packet duration, {} us, spent capturing the samples)",
            us(r.packet_duration_ns)
        );
    }
}

pub fn print_counts(s: &StreamerReport, radio: Option<&RadioReport>) {
    let c = &s.counters;
    println!(
        "  streamer: {} frames, {} RX datagrams, {} TX packets, {} fan-out copies",
        c.frames, c.rx_datagrams, c.tx_packets, c.fanout_packets
    );
    let t = s.totals();
    println!(
        "  RX sequence: {} gaps (zero-filled {}), {} reordered, {} stale; \
         flow control: {} stalls; drops: {} host queue, {} send, {} unknown stream, {} malformed",
        t.gaps,
        c.zero_filled_packets,
        t.reordered,
        t.stale,
        t.stalls,
        c.host_queue_drops,
        c.send_drops,
        c.unknown_stream,
        c.malformed
    );
    if let Some(p) = &s.pin_error {
        println!("  note: {p}");
    }
    if let Some(r) = radio {
        let t = r.tx_totals();
        println!(
            "  radio: {} RX packets; TX played {} samples + {} zero-fill; events {}",
            r.rx_packets,
            t.samples_played,
            t.zeros_played,
            EventCounts(&t)
        );
    }
}

/// A run as tables: what ran, latency, counters, the output check.
pub fn print_run(r: &RunReport) {
    let s = &r.config.session;
    println!(
        "{}: {}; {}x{} ports, {} packets of {} samples at {:.3} MSa/s, {:?}, TX offset {:?}, {:.2} s",
        r.what,
        r.channel,
        s.inputs,
        s.outputs,
        s.packets,
        s.samples_per_packet,
        s.rate_sps / 1e6,
        s.poll,
        s.offset,
        r.wall_s
    );
    if let Some((bind, radio_tx)) = r.config.external {
        println!("  external radio: streamer on {bind}, radio TX at {radio_tx}");
    }
    print_latency(&r.streamer, r.radio.as_ref());
    print_counts(&r.streamer, r.radio.as_ref());
    if let Some(k) = &r.keep_up {
        match &k.reason {
            None => println!(
                "  kept up: every TX packet reached the radio in time (processing {:.0}% of a core, worst end-to-end {:.2} ms of the {:.2} ms offset)",
                k.processing_load * 100.0,
                k.worst_end_to_end_us / 1e3,
                k.offset_us / 1e3
            ),
            Some(why) => println!("  DID NOT KEEP UP: {why}"),
        }
    }
    if let Some(c) = &r.check {
        println!("  check: {c}");
    }
    if let Some(v) = &r.verification {
        print_verification(v);
    }
}

/// The emulated radio's own report (`chdr emulate`).
pub fn print_radio(r: &RadioReport) {
    println!("  RX packets sent: {}", r.rx_packets);
    for (p, t) in r.tx.iter().enumerate() {
        println!(
            "  TX{p}: {} packets, {} samples played, {} zero-filled; {}",
            t.packets,
            t.samples_played,
            t.zeros_played,
            EventCounts(t)
        );
    }
    let letters: String = r.event_letters.chars().take(200).collect();
    println!(
        "  events: {}",
        if letters.is_empty() { "none" } else { &letters }
    );
    let e = &r.end_to_end;
    println!(
        "  end-to-end (RX timestamp -> TX arrival): median {} us, p99.9 {} us, max {} us over {} packets",
        us(e.median_ns),
        us(e.p999_ns),
        us(e.max_ns),
        e.samples
    );
}

pub fn print_verification(v: &Verification) {
    if v.passed() {
        println!(
            "  verified: {} output samples equal the expected output (max error {} LSB), none lost or duplicated",
            v.checked, v.max_error_lsb
        );
    } else {
        println!(
            "  VERIFICATION FAILED: {} of {} checked samples differ ({} were zero-filled), length/continuity ok: {}, first: {:?}",
            v.mismatches, v.checked, v.zero_filled, v.length_ok, v.first_mismatch
        );
    }
}

/// Two panels: the per-packet RX->TX delay histogram and the end-to-end one.
pub fn plot(
    path: &Path,
    title: &str,
    rx_to_tx: &LatencyHistogram,
    e2e: Option<&LatencyHistogram>,
) -> Result<()> {
    let mut panels = vec![latency_histograms(
        "per-packet RX->TX processing delay (kernel RX timestamp -> TX sent)",
        &[("packets".to_string(), rx_to_tx)],
    )];
    if let Some(h) = e2e {
        panels.push(latency_histograms(
            "end-to-end latency (RX timestamp -> TX arrival at the radio)",
            &[("packets".to_string(), h)],
        ));
    }
    write_panels(path, (900, 640), Some(title), &panels)
}
