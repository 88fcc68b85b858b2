//! Codec throughput against its floor, a plain copy of the same bytes: encoding
//! and decoding a jumbo sample packet should cost little more than moving it.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use radiohost_iq::WarpWord;
use radiohost_warp::wire::{
    self, PacketType, RfBuffer, SampleHeader, TransportHeader, CMD_READ_IQ, MAX_DATAGRAM,
};
use std::hint::black_box;

fn codec(c: &mut Criterion) {
    let words: Vec<WarpWord> = (0..2232u32)
        .map(|i| WarpWord(i.wrapping_mul(2_654_435_761)))
        .collect();
    let t = TransportHeader {
        dest_id: 1,
        src_id: 0,
        pkt_type: PacketType::NodeToHost,
        seq_num: 7,
        flags: 0,
    };
    let h = SampleHeader {
        buffer: RfBuffer::A,
        flags: 0,
        start: 0,
        num_samples: words.len() as u32,
    };
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let n = wire::encode_samples(&mut buf, &t, CMD_READ_IQ, &h, &words).unwrap();
    let mut out = vec![WarpWord(0); words.len()];
    let mut copy_dst = vec![0u8; n];

    let mut g = c.benchmark_group("jumbo_sample_packet");
    g.throughput(Throughput::Bytes(n as u64));
    g.bench_function("floor_memcpy", |b| {
        b.iter(|| copy_dst.copy_from_slice(black_box(&buf[..n])))
    });
    g.bench_function("encode", |b| {
        b.iter(|| {
            wire::encode_samples(black_box(&mut buf), &t, CMD_READ_IQ, &h, black_box(&words))
                .unwrap()
        })
    });
    g.bench_function("decode_and_copy_out", |b| {
        b.iter(|| {
            if let wire::Message::Samples { words, .. } =
                wire::decode(black_box(&buf[..n])).unwrap().message
            {
                words.copy_to(&mut out);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
