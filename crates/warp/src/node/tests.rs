use super::*;
use crate::wire::{
    decode, encode_read_request, encode_samples, encode_trigger, FLAG_ROBUST, MAX_DATAGRAM,
};

fn host_header(dest: u16, seq: u16, flags: u16) -> TransportHeader {
    TransportHeader {
        dest_id: dest,
        src_id: 0xFFFE,
        pkt_type: PacketType::HostToNode,
        seq_num: seq,
        flags,
    }
}

fn write_packet(
    node: &mut NodeCore,
    dest: u16,
    start: u32,
    words: &[WarpWord],
    flags: u8,
    robust: bool,
) -> NodeAction {
    let mut pkt = vec![0u8; MAX_DATAGRAM];
    let h = SampleHeader {
        buffer: RfBuffer::C,
        flags,
        start,
        num_samples: words.len() as u32,
    };
    let t = host_header(dest, 1, if robust { FLAG_ROBUST } else { 0 });
    let n = encode_samples(&mut pkt, &t, CMD_WRITE_IQ, &h, words).unwrap();
    let mut out = vec![0u8; MAX_DATAGRAM];
    node.handle(&pkt[..n], &mut out)
}

#[test]
fn write_trigger_read_is_a_loopback_with_fix14_shift() {
    let mut node = NodeCore::new(2);
    let words: Vec<WarpWord> = (0..100u32).map(|i| WarpWord((i << 18) | (i * 4))).collect();
    assert_eq!(
        write_packet(&mut node, 2, 50, &words, SAMPLE_FLAG_RESET_CHECKSUM, false),
        NodeAction::None
    );
    let mut pkt = [0u8; 64];
    let n = encode_trigger(
        &mut pkt,
        &TransportHeader {
            dest_id: BROADCAST_ID,
            src_id: 0,
            pkt_type: PacketType::Trigger,
            seq_num: 0,
            flags: 0,
        },
        1,
    )
    .unwrap();
    node.handle(&pkt[..n], &mut [0u8; 16]);
    let rx = node.rx_buffer(RfBuffer::C).to_vec();
    for (i, w) in words.iter().enumerate() {
        assert_eq!(rx[50 + i], w.tx_to_rx());
    }
    assert_eq!(node.counters().triggers, 1);

    let req = ReadIqRequest {
        buffers: RfBuffer::C.mask() as u32,
        start: 40,
        num_samples: 100,
        bytes_per_packet: 160,
        num_packets: 3,
    };
    let n = encode_read_request(&mut pkt, &host_header(2, 9, 0), &req).unwrap();
    let NodeAction::Read(job) = node.handle(&pkt[..n], &mut [0u8; 16]) else {
        panic!("expected a read")
    };
    assert_eq!(job.packet_count(), 3);
    assert_eq!(job.packet(0), (RfBuffer::C, 40, 40));
    assert_eq!(job.packet(2), (RfBuffer::C, 120, 20));
    let mut out = vec![0u8; MAX_DATAGRAM];
    let n = node.encode_read_packet(&job, 1, &mut out);
    let d = wire::decode(&out[..n]).unwrap();
    assert_eq!(d.transport.seq_num, 9);
    assert_eq!(d.transport.dest_id, 0xFFFE);
    match d.message {
        Message::Samples {
            header, words: got, ..
        } => {
            assert_eq!(header.start, 80);
            assert_eq!(got.get(0), Some(rx[80]));
        }
        m => panic!("{m:?}"),
    }
}

#[test]
fn rounded_up_packet_count_gives_empty_last_packet() {
    let job = ReadJob {
        seq_num: 0,
        host_id: 0,
        request: ReadIqRequest {
            buffers: 3,
            start: 0,
            num_samples: 80,
            bytes_per_packet: 160,
            num_packets: 3,
        },
    };
    assert_eq!(job.packet_count(), 6);
    assert_eq!(job.packet(2), (RfBuffer::A, 80, 0));
    assert_eq!(job.packet(4), (RfBuffer::B, 40, 40));
}

