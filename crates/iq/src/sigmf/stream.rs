//! Streaming access to recordings too large to hold: [`SampleReader`] reads a data
//! file chunk by chunk and verifies `core:sha512` as it goes; [`SampleWriter`]
//! writes one chunk by chunk to a temporary file, hashing it, and renames it into
//! place with its metadata only when [`SampleWriter::finish`] succeeds. Each holds
//! one chunk of bytes, sized by the largest chunk its caller passes.

use super::file::{check_length, check_writer, hex, output_meta_json, write_atomically};
use super::{data_path, io_err, meta_path, parse_meta, with_suffix, DataType, Meta, SigMfError};
use crate::{Cf32, Ci16};
use sha2::{Digest, Sha512};
use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

/// Reads a recording's samples in chunks, as floats (integer recordings scaled so
/// full scale is 1.0, as [`super::Samples::to_cf32`]), interleaved per sample.
///
/// The size checks of [`super::check_data`] run at [`SampleReader::open`]; the
/// checksum is verified by [`SampleReader::finish`] once every byte was read.
pub struct SampleReader {
    meta: Meta,
    datatype: DataType,
    data_file: PathBuf,
    file: File,
    samples: u64,
    remaining: u64,
    hasher: Sha512,
    bytes: Vec<u8>,
}

impl SampleReader {
    /// Opens a recording (base name or either file's name).
    pub fn open(path: &Path) -> Result<Self, SigMfError> {
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
        let file = File::open(&data_file).map_err(io_err(&data_file))?;
        let len = file.metadata().map_err(io_err(&data_file))?.len();
        let samples = check_length(&meta, datatype, len, &data_file)?;
        Ok(Self {
            meta,
            datatype,
            data_file,
            file,
            samples,
            remaining: len,
            hasher: Sha512::new(),
            bytes: Vec::new(),
        })
    }

    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    pub fn channels(&self) -> usize {
        self.meta.channels()
    }

