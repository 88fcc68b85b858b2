#![no_main]
//! The receiver state machine fed arbitrary datagrams (split on 0xFF 0xFF markers):
//! never panics, never reports more bytes than the object it believes in.
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use radiohost_pmt::{Receiver, ReceiverConfig};

fuzz_target!(|data: &[u8]| {
    let from = "10.0.0.1:7000".parse().unwrap();
    let mut r = Receiver::new(ReceiverConfig {
        buffer_segments: 8,
        max_object_len: 1 << 20,
        ..Default::default()
    });
    let mut out = Vec::new();
    let mut sink = [0u8; 4096];
    let mut now = Duration::ZERO;
    for chunk in data.split(|&b| b == 0xFF) {
        now += Duration::from_millis(1);
        r.handle_datagram(now, from, chunk);
        r.handle_timeout(now);
        while r.poll_transmit(now, &mut out).is_some() {}
        while r.read(&mut sink) > 0 {}
        if let Some(len) = r.object_len() {
            assert!(r.received_bytes() <= len);
        }
    }
});
