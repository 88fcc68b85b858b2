//! The fronthaul parser must never panic, and whatever it accepts must re-encode to
//! the same bytes (header fields and samples survive a round trip).
#![no_main]

use libfuzzer_sys::fuzz_target;
use radiohost_iq::Ci16;
use radiohost_station::ru::wire::{encode, parse, read_samples};

fuzz_target!(|data: &[u8]| {
    if let Ok((h, payload)) = parse(data) {
        let mut samples = vec![Ci16::default(); h.samples as usize];
        assert_eq!(read_samples(payload, &mut samples), h.samples as usize);
        let mut out = vec![0u8; h.packet_len()];
        let n = encode(&h, &samples, &mut out).expect("an accepted packet re-encodes");
        // Byte 3 (flags) is ignored by the parser and written as 0.
        assert_eq!(n, data.len());
        assert_eq!(&out[..3], &data[..3]);
        assert_eq!(&out[4..], &data[4..]);
    }
});
