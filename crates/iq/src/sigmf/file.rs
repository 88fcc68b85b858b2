//! Writing, checking and reading recordings.

use super::{
    data_path, io_err, meta_path, with_suffix, DataType, Meta, Recording, Samples, SigMfError,
};
use crate::{Cf32, Ci16};
use serde_json::Value;
use std::fs;
use std::io::Write;
use std::path::Path;

/// Write `bytes` to `path` through a temporary file renamed into place.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), SigMfError> {
    let tmp = with_suffix(path, ".tmp");
    let mut f = fs::File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))
}

/// Lower-case hex SHA-512 of `bytes`, as `core:sha512` holds it.
pub fn sha512_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha512};
    hex(&Sha512::digest(bytes))
}

/// Lower-case hex of a digest.
pub(crate) fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The metadata a writer stores for `samples` samples (per channel): captures and
/// annotations sorted and checked to lie within the data, our namespace declared,
/// `core:sha512` set to `sha512` (the checksum of the bytes written, never one
/// carried over; `None`: left out). Returns the JSON document.
pub(crate) fn output_meta_json(
    meta: &Meta,
    samples: u64,
    sha512: Option<String>,
    meta_file: &Path,
) -> Result<Vec<u8>, SigMfError> {
    let mut meta = meta.clone();
    // Captures and annotations must be sorted by sample_start (SigMF 1.2).
    meta.captures.sort_by_key(|c| c.sample_start);
    meta.annotations.sort_by_key(|a| a.sample_start);
    check_layout(&meta, samples, meta_file, true)?;
    declare_own_extension(&mut meta);
    meta.global.sha512 = sha512;
    serde_json::to_vec_pretty(&meta).map_err(|source| SigMfError::Json {
        path: meta_file.to_path_buf(),
        source,
    })
}

fn write_recording(base: &Path, meta: &Meta, data: &[u8]) -> Result<(), SigMfError> {
    let meta_file = meta_path(base);
    let frame = (meta.datatype().map_or(1, DataType::sample_bytes) * meta.channels()) as u64;
    let json = output_meta_json(
        meta,
        data.len() as u64 / frame,
        Some(sha512_hex(data)),
        &meta_file,
    )?;
    // Data first: a meta file never points at missing data.
    write_atomically(&data_path(base), data)?;
    write_atomically(&meta_file, &json)
}

/// Our own namespace for fields SigMF has no core key for (`radiohost:inputs`, ...).
pub const EXTENSION: &str = "radiohost";

/// Declares the `radiohost` namespace in `core:extensions` when a field uses it, as
/// SigMF requires of every non-core namespace (the reference validator warns otherwise).
fn declare_own_extension(meta: &mut Meta) {
    let prefix = format!("{EXTENSION}:");
    let used = meta.global.extra.keys().any(|k| k.starts_with(&prefix))
        || meta
            .captures
            .iter()
            .any(|c| c.extra.keys().any(|k| k.starts_with(&prefix)))
        || meta
            .annotations
            .iter()
            .any(|a| a.extra.keys().any(|k| k.starts_with(&prefix)));
    if !used {
        return;
    }
    let list = meta
        .global
        .extra
        .entry("core:extensions")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(list) = list else {
        return; // not ours to repair; the reader of such a file reports it
    };
    if !list
        .iter()
        .any(|e| e.get("name").and_then(Value::as_str) == Some(EXTENSION))
    {
        list.push(serde_json::json!({
            "name": EXTENSION,
            "version": env!("CARGO_PKG_VERSION"),
            "optional": true,
        }));
    }
}

/// Checks that captures and annotations of `meta` lie within `samples` samples
/// (`writing`: a capture at 0 is allowed in an empty recording, which readers reject).
fn check_layout(meta: &Meta, samples: u64, path: &Path, writing: bool) -> Result<(), SigMfError> {
    let invalid = |what: String| SigMfError::Invalid {
        path: path.to_path_buf(),
        what,
    };
    for c in &meta.captures {
        if c.sample_start >= samples && !(writing && c.sample_start == 0) {
            return Err(invalid(format!(
                "capture at core:sample_start {} lies beyond the {samples} samples of the data; sample_start is a file index (put a sample-clock time in core:global_index)",
                c.sample_start
            )));
        }
    }
    for a in &meta.annotations {
        let end = a.sample_start.saturating_add(a.sample_count.unwrap_or(0));
        if end > samples {
            return Err(invalid(format!(
                "annotation at core:sample_start {} (core:sample_count {:?}) ends beyond the {samples} samples of the data",
                a.sample_start, a.sample_count
            )));
        }
    }
    Ok(())
}

