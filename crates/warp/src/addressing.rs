//! Where nodes listen and how big their sample packets are.

use crate::wire::SAMPLE_PACKET_OVERHEAD;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Node n listens on UDP port `NODE_BASE_PORT + n`.
pub const NODE_BASE_PORT: u16 = 9000;
/// Triggers go to this UDP port.
pub const TRIGGER_PORT: u16 = 10000;

/// How node addresses are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addressing {
    /// All nodes on 127.0.0.1, node n on port 9000+n, triggers to 127.0.0.1:10000.
    Loopback,
    /// Real WARPLab layout: node n at 10.0.0.(n+1):9000+n, triggers broadcast to
    /// 10.0.0.255:10000. For use inside a network namespace.
    WarpLab,
}

impl Addressing {
    pub fn node_addr(self, node: u16) -> SocketAddr {
        let ip = match self {
            Addressing::Loopback => Ipv4Addr::LOCALHOST,
            Addressing::WarpLab => Ipv4Addr::new(10, 0, 0, (node + 1).min(254) as u8),
        };
        SocketAddr::new(IpAddr::V4(ip), NODE_BASE_PORT + node)
    }

    pub fn trigger_addr(self) -> SocketAddr {
        let ip = match self {
            Addressing::Loopback => Ipv4Addr::LOCALHOST,
            Addressing::WarpLab => Ipv4Addr::new(10, 0, 0, 255),
        };
        SocketAddr::new(IpAddr::V4(ip), TRIGGER_PORT)
    }

    /// Where the emulator binds its trigger socket.
    pub fn trigger_bind_addr(self) -> SocketAddr {
        match self {
            Addressing::Loopback => self.trigger_addr(),
            Addressing::WarpLab => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), TRIGGER_PORT),
        }
    }
}

/// UDP payload budget per sample packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FramePayload {
    /// 1500-byte MTU: 1472-byte UDP payloads.
    Standard,
    /// Jumbo frames: 8960-byte UDP payloads.
    Jumbo,
}

impl FramePayload {
    pub fn udp_payload(self) -> usize {
        match self {
            FramePayload::Standard => 1472,
            FramePayload::Jumbo => 8960,
        }
    }

    /// Sample words in one full sample packet.
    pub fn samples_per_packet(self) -> usize {
        (self.udp_payload() - SAMPLE_PACKET_OVERHEAD) / 4
    }

    /// IP + UDP + Ethernet bytes on the wire around one UDP payload (for link pacing).
    pub const WIRE_OVERHEAD: usize = 20 + 8 + 14 + 4 + 8 + 12;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_sizes() {
        assert_eq!(FramePayload::Jumbo.samples_per_packet(), 2231);
        assert_eq!(FramePayload::Standard.samples_per_packet(), 359);
        assert_eq!(Addressing::WarpLab.node_addr(3).to_string(), "10.0.0.4:9003");
        assert_eq!(Addressing::Loopback.node_addr(15).port(), 9015);
    }
}
