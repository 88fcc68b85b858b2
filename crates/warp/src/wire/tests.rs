use super::*;
use proptest::prelude::*;

fn th(pkt_type: PacketType, seq: u16, flags: u16) -> TransportHeader {
    TransportHeader {
        dest_id: 3,
        src_id: 0xFFF0,
        pkt_type,
        seq_num: seq,
        flags,
    }
}

#[test]
fn read_request_layout_is_big_endian_and_matches_spec() {
    let mut buf = [0u8; 64];
    let req = ReadIqRequest {
        buffers: 1,
        start: 0,
        num_samples: 32768,
        bytes_per_packet: 8924,
        num_packets: 15,
    };
    let n =
        encode_read_request(&mut buf, &th(PacketType::HostToNode, 7, FLAG_ROBUST), &req).unwrap();
    assert_eq!(n, 14 + 8 + 20);
    assert_eq!(&buf[0..2], &[0, 0]); // pad
    assert_eq!(&buf[2..4], &[0, 3]); // dest
    assert_eq!(buf[7], 1); // host->node
    assert_eq!(&buf[8..10], &[0, 28]); // length after transport header
    assert_eq!(&buf[14..18], &[0x30, 0, 0, 0x08]);
    let d = decode(&buf[..n]).unwrap();
    assert_eq!(d.message, Message::ReadIq(req));
    assert!(d.transport.robust());
}

#[test]
fn zero_cmd_length_and_num_args_are_accepted() {
    let mut buf = [0u8; 64];
    let words = [WarpWord(0x0001_0002)];
    let h = SampleHeader {
        buffer: RfBuffer::B,
        flags: SAMPLE_FLAG_RESET_CHECKSUM,
        start: 10,
        num_samples: 1,
    };
    let n = encode_samples(
        &mut buf,
        &th(PacketType::HostToNode, 1, 0),
        CMD_WRITE_IQ,
        &h,
        &words,
    )
    .unwrap();
    buf[18..22].fill(0); // already zero on encode; make it explicit
    let d = decode(&buf[..n]).unwrap();
    match d.message {
        Message::Samples { header, words, .. } => {
            assert_eq!(header, h);
            assert_eq!(words.get(0), Some(WarpWord(0x0001_0002)));
        }
        m => panic!("{m:?}"),
    }
}

#[test]
fn malformed_inputs_give_typed_errors() {
    assert!(matches!(decode(&[0; 5]), Err(WireError::Truncated { .. })));
    let mut buf = [0u8; 64];
    let n = encode_trigger(&mut buf, &th(PacketType::Trigger, 0, 0), 1).unwrap();
    let mut bad = buf[..n].to_vec();
    bad[7] = 9;
    assert_eq!(decode(&bad), Err(WireError::PacketType(9)));
    let mut bad = buf[..n].to_vec();
    bad[9] = 99;
    assert!(matches!(
        decode(&bad),
        Err(WireError::LengthMismatch { .. })
    ));
    // A sample packet whose count lies.
    let h = SampleHeader {
        buffer: RfBuffer::A,
        flags: 0,
        start: 0,
        num_samples: 2,
    };
    let n = encode_samples(
        &mut buf,
        &th(PacketType::HostToNode, 0, 0),
        CMD_WRITE_IQ,
        &h,
        &[WarpWord(1), WarpWord(2)],
    )
    .unwrap();
    let mut lie = buf[..n].to_vec();
    lie[33] = 200;
    assert!(matches!(decode(&lie), Err(WireError::SampleCount { .. })));
    // Two buffers in one sample header.
    let mut two = buf[..n].to_vec();
    two[23] = 3;
    assert_eq!(decode(&two), Err(WireError::BufferMask(3)));
    assert!(matches!(
        decode(&vec![0u8; MAX_DATAGRAM + 1]),
        Err(WireError::Oversized { .. })
    ));
}

#[test]
fn read_requests_that_cannot_be_served_are_rejected() {
    let mut buf = [0u8; 64];
    let t = th(PacketType::HostToNode, 0, 0);
    let bad = [
        ReadIqRequest {
            buffers: 0,
            start: 0,
            num_samples: 10,
            bytes_per_packet: 40,
            num_packets: 1,
        },
        ReadIqRequest {
            buffers: 0x10,
            start: 0,
            num_samples: 10,
            bytes_per_packet: 40,
            num_packets: 1,
        },
        ReadIqRequest {
            buffers: 1,
            start: 0,
            num_samples: 10,
            bytes_per_packet: 0,
            num_packets: 1,
        },
        ReadIqRequest {
            buffers: 1,
            start: 0,
            num_samples: 100,
            bytes_per_packet: 40,
            num_packets: 2,
        },
        ReadIqRequest {
            buffers: 1,
            start: 0,
            num_samples: 10,
            bytes_per_packet: 40,
            num_packets: 1_000_000,
        },
        ReadIqRequest {
            buffers: 1,
            start: 0,
            num_samples: 10,
            bytes_per_packet: 100_000,
            num_packets: 1,
        },
    ];
    for req in bad {
        let n = encode_read_request(&mut buf, &t, &req).unwrap();
        assert!(
            matches!(decode(&buf[..n]), Err(WireError::BadReadRequest(_))),
            "{req:?}"
        );
    }
}

