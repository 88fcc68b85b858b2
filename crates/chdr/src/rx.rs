//! The receive side of an emulated streaming radio, as a sans-IO core: it
//! "captures" a deterministic test signal against the sample clock and emits a
//! timestamped data packet once all of its samples exist.

use radiohost_iq::Ci16;

use crate::wire::{data_packet_len, write_data_packet, DataPacketSpec, WireError};

/// Peak amplitude of [`test_signal`]: an eighth of full scale, leaving headroom
/// for channel gains so processed outputs rarely clip.
pub const TEST_SIGNAL_PEAK: i16 = 4096;

/// The sample port `port` captures at `tick`: white, uniformly distributed
/// I and Q from a counter-based hash, so anyone can regenerate the input of any
/// tick to verify an output without storing it.
pub fn test_signal(port: u16, tick: u64) -> Ci16 {
    let mut z = tick
        .wrapping_add((port as u64) << 48)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(0x632b_e59b_d9b4_e019);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let span = 2 * TEST_SIGNAL_PEAK as i32 + 1;
    let re = ((z & 0xffff_ffff) % span as u64) as i32 - TEST_SIGNAL_PEAK as i32;
    let im = ((z >> 32) % span as u64) as i32 - TEST_SIGNAL_PEAK as i32;
    Ci16::new(re as i16, im as i16)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RxConfig {
    /// Port index: selects the test signal.
    pub port: u16,
    /// Destination EPID written into every packet (the host's stream endpoint).
    pub dst_epid: u16,
    pub samples_per_packet: usize,
    /// Tick of the first sample.
    pub start_tick: u64,
    /// Stop after this many packets (the last one carries EOB).
    pub packets: Option<u64>,
}

pub struct RxSource {
    cfg: RxConfig,
    next_ts: u64,
    seq: u16,
    sent: u64,
    samples: Vec<Ci16>,
}

impl RxSource {
    pub fn new(cfg: RxConfig) -> Self {
        RxSource {
            cfg,
            next_ts: cfg.start_tick,
            seq: 0,
            sent: 0,
            samples: vec![Ci16::default(); cfg.samples_per_packet],
        }
    }

    pub fn config(&self) -> RxConfig {
        self.cfg
    }

    /// Bytes of each packet this source emits.
    pub fn packet_len(&self) -> usize {
        data_packet_len(true, 0, self.cfg.samples_per_packet)
    }

    pub fn packets_sent(&self) -> u64 {
        self.sent
    }

    pub fn finished(&self) -> bool {
        self.cfg.packets.is_some_and(|n| self.sent >= n)
    }

    /// The tick at which the next packet is complete (its last sample captured).
    pub fn next_due(&self) -> u64 {
        self.next_ts + self.cfg.samples_per_packet as u64
    }

    /// If the next packet is complete at `now`, encode it into `out` and return
    /// its length and timestamp.
    pub fn poll(&mut self, now: u64, out: &mut [u8]) -> Result<Option<(usize, u64)>, WireError> {
        let port = self.cfg.port;
        self.poll_with(now, out, |ts, samples| {
            for (i, s) in samples.iter_mut().enumerate() {
                *s = test_signal(port, ts + i as u64);
            }
        })
    }

    /// As [`Self::poll`], with the packet's samples from `capture(first tick, samples)`
    /// instead of the test signal (e.g. what an emulated air received).
    pub fn poll_with(
        &mut self,
        now: u64,
        out: &mut [u8],
        capture: impl FnOnce(u64, &mut [Ci16]),
    ) -> Result<Option<(usize, u64)>, WireError> {
        if self.finished() || now < self.next_due() {
            return Ok(None);
        }
        let ts = self.next_ts;
        capture(ts, &mut self.samples);
        let spec = DataPacketSpec {
            seq_num: self.seq,
            dst_epid: self.cfg.dst_epid,
            timestamp: Some(ts),
            eob: self.cfg.packets.is_some_and(|n| self.sent + 1 == n),
            ..Default::default()
        };
        let len = write_data_packet(out, &spec, &[], &self.samples)?;
        self.seq = self.seq.wrapping_add(1);
        self.sent += 1;
        self.next_ts += self.cfg.samples_per_packet as u64;
        Ok(Some((len, ts)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::DataPacket;

    #[test]
    fn emits_contiguous_timestamped_packets_when_due() {
        let mut rx = RxSource::new(RxConfig {
            port: 1,
            dst_epid: 9,
            samples_per_packet: 4,
            start_tick: 100,
            packets: Some(2),
        });
        let mut buf = vec![0u8; rx.packet_len()];
        assert_eq!(
            rx.poll(103, &mut buf).unwrap(),
            None,
            "last sample not captured yet"
        );
        let (n, ts) = rx.poll(104, &mut buf).unwrap().unwrap();
        assert_eq!((n, ts), (rx.packet_len(), 100));
        let p = DataPacket::parse(&buf).unwrap();
        let mut s = [Ci16::default(); 4];
        p.read_samples(&mut s).unwrap();
        assert_eq!(s[3], test_signal(1, 103));
        assert!(!p.header.eob);
        let (_, ts) = rx.poll(1000, &mut buf).unwrap().unwrap();
        assert_eq!(ts, 104);
        assert!(DataPacket::parse(&buf).unwrap().header.eob);
        assert!(rx.finished());
        assert_eq!(rx.poll(2000, &mut buf).unwrap(), None);
    }

    #[test]
    fn test_signal_is_bounded_and_port_dependent() {
        let mut differ = 0;
        for t in 0..10_000 {
            let a = test_signal(0, t);
            assert!(a.re.abs() <= TEST_SIGNAL_PEAK && a.im.abs() <= TEST_SIGNAL_PEAK);
            differ += (a != test_signal(1, t)) as u32;
        }
        assert!(differ > 9_900);
    }
}