pub(crate) fn check_writer(
    meta: &Meta,
    wanted: DataType,
    samples: usize,
) -> Result<(), SigMfError> {
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
    // Non-conforming datasets (samples inside another file) would be misread as
    // plain sample data.
    let nonconforming = ["core:dataset", "core:trailing_bytes"]
        .into_iter()
        .find(|k| meta.global.extra.contains_key(*k))
        .or_else(|| {
            meta.captures
                .iter()
                .any(|c| c.extra.contains_key("core:header_bytes"))
                .then_some("core:header_bytes")
        });
    if let Some(key) = nonconforming {
        return Err(invalid(format!(
            "{key}: non-conforming datasets are not supported; extract the samples into a .sigmf-data file beside the metadata"
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

/// Checks raw data bytes of a recording against its metadata: a whole number of
/// samples, not empty (unless `core:metadata_only`), long enough for every capture
/// and annotation, and matching `core:sha512` when present. Returns the number of
/// samples (per channel). `meta_file` and `data_file` name the files in errors.
pub fn check_data(
    meta: &Meta,
    bytes: &[u8],
    meta_file: &Path,
    data_file: &Path,
) -> Result<u64, SigMfError> {
    let datatype = meta
        .datatype()
        .ok_or_else(|| SigMfError::UnsupportedDatatype {
            path: meta_file.to_path_buf(),
            datatype: meta.global.datatype.clone(),
        })?;
    let samples = check_length(meta, datatype, bytes.len() as u64, data_file)?;
    if let Some(expected) = &meta.global.sha512 {
        let actual = sha512_hex(bytes);
        if !expected.eq_ignore_ascii_case(&actual) {
            return Err(SigMfError::ChecksumMismatch {
                path: data_file.to_path_buf(),
                expected: expected.clone(),
                actual,
            });
        }
    }
    Ok(samples)
}

/// The size checks of [`check_data`] on a data file of `len` bytes: a whole number
/// of samples, not empty (unless `core:metadata_only`), long enough for every
/// capture and annotation. Returns the number of samples (per channel).
pub(crate) fn check_length(
    meta: &Meta,
    datatype: DataType,
    len: u64,
    data_file: &Path,
) -> Result<u64, SigMfError> {
    let frame = (datatype.sample_bytes() * meta.channels()) as u64;
    if !len.is_multiple_of(frame) {
        return Err(SigMfError::Truncated {
            path: data_file.to_path_buf(),
            bytes: len,
            channels: meta.channels(),
            datatype: datatype.name(),
            frame_bytes: frame,
            expected_bytes: len.div_ceil(frame) * frame,
        });
    }
    let samples = len / frame;
    // The samples the metadata claims: past every capture start and annotation end.
    let mut needed = (1u64, "a SigMF recording".to_string());
    for c in &meta.captures {
        let n = c.sample_start.saturating_add(1);
        if n > needed.0 {
            needed = (n, format!("the capture at sample {}", c.sample_start));
        }
    }
    for a in &meta.annotations {
        let n = a.sample_start.saturating_add(a.sample_count.unwrap_or(0));
        if n > needed.0 {
            needed = (
                n,
                format!(
                    "the annotation at sample {} ({} samples)",
                    a.sample_start,
                    a.sample_count.unwrap_or(0)
                ),
            );
        }
    }
    let metadata_only = meta.global.extra.get("core:metadata_only") == Some(&Value::Bool(true));
    if samples == 0 && !metadata_only {
        return Err(SigMfError::Empty {
            path: data_file.to_path_buf(),
            channels: meta.channels(),
            datatype: datatype.name(),
            expected_samples: needed.0,
            expected_bytes: needed.0.saturating_mul(frame),
        });
    }
    if samples < needed.0 && !metadata_only {
        return Err(SigMfError::TooShort {
            path: data_file.to_path_buf(),
            bytes: len,
            samples,
            what: needed.1,
            expected_samples: needed.0,
            expected_bytes: needed.0.saturating_mul(frame),
        });
    }
    Ok(samples)
}

/// Read a recording (give the base name or either file's name). The data is
/// checked with [`check_data`]: truncated, empty or checksum-mismatched data is
/// an error naming the file.
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
    check_data(&meta, &bytes, &meta_file, &data_file)?;
    let samples = decode_data(datatype, &bytes);
    Ok(Recording { meta, samples })
}
