//! Conformance with the WARPLab 7.4 reference host.
//!
//! The client below builds and parses every byte by hand, the way the reference MEX
//! transport (`wl_mex_udp_transport.c`, Mango Communications, read from its public
//! source) does, without using this crate's codec:
//!
//! - every datagram starts with a 2-byte alignment pad, then the transport header
//!   `dest_id, src_id, reserved, pkt_type, length, seq_num, flags` where `length`
//!   counts the bytes after the 14-byte header (so it excludes the pad);
//! - the node's maximum payload excludes the pad: 8960 bytes with jumbo frames, so
//!   `max_samples = (8960 - 12 - 8 - 12) / 4 = 2232`, and a full write packet is an
//!   8962-byte datagram;
//! - command header `command, length (bytes after it), num_args (1 for samples)`;
//! - sample header `buffer_id, flags, reserved, start, num_samples`; the first write
//!   packet carries the checksum-reset flag (0x01 in WARPLab 7.4's transport);
//! - only the last write packet asks for a reply (ROBUST flag 0x0001); the node answers
//!   with its Fletcher-32 checksum (sums mod 65535) over each packet's
//!   `start & 0xFFFF` and its last sample's `I ^ Q`, which the client computes too;
//! - sequence numbers increase by one per packet;
//! - a READ_IQ asks for `[buffer, start, count, bytes_per_packet, packets]`, and the
//!   client checks the replies with the reference's sample tracker (sum of counts and
//!   sum of start indexes);
//! - the trigger is a type-0 packet to the broadcast ID carrying a trigger bitmask.
//!
//! The cycle: write 32768 samples to RFA of 16 emulated nodes in 2232-sample
//! packets, trigger, read RFA back, and check every sample came back within half a
//! Fix_14_13 LSB of what was written.

use radiohost_warp::emulator::{Emulator, EmulatorConfig};
use radiohost_warp::{Addressing, FramePayload};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

const PAD: usize = 2;
const TRANSPORT_NO_PAD: usize = 12;
const COMMAND_HDR: usize = 8;
const SAMPLE_HDR: usize = 12;
/// What a WARPLab 7.4 node with jumbo frames reports as its maximum payload.
const NODE_MAX_PAYLOAD: usize = 8960;
const MAX_SAMPLES: usize = (NODE_MAX_PAYLOAD - TRANSPORT_NO_PAD - COMMAND_HDR - SAMPLE_HDR) / 4;

const PKT_TRIGGER: u8 = 0;
const PKT_HOST_TO_NODE: u8 = 1;
const PKT_NODE_TO_HOST: u8 = 2;
const FLAG_ROBUST: u16 = 0x0001;
const SAMPLE_CHKSUM_RESET: u8 = 0x01;
const CMD_WRITE_IQ: u32 = 0x3000_0007;
const CMD_READ_IQ: u32 = 0x3000_0008;
const BUFFER_RFA: u16 = 0x0001;
const BROADCAST: u16 = 0xFFFF;
const HOST_ID: u16 = 0xFFFE;

const NODES: u16 = 16;
const SAMPLES: usize = 32768;

/// The reference host's Fletcher-32 write checksum.
#[derive(Default)]
struct Fletcher {
    sum1: u32,
    sum2: u32,
}

impl Fletcher {
    fn update(&mut self, data: u16, reset: bool) -> u32 {
        if reset {
            *self = Self::default();
        }
        self.sum1 = (self.sum1 + data as u32) % 0xFFFF;
        self.sum2 = (self.sum2 + self.sum1) % 0xFFFF;
        (self.sum2 << 16) + self.sum1
    }
}

fn put16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_be_bytes());
}

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_be_bytes());
}

fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Pad and transport header; `payload_np` is everything after the transport header.
fn transport(b: &mut Vec<u8>, dest: u16, pkt_type: u8, payload_np: usize, seq: u16, flags: u16) {
    put16(b, 0); // alignment pad
    put16(b, dest);
    put16(b, HOST_ID);
    b.push(0);
    b.push(pkt_type);
    put16(b, payload_np as u16);
    put16(b, seq);
    put16(b, flags);
}

/// The test signal of node `n`: Fix_16_15 I and Q halves. Values above 32765 are
/// avoided: a 14-bit ADC saturates them at 8191 (0.75 LSB away).
fn signal(n: u16) -> Vec<(i16, i16)> {
    let mut x = 0x9E37_79B9u32 ^ (n as u32).wrapping_mul(0x85EB_CA6B);
    (0..SAMPLES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let i = ((x & 0xFFFF) as u16 as i16).min(32765);
            let q = ((x >> 16) as u16 as i16).min(32765);
            (i, q)
        })
        .collect()
}

struct Client {
    sock: UdpSocket,
    node: SocketAddr,
    id: u16,
    seq: u16,
}

impl Client {
    fn next_seq(&mut self) -> u16 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// `wl_write_baseband_buffer` for one buffer; returns the node's checksum and ours.
    fn write_iq(&mut self, samples: &[(i16, i16)]) -> (u32, u32) {
        let num_pkts = samples.len().div_ceil(MAX_SAMPLES);
        let mut local = Fletcher::default();
        let mut checksum = 0;
        let mut offset = 0usize;
        for i in 0..num_pkts {
            let n = MAX_SAMPLES.min(samples.len() - offset);
            let length_np = TRANSPORT_NO_PAD + COMMAND_HDR + SAMPLE_HDR + 4 * n;
            let last = i == num_pkts - 1;
            let flags = if last { FLAG_ROBUST } else { 0 };
            let seq = self.next_seq();
            let mut b = Vec::with_capacity(length_np + PAD);
            transport(
                &mut b,
                self.id,
                PKT_HOST_TO_NODE,
                length_np - TRANSPORT_NO_PAD,
                seq,
                flags,
            );
            put32(&mut b, CMD_WRITE_IQ);
            put16(&mut b, (length_np - TRANSPORT_NO_PAD - COMMAND_HDR) as u16);
            put16(&mut b, 1);
            put16(&mut b, BUFFER_RFA);
            b.push(if i == 0 { SAMPLE_CHKSUM_RESET } else { 0 });
            b.push(0);
            put32(&mut b, offset as u32);
            put32(&mut b, n as u32);
            for &(re, im) in &samples[offset..offset + n] {
                put32(&mut b, ((re as u16 as u32) << 16) | im as u16 as u32);
            }
            assert_eq!(b.len(), length_np + PAD);
            if n == MAX_SAMPLES {
                assert_eq!(b.len(), 8962, "a full jumbo write packet is 8962 bytes");
            }
            assert_eq!(self.sock.send_to(&b, self.node).unwrap(), b.len());
            local.update((offset & 0xFFFF) as u16, i == 0);
            let (re, im) = samples[offset + n - 1];
            checksum = local.update((re as u16) ^ (im as u16), false);
            offset += n;
            // Pace like the reference's inter-packet wait, so the socket never
            // overruns the emulated 1 Gbit/s node link.
            std::thread::sleep(Duration::from_micros(80));
        }
        let mut r = [0u8; 128];
        let (len, _) = self
            .sock
            .recv_from(&mut r)
            .expect("the node acknowledges the last (ROBUST) write packet");
        assert!(
            len >= PAD + TRANSPORT_NO_PAD + COMMAND_HDR + 4,
            "ack of {len} bytes"
        );
        assert_eq!(r[7], PKT_NODE_TO_HOST);
        assert_eq!(get16(&r, 2), HOST_ID, "ack addressed to the host");
        assert_eq!(get16(&r, 4), self.id, "ack from the node");
        assert_eq!(
            get16(&r, 10),
            self.seq,
            "ack echoes the last packet's sequence number"
        );
        assert_eq!(get32(&r, 14), CMD_WRITE_IQ);
        (get32(&r, PAD + TRANSPORT_NO_PAD + COMMAND_HDR), checksum)
    }

