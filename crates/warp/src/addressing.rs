//! Where nodes listen and how big their sample packets are.

use crate::wire::{MAX_PAYLOAD, PAD_LEN, SAMPLE_PACKET_OVERHEAD};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Node n listens on UDP port `NODE_BASE_PORT + n`.
pub const NODE_BASE_PORT: u16 = 9000;
/// Triggers go to this UDP port.
pub const TRIGGER_PORT: u16 = 10000;

/// Most nodes WARPLab addressing has room for: 10.0.0.1 ..= 10.0.0.254.
pub const MAX_WARPLAB_NODES: u16 = 254;

/// A node the address layout has no address for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressingError {
    #[error("node {node} would listen on port {base_port} + {node}, beyond 65535; lower the base port (--base-port) or the node IDs")]
    Port { node: u16, base_port: u16 },
    #[error("node {node} has no WARPLab address: node n is 10.0.0.(n+1), so node IDs are 0..={}", MAX_WARPLAB_NODES - 1)]
    WarplabAddress { node: u16 },
}

/// How node addresses are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addressing {
    /// Real WARPLab layout: node n at 10.0.0.(n+1), triggers broadcast to
    /// 10.0.0.255 (for use inside a network namespace). Otherwise everything is on
    /// 127.0.0.1.
    pub warplab: bool,
    /// Node n listens on `base_port + n`.
    pub base_port: u16,
    pub trigger_port: u16,
}

impl Addressing {
    pub const LOOPBACK: Self = Self {
        warplab: false,
        base_port: NODE_BASE_PORT,
        trigger_port: TRIGGER_PORT,
    };
    pub const WARPLAB: Self = Self {
        warplab: true,
        base_port: NODE_BASE_PORT,
        trigger_port: TRIGGER_PORT,
    };

    /// The same layout on other ports (several testbeds on one machine).
    pub fn with_ports(self, base_port: u16, trigger_port: u16) -> Self {
        Self {
            base_port,
            trigger_port,
            ..self
        }
    }

    /// Where node `node` listens; an error where the layout has no address for it
    /// (a port past 65535, or a WARPLab address past 10.0.0.254).
    pub fn node_addr(self, node: u16) -> Result<SocketAddr, AddressingError> {
        let ip = if self.warplab {
            let host = u8::try_from(node as u32 + 1)
                .ok()
                .filter(|&h| h <= MAX_WARPLAB_NODES as u8)
                .ok_or(AddressingError::WarplabAddress { node })?;
            Ipv4Addr::new(10, 0, 0, host)
        } else {
            Ipv4Addr::LOCALHOST
        };
        let port = self
            .base_port
            .checked_add(node)
            .ok_or(AddressingError::Port {
                node,
                base_port: self.base_port,
            })?;
        Ok(SocketAddr::new(IpAddr::V4(ip), port))
    }

    pub fn trigger_addr(self) -> SocketAddr {
        let ip = if self.warplab {
            Ipv4Addr::new(10, 0, 0, 255)
        } else {
            Ipv4Addr::LOCALHOST
        };
        SocketAddr::new(IpAddr::V4(ip), self.trigger_port)
    }

    /// Where the emulator binds its trigger socket.
    pub fn trigger_bind_addr(self) -> SocketAddr {
        if self.warplab {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), self.trigger_port)
        } else {
            self.trigger_addr()
        }
    }
}

/// Frame size of the node network, as a WARPLab 7.4 node reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FramePayload {
    /// 1500-byte MTU: 1472-byte UDP datagrams, a 1470-byte payload after the pad,
    /// 359 samples per packet.
    Standard,
    /// Jumbo frames (9000-byte MTU): an 8960-byte payload, 2232 samples per packet
    /// (8928 sample bytes), 8962-byte UDP datagrams with the pad.
    Jumbo,
}

impl FramePayload {
    /// The maximum payload a node reports: the message after the 2-byte pad.
    pub fn max_payload(self) -> usize {
        match self {
            FramePayload::Standard => 1470,
            FramePayload::Jumbo => MAX_PAYLOAD,
        }
    }

    /// Largest UDP datagram (the pad included) nodes and hosts send and accept.
    pub fn udp_payload(self) -> usize {
        self.max_payload() + PAD_LEN
    }

    /// Sample words in one full sample packet (as the reference host computes it
    /// from the node's maximum payload): 359 or 2232.
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
        // WARPLab 7.4 with jumbo frames: 2232 samples, 8928 + 32 = 8960 bytes of
        // message, 8962-byte datagrams with the pad.
        assert_eq!(FramePayload::Jumbo.samples_per_packet(), 2232);
        assert_eq!(FramePayload::Jumbo.max_payload(), 8960);
        assert_eq!(FramePayload::Jumbo.udp_payload(), 8962);
        assert_eq!(
            SAMPLE_PACKET_OVERHEAD + 4 * FramePayload::Jumbo.samples_per_packet(),
            FramePayload::Jumbo.udp_payload()
        );
        assert_eq!(FramePayload::Standard.samples_per_packet(), 359);
        assert!(FramePayload::Standard.udp_payload() <= 1500 - 20 - 8);
        assert_eq!(
            Addressing::WARPLAB.node_addr(3).unwrap().to_string(),
            "10.0.0.4:9003"
        );
        assert_eq!(Addressing::LOOPBACK.node_addr(15).unwrap().port(), 9015);
    }

    #[test]
    fn nodes_without_an_address_are_refused() {
        let top = Addressing::LOOPBACK.with_ports(65535, 10000);
        assert_eq!(top.node_addr(0).unwrap().port(), 65535);
        let err = top.node_addr(1).unwrap_err();
        assert_eq!(
            err,
            AddressingError::Port {
                node: 1,
                base_port: 65535
            }
        );
        assert!(err.to_string().contains("65535"), "{err}");
        assert_eq!(
            Addressing::WARPLAB.node_addr(253).unwrap().ip().to_string(),
            "10.0.0.254"
        );
        assert!(Addressing::WARPLAB.node_addr(254).is_err());
        assert!(Addressing::WARPLAB.node_addr(u16::MAX).is_err());
    }
}
