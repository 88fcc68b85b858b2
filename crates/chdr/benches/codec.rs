//! CHDR codec per packet: decode a 512-sample sc16 packet into a caller buffer
//! and encode one, against the memcpy of the same bytes (the floor: the codec
//! only has to move the payload once).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use radiohost_chdr::wire::{write_data_packet, DataPacket, DataPacketSpec};
use radiohost_iq::Ci16;

fn codec(c: &mut Criterion) {
    for spp in [256usize, 512, 2000] {
        let samples: Vec<Ci16> = (0..spp).map(|i| Ci16::new(i as i16, !(i as i16))).collect();
        let spec = DataPacketSpec {
            timestamp: Some(1234),
            seq_num: 7,
            dst_epid: 3,
            ..Default::default()
        };
        let mut pkt = vec![0u8; 16 + 8 + 4 * spp];
        let len = write_data_packet(&mut pkt, &spec, &[], &samples).unwrap();
        let mut out = vec![Ci16::default(); spp];
        let mut g = c.benchmark_group(format!("chdr_codec_{spp}"));
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function("decode_into_buffer", |b| {
            b.iter(|| {
                let p = DataPacket::parse(black_box(&pkt[..len])).unwrap();
                p.read_samples(black_box(&mut out)).unwrap()
            })
        });
        let mut enc = vec![0u8; len];
        g.bench_function("encode", |b| {
            b.iter(|| {
                write_data_packet(black_box(&mut enc), &spec, &[], black_box(&samples)).unwrap()
            })
        });
        let mut dst = vec![0u8; len];
        g.bench_function("floor_memcpy", |b| {
            b.iter(|| black_box(&mut dst).copy_from_slice(black_box(&pkt[..len])))
        });
        g.finish();
    }
}

criterion_group!(benches, codec);
criterion_main!(benches);