    /// Sends a READ_IQ for `count` samples of RFA from `start` in `num_pkts` packets.
    fn request(&mut self, start: usize, count: usize, num_pkts: usize) {
        let seq = self.next_seq();
        let mut b = Vec::new();
        transport(
            &mut b,
            self.id,
            PKT_HOST_TO_NODE,
            COMMAND_HDR + 20,
            seq,
            FLAG_ROBUST,
        );
        put32(&mut b, CMD_READ_IQ);
        put16(&mut b, 20);
        put16(&mut b, 5);
        for v in [
            BUFFER_RFA as u32,
            start as u32,
            count as u32,
            (4 * MAX_SAMPLES) as u32,
            num_pkts as u32,
        ] {
            put32(&mut b, v);
        }
        assert_eq!(b.len(), PAD + TRANSPORT_NO_PAD + COMMAND_HDR + 20);
        self.sock.send_to(&b, self.node).unwrap();
    }

    /// `wl_read_baseband_buffer` for one buffer: the raw RX words, and how many
    /// re-requests it took. As the reference does after a timeout, only what is
    /// missing is asked for again (a slow test machine can overrun the socket).
    fn read_iq(&mut self, count: usize) -> (Vec<u32>, usize) {
        let num_pkts = count.div_ceil(MAX_SAMPLES);
        let first_seq = self.seq.wrapping_add(1);
        let mut words = vec![0u32; count];
        let mut got = vec![false; num_pkts];
        let mut rerequests = 0;
        let mut buf = vec![0u8; 9050]; // the reference's TRANSPORT_MAX_PKT_LENGTH
        for round in 0..6 {
            let missing: Vec<usize> = (0..num_pkts).filter(|&p| !got[p]).collect();
            if missing.is_empty() {
                break;
            }
            if round == 0 {
                self.request(0, count, num_pkts);
            } else {
                for &p in &missing {
                    let start = p * MAX_SAMPLES;
                    self.request(start, MAX_SAMPLES.min(count - start), 1);
                    rerequests += 1;
                }
            }
            while got.iter().any(|g| !g) {
                let Ok((len, from)) = self.sock.recv_from(&mut buf) else {
                    break; // timed out: re-request what is missing
                };
                assert_eq!(from, self.node);
                assert_eq!(buf[7], PKT_NODE_TO_HOST);
                let seq = get16(&buf, 10);
                let issued = self.seq.wrapping_sub(first_seq);
                assert!(
                    seq.wrapping_sub(first_seq) <= issued,
                    "replies carry the sequence number of one of this read's requests"
                );
                assert_eq!(
                    get16(&buf, 8) as usize,
                    len - PAD - TRANSPORT_NO_PAD,
                    "transport length excludes the pad"
                );
                let hdr = PAD + TRANSPORT_NO_PAD + COMMAND_HDR;
                assert_eq!(get32(&buf, PAD + TRANSPORT_NO_PAD), CMD_READ_IQ);
                assert_eq!(get16(&buf, hdr), BUFFER_RFA);
                let start = get32(&buf, hdr + 4) as usize;
                let n = get32(&buf, hdr + 8) as usize;
                assert_eq!(
                    len,
                    hdr + SAMPLE_HDR + 4 * n,
                    "datagram holds exactly its samples"
                );
                // The reference's sample tracker expects starts 0, y, 2y, ... with
                // y = max samples per packet, and every packet full but the last.
                assert_eq!(start % MAX_SAMPLES, 0, "packet start {start}");
                assert!(start < count);
                assert_eq!(n, MAX_SAMPLES.min(count - start), "packet at {start}");
                if n == MAX_SAMPLES {
                    assert_eq!(len, 8962, "a full jumbo reply is 8962 bytes");
                }
                for k in 0..n {
                    words[start + k] = get32(&buf, hdr + SAMPLE_HDR + 4 * k);
                }
                got[start / MAX_SAMPLES] = true;
            }
        }
        assert!(
            got.iter().all(|&g| g),
            "node {}: READ_IQ replies still missing after {rerequests} re-requests",
            self.id
        );
        (words, rerequests)
    }
}

