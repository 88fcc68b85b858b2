//! PMT: reliable point-to-multipoint transport.
//!
//! One sender delivers one object to many receivers over unequal, lossy links.
//! Receivers are split by smoothed round-trip time into groups ([`groups`]); each
//! group is served one window of segments per group period (fast group every T, slow
//! group every T_max), so every receiver is served at its own pace by a single
//! protocol instance. Losses cause retransmission, never a rate cut: the rate follows
//! the RTT.
//!
//! * [`wire`]: typed packet formats (DATA, META, ACK) with a version byte, CRC32C per
//!   packet and optional HMAC-SHA256 per packet.
//! * [`groups`]: greedy T selection, its brute-force check and the K-group split.
//! * [`rtt`]: the RTT estimator.
//! * [`sender`] / [`receiver`]: the sans-IO protocol cores.
//! * [`multicast`]: the slowest-receiver multicast baseline (NORM-like NACK repair).
//! * [`sim`]: runs PMT and the baseline over `testbed::simnet` in virtual time.
//! * [`udp`]: the UDP driver (one unicast flow per receiver).
//! * [`tun`] / [`tcp`]: the kernel TCP Reno baseline through the same link model
//!   (network namespaces joined by TUN devices).

pub mod app;
pub mod groups;
pub mod multicast;
pub mod receiver;
pub mod rtt;
pub mod sender;
pub mod sim;
pub mod tcp;
pub mod tun;
pub mod udp;
pub mod wire;

pub use receiver::{Receiver, ReceiverConfig, ReceiverEvent, ReceiverStats};
pub use sender::{Sender, SenderConfig, SenderEvent, SenderStats};
