#![no_main]
//! The datagram decoder must never panic and must never report more samples
//! than the datagram carries.
use libfuzzer_sys::fuzz_target;
use radiohost_warp::wire::{decode, Message};

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = decode(data) {
        if let Message::Samples { header, words, .. } = d.message {
            assert_eq!(header.num_samples as usize, words.len());
            assert!(words.len() * 4 <= data.len());
        }
    }
});
