//! [`Block`]: the timestamped multi-port sample block every stage passes.
//!
//! A block holds `ports x len` samples (port-major: port 0's samples, then port
//! 1's, ...), the sample-clock tick of its first sample, the sample rate, and
//! UHD-style burst flags. The sample type is `Cf32` for processing and `Ci16`
//! where wire samples are handled without conversion (the CHDR streamer's packet
//! processors). Ticks are integers on the sample clock; use
//! `radiohost_rt::Time::from_ticks` to turn them into time.

use crate::Cf32;
use bytemuck::Pod;
use sha2::{Digest, Sha256};
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum BlockError {
    #[error("a block needs at least one port")]
    NoPorts,
    #[error("port {port} has {got} samples but port 0 has {expected}; every port of a block must have the same length")]
    RaggedPorts {
        port: usize,
        got: usize,
        expected: usize,
    },
    #[error("sample rate {0} Hz is not a finite number >= 0 (0 = not known)")]
    BadRate(f64),
    #[error("block of {ports} ports x {len} samples is too large to allocate")]
    TooLarge { ports: usize, len: usize },
}

/// Timestamped samples on one or more ports (antennas, channels).
#[derive(Clone, Debug, PartialEq)]
pub struct Block<S = Cf32> {
    ports: usize,
    len: usize,
    data: Vec<S>,
    /// Sample-clock tick of the first sample of every port.
    pub start_tick: u64,
    /// Samples per second per port; 0 where the producer does not know it (a
    /// packet processor inside a streamer sees samples, not the radio's rate).
    pub rate_hz: f64,
    /// First block of a burst (UHD `start_of_burst`).
    pub start_of_burst: bool,
    /// Last block of a burst (UHD `end_of_burst`).
    pub end_of_burst: bool,
}

/// Refuse blocks beyond 2^31 samples in total (16 GiB): a wrong length from a
/// config or a packet must not turn into a huge allocation.
const MAX_SAMPLES: usize = 1 << 31;

fn check_rate(rate_hz: f64) -> Result<(), BlockError> {
    if rate_hz.is_finite() && rate_hz >= 0.0 {
        Ok(())
    } else {
        Err(BlockError::BadRate(rate_hz))
    }
}

impl<S: Pod + Default> Block<S> {
    /// A zeroed block.
    pub fn zeros(
        ports: usize,
        len: usize,
        rate_hz: f64,
        start_tick: u64,
    ) -> Result<Self, BlockError> {
        if ports == 0 {
            return Err(BlockError::NoPorts);
        }
        check_rate(rate_hz)?;
        let total = ports
            .checked_mul(len)
            .filter(|&n| n <= MAX_SAMPLES)
            .ok_or(BlockError::TooLarge { ports, len })?;
        Ok(Block {
            ports,
            len,
            data: vec![S::default(); total],
            start_tick,
            rate_hz,
            start_of_burst: false,
            end_of_burst: false,
        })
    }

    /// A block from one vector per port; all must have the same length.
    pub fn from_ports(
        ports: Vec<Vec<S>>,
        rate_hz: f64,
        start_tick: u64,
    ) -> Result<Self, BlockError> {
        let first = ports.first().ok_or(BlockError::NoPorts)?.len();
        if let Some((port, p)) = ports.iter().enumerate().find(|(_, p)| p.len() != first) {
            return Err(BlockError::RaggedPorts {
                port,
                got: p.len(),
                expected: first,
            });
        }
        let mut block = Self::zeros(ports.len(), first, rate_hz, start_tick)?;
        for (i, p) in ports.iter().enumerate() {
            block.port_mut(i).copy_from_slice(p);
        }
        Ok(block)
    }

    pub fn ports(&self) -> usize {
        self.ports
    }

    /// Samples per port.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tick one past the last sample.
    pub fn end_tick(&self) -> u64 {
        self.start_tick.saturating_add(self.len as u64)
    }

    /// Port `i`'s samples. Panics if `i >= ports()` (a programming error).
    pub fn port(&self, i: usize) -> &[S] {
        &self.data[i * self.len..(i + 1) * self.len]
    }

    pub fn port_mut(&mut self, i: usize) -> &mut [S] {
        &mut self.data[i * self.len..(i + 1) * self.len]
    }

    /// Every port's samples, one slice each.
    pub fn port_slices(&self) -> Vec<&[S]> {
        (0..self.ports).map(|i| self.port(i)).collect()
    }

    /// Every port's samples, mutable.
    pub fn port_slices_mut(&mut self) -> Vec<&mut [S]> {
        if self.len == 0 {
            return (0..self.ports).map(|_| <&mut [S]>::default()).collect();
        }
        self.data.chunks_mut(self.len).collect()
    }

    /// All samples, port-major.
    pub fn as_slice(&self) -> &[S] {
        &self.data
    }

    /// SHA-256 over the block's shape, start tick and samples (their
    /// little-endian bytes): two blocks with equal digests carry the same samples at the
    /// same time. The demo chains stages by these digests.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update((self.ports as u64).to_le_bytes());
        h.update((self.len as u64).to_le_bytes());
        h.update(self.start_tick.to_le_bytes());
        h.update(bytemuck::cast_slice::<S, u8>(&self.data));
        h.finalize().into()
    }
}

/// Lower-case hex of a digest, for reports.
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_independent_and_ordered() {
        let b = Block::<Cf32>::from_ports(
            vec![vec![Cf32::new(1.0, 0.0); 3], vec![Cf32::new(0.0, 2.0); 3]],
            1e6,
            100,
        )
        .unwrap();
        assert_eq!((b.ports(), b.len(), b.end_tick()), (2, 3, 103));
        assert_eq!(b.port(1)[2], Cf32::new(0.0, 2.0));
        assert_eq!(b.port_slices()[0], &[Cf32::new(1.0, 0.0); 3]);
    }

    #[test]
    fn bad_shapes_are_errors_not_panics() {
        assert_eq!(
            Block::<Cf32>::from_ports(vec![], 1.0, 0),
            Err(BlockError::NoPorts)
        );
        assert!(matches!(
            Block::<Cf32>::from_ports(vec![vec![Cf32::default(); 2], vec![]], 1.0, 0),
            Err(BlockError::RaggedPorts { port: 1, .. })
        ));
        assert!(matches!(
            Block::<Cf32>::zeros(1, 4, -1.0, 0),
            Err(BlockError::BadRate(_))
        ));
        assert!(matches!(
            Block::<Cf32>::zeros(1, 4, f64::NAN, 0),
            Err(BlockError::BadRate(_))
        ));
        assert!(matches!(
            Block::<Cf32>::zeros(usize::MAX, 2, 1.0, 0),
            Err(BlockError::TooLarge { .. })
        ));
    }

    #[test]
    fn digest_changes_with_samples_and_time() {
        let a = Block::<Cf32>::zeros(2, 8, 1e6, 0).unwrap();
        let mut b = a.clone();
        assert_eq!(a.digest(), b.digest());
        b.port_mut(1)[7] = Cf32::new(1e-9, 0.0);
        assert_ne!(a.digest(), b.digest());
        let mut c = a.clone();
        c.start_tick = 1;
        assert_ne!(a.digest(), c.digest());
        assert_eq!(hex(&[0xab, 0x01]), "ab01");
    }

    #[test]
    fn empty_blocks_have_empty_ports() {
        let mut b = Block::<crate::Ci16>::zeros(3, 0, 0.0, 5).unwrap();
        assert!(b.is_empty());
        assert_eq!(b.port_slices_mut().len(), 3);
    }
}
