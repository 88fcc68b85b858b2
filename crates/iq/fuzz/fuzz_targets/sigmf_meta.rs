#![no_main]
//! SigMF metadata parsing never panics, and accepted metadata round-trips.
use libfuzzer_sys::fuzz_target;
use radiohost_iq::sigmf::{decode_data, parse_meta, DataType};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(meta) = parse_meta(data, Path::new("fuzz.sigmf-meta")) {
        let json = serde_json::to_vec(&meta).unwrap();
        let again = parse_meta(&json, Path::new("again.sigmf-meta")).unwrap();
        assert_eq!(again.global.datatype, meta.global.datatype);
    }
    for dt in [DataType::Cf32Le, DataType::Cf32Be, DataType::Ci16Le, DataType::Ci16Be, DataType::Ci8] {
        let s = decode_data(dt, data);
        assert_eq!(s.len(), data.len() / dt.sample_bytes());
    }
});
