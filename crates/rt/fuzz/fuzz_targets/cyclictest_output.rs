//! cyclictest's verbose output parser never panics; a parsed line formats
//! back to the same sample.
#![no_main]
use libfuzzer_sys::fuzz_target;
use radiohost_rt::cyclictest;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        if let Some(s) = cyclictest::parse_line(line) {
            let again = format!("{}:{}:{}", s.thread, s.cycle, s.value);
            assert_eq!(cyclictest::parse_line(&again), Some(s));
        }
    }
    if let Ok(p) = cyclictest::parse_output(&text) {
        assert!(!p.histogram.is_empty());
    }
});
