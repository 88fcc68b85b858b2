//! The frame-configuration parser and validator must return a config or an error
//! for any input, never panic; a config that validates must survive a JSON round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use radiohost_phy::FrameConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = FrameConfig::from_json(text) {
        // Derived sizes must be consistent and computable without overflow.
        assert!(cfg.blocks_per_symbol >= 1);
        assert!(cfg.coded_bits_per_symbol() <= cfg.symbol_bits());
        let _ = cfg.frame_len();
        let again = serde_json_roundtrip(&cfg);
        assert_eq!(again.file, cfg.file);
    }
});

fn serde_json_roundtrip(cfg: &FrameConfig) -> FrameConfig {
    let text = radiohost_phy::config::to_json(&cfg.file);
    FrameConfig::from_json(&text).expect("a validated config re-validates")
}
