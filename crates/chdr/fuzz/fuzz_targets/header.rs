#![no_main]
//! The header parser never panics, and whatever it accepts re-encodes to the same word.
use libfuzzer_sys::fuzz_target;
use radiohost_chdr::wire::ChdrHeader;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = ChdrHeader::parse(data) {
        assert!(h.length as usize <= data.len());
        let word = u64::from_le_bytes(data[..8].try_into().unwrap());
        assert_eq!(h.encode().unwrap(), word);
    }
});
