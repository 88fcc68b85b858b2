#![no_main]
//! The packet parser: never panics; whatever it accepts re-encodes to the same bytes.
use libfuzzer_sys::fuzz_target;
use radiohost_pmt::wire::{self, Body, Psk};

fuzz_target!(|data: &[u8]| {
    let key = Psk::new(b"fuzz key");
    for psk in [None, Some(&key)] {
        let Ok(p) = wire::decode(data, psk) else { continue };
        let mut out = Vec::new();
        match p.body {
            Body::Data(d) => wire::encode_data(&mut out, p.session, &d, psk),
            Body::Meta(m) => wire::encode_meta(&mut out, p.session, &m, psk),
            Body::Ack(a) => wire::encode_ack(&mut out, p.session, &a, psk),
            Body::Nack(n) => wire::encode_nack(&mut out, p.session, n.iter(), psk),
        };
        assert_eq!(out, data, "accepted packet does not re-encode identically");
    }
});
