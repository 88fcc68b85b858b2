#![no_main]
//! Stream command: parse never panics; accepted values re-encode and parse back equal.
use libfuzzer_sys::fuzz_target;
use radiohost_chdr::wire::{StreamCommand, STREAM_COMMAND_BYTES};

fuzz_target!(|data: &[u8]| {
    let Ok((h, c)) = StreamCommand::parse(data) else { return };
    let mut buf = [0u8; STREAM_COMMAND_BYTES];
    c.write(&mut buf, h.seq_num, h.dst_epid).unwrap();
    assert_eq!(StreamCommand::parse(&buf).unwrap().1, c);
});
