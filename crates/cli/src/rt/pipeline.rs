//! Pipeline mode: one CHDR packet per interval from an emulated radio through
//! the host streamer (pass-through processor) and back to the radio's TX
//! endpoint, all on loopback. Latency = kernel RX timestamp of the packet to
//! the return of the `sendmmsg` carrying its TX packet, as the streamer
//! measures it; the streamer thread runs with the probe's thread setup.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use radiohost_chdr::process::Passthrough;
use radiohost_chdr::radio::{run_radio_on, RadioConfig, RadioSockets};
use radiohost_chdr::streamer::{run_streamer_on, StreamerConfig};
use radiohost_chdr::tx::TxPolicy;
use radiohost_rt::probe::ProbeRun;
use radiohost_rt::{LatencyHistogram, RtThreadBuilder, ThreadConfig};

/// Sample rate of the emulated radio: 1 Msps, so one sample per µs and a
/// packet of `interval_us` samples arrives every interval.
const RATE_SPS: f64 = 1e6;
const HOST_RX_EPID: u16 = 0x0100;
const RADIO_TX_EPID: u16 = 0x0200;
const HOST_TX_EPID: u16 = 0x0300;

/// Streams `duration / interval` packets through the streamer.
pub fn measure(cfg: &ThreadConfig, interval: Duration, duration: Duration) -> Result<ProbeRun> {
    let spp = interval.as_micros() as usize;
    if !(16..=1900).contains(&spp) {
        bail!("pipeline mode needs --interval-us between 16 and 1900 (one CHDR packet of that many samples at 1 Msps)");
    }
    let packets = (duration.as_nanos() / interval.as_nanos()).max(1) as u64;
    // TX timestamp = RX timestamp + 2 ms: ample, so late packets mean a stall.
    let offset_ticks = (0.002 * RATE_SPS) as u64;
    let host = UdpSocket::bind("127.0.0.1:0").context("binding the streamer socket")?;
    let host_addr = host.local_addr()?;
    let radio_cfg = RadioConfig {
        host: host_addr,
        rx_bind: "127.0.0.1:0".parse()?,
        tx_bind: "127.0.0.1:0".parse()?,
        rx_dst_epids: vec![HOST_RX_EPID],
        tx_epids: vec![RADIO_TX_EPID],
        rate_sps: RATE_SPS,
        samples_per_packet: spp,
        packets,
        start_delay: Duration::from_millis(50),
        tx_capacity_pkts: 64,
        policy: TxPolicy::ZeroFill,
        linger: Duration::from_millis(100),
        record: false,
        spin: false,
    };
    let sockets = RadioSockets::bind(&radio_cfg)?;
    let mut scfg = StreamerConfig::new(host_addr, sockets.tx.local_addr()?, spp);
    scfg.rx_epids = vec![HOST_RX_EPID];
    scfg.tx_epids = vec![RADIO_TX_EPID];
    scfg.host_epid = HOST_TX_EPID;
    scfg.tx_offset_ticks = offset_ticks;
    scfg.stop_after_frames = Some(packets);
    scfg.idle_timeout = Duration::from_millis(500);
    // Pinning comes from the probe's ThreadConfig, applied to this thread.
    scfg.cpu = None;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_streamer = stop.clone();
    let streamer = RtThreadBuilder::new("rt-probe-streamer")
        .config(cfg.clone())
        .spawn(move |_| run_streamer_on(host, scfg, Passthrough { ports: 1 }, &stop_streamer))?;
    let report = streamer.report().clone();
    let stop_radio = stop.clone();
    let radio = std::thread::Builder::new()
        .name("rt-probe-radio".into())
        .spawn(move || run_radio_on(sockets, radio_cfg, &stop_radio))?;
    let radio = radio
        .join()
        .map_err(|_| anyhow::anyhow!("emulated radio thread panicked"));
    stop.store(true, Ordering::Relaxed);
    let streamed = streamer
        .join()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .context("host streamer failed")?;
    radio?.context("emulated radio failed")?;
    let mut histogram = LatencyHistogram::new();
    for v in streamed.rx_to_tx_hist.histogram().iter_recorded() {
        histogram.record_n(v.value_iterated_to(), v.count_at_value());
    }
    let missed = packets.saturating_sub(histogram.len());
    Ok(ProbeRun {
        histogram,
        report,
        missed,
    })
}
