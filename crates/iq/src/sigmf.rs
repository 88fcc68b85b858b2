//! SigMF 1.2 recordings: a JSON `.sigmf-meta` file beside a raw `.sigmf-data` file.
//!
//! We write `cf32_le` and `ci16_le`, and read those plus their big-endian forms and
//! `ci8`, so captures open in GNU Radio, inspectrum, SigMF's Python tools and others.
//! Fields of other namespaces in a recording we read are kept and written back.
//! Writes go to a temporary file that is renamed into place, so a crash never leaves
//! a half-written recording under the final name.

use crate::{Cf32, Ci16};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use thiserror::Error;

pub const SIGMF_VERSION: &str = "1.2.0";

#[derive(Debug, Error)]
pub enum SigMfError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not valid SigMF metadata: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: datatype {datatype:?} is not supported (supported: cf32_le, cf32_be, ci16_le, ci16_be, ci8)")]
    UnsupportedDatatype { path: PathBuf, datatype: String },
    #[error("{path}: {bytes} bytes is not a whole number of {channels}-channel {datatype} samples ({sample_bytes} bytes each): truncated or wrong datatype?")]
    Truncated {
        path: PathBuf,
        bytes: u64,
        channels: usize,
        datatype: &'static str,
        sample_bytes: usize,
    },
    #[error("{path}: {what}")]
    Invalid { path: PathBuf, what: String },
    #[error("{0} samples were given, which is not a multiple of num_channels = {1}")]
    ChannelMismatch(usize, usize),
    #[error("cannot write {wanted} samples into a recording whose datatype is {datatype}")]
    WrongWriter {
        wanted: &'static str,
        datatype: &'static str,
    },
}

/// Sample formats of the data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataType {
    Cf32Le,
    Cf32Be,
    Ci16Le,
    Ci16Be,
    Ci8,
}

impl DataType {
    pub fn name(self) -> &'static str {
        match self {
            DataType::Cf32Le => "cf32_le",
            DataType::Cf32Be => "cf32_be",
            DataType::Ci16Le => "ci16_le",
            DataType::Ci16Be => "ci16_be",
            DataType::Ci8 => "ci8",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "cf32_le" => DataType::Cf32Le,
            "cf32_be" => DataType::Cf32Be,
            "ci16_le" => DataType::Ci16Le,
            "ci16_be" => DataType::Ci16Be,
            "ci8" | "ci8_le" | "ci8_be" => DataType::Ci8,
            _ => return None,
        })
    }

    /// Bytes per complex sample of one channel.
    pub fn sample_bytes(self) -> usize {
        match self {
            DataType::Cf32Le | DataType::Cf32Be => 8,
            DataType::Ci16Le | DataType::Ci16Be => 4,
            DataType::Ci8 => 2,
        }
    }
}

/// The `global` object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Global {
    #[serde(rename = "core:datatype")]
    pub datatype: String,
    #[serde(
        rename = "core:sample_rate",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub sample_rate: Option<f64>,
    #[serde(rename = "core:version")]
    pub version: String,
    #[serde(
        rename = "core:num_channels",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub num_channels: Option<usize>,
    #[serde(
        rename = "core:description",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub description: Option<String>,
    #[serde(
        rename = "core:author",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub author: Option<String>,
    #[serde(rename = "core:hw", skip_serializing_if = "Option::is_none", default)]
    pub hw: Option<String>,
    #[serde(
        rename = "core:recorder",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub recorder: Option<String>,
    /// Fields we do not interpret (other namespaces), kept for round trips.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `captures`: a segment of the data starting at `sample_start`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Capture {
    #[serde(rename = "core:sample_start")]
    pub sample_start: u64,
    #[serde(
        rename = "core:frequency",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub frequency: Option<f64>,
    #[serde(
        rename = "core:datetime",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub datetime: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `annotations`: a labelled span of samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Annotation {
    #[serde(rename = "core:sample_start")]
    pub sample_start: u64,
    #[serde(
        rename = "core:sample_count",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub sample_count: Option<u64>,
    #[serde(
        rename = "core:label",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub label: Option<String>,
    #[serde(
        rename = "core:comment",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub comment: Option<String>,
    #[serde(
        rename = "core:freq_lower_edge",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub freq_lower_edge: Option<f64>,
    #[serde(
        rename = "core:freq_upper_edge",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub freq_upper_edge: Option<f64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The whole `.sigmf-meta` document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub global: Global,
    #[serde(default)]
    pub captures: Vec<Capture>,
    #[serde(default)]
    pub annotations: Vec<Annotation>,
}

