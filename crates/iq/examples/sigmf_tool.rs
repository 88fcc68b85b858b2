//! A small SigMF reader/writer over `radiohost_iq::sigmf`, for interoperability
//! tests against other SigMF implementations (tests/python/test_sigmf_interop.py).
//!
//! ```text
//! sigmf_tool write <base> <cf32|ci16> <channels> <samples>   # a known test pattern
//! sigmf_tool read <base or .sigmf-meta>                      # the recording as JSON
//! ```
//!
//! The pattern: sample `i` of channel `c` is `(a, b)` with
//! `a = (7i + 13c) mod 200 - 100` and `b = (3i + 29c) mod 200 - 100`, stored as
//! `a/128 + j b/128` in cf32 and `300a + j 300b` in ci16. The recording has two
//! captures (at 0 and at samples/2, with `core:global_index`) and one annotation.
//! `read` checks the data like every radiohost reader does (size, `core:sha512`)
//! and exits with status 2 and the error on stderr when it fails.

use radiohost_iq::sigmf::{self, Annotation, DataType, Meta, Samples};
use radiohost_iq::{Cf32, Ci16};
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;

fn pattern(i: usize, c: usize) -> (i32, i32) {
    (
        ((7 * i + 13 * c) % 200) as i32 - 100,
        ((3 * i + 29 * c) % 200) as i32 - 100,
    )
}

fn write(base: &Path, datatype: &str, channels: usize, samples: usize) -> Result<(), String> {
    let dt = match datatype {
        "cf32" => DataType::Cf32Le,
        "ci16" => DataType::Ci16Le,
        other => return Err(format!("datatype {other:?}: use cf32 or ci16")),
    };
    if channels == 0 || samples < 16 {
        return Err("need at least 1 channel and 16 samples".into());
    }
    let mut meta = Meta::new(dt, 1e6)
        .num_channels(channels)
        .description("radiohost sigmf_tool test pattern")
        .capture(0, Some(2.4e9))
        .capture(samples as u64 / 2, Some(2.45e9))
        .annotation(Annotation {
            sample_start: 5,
            sample_count: Some(10),
            label: Some("burst".into()),
            ..Default::default()
        });
    meta.captures[0].global_index = Some(1_000);
    meta.captures[1].global_index = Some(50_000);
    let points = (0..samples).flat_map(|i| (0..channels).map(move |c| pattern(i, c)));
    match dt {
        DataType::Cf32Le => {
            let v: Vec<Cf32> = points
                .map(|(a, b)| Cf32::new(a as f32 / 128.0, b as f32 / 128.0))
                .collect();
            sigmf::write_cf32(base, &meta, &v)
        }
        _ => {
            let v: Vec<Ci16> = points
                .map(|(a, b)| Ci16::new((300 * a) as i16, (300 * b) as i16))
                .collect();
            sigmf::write_ci16(base, &meta, &v)
        }
    }
    .map_err(|e| e.to_string())
}

fn read(path: &Path) -> Result<Value, String> {
    let rec = sigmf::read(path).map_err(|e| e.to_string())?;
    let samples: Vec<Value> = match &rec.samples {
        Samples::Cf32(v) => v.iter().map(|s| json!([s.re, s.im])).collect(),
        Samples::Ci16(v) => v.iter().map(|s| json!([s.re, s.im])).collect(),
    };
    Ok(json!({
        "datatype": rec.meta.global.datatype,
        "channels": rec.meta.channels(),
        "sample_rate": rec.meta.global.sample_rate,
        "sha512": rec.meta.global.sha512,
        "captures": rec.meta.captures.iter()
            .map(|c| json!([c.sample_start, c.global_index, c.frequency])).collect::<Vec<_>>(),
        "annotations": rec.meta.annotations.iter()
            .map(|a| json!([a.sample_start, a.sample_count, a.label])).collect::<Vec<_>>(),
        "samples": samples,
    }))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["write", base, dt, ch, n] => match (ch.parse(), n.parse()) {
            (Ok(ch), Ok(n)) => write(Path::new(base), dt, ch, n).map(|()| Value::Null),
            _ => Err("channels and samples must be whole numbers".into()),
        },
        ["read", path] => read(Path::new(path)),
        _ => Err("usage: sigmf_tool write <base> <cf32|ci16> <channels> <samples> | sigmf_tool read <path>".into()),
    };
    match result {
        Ok(Value::Null) => ExitCode::SUCCESS,
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
