//! JSON tap files: tapped-delay-line descriptions of an M x N channel.
//!
//! ```json
//! {
//!   "radiohost_taps": 1,
//!   "inputs": 2, "outputs": 2,
//!   "sample_rate": 100e6,
//!   "description": "two-ray 2x2",
//!   "paths": [
//!     { "input": 0, "output": 0, "taps": [[1.0, 0.0], [0.0, 0.0], [0.25, -0.1]] },
//!     { "input": 1, "output": 0, "sparse": [
//!         { "delay": 3, "re": 0.5, "im": 0.0 },
//!         { "delay": 40, "gain_db": -12.0, "phase_deg": 90.0 } ] }
//!   ]
//! }
//! ```
//!
//! * `radiohost_taps` is the format version (1). `inputs`/`outputs` default to 1.
//! * A path gives either dense `taps` (`[re, im]` pairs from delay 0) or `sparse` taps at
//!   integer sample delays, each as `re`/`im` or as `gain_db`/`phase_deg`.
//! * Paths not listed are zero; a path listed twice, a port out of range, a delay listed
//!   twice or a non-finite number is an error. Unknown fields are errors (typos).
//! * The same responses can be stored as a SigMF cf32 recording with `inputs * outputs`
//!   channels, channel `n * inputs + m` holding path `m -> n` (see the CLI).

use radiohost_iq::Cf32;
use serde::{Deserialize, Serialize};

use crate::taps::{MimoTaps, MAX_PORTS, MAX_TAPS};

/// Current format version.
pub const TAP_FILE_VERSION: u32 = 1;

