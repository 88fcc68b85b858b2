#![no_main]
//! Stream status: parse never panics; accepted values re-encode and parse back equal.
use libfuzzer_sys::fuzz_target;
use radiohost_chdr::wire::{StreamStatus, STREAM_STATUS_BYTES};

fuzz_target!(|data: &[u8]| {
    let Ok((h, s)) = StreamStatus::parse(data) else { return };
    let mut buf = [0u8; STREAM_STATUS_BYTES];
    s.write(&mut buf, h.seq_num, h.dst_epid).unwrap();
    assert_eq!(StreamStatus::parse(&buf).unwrap().1, s);
});
