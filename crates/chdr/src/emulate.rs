//! `radiohost chdr emulate`: one emulated streaming radio on its own, serving a host
//! streamer elsewhere, its endpoints numbered as in a [`crate::session`].

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::radio::{run_radio, RadioConfig, RadioReport};
use crate::session::{write_tx_recordings, SessionError, HOST_RX_EPID, RADIO_TX_EPID};
use crate::tx::TxPolicy;

impl RadioConfig {
    /// A radio with `ports` RX and TX ports sending RX packets to `host`: RX port `p`
    /// to EPID `HOST_RX_EPID + p`, TX port `p` at `RADIO_TX_EPID + p`. The rest is
    /// `radiohost chdr emulate`'s defaults: TX on 127.0.0.1:49200, RX from any port,
    /// 10000 packets per port, 1024 packets of TX buffer, zero-fill, 500 ms before
    /// the first sample and after the last, sleeping between packets, no recording.
    pub fn with_ports(host: SocketAddr, ports: usize, rate_sps: f64, spp: usize) -> Self {
        Self {
            host,
            rx_bind: SocketAddr::from(([0, 0, 0, 0], 0)),
            tx_bind: SocketAddr::from(([127, 0, 0, 1], 49200)),
            rx_dst_epids: (0..ports as u16).map(|p| HOST_RX_EPID + p).collect(),
            tx_epids: (0..ports as u16).map(|p| RADIO_TX_EPID + p).collect(),
            rate_sps,
            samples_per_packet: spp,
            packets: 10_000,
            start_delay: Duration::from_millis(500),
            tx_capacity_pkts: 1024,
            policy: TxPolicy::ZeroFill,
            linger: Duration::from_millis(500),
            record: false,
            spin: false,
        }
    }
}

/// One line: ports, rate, packet size, where RX goes and TX listens, the first TX EPID.
impl fmt::Display for RadioConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ports, {:.3} MSa/s, {} samples/packet, RX -> {}, TX on {} (EPIDs 0x{:04x}+)",
            self.tx_epids.len(),
            self.rate_sps / 1e6,
            self.samples_per_packet,
            self.host,
            self.tx_bind,
            self.tx_epids.first().copied().unwrap_or(RADIO_TX_EPID)
        )
    }
}

/// Run the radio until its RX packets are sent and the TX linger is over (or `stop`
/// is set); with `output`, write what each TX port played as SigMF `<output>-txN`.
pub fn emulate(
    mut cfg: RadioConfig,
    output: Option<&Path>,
    stop: &AtomicBool,
) -> Result<RadioReport, SessionError> {
    cfg.record |= output.is_some();
    let rate = cfg.rate_sps;
    let report = run_radio(cfg, stop)?;
    if let Some(out) = output {
        write_tx_recordings(&report, out, rate)?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_get_session_epids_and_describe_themselves() {
        let c = RadioConfig::with_ports("127.0.0.1:5000".parse().unwrap(), 2, 10e6, 512);
        assert_eq!(c.rx_dst_epids, vec![HOST_RX_EPID, HOST_RX_EPID + 1]);
        assert_eq!(c.tx_epids, vec![RADIO_TX_EPID, RADIO_TX_EPID + 1]);
        let line = c.to_string();
        assert!(line.starts_with("2 ports, 10.000 MSa/s, 512 samples/packet"));
        assert!(line.ends_with("(EPIDs 0x0200+)"), "{line}");
    }
}