    /// Samples per channel in the data file.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Bytes held by the chunk buffer.
    pub fn buffer_capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Replaces `out` with the next at most `max_samples` samples (per channel; all
    /// channels interleaved, so `out` holds up to `max_samples * channels`). Returns
    /// the samples per channel read, 0 at the end of the data.
    pub fn read_cf32(
        &mut self,
        out: &mut Vec<Cf32>,
        max_samples: usize,
    ) -> Result<usize, SigMfError> {
        out.clear();
        let frame = (self.datatype.sample_bytes() * self.channels()) as u64;
        let frames = (self.remaining / frame).min(max_samples as u64) as usize;
        let len = frames * frame as usize;
        if self.bytes.len() < len {
            self.bytes.reserve_exact(len - self.bytes.len());
        }
        self.bytes.resize(len, 0);
        let mut filled = 0;
        while filled < len {
            match self.file.read(&mut self.bytes[filled..len]) {
                Ok(0) => {
                    return Err(SigMfError::Io {
                        path: self.data_file.clone(),
                        source: std::io::Error::new(
                            ErrorKind::UnexpectedEof,
                            format!(
                                "the data file shrank while it was read ({} bytes missing); do not change a recording while it is processed",
                                self.remaining - filled as u64
                            ),
                        ),
                    })
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(SigMfError::Io {
                        path: self.data_file.clone(),
                        source,
                    })
                }
            }
        }
        self.remaining -= len as u64;
        let bytes = &self.bytes[..len];
        // Hashing is most of a read's cost: only when there is a checksum to check.
        if self.meta.global.sha512.is_some() {
            self.hasher.update(bytes);
        }
        decode_into(self.datatype, bytes, out);
        Ok(frames)
    }

    /// After the last chunk: checks `core:sha512` (when present) against every byte
    /// read. An error if data is left unread or the checksum does not match.
    pub fn finish(self) -> Result<(), SigMfError> {
        if self.remaining > 0 {
            return Err(SigMfError::Invalid {
                path: self.data_file,
                what: format!(
                    "{} bytes were left unread, so core:sha512 could not be checked",
                    self.remaining
                ),
            });
        }
        if let Some(expected) = &self.meta.global.sha512 {
            let actual = hex(&self.hasher.finalize());
            if !expected.eq_ignore_ascii_case(&actual) {
                return Err(SigMfError::ChecksumMismatch {
                    path: self.data_file,
                    expected: expected.clone(),
                    actual,
                });
            }
        }
        Ok(())
    }
}

/// Appends the samples of raw `bytes` of `datatype` to `out` as floats.
fn decode_into(datatype: DataType, bytes: &[u8], out: &mut Vec<Cf32>) {
    let c = bytes.chunks_exact(datatype.sample_bytes());
    let f = |b: &[u8], le: bool| {
        let b = [b[0], b[1], b[2], b[3]];
        if le {
            f32::from_le_bytes(b)
        } else {
            f32::from_be_bytes(b)
        }
    };
    let i = |b: &[u8], le: bool| {
        let b = [b[0], b[1]];
        if le {
            i16::from_le_bytes(b)
        } else {
            i16::from_be_bytes(b)
        }
    };
    match datatype {
        DataType::Cf32Le => out.extend(c.map(|s| Cf32::new(f(&s[..4], true), f(&s[4..], true)))),
        DataType::Cf32Be => out.extend(c.map(|s| Cf32::new(f(&s[..4], false), f(&s[4..], false)))),
        DataType::Ci16Le => {
            out.extend(c.map(|s| Ci16::new(i(&s[..2], true), i(&s[2..], true)).to_cf32()))
        }
        DataType::Ci16Be => {
            out.extend(c.map(|s| Ci16::new(i(&s[..2], false), i(&s[2..], false)).to_cf32()))
        }
        // As `decode_data`: 8-bit samples scaled up to the 16-bit range.
        DataType::Ci8 => out.extend(
            c.map(|s| Ci16::new((s[0] as i8 as i16) << 8, (s[1] as i8 as i16) << 8).to_cf32()),
        ),
    }
}

/// Writes a `cf32_le` or `ci16_le` recording chunk by chunk: the data goes to
/// `<base>.sigmf-data.tmp`, hashed as it is written; [`SampleWriter::finish`] renames
/// it into place and writes the metadata with the data's own `core:sha512`. Dropped
/// unfinished (an error on the way), it removes the temporary file.
pub struct SampleWriter {
    base: PathBuf,
    meta: Meta,
    datatype: DataType,
    tmp: PathBuf,
    file: Option<File>,
    hasher: Sha512,
    /// Compute `core:sha512` (see [`SampleWriter::without_checksum`]).
    checksum: bool,
    bytes: Vec<u8>,
    values: u64,
}

impl SampleWriter {
    /// Starts a recording at `base` described by `meta` (its datatype, `cf32_le` or
    /// `ci16_le`, picks the writer; its captures and annotations are checked
    /// against the samples written at [`SampleWriter::finish`]).
    pub fn create(base: &Path, meta: &Meta) -> Result<Self, SigMfError> {
        let datatype = match meta.datatype() {
            Some(d @ (DataType::Cf32Le | DataType::Ci16Le)) => d,
            other => {
                return Err(SigMfError::WrongWriter {
                    wanted: "cf32_le or ci16_le",
                    datatype: other.map_or("unsupported", DataType::name),
                })
            }
        };
        let tmp = with_suffix(&data_path(base), ".tmp");
        let file = File::create(&tmp).map_err(io_err(&tmp))?;
        Ok(Self {
            base: base.to_path_buf(),
            meta: meta.clone(),
            datatype,
            tmp,
            file: Some(file),
            hasher: Sha512::new(),
            checksum: true,
            bytes: Vec::new(),
            values: 0,
        })
    }

    /// Leaves `core:sha512` out of the metadata (it is optional in SigMF) and so
    /// skips hashing, most of a cf32 write's CPU time.
    pub fn without_checksum(mut self) -> Self {
        self.checksum = false;
        self
    }

    /// Bytes held by the chunk buffer.
    pub fn buffer_capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Samples per channel written so far.
    pub fn samples(&self) -> u64 {
        self.values / self.meta.channels() as u64
    }

