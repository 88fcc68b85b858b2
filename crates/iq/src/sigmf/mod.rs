//! SigMF 1.2 recordings: a JSON `.sigmf-meta` file beside a raw `.sigmf-data` file.
//!
//! We write `cf32_le` and `ci16_le`, and read those plus their big-endian forms and
//! `ci8`, so captures open in GNU Radio, inspectrum, SigMF's Python tools and others.
//! Fields of other namespaces in a recording we read are kept and written back.
//! Writes go to a temporary file that is renamed into place, so a crash never leaves
//! a half-written recording under the final name.
//!
//! Writers compute `core:sha512` of the data they write and refuse captures or
//! annotations beyond it (`core:sample_start` is a file index; a sample-clock time
//! belongs in `core:global_index`). Readers verify `core:sha512` when present and
//! refuse empty data, data that is not a whole number of samples, and data shorter
//! than the captures and annotations claim, naming the file and the size expected.

use crate::{Cf32, Ci16};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
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
    #[error("{path}: {bytes} bytes is not a whole number of {channels}-channel {datatype} samples ({frame_bytes} bytes each); expected a multiple of {frame_bytes} bytes, e.g. {expected_bytes}: truncated or wrong datatype? Re-record it or fix core:datatype/core:num_channels")]
    Truncated {
        path: PathBuf,
        bytes: u64,
        channels: usize,
        datatype: &'static str,
        /// Bytes of one sample of every channel.
        frame_bytes: u64,
        /// The next whole number of samples, in bytes.
        expected_bytes: u64,
    },
    #[error("{path}: the data file is empty; expected at least {expected_bytes} bytes ({expected_samples} {channels}-channel {datatype} sample(s)). Record some samples, or set core:metadata_only in the metadata")]
    Empty {
        path: PathBuf,
        channels: usize,
        datatype: &'static str,
        expected_samples: u64,
        expected_bytes: u64,
    },
    #[error("{path}: holds {samples} samples ({bytes} bytes) but {what} needs {expected_samples}; expected at least {expected_bytes} bytes: the data file is truncated, or the metadata belongs to another recording")]
    TooShort {
        path: PathBuf,
        bytes: u64,
        samples: u64,
        what: String,
        expected_samples: u64,
        expected_bytes: u64,
    },
    #[error("{path}: SHA-512 of the data is {actual} but core:sha512 in the .sigmf-meta beside it says {expected}: the data file is corrupt or was changed; re-record or re-copy it (or remove core:sha512 if the change was intended)")]
    ChecksumMismatch {
        path: PathBuf,
        expected: String,
        actual: String,
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
    /// SHA-512 of the data file, lower-case hex. Writers here always compute it from
    /// the bytes they write; readers verify it when present.
    #[serde(
        rename = "core:sha512",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub sha512: Option<String>,
    /// Fields we do not interpret (other namespaces), kept for round trips.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `captures`: a segment of the data starting at `sample_start`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Capture {
    /// Index into the data file (in samples, all channels counted once).
    #[serde(rename = "core:sample_start")]
    pub sample_start: u64,
    /// Where this segment's first sample lies in the original stream: the
    /// sample-clock tick for our recorders.
    #[serde(
        rename = "core:global_index",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub global_index: Option<u64>,
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
                sha512: None,
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

pub(crate) fn with_suffix(base: &Path, suffix: &str) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SigMfError + '_ {
    move |source| SigMfError::Io {
        path: path.to_path_buf(),
        source,
    }
}

mod file;
mod stream;
pub use file::{
    check_data, decode_data, parse_meta, read, sha512_hex, write_cf32, write_ci16, EXTENSION,
};
pub use stream::{SampleReader, SampleWriter};

#[cfg(test)]
mod tests;
