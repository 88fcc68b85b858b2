#![no_main]
//! Link specs from the command line: parsing never panics, and a parsed link
//! can carry traffic without panicking either.
use libfuzzer_sys::fuzz_target;
use radiohost_testbed::{Link, LinkConfig};
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(cfg) = LinkConfig::parse(text) {
        let mut link = Link::new(cfg);
        for i in 0..32u64 {
            let _ = link.offer(Duration::from_micros(i * 10), 1500);
        }
    }
});
