use super::*;
use crate::emulator::{Emulator, EmulatorConfig};
use crate::{Addressing, FramePayload};
use radiohost_testbed::LinkConfig;
use std::time::Instant;

/// Each test gets its own ports so tests can run in parallel.
fn testbed(
    nodes: u16,
    base_port: u16,
    node_link: LinkConfig,
    payload: FramePayload,
) -> (Emulator, WarpHost) {
    let addressing = Addressing::LOOPBACK.with_ports(base_port, base_port + 900);
    let emu = Emulator::start(EmulatorConfig {
        nodes,
        addressing,
        payload,
        node_link,
        ..Default::default()
    })
    .unwrap();
    let targets = (0..nodes)
        .map(|n| NodeTarget {
            id: n,
            addr: addressing.node_addr(n).unwrap(),
            interface: 0,
        })
        .collect();
    let host = WarpHost::new(
        HostConfig {
            payload,
            trigger_addr: addressing.trigger_addr(),
            // Reads right after a trigger wait for the air to capture (ms under load).
            timeout: Duration::from_millis(50),
            ..Default::default()
        },
        targets,
    )
    .unwrap();
    (emu, host)
}

fn waveform(node: u16, len: usize) -> Vec<WarpWord> {
    (0..len)
        .map(|i| {
            let i_part = ((i as u32 * 7 + node as u32 * 1000) % 60000) as u16;
            let q_part = ((i as u32 * 13) ^ node as u32) as u16;
            WarpWord::from_halves(i_part, q_part)
        })
        .collect()
}