impl Meta {
    /// A recording of `datatype` at `sample_rate_hz`, one channel, one capture at 0.
    pub fn new(datatype: DataType, sample_rate_hz: f64) -> Self {
        Self {
            global: Global {
                datatype: datatype.name().to_string(),
                sample_rate: Some(sample_rate_hz),
                version: SIGMF_VERSION.to_string(),
                num_channels: None,
                description: None,
                author: None,
                hw: None,
                recorder: Some(concat!("radiohost ", env!("CARGO_PKG_VERSION")).to_string()),
                extra: Map::new(),
            },
            captures: vec![Capture::default()],
            annotations: Vec::new(),
        }
    }

    pub fn num_channels(mut self, n: usize) -> Self {
        self.global.num_channels = Some(n);
        self
    }

    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.global.description = Some(text.into());
        self
    }

    pub fn author(mut self, text: impl Into<String>) -> Self {
        self.global.author = Some(text.into());
        self
    }

    pub fn hw(mut self, text: impl Into<String>) -> Self {
        self.global.hw = Some(text.into());
        self
    }

    /// Add a capture segment (replacing the default one at 0 if it starts there).
    pub fn capture(mut self, sample_start: u64, frequency: Option<f64>) -> Self {
        self.captures.retain(|c| c.sample_start != sample_start);
        self.captures.push(Capture {
            sample_start,
            frequency,
            ..Default::default()
        });
        self.captures.sort_by_key(|c| c.sample_start);
        self
    }

    pub fn annotation(mut self, a: Annotation) -> Self {
        self.annotations.push(a);
        self.annotations.sort_by_key(|a| a.sample_start);
        self
    }

    pub fn datatype(&self) -> Option<DataType> {
        DataType::parse(&self.global.datatype)
    }

    pub fn channels(&self) -> usize {
        self.global.num_channels.unwrap_or(1).max(1)
    }
}

/// Decoded samples, in the recording's own precision.
#[derive(Clone, Debug, PartialEq)]
pub enum Samples {
    Cf32(Vec<Cf32>),
    Ci16(Vec<Ci16>),
}

impl Samples {
    pub fn len(&self) -> usize {
        match self {
            Samples::Cf32(v) => v.len(),
            Samples::Ci16(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// As floats; integer recordings are scaled so full scale is 1.0.
    pub fn to_cf32(&self) -> Vec<Cf32> {
        match self {
            Samples::Cf32(v) => v.clone(),
            Samples::Ci16(v) => v.iter().map(|s| s.to_cf32()).collect(),
        }
    }
}

/// A recording read from disk. Multi-channel samples are interleaved per sample
/// (channel 0 of sample 0, channel 1 of sample 0, ...), the SigMF convention.
#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    pub meta: Meta,
    pub samples: Samples,
}

impl Recording {
    /// Samples of one channel, as floats.
    pub fn channel_cf32(&self, channel: usize) -> Vec<Cf32> {
        let n = self.meta.channels();
        self.samples
            .to_cf32()
            .into_iter()
            .skip(channel)
            .step_by(n)
            .collect()
    }
}

/// `base` with any `.sigmf-meta`/`.sigmf-data`/`.sigmf` extension removed.
pub fn base_path(path: &Path) -> PathBuf {
    let s = path.to_string_lossy();
    for ext in [".sigmf-meta", ".sigmf-data", ".sigmf"] {
        if let Some(stripped) = s.strip_suffix(ext) {
            return PathBuf::from(stripped);
        }
    }
    path.to_path_buf()
}

pub fn meta_path(base: &Path) -> PathBuf {
    with_suffix(&base_path(base), ".sigmf-meta")
}

pub fn data_path(base: &Path) -> PathBuf {
    with_suffix(&base_path(base), ".sigmf-data")
}

fn with_suffix(base: &Path, suffix: &str) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SigMfError + '_ {
    move |source| SigMfError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Write `bytes` to `path` through a temporary file renamed into place.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), SigMfError> {
    let tmp = with_suffix(path, ".tmp");
    let mut f = fs::File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))
}

fn write_recording(base: &Path, meta: &Meta, data: &[u8]) -> Result<(), SigMfError> {
    let json = serde_json::to_vec_pretty(meta).map_err(|source| SigMfError::Json {
        path: meta_path(base),
        source,
    })?;
    // Data first: a meta file never points at missing data.
    write_atomically(&data_path(base), data)?;
    write_atomically(&meta_path(base), &json)
}