    /// Appends interleaved samples (a whole number of samples of every channel) to
    /// a `cf32_le` recording.
    pub fn write_cf32(&mut self, samples: &[Cf32]) -> Result<(), SigMfError> {
        check_writer(&self.meta, DataType::Cf32Le, samples.len())?;
        self.bytes.clear();
        // Exactly one chunk: amortised growth would hold up to twice that.
        self.bytes
            .reserve_exact(samples.len() * self.datatype.sample_bytes());
        for s in samples {
            self.bytes.extend_from_slice(&s.re.to_le_bytes());
            self.bytes.extend_from_slice(&s.im.to_le_bytes());
        }
        self.flush_chunk(samples.len())
    }

    /// Appends interleaved samples to a `ci16_le` recording.
    pub fn write_ci16(&mut self, samples: &[Ci16]) -> Result<(), SigMfError> {
        check_writer(&self.meta, DataType::Ci16Le, samples.len())?;
        self.bytes.clear();
        // Exactly one chunk: amortised growth would hold up to twice that.
        self.bytes
            .reserve_exact(samples.len() * self.datatype.sample_bytes());
        for s in samples {
            self.bytes.extend_from_slice(&s.re.to_le_bytes());
            self.bytes.extend_from_slice(&s.im.to_le_bytes());
        }
        self.flush_chunk(samples.len())
    }

    /// Appends interleaved float samples, quantised for a `ci16_le` recording
    /// (full scale 1.0, as [`Ci16::from_cf32`]) or as they are for `cf32_le`.
    pub fn write_from_cf32(&mut self, samples: &[Cf32]) -> Result<(), SigMfError> {
        if self.datatype == DataType::Cf32Le {
            return self.write_cf32(samples);
        }
        check_writer(&self.meta, DataType::Ci16Le, samples.len())?;
        self.bytes.clear();
        // Exactly one chunk: amortised growth would hold up to twice that.
        self.bytes
            .reserve_exact(samples.len() * self.datatype.sample_bytes());
        for s in samples {
            let q = Ci16::from_cf32(*s);
            self.bytes.extend_from_slice(&q.re.to_le_bytes());
            self.bytes.extend_from_slice(&q.im.to_le_bytes());
        }
        self.flush_chunk(samples.len())
    }

    fn flush_chunk(&mut self, values: usize) -> Result<(), SigMfError> {
        let Some(file) = self.file.as_mut() else {
            return Err(SigMfError::Invalid {
                path: self.tmp.clone(),
                what: "written after an earlier write failed".into(),
            });
        };
        if self.checksum {
            self.hasher.update(&self.bytes);
        }
        if let Err(source) = file.write_all(&self.bytes) {
            self.file = None;
            return Err(SigMfError::Io {
                path: self.tmp.clone(),
                source,
            });
        }
        self.values += values as u64;
        Ok(())
    }