#[test]
fn encoder_refuses_small_buffers() {
    let mut buf = [0u8; 20];
    let r = encode_write_ack(&mut buf, &th(PacketType::NodeToHost, 0, 0), 5);
    assert!(matches!(r, Err(WireError::BufferTooSmall { .. })));
}

fn buffer() -> impl Strategy<Value = RfBuffer> {
    prop::sample::select(RfBuffer::ALL.to_vec())
}

proptest! {
    #[test]
    fn sample_packets_roundtrip(seq: u16, flags: u8, start: u32, words in prop::collection::vec(any::<u32>(), 0..2000),
                                b in buffer(), to_host: bool) {
        let words: Vec<WarpWord> = words.into_iter().map(WarpWord).collect();
        let (pt, cmd) = if to_host { (PacketType::NodeToHost, CMD_READ_IQ) } else { (PacketType::HostToNode, CMD_WRITE_IQ) };
        let h = SampleHeader { buffer: b, flags, start, num_samples: words.len() as u32 };
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let n = encode_samples(&mut buf, &th(pt, seq, 0), cmd, &h, &words).unwrap();
        let d = decode(&buf[..n]).unwrap();
        prop_assert_eq!(d.transport, th(pt, seq, 0));
        match d.message {
            Message::Samples { command, header, words: got } => {
                prop_assert_eq!(command, cmd);
                prop_assert_eq!(header, h);
                prop_assert_eq!(got.iter().collect::<Vec<_>>(), words);
            }
            m => prop_assert!(false, "{:?}", m),
        }
    }

    #[test]
    fn acks_triggers_and_requests_roundtrip(seq: u16, checksum: u32, ids: u32, start: u32, count in 1u32..100_000) {
        let mut buf = [0u8; 128];
        let n = encode_write_ack(&mut buf, &th(PacketType::NodeToHost, seq, 0), checksum).unwrap();
        prop_assert_eq!(decode(&buf[..n]).unwrap().message, Message::WriteAck { checksum });
        let n = encode_trigger(&mut buf, &th(PacketType::Trigger, seq, 0), ids).unwrap();
        prop_assert_eq!(decode(&buf[..n]).unwrap().message, Message::Trigger { trigger_ids: ids });
        let req = ReadIqRequest { buffers: 5, start, num_samples: count, bytes_per_packet: 8928, num_packets: count.div_ceil(2232) };
        let n = encode_read_request(&mut buf, &th(PacketType::HostToNode, seq, 0), &req).unwrap();
        prop_assert_eq!(decode(&buf[..n]).unwrap().message, Message::ReadIq(req));
        for command in [CMD_READ_IQ, CMD_WRITE_IQ] {
            for reason in [NodeRefusal::OutOfRange, NodeRefusal::Empty, NodeRefusal::PacketTooLarge] {
                let n = encode_refusal(&mut buf, &th(PacketType::NodeToHost, seq, 0), command, reason).unwrap();
                prop_assert_eq!(decode(&buf[..n]).unwrap().message, Message::Refused { command, reason });
            }
        }
    }

    #[test]
    fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn corrupted_valid_packets_never_panic(words in prop::collection::vec(any::<u32>(), 0..50),
                                           flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8),
                                           cut in any::<usize>()) {
        let words: Vec<WarpWord> = words.into_iter().map(WarpWord).collect();
        let h = SampleHeader { buffer: RfBuffer::A, flags: 0, start: 0, num_samples: words.len() as u32 };
        let mut buf = vec![0u8; 512];
        let n = encode_samples(&mut buf, &th(PacketType::HostToNode, 0, 0), CMD_WRITE_IQ, &h, &words).unwrap();
        let mut pkt = buf[..n].to_vec();
        for (at, v) in flips {
            let i = at % pkt.len();
            pkt[i] ^= v;
        }
        pkt.truncate(cut % (pkt.len() + 1));
        if let Ok(Datagram { message: Message::Samples { header, words, .. }, .. }) = decode(&pkt) {
            prop_assert_eq!(header.num_samples as usize, words.len());
        }
    }
}