fn check_writer(meta: &Meta, wanted: DataType, samples: usize) -> Result<(), SigMfError> {
    if meta.datatype() != Some(wanted) {
        return Err(SigMfError::WrongWriter {
            wanted: wanted.name(),
            datatype: meta.datatype().map_or("unsupported", DataType::name),
        });
    }
    if !samples.is_multiple_of(meta.channels()) {
        return Err(SigMfError::ChannelMismatch(samples, meta.channels()));
    }
    Ok(())
}

/// Write a `cf32_le` recording (`meta` must say `cf32_le`).
pub fn write_cf32(base: &Path, meta: &Meta, samples: &[Cf32]) -> Result<(), SigMfError> {
    check_writer(meta, DataType::Cf32Le, samples.len())?;
    let mut data = Vec::with_capacity(samples.len() * 8);
    for s in samples {
        data.extend_from_slice(&s.re.to_le_bytes());
        data.extend_from_slice(&s.im.to_le_bytes());
    }
    write_recording(base, meta, &data)
}

/// Write a `ci16_le` recording (`meta` must say `ci16_le`).
pub fn write_ci16(base: &Path, meta: &Meta, samples: &[Ci16]) -> Result<(), SigMfError> {
    check_writer(meta, DataType::Ci16Le, samples.len())?;
    let mut data = Vec::with_capacity(samples.len() * 4);
    for s in samples {
        data.extend_from_slice(&s.re.to_le_bytes());
        data.extend_from_slice(&s.im.to_le_bytes());
    }
    write_recording(base, meta, &data)
}

/// Parse and validate a `.sigmf-meta` document.
pub fn parse_meta(json: &[u8], path: &Path) -> Result<Meta, SigMfError> {
    let meta: Meta = serde_json::from_slice(json).map_err(|source| SigMfError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    let invalid = |what: String| SigMfError::Invalid {
        path: path.to_path_buf(),
        what,
    };
    if meta.global.num_channels == Some(0) {
        return Err(invalid("core:num_channels must be at least 1".into()));
    }
    if let Some(rate) = meta.global.sample_rate {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(invalid(format!("core:sample_rate {rate} must be positive")));
        }
    }
    if !meta.global.version.starts_with("1.") {
        return Err(invalid(format!(
            "core:version {:?} is not a SigMF 1.x version",
            meta.global.version
        )));
    }
    Ok(meta)
}

/// Decode raw data bytes of `datatype`.
pub fn decode_data(datatype: DataType, bytes: &[u8]) -> Samples {
    let sample = datatype.sample_bytes();
    let chunks = bytes.chunks_exact(sample);
    let f32_at = |c: &[u8], i: usize, le: bool| {
        let b = [c[i], c[i + 1], c[i + 2], c[i + 3]];
        if le {
            f32::from_le_bytes(b)
        } else {
            f32::from_be_bytes(b)
        }
    };
    let i16_at = |c: &[u8], i: usize, le: bool| {
        let b = [c[i], c[i + 1]];
        if le {
            i16::from_le_bytes(b)
        } else {
            i16::from_be_bytes(b)
        }
    };
    match datatype {
        DataType::Cf32Le | DataType::Cf32Be => {
            let le = datatype == DataType::Cf32Le;
            Samples::Cf32(
                chunks
                    .map(|c| Cf32::new(f32_at(c, 0, le), f32_at(c, 4, le)))
                    .collect(),
            )
        }
        DataType::Ci16Le | DataType::Ci16Be => {
            let le = datatype == DataType::Ci16Le;
            Samples::Ci16(
                chunks
                    .map(|c| Ci16::new(i16_at(c, 0, le), i16_at(c, 2, le)))
                    .collect(),
            )
        }
        // Scale 8-bit samples up to the 16-bit range so `to_cf32` stays in [-1, 1].
        DataType::Ci8 => Samples::Ci16(
            chunks
                .map(|c| Ci16::new((c[0] as i8 as i16) << 8, (c[1] as i8 as i16) << 8))
                .collect(),
        ),
    }
}