/// What is wrong with a tap file.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TapFileError {
    #[error("not a valid tap file: {0}")]
    Json(String),
    #[error("tap file version {0} is not supported (this build reads version {TAP_FILE_VERSION})")]
    Version(u32),
    #[error("{inputs}x{outputs} ports: each side needs 1 to {MAX_PORTS} ports")]
    Ports { inputs: usize, outputs: usize },
    #[error("path #{index}: port {input} -> {output} is outside the {inputs}x{outputs} channel")]
    PortOutOfRange {
        index: usize,
        input: usize,
        output: usize,
        inputs: usize,
        outputs: usize,
    },
    #[error("path #{index}: input {input} -> output {output} is listed twice")]
    DuplicatePath {
        index: usize,
        input: usize,
        output: usize,
    },
    #[error("path #{index}: give either \"taps\" or \"sparse\", not {what}")]
    TapForm { index: usize, what: &'static str },
    #[error("path #{index}, tap #{tap}: {what}")]
    BadTap {
        index: usize,
        tap: usize,
        what: String,
    },
    #[error("path #{index}: delay {delay} is listed twice")]
    DuplicateDelay { index: usize, delay: u64 },
    #[error("path #{index}: {len} taps exceed the limit of {MAX_TAPS}")]
    TooLong { index: usize, len: u64 },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRepr {
    radiohost_taps: u32,
    #[serde(default = "one")]
    inputs: usize,
    #[serde(default = "one")]
    outputs: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sample_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    paths: Vec<PathRepr>,
}

fn one() -> usize {
    1
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PathRepr {
    input: usize,
    output: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    taps: Option<Vec<[f64; 2]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sparse: Option<Vec<SparseTap>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SparseTap {
    delay: u64,
    #[serde(default)]
    re: Option<f64>,
    #[serde(default)]
    im: Option<f64>,
    #[serde(default)]
    gain_db: Option<f64>,
    #[serde(default)]
    phase_deg: Option<f64>,
}

/// A parsed tap file.
#[derive(Debug, Clone, PartialEq)]
pub struct TapFile {
    /// The responses (all paths zero-padded to one length).
    pub taps: MimoTaps,
    /// Sample rate the delays refer to, if the file says.
    pub sample_rate: Option<f64>,
    /// Free text from the file.
    pub description: Option<String>,
}

/// Parses a tap file from JSON text. Never panics; every problem is a [`TapFileError`].
pub fn parse_tap_file(text: &str) -> Result<TapFile, TapFileError> {
    let file: FileRepr =
        serde_json::from_str(text).map_err(|e| TapFileError::Json(e.to_string()))?;
    if file.radiohost_taps != TAP_FILE_VERSION {
        return Err(TapFileError::Version(file.radiohost_taps));
    }
    let (inputs, outputs) = (file.inputs, file.outputs);
    if inputs == 0 || outputs == 0 || inputs > MAX_PORTS || outputs > MAX_PORTS {
        return Err(TapFileError::Ports { inputs, outputs });
    }
    let mut paths: Vec<Option<Vec<Cf32>>> = vec![None; inputs * outputs];
    for (index, p) in file.paths.iter().enumerate() {
        if p.input >= inputs || p.output >= outputs {
            return Err(TapFileError::PortOutOfRange {
                index,
                input: p.input,
                output: p.output,
                inputs,
                outputs,
            });
        }
        let slot = &mut paths[p.output * inputs + p.input];
        if slot.is_some() {
            return Err(TapFileError::DuplicatePath {
                index,
                input: p.input,
                output: p.output,
            });
        }
        *slot = Some(match (&p.taps, &p.sparse) {
            (Some(dense), None) => dense_path(index, dense)?,
            (None, Some(sparse)) => sparse_path(index, sparse)?,
            (Some(_), Some(_)) => {
                return Err(TapFileError::TapForm {
                    index,
                    what: "both",
                })
            }
            (None, None) => {
                return Err(TapFileError::TapForm {
                    index,
                    what: "neither",
                })
            }
        });
    }
    let len = paths
        .iter()
        .flatten()
        .map(Vec::len)
        .max()
        .unwrap_or(1)
        .max(1);
    let paths = paths
        .into_iter()
        .map(|p| {
            let mut p = p.unwrap_or_default();
            p.resize(len, Cf32::new(0.0, 0.0));
            p
        })
        .collect();
    let taps = MimoTaps::from_paths(inputs, outputs, paths)
        .map_err(|e| TapFileError::Json(e.to_string()))?;
    Ok(TapFile {
        taps,
        sample_rate: file.sample_rate,
        description: file.description,
    })
}

fn finite32(index: usize, tap: usize, v: f64) -> Result<f32, TapFileError> {
    let f = v as f32;
    if f.is_finite() {
        Ok(f)
    } else {
        Err(TapFileError::BadTap {
            index,
            tap,
            what: format!("{v} is not a finite f32"),
        })
    }
}

fn dense_path(index: usize, dense: &[[f64; 2]]) -> Result<Vec<Cf32>, TapFileError> {
    if dense.len() > MAX_TAPS {
        return Err(TapFileError::TooLong {
            index,
            len: dense.len() as u64,
        });
    }
    dense
        .iter()
        .enumerate()
        .map(|(tap, [re, im])| {
            Ok(Cf32::new(
                finite32(index, tap, *re)?,
                finite32(index, tap, *im)?,
            ))
        })
        .collect()
}

fn sparse_path(index: usize, sparse: &[SparseTap]) -> Result<Vec<Cf32>, TapFileError> {
    let max_delay = sparse.iter().map(|t| t.delay).max().unwrap_or(0);
    if max_delay >= MAX_TAPS as u64 {
        return Err(TapFileError::TooLong {
            index,
            len: max_delay.saturating_add(1),
        });
    }
    let mut out = vec![Cf32::new(0.0, 0.0); max_delay as usize + 1];
    let mut seen = vec![false; out.len()];
    for (tap, t) in sparse.iter().enumerate() {
        let value = match (t.re, t.im, t.gain_db, t.phase_deg) {
            (re, im, None, None) if re.is_some() || im.is_some() => Cf32::new(
                finite32(index, tap, re.unwrap_or(0.0))?,
                finite32(index, tap, im.unwrap_or(0.0))?,
            ),
            (None, None, Some(db), phase) => {
                let amp = 10f64.powf(db / 20.0);
                let ph = phase.unwrap_or(0.0).to_radians();
                Cf32::new(
                    finite32(index, tap, amp * ph.cos())?,
                    finite32(index, tap, amp * ph.sin())?,
                )
            }
            _ => {
                return Err(TapFileError::BadTap {
                    index,
                    tap,
                    what: "give re/im or gain_db (with optional phase_deg), not a mix or nothing"
                        .into(),
                })
            }
        };
        let d = t.delay as usize;
        if std::mem::replace(&mut seen[d], true) {
            return Err(TapFileError::DuplicateDelay {
                index,
                delay: t.delay,
            });
        }
        out[d] = value;
    }
    Ok(out)
}

/// Writes `taps` as a tap file (dense form; all-zero paths are left out).
pub fn write_tap_file(
    taps: &MimoTaps,
    sample_rate: Option<f64>,
    description: Option<&str>,
) -> String {
    let mut paths = Vec::new();
    for n in 0..taps.outputs() {
        for m in 0..taps.inputs() {
            let p = taps.path(n, m);
            if p.iter().all(|t| t.re == 0.0 && t.im == 0.0) {
                continue;
            }
            paths.push(PathRepr {
                input: m,
                output: n,
                taps: Some(
                    p.iter()
                        .map(|t| [f64::from(t.re), f64::from(t.im)])
                        .collect(),
                ),
                sparse: None,
            });
        }
    }
    let file = FileRepr {
        radiohost_taps: TAP_FILE_VERSION,
        inputs: taps.inputs(),
        outputs: taps.outputs(),
        sample_rate,
        description: description.map(str::to_owned),
        paths,
    };
    // Serialising plain numbers and strings cannot fail.
    serde_json::to_string_pretty(&file).unwrap_or_default()
}