    /// Syncs the data, renames it into place and writes the metadata (data first, so
    /// a meta file never points at missing data). Returns the metadata written.
    pub fn finish(mut self) -> Result<Meta, SigMfError> {
        let meta_file = meta_path(&self.base);
        let data_file = data_path(&self.base);
        let Some(file) = self.file.take() else {
            return Err(SigMfError::Invalid {
                path: self.tmp.clone(),
                what: "an earlier write failed".into(),
            });
        };
        let sha512 = self
            .checksum
            .then(|| hex(&std::mem::take(&mut self.hasher).finalize()));
        let json = output_meta_json(&self.meta, self.samples(), sha512.clone(), &meta_file)?;
        file.sync_all().map_err(io_err(&self.tmp))?;
        drop(file);
        fs::rename(&self.tmp, &data_file).map_err(io_err(&data_file))?;
        write_atomically(&meta_file, &json)?;
        let mut meta = self.meta.clone();
        meta.global.sha512 = sha512;
        Ok(meta)
    }
}

impl Drop for SampleWriter {
    fn drop(&mut self) {
        // Unfinished (or finished: then the rename already moved it and this fails).
        let _ = fs::remove_file(&self.tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{read, sha512_hex, write_cf32, write_ci16, Annotation, Samples};
    use super::*;

    #[test]
    fn chunked_read_matches_whole_read_and_checks_sha512() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("r");
        let samples: Vec<Ci16> = (0..1001 * 2)
            .map(|i| Ci16::new(i as i16, -(i as i16)))
            .collect();
        write_ci16(
            &base,
            &Meta::new(DataType::Ci16Le, 1e6).num_channels(2),
            &samples,
        )
        .unwrap();
        let mut r = SampleReader::open(&base).unwrap();
        assert_eq!((r.samples(), r.channels()), (1001, 2));
        let (mut all, mut chunk) = (Vec::new(), Vec::new());
        loop {
            let n = r.read_cf32(&mut chunk, 100).unwrap();
            if n == 0 {
                break;
            }
            assert!(n <= 100 && chunk.len() == 2 * n);
            all.extend_from_slice(&chunk);
        }
        assert!(r.buffer_capacity() <= 100 * 2 * 4);
        r.finish().unwrap();
        assert_eq!(all, read(&base).unwrap().samples.to_cf32());

        // One flipped byte: the whole-file checksum no longer matches.
        let data = data_path(&base);
        let mut bytes = fs::read(&data).unwrap();
        bytes[17] ^= 1;
        fs::write(&data, &bytes).unwrap();
        let mut r = SampleReader::open(&base).unwrap();
        while r.read_cf32(&mut chunk, 64).unwrap() > 0 {}
        let err = r.finish().unwrap_err().to_string();
        assert!(
            err.contains("r.sigmf-data") && err.contains("SHA-512"),
            "{err}"
        );
    }

    #[test]
    fn reader_refuses_truncated_data_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("t");
        write_cf32(
            &base,
            &Meta::new(DataType::Cf32Le, 1.0),
            &[Cf32::new(1.0, 2.0); 4],
        )
        .unwrap();
        let data = data_path(&base);
        let bytes = fs::read(&data).unwrap();
        fs::write(&data, &bytes[..13]).unwrap();
        let err = SampleReader::open(&base).err().unwrap().to_string();
        assert!(err.contains("t.sigmf-data") && err.contains("16"), "{err}");
    }

    #[test]
    fn chunked_write_equals_one_shot_write() {
        let dir = tempfile::tempdir().unwrap();
        let samples: Vec<Cf32> = (0..300).map(|i| Cf32::new(i as f32 * 0.01, -0.5)).collect();
        let meta = Meta::new(DataType::Cf32Le, 1e6)
            .num_channels(3)
            .annotation(Annotation {
                sample_start: 20,
                sample_count: Some(30),
                ..Default::default()
            });
        write_cf32(&dir.path().join("one"), &meta, &samples).unwrap();
        let mut w = SampleWriter::create(&dir.path().join("chunked"), &meta).unwrap();
        for c in samples.chunks(3 * 7) {
            w.write_cf32(c).unwrap();
        }
        assert!(w.buffer_capacity() <= 3 * 7 * 8);
        let written = w.finish().unwrap();
        let one = fs::read(data_path(&dir.path().join("one"))).unwrap();
        let chunked = fs::read(data_path(&dir.path().join("chunked"))).unwrap();
        assert_eq!(one, chunked);
        assert_eq!(written.global.sha512, Some(sha512_hex(&chunked)));
        let rec = read(&dir.path().join("chunked")).unwrap();
        assert_eq!(rec.samples, Samples::Cf32(samples));
        assert_eq!(rec.meta.annotations, meta.annotations);
        assert!(!with_suffix(&data_path(&dir.path().join("chunked")), ".tmp").exists());
    }

    #[test]
    fn unfinished_or_invalid_write_leaves_no_recording() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("w");
        // An annotation beyond the 2 samples written: refused at finish.
        let meta = Meta::new(DataType::Ci16Le, 1.0).annotation(Annotation {
            sample_start: 5,
            sample_count: Some(1),
            ..Default::default()
        });
        let mut w = SampleWriter::create(&base, &meta).unwrap();
        w.write_from_cf32(&[Cf32::new(0.5, -0.5), Cf32::new(2.0, 0.0)])
            .unwrap();
        assert!(w.finish().is_err());
        assert!(!data_path(&base).exists() && !meta_path(&base).exists());
        assert!(!with_suffix(&data_path(&base), ".tmp").exists());
        let w = SampleWriter::create(&base, &Meta::new(DataType::Cf32Be, 1.0));
        assert!(w.is_err());
    }
}
