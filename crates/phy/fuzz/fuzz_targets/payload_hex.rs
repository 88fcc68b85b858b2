//! The truth-file payload decoder (hex to bits) never panics, and whatever it
//! accepts re-encodes to the same bits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use radiohost_phy::recording::{bits_to_hex, hex_to_bits};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let n = u16::from_le_bytes([data[0], data[1]]) as usize;
    let Ok(text) = std::str::from_utf8(&data[2..]) else {
        return;
    };
    if let Some(bits) = hex_to_bits(text, n) {
        assert_eq!(bits.len(), n);
        assert_eq!(
            hex_to_bits(&bits_to_hex(&bits), n).as_deref(),
            Some(&bits[..])
        );
    }
});