/// Read a recording (give the base name or either file's name).
pub fn read(path: &Path) -> Result<Recording, SigMfError> {
    let meta_file = meta_path(path);
    let data_file = data_path(path);
    let json = fs::read(&meta_file).map_err(io_err(&meta_file))?;
    let meta = parse_meta(&json, &meta_file)?;
    let datatype = meta
        .datatype()
        .ok_or_else(|| SigMfError::UnsupportedDatatype {
            path: meta_file.clone(),
            datatype: meta.global.datatype.clone(),
        })?;
    let bytes = fs::read(&data_file).map_err(io_err(&data_file))?;
    let frame = datatype.sample_bytes() * meta.channels();
    if !bytes.len().is_multiple_of(frame) {
        return Err(SigMfError::Truncated {
            path: data_file,
            bytes: bytes.len() as u64,
            channels: meta.channels(),
            datatype: datatype.name(),
            sample_bytes: datatype.sample_bytes(),
        });
    }
    let total = (bytes.len() / frame) as u64;
    if let Some(c) = meta.captures.iter().find(|c| c.sample_start > total) {
        return Err(SigMfError::Invalid {
            path: meta_file,
            what: format!(
                "capture starts at sample {} but the data holds only {total} samples",
                c.sample_start
            ),
        });
    }
    let samples = decode_data(datatype, &bytes);
    Ok(Recording { meta, samples })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cf32_roundtrip_keeps_meta_and_samples() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("capture");
        let samples: Vec<Cf32> = (0..64)
            .map(|i| Cf32::new(i as f32, -(i as f32) / 3.0))
            .collect();
        let meta = Meta::new(DataType::Cf32Le, 1e6)
            .num_channels(2)
            .description("test")
            .capture(0, Some(2.4e9))
            .annotation(Annotation {
                sample_start: 4,
                sample_count: Some(8),
                label: Some("burst".into()),
                ..Default::default()
            });
        write_cf32(&base, &meta, &samples).unwrap();
        let rec = read(&base.with_extension("sigmf-meta")).unwrap();
        assert_eq!(rec.meta, meta);
        assert_eq!(rec.samples, Samples::Cf32(samples.clone()));
        assert_eq!(rec.channel_cf32(1)[3], samples[7]);
        // The file is plain SigMF JSON other tools read.
        let text = fs::read_to_string(meta_path(&base)).unwrap();
        assert!(text.contains("\"core:datatype\": \"cf32_le\""));
        assert!(text.contains("\"core:sample_start\": 4"));
    }

    #[test]
    fn ci16_roundtrip_and_foreign_fields_survive() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("warp");
        let samples: Vec<Ci16> = (0..10).map(|i| Ci16::new(i * 100, -i)).collect();
        write_ci16(&base, &Meta::new(DataType::Ci16Le, 40e6), &samples).unwrap();
        let mut json: Value = serde_json::from_slice(&fs::read(meta_path(&base)).unwrap()).unwrap();
        json["global"]["antenna:gain"] = Value::from(3.5);
        fs::write(meta_path(&base), serde_json::to_vec(&json).unwrap()).unwrap();
        let rec = read(&base).unwrap();
        assert_eq!(rec.samples, Samples::Ci16(samples));
        assert_eq!(rec.meta.global.extra["antenna:gain"], Value::from(3.5));
    }

    #[test]
    fn truncated_data_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("t");
        write_ci16(
            &base,
            &Meta::new(DataType::Ci16Le, 1.0),
            &[Ci16::new(1, 2); 4],
        )
        .unwrap();
        let data = data_path(&base);
        let mut bytes = fs::read(&data).unwrap();
        bytes.pop();
        fs::write(&data, bytes).unwrap();
        let err = read(&base).unwrap_err().to_string();
        assert!(
            err.contains("15 bytes") && err.contains("truncated"),
            "{err}"
        );
    }

    #[test]
    fn bad_metadata_names_the_problem() {
        let p = Path::new("x.sigmf-meta");
        let e = parse_meta(br#"{"global":{"core:datatype":"cf32_le","core:version":"1.2.0","core:num_channels":0}}"#, p)
            .unwrap_err();
        assert!(e.to_string().contains("num_channels"), "{e}");
        let e = parse_meta(b"{not json", p).unwrap_err();
        assert!(e.to_string().contains("not valid SigMF"), "{e}");
        let e = write_cf32(
            Path::new("/nonexistent/x"),
            &Meta::new(DataType::Ci16Le, 1.0),
            &[],
        )
        .unwrap_err();
        assert!(matches!(e, SigMfError::WrongWriter { .. }));
    }

    #[test]
    fn big_endian_and_ci8_decode() {
        let be = [0x3f, 0x80, 0, 0, 0xbf, 0x80, 0, 0];
        assert_eq!(
            decode_data(DataType::Cf32Be, &be),
            Samples::Cf32(vec![Cf32::new(1.0, -1.0)])
        );
        assert_eq!(
            decode_data(DataType::Ci8, &[1, 0xff]),
            Samples::Ci16(vec![Ci16::new(256, -256)])
        );
    }
}
