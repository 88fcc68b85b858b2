//! Tap-file parser: any bytes give a tap file or a `TapFileError`, never a panic, and
//! whatever parses survives a write/parse round trip unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use radiohost_dsp::channel::{parse_tap_file, write_tap_file};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(file) = parse_tap_file(text) {
        let written = write_tap_file(&file.taps, None, file.description.as_deref());
        let back = parse_tap_file(&written).expect("a written tap file parses");
        assert_eq!(back.taps.inputs(), file.taps.inputs());
        assert_eq!(back.taps.outputs(), file.taps.outputs());
        let nonzero = file
            .taps
            .paths()
            .iter()
            .flatten()
            .any(|t| t.re != 0.0 || t.im != 0.0);
        if nonzero {
            assert_eq!(back.taps, file.taps);
        }
    }
});