/// A Fix_14_13 half from a raw RX word half (bits 13..0, sign-extended).
fn fix14(half: u16) -> i16 {
    ((half << 2) as i16) >> 2
}

#[test]
fn warplab_reference_client_write_trigger_read_16_nodes() {
    assert_eq!(MAX_SAMPLES, 2232);
    assert_eq!(FramePayload::Jumbo.samples_per_packet(), MAX_SAMPLES);
    let emu = Emulator::start(EmulatorConfig {
        nodes: NODES,
        addressing: Addressing::LOOPBACK.with_ports(0, 0),
        payload: FramePayload::Jumbo,
        ..Default::default()
    })
    .expect("emulator starts on ephemeral loopback ports");
    let trigger_addr = emu
        .trigger_addr()
        .expect("the emulator listens for triggers");
    let mut clients: Vec<Client> = emu
        .node_addrs()
        .iter()
        .enumerate()
        .map(|(n, &node)| {
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            // As the reference transport does: ask for a large receive buffer (the
            // kernel caps it at net.core.rmem_max).
            let _ = socket2::SockRef::from(&sock).set_recv_buffer_size(8 << 20);
            Client {
                sock,
                node,
                id: n as u16,
                seq: 0,
            }
        })
        .collect();
    let signals: Vec<_> = (0..NODES).map(signal).collect();

    for (c, s) in clients.iter_mut().zip(&signals) {
        let (node_sum, ours) = c.write_iq(s);
        assert_eq!(node_sum, ours, "node {}: write checksum", c.id);
    }

    // Broadcast trigger, trigger ID bitmask 1.
    let trig = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut b = Vec::new();
    transport(&mut b, BROADCAST, PKT_TRIGGER, 4, 1, 0);
    put32(&mut b, 0x0000_0001);
    trig.send_to(&b, trigger_addr).unwrap();
    // Let the node emit and capture its 32768-sample buffers (0.8 ms at 40 MS/s);
    // the reference waits the same way before reading.
    std::thread::sleep(Duration::from_millis(20));

    let mut worst = 0.0f64;
    for (c, s) in clients.iter_mut().zip(&signals) {
        let (words, rerequests) = c.read_iq(SAMPLES);
        if rerequests > 0 {
            eprintln!("node {}: {rerequests} READ_IQ packets re-requested", c.id);
        }
        for (k, (&w, &(re, im))) in words.iter().zip(s).enumerate() {
            for (rx, tx) in [(fix14((w >> 16) as u16), re), (fix14(w as u16), im)] {
                // Error in Fix_14_13 LSBs: tx is tx/32768 full scale, rx is rx/8192.
                let err = (rx as f64 - tx as f64 / 4.0).abs();
                worst = worst.max(err);
                assert!(
                    err <= 0.5,
                    "node {} sample {k}: wrote {tx} (Fix_16_15), read {rx} (Fix_14_13): {err} LSB off",
                    c.id
                );
            }
        }
    }
    let stats = emu.stop().unwrap();
    assert_eq!(
        stats.dropped_total(),
        0,
        "the emulator dropped datagrams: {stats:?}"
    );
    for (n, c) in stats.nodes.iter().enumerate() {
        assert_eq!(c.samples_written, SAMPLES as u64, "node {n}");
        assert_eq!(c.triggers, 1, "node {n}");
    }
    println!("16 nodes x {SAMPLES} samples: max error {worst} Fix_14_13 LSB");
}