#[test]
fn write_trigger_read_roundtrips_on_all_nodes() {
    let (emu, mut host) = testbed(
        4,
        21000,
        LinkConfig::parse("1G").unwrap(),
        FramePayload::Jumbo,
    );
    let nodes: Vec<usize> = (0..4).collect();
    let data: Vec<Vec<WarpWord>> = (0..4).map(|n| waveform(n, 10_000)).collect();
    let refs: Vec<&[WarpWord]> = data.iter().map(|d| d.as_slice()).collect();
    host.write_iq(&nodes, RfBuffer::A, 100, &refs).unwrap();
    emu.with_nodes(|n| assert_eq!(&n[2].tx_buffer(RfBuffer::A)[100..10_100], &data[2][..]));
    host.trigger(1).unwrap();
    // The trigger is fire-and-forget: wait until every node has seen it.
    let deadline = Instant::now() + Duration::from_secs(2);
    while emu.stats().nodes.iter().any(|c| c.triggers == 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let read = host.read_iq(&nodes, RfBuffer::A, 100, 10_000).unwrap();
    for n in 0..4 {
        let expected: Vec<WarpWord> = data[n].iter().map(|w| w.tx_to_rx()).collect();
        assert_eq!(read[n], expected, "node {n}");
    }
    assert_eq!(host.stats().rerequests, 0);
    assert_eq!(host.stats().write_retries, 0);
}

#[test]
fn serial_and_parallel_read_the_same_samples() {
    let (emu, mut host) = testbed(3, 21100, LinkConfig::default(), FramePayload::Standard);
    emu.with_nodes(|nodes| {
        for node in nodes.iter_mut() {
            let id = node.id();
            let data = waveform(id, 5000);
            let mut out = vec![0u8; wire::MAX_DATAGRAM];
            // Load RX directly through the node's own write + trigger path.
            let h = wire::SampleHeader {
                buffer: RfBuffer::B,
                flags: 1,
                start: 0,
                num_samples: 300,
            };
            let t = TransportHeader {
                dest_id: id,
                src_id: HOST_ID,
                pkt_type: PacketType::HostToNode,
                seq_num: 0,
                flags: 0,
            };
            let mut pkt = vec![0u8; wire::MAX_DATAGRAM];
            let n =
                wire::encode_samples(&mut pkt, &t, wire::CMD_WRITE_IQ, &h, &data[..300]).unwrap();
            node.handle(&pkt[..n], &mut out);
            node.trigger();
        }
    });
    let parallel = host.read_iq(&[0, 1, 2], RfBuffer::B, 0, 2000).unwrap();
    host.set_mode(Mode::Serial);
    let serial = host.read_iq(&[0, 1, 2], RfBuffer::B, 0, 2000).unwrap();
    assert_eq!(parallel, serial);
    assert_ne!(parallel[0], parallel[1]);
}

#[test]
fn lossy_links_are_recovered_by_selective_rerequests() {
    // 10% loss each way on every node link, standard frames: many packets per read.
    let lossy = LinkConfig::parse("1G,10%,seed=5").unwrap();
    let (emu, mut host) = testbed(4, 21200, lossy, FramePayload::Standard);
    let nodes: Vec<usize> = (0..4).collect();
    let data: Vec<Vec<WarpWord>> = (0..4).map(|n| waveform(n, 8000)).collect();
    let refs: Vec<&[WarpWord]> = data.iter().map(|d| d.as_slice()).collect();
    host.write_iq(&nodes, RfBuffer::D, 0, &refs).unwrap();
    emu.with_nodes(|n| {
        for (i, node) in n.iter().enumerate() {
            assert_eq!(
                &node.tx_buffer(RfBuffer::D)[..8000],
                &data[i][..],
                "node {i}"
            );
        }
    });
    emu.with_nodes(|n| n.iter_mut().for_each(|node| node.trigger()));
    let read = host.read_iq(&nodes, RfBuffer::D, 0, 8000).unwrap();
    for n in 0..4 {
        assert!(
            read[n]
                .iter()
                .zip(&data[n])
                .all(|(r, w)| *r == w.tx_to_rx()),
            "node {n}"
        );
    }
    let s = host.stats();
    assert!(
        s.rerequests > 0,
        "10% loss must have cost re-requests: {s:?}"
    );
    assert!(s.write_retries > 0 || s.write_fallbacks > 0, "{s:?}");
}

#[test]
fn a_silent_node_is_named_in_the_error() {
    let (_emu, host) = testbed(2, 21300, LinkConfig::default(), FramePayload::Jumbo);
    // Point a third target at a port where nothing listens.
    let mut cfg = host.config().clone();
    cfg.retries = 2;
    cfg.timeout = Duration::from_millis(5);
    let mut targets = host.nodes().to_vec();
    targets.push(NodeTarget {
        id: 2,
        addr: "127.0.0.1:21399".parse().unwrap(),
        interface: 0,
    });
    drop(host);
    let mut host = WarpHost::new(cfg, targets).unwrap();
    let err = host
        .read_iq(&[0, 1, 2], RfBuffer::A, 0, 4000)
        .unwrap_err()
        .to_string();
    assert!(err.contains("node 2 (127.0.0.1:21399)"), "{err}");
    assert!(
        err.contains("READ_IQ") && err.contains("2 of 2 packets"),
        "{err}"
    );
    assert!(
        !err.contains("node 0"),
        "healthy nodes are not blamed: {err}"
    );
    let err = host
        .write_iq(&[2], RfBuffer::A, 0, &[&[WarpWord(1); 10]])
        .unwrap_err()
        .to_string();
    assert!(err.contains("WRITE_IQ") && err.contains("node 2"), "{err}");
}

#[test]
fn junk_and_strangers_are_counted_not_used() {
    let (_emu, mut host) = testbed(1, 21400, LinkConfig::default(), FramePayload::Jumbo);
    let local = host.socket_buffers()[0].local;
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    stranger.send_to(b"not warp", local).unwrap();
    let read = host.read_iq(&[0], RfBuffer::C, 0, 100).unwrap();
    assert_eq!(read[0].len(), 100);
    assert_eq!(host.stats().unexpected_source, 1);
}

#[test]
fn out_of_range_requests_are_refused_before_sending() {
    let (_emu, mut host) = testbed(1, 21500, LinkConfig::default(), FramePayload::Jumbo);
    assert!(matches!(
        host.read_iq(&[0], RfBuffer::A, 32_000, 1000),
        Err(TransportError::Invalid(_))
    ));
    assert!(matches!(
        host.read_iq(&[5], RfBuffer::A, 0, 10),
        Err(TransportError::Invalid(_))
    ));
    let long = vec![WarpWord(0); 40_000];
    assert!(matches!(
        host.write_iq(&[0], RfBuffer::A, 0, &[&long]),
        Err(TransportError::Invalid(_))
    ));
}

#[test]
fn socket_buffer_grant_is_reported() {
    let (_emu, host) = testbed(1, 21600, LinkConfig::default(), FramePayload::Jumbo);
    let b = host.socket_buffers()[0];
    assert_eq!(b.requested, 32 << 20);
    assert!(b.recv_granted > 0 && b.send_granted > 0);
}

#[test]
fn nodes_ignore_hosts_they_do_not_know() {
    let addressing = Addressing::LOOPBACK.with_ports(0, 0);
    let emu = Emulator::start(EmulatorConfig {
        nodes: 1,
        addressing,
        allowed_hosts: vec!["127.0.0.9".parse().unwrap()],
        ..Default::default()
    })
    .unwrap();
    let target = NodeTarget {
        id: 0,
        addr: emu.node_addrs()[0],
        interface: 0,
    };
    let mut host = WarpHost::new(
        HostConfig {
            retries: 1,
            timeout: Duration::from_millis(5),
            ..Default::default()
        },
        vec![target],
    )
    .unwrap();
    assert!(host.read_iq(&[0], RfBuffer::A, 0, 10).is_err());
    assert!(emu.stats().unexpected_source >= 2);
    assert_eq!(emu.stats().nodes[0].received, 0, "nothing reached the node");
}

/// The same write / trigger / read cycle moves the same samples with UDP GSO/GRO
/// (where this kernel has them) and without; each path reports what it used.
#[test]
fn offload_and_plain_paths_move_the_same_samples() {
    use crate::udp::OffloadPolicy;
    for policy in [OffloadPolicy::Auto, OffloadPolicy::Off] {
        let emu = Emulator::start(EmulatorConfig {
            nodes: 4,
            addressing: Addressing::LOOPBACK.with_ports(0, 0),
            // Links this fast make a node's reply packets due together, so the
            // emulator sends them with GSO.
            node_link: LinkConfig::parse("1000G").unwrap(),
            offload: policy,
            ..Default::default()
        })
        .unwrap();
        let targets = (0..4u16)
            .map(|n| NodeTarget {
                id: n,
                addr: emu.node_addrs()[n as usize],
                interface: 0,
            })
            .collect();
        let mut host = WarpHost::new(
            HostConfig {
                trigger_addr: emu.trigger_addr().unwrap(),
                timeout: Duration::from_millis(50),
                offload: policy,
                ..Default::default()
            },
            targets,
        )
        .unwrap();
        let nodes: Vec<usize> = (0..4).collect();
        let data: Vec<Vec<WarpWord>> = (0..4).map(|n| waveform(n, 20_000)).collect();
        let refs: Vec<&[WarpWord]> = data.iter().map(|d| d.as_slice()).collect();
        host.write_iq(&nodes, RfBuffer::B, 0, &refs).unwrap();
        emu.with_nodes(|n| n.iter_mut().for_each(|n| n.trigger()));
        for _ in 0..20 {
            let read = host.read_iq(&nodes, RfBuffer::B, 0, 20_000).unwrap();
            for n in 0..4 {
                let expected: Vec<WarpWord> = data[n].iter().map(|w| w.tx_to_rx()).collect();
                assert_eq!(read[n], expected, "{policy:?}: node {n}");
            }
        }
        let (h, e) = (host.stats().clone(), emu.stats());
        match policy {
            OffloadPolicy::Off => {
                assert!(host.offload().iter().all(|o| !o.gso && !o.gro));
                assert!(e.offload.iter().all(|o| !o.gso && !o.gro));
                assert_eq!(
                    (h.gso_sends, h.gro_batches, e.gso_sends, e.gro_batches),
                    (0, 0, 0, 0)
                );
            }
            OffloadPolicy::Auto => {
                let o = host.offload()[0];
                if !(o.gso && o.gro) {
                    eprintln!(
                        "SKIPPED: the offload half: this kernel lacks UDP GSO or GRO ({o:?})"
                    );
                    continue;
                }
                // 9 packets per node per write: GSO sends, arriving as GRO batches.
                assert!(h.gso_sends >= 4, "{h:?}");
                assert!(e.gro_batches >= 4, "{e:?}");
                // Reply packets due together leave in one GSO send and arrive as one
                // GRO batch.
                assert!(e.gso_sends > 0 && h.gro_batches > 0, "{h:?} {e:?}");
            }
        }
    }
}
