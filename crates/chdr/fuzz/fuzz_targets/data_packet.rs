#![no_main]
//! Data packets: parse never panics; accepted packets decode into a buffer of
//! exactly their size and re-encode to the same bytes.
use libfuzzer_sys::fuzz_target;
use radiohost_chdr::wire::{write_data_packet, DataPacket, DataPacketSpec};
use radiohost_iq::Ci16;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = DataPacket::parse(data) else { return };
    let mut samples = vec![Ci16::default(); p.num_samples()];
    assert_eq!(p.read_samples(&mut samples).unwrap(), samples.len());
    if p.num_samples() > 0 {
        let mut short = vec![Ci16::default(); p.num_samples() - 1];
        assert!(p.read_samples(&mut short).is_err());
    }
    let md: Vec<u64> = p.metadata_words().collect();
    let h = p.header;
    let spec = DataPacketSpec {
        vc: h.vc,
        eob: h.eob,
        eov: h.eov,
        seq_num: h.seq_num,
        dst_epid: h.dst_epid,
        timestamp: p.timestamp,
    };
    let mut out = vec![0u8; h.length as usize];
    let n = write_data_packet(&mut out, &spec, &md, &samples).unwrap();
    assert_eq!(&out[..n], &data[..h.length as usize]);
});