#[test]
fn robust_write_reports_the_running_checksum() {
    let mut node = NodeCore::new(0);
    let a = [WarpWord(0x0001_0003)];
    let b = [WarpWord(0x00F0_000F), WarpWord(0x1234_4321)];
    write_packet(&mut node, 0, 0, &a, SAMPLE_FLAG_RESET_CHECKSUM, false);
    let mut out = vec![0u8; MAX_DATAGRAM];
    let h = SampleHeader {
        buffer: RfBuffer::C,
        flags: 0,
        start: 1,
        num_samples: 2,
    };
    let mut pkt = vec![0u8; MAX_DATAGRAM];
    let n = encode_samples(
        &mut pkt,
        &host_header(0, 4, FLAG_ROBUST),
        CMD_WRITE_IQ,
        &h,
        &b,
    )
    .unwrap();
    let NodeAction::Reply(len) = node.handle(&pkt[..n], &mut out) else {
        panic!("no ack")
    };
    let mut expected = WriteChecksum::default();
    expected.add_packet(0, a[0].i_xor_q());
    expected.add_packet(1, b[1].i_xor_q());
    let d = wire::decode(&out[..len]).unwrap();
    assert_eq!(
        d.message,
        Message::WriteAck {
            checksum: expected.value()
        }
    );
    assert_eq!(d.transport.seq_num, 4);
}

#[test]
fn bad_datagrams_are_counted_and_never_written() {
    let mut node = NodeCore::new(1);
    let words = [WarpWord(0xDEAD_BEEF); 10];
    // Wrong node id.
    write_packet(&mut node, 7, 0, &words, 0, true);
    // Past the end of the buffer.
    write_packet(&mut node, 1, (BUFFER_SAMPLES - 5) as u32, &words, 0, true);
    // Garbage.
    node.handle(&[1, 2, 3], &mut [0u8; 16]);
    let c = node.counters();
    assert_eq!((c.wrong_node_id, c.out_of_range, c.malformed), (1, 1, 1));
    assert!(node.tx_buffer(RfBuffer::C).iter().all(|w| w.0 == 0));
    // A read past the end is refused too.
    let mut pkt = [0u8; 64];
    let req = ReadIqRequest {
        buffers: 1,
        start: BUFFER_SAMPLES as u32 - 10,
        num_samples: 20,
        bytes_per_packet: 80,
        num_packets: 1,
    };
    let n = encode_read_request(&mut pkt, &host_header(1, 0, 0), &req).unwrap();
    let mut out = [0u8; 64];
    let NodeAction::Reply(len) = node.handle(&pkt[..n], &mut out) else {
        panic!("a read out of range is answered with an error");
    };
    assert_eq!(
        decode(&out[..len]).unwrap().message,
        Message::Refused {
            command: CMD_READ_IQ,
            reason: NodeRefusal::OutOfRange
        }
    );
    assert_eq!(node.counters().out_of_range, 2);
}

/// A read of zero samples (what `warp read --samples 0` once sent) is refused with an
/// error reply; the node neither panics nor goes quiet, and serves the next read.
#[test]
fn a_read_of_zero_samples_is_refused_and_the_node_keeps_serving() {
    let mut node = NodeCore::new(0);
    let mut pkt = [0u8; 64];
    let mut out = vec![0u8; MAX_DATAGRAM];
    let empty = ReadIqRequest {
        buffers: 1,
        start: 0,
        num_samples: 0,
        bytes_per_packet: 8928,
        num_packets: 0,
    };
    let n = encode_read_request(&mut pkt, &host_header(0, 0, 0), &empty).unwrap();
    let NodeAction::Reply(len) = node.handle(&pkt[..n], &mut out) else {
        panic!("an empty read is answered with an error");
    };
    let d = decode(&out[..len]).unwrap();
    assert_eq!(
        d.message,
        Message::Refused {
            command: CMD_READ_IQ,
            reason: NodeRefusal::Empty
        }
    );
    assert_eq!(d.transport.pkt_type, PacketType::NodeToHost);
    assert_eq!(node.counters().refusals, 1);
    let one = ReadIqRequest {
        num_samples: 10,
        num_packets: 1,
        ..empty
    };
    let n = encode_read_request(&mut pkt, &host_header(0, 0, 0), &one).unwrap();
    let NodeAction::Read(job) = node.handle(&pkt[..n], &mut out) else {
        panic!("the next read is served");
    };
    assert_eq!(job.packet_count(), 1);
    assert_eq!(
        job.packet(5).2,
        0,
        "past the end: an empty packet, no panic"
    );
}

/// Two nodes on one air: node 0 transmits on path C, node 1 hears it on path A through
/// a channel of gain 0.5, one sample late; node 0's own RX hears nothing.
#[test]
fn nodes_on_a_shared_air_hear_each_other_through_its_channel() {
    use radiohost_dsp::MimoTaps;
    use radiohost_testbed::air::AirChannel;
    let mut taps = MimoTaps::zeros(1, 1, 2).unwrap();
    taps.path_mut(0, 0)[1] = Cf32::new(0.5, 0.0);
    let air = Air::new(AirConfig {
        channel: AirChannel::Static(taps),
        history: BUFFER_SAMPLES,
        ..AirConfig::identity(WARP_RATE_HZ, 1)
    })
    .unwrap();
    let tx_only = NodePorts {
        tx: [None, None, Some(0), None],
        rx: [None; 4],
    };
    let rx_only = NodePorts {
        tx: [None; 4],
        rx: [Some(0), None, None, None],
    };
    let mut a = NodeCore::on_air(0, air.clone(), tx_only);
    let mut b = NodeCore::on_air(1, air.clone(), rx_only);
    let words: Vec<WarpWord> = (0..64i16)
        .map(|i| WarpWord::from_ci16(Ci16::new(i * 256 + 3, -i * 128 + 3)))
        .collect();
    write_packet(&mut a, 0, 10, &words, SAMPLE_FLAG_RESET_CHECKSUM, false);
    let tick = a.earliest_trigger_tick().max(b.earliest_trigger_tick());
    a.trigger_at(tick);
    b.trigger_at(tick);
    let rx = b.rx_buffer(RfBuffer::A).to_vec();
    assert_eq!(rx[10], WarpWord(0));
    for (i, w) in words.iter().enumerate() {
        let s = w.to_ci16();
        // Gain 0.5 into the 14-bit ADC: value / 8, rounded to nearest (the words are
        // 3/8 LSB off a Fix_14_13 step, so the channel's FFT rounding cannot flip them).
        let q = |v: i16| (v as f32 / 8.0).round() as i16;
        let want = WarpWord::from_ci16(Ci16::new(q(s.re), q(s.im)));
        assert_eq!(rx[11 + i], want, "sample {i}");
    }
    assert!(a.rx_buffer(RfBuffer::C).iter().all(|w| w.0 == 0));
    assert_eq!(b.counters().air_rx_lost, 0);
    // A later trigger starts after the first one's window.
    assert!(a.earliest_trigger_tick() >= tick + BUFFER_SAMPLES as u64);
}

/// Repeated triggers without reads never make a node's emission late.
#[test]
fn back_to_back_triggers_stay_on_time() {
    let mut node = NodeCore::new(3);
    let words = [WarpWord::from_ci16(Ci16::new(4000, -4000)); 8];
    write_packet(&mut node, 3, 0, &words, SAMPLE_FLAG_RESET_CHECKSUM, false);
    for _ in 0..5 {
        node.trigger();
    }
    assert_eq!(node.rx_buffer(RfBuffer::C)[..8], [words[0].tx_to_rx(); 8]);
    assert_eq!(node.air().stats().late_emissions, 0);
    assert_eq!(node.counters().air_tx_dropped, 0);
    assert_eq!(node.counters().triggers, 5);
}
