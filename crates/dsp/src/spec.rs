//! A channel described by its parameters: a tap file (JSON or SigMF), a static
//! model (identity, Rayleigh) or a seeded fading model (AR(1), Jakes). The
//! offline filter (`chanemu file`) and the live emulator (`chdr chanemu`) both
//! build their channel here, so the same flags mean the same channel.

use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use radiohost_iq::sigmf::{self, DataType, Meta, SigMfError};
use radiohost_iq::Cf32;

use crate::channel::{
    ar1_rho_for_doppler, draw_rayleigh, parse_tap_file, write_tap_file, FadingChannel, FadingError,
    FadingProcess, PdpError, PowerDelayProfile, TapFileError,
};
use crate::{taps, DspError, MimoTaps};

/// Errors building or storing a channel. Each says which input to change.
#[derive(Debug, thiserror::Error)]
pub enum ChannelSpecError {
    #[error("{0:?} is not MxN (inputs x outputs), e.g. 2x2")]
    PortsSyntax(String),
    #[error("ports {0}: each side needs 1 to {max} ports", max = taps::MAX_PORTS)]
    PortsRange(String),
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("tap file {path}: {source}")]
    TapFile { path: PathBuf, source: TapFileError },
    #[error("impulse responses {path}: {source}")]
    Sigmf { path: PathBuf, source: SigMfError },
    #[error("{path}: {channels} channel(s) but no radiohost:inputs/outputs fields; give the ports (MxN)")]
    UnknownShape { path: PathBuf, channels: usize },
    #[error("{path}: {channels} channels cannot hold {inputs}x{outputs} paths")]
    ChannelCount {
        path: PathBuf,
        channels: usize,
        inputs: usize,
        outputs: usize,
    },
    #[error("ports {want:?} given but {path} describes a {got:?} channel (inputs, outputs)")]
    ShapeMismatch {
        path: PathBuf,
        want: (usize, usize),
        got: (usize, usize),
    },
    #[error("the identity model needs as many inputs as outputs, got {0}x{1}")]
    IdentityShape(usize, usize),
    #[error("ar1/jakes need a sample rate: the recording has none, give one")]
    NoSampleRate,
    #[error("update interval must be at least one block")]
    UpdateBlocks,
    #[error("Doppler {doppler_hz} Hz is out of range: 0 to {max_hz:.1} Hz for an update every {update_blocks} blocks ({interval_ms:.3} ms); the fading is sampled once per update, so fd must stay below half the update rate: lower the Doppler or the update interval")]
    DopplerRange {
        doppler_hz: f64,
        max_hz: f64,
        update_blocks: usize,
        interval_ms: f64,
    },
    #[error("power-delay profile: {0}")]
    Pdp(#[from] PdpError),
    #[error("fading model: {0}")]
    Fading(#[from] FadingError),
    #[error(transparent)]
    Dsp(#[from] DspError),
}

/// Parses `MxN` (inputs x outputs), each side 1 to [`taps::MAX_PORTS`].
pub fn parse_ports(s: &str) -> Result<(usize, usize), ChannelSpecError> {
    let (m, n) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| ChannelSpecError::PortsSyntax(s.to_string()))?;
    let parse = |v: &str| v.trim().parse::<usize>().ok();
    let (Some(m), Some(n)) = (parse(m), parse(n)) else {
        return Err(ChannelSpecError::PortsSyntax(s.to_string()));
    };
    if !(1..=taps::MAX_PORTS).contains(&m) || !(1..=taps::MAX_PORTS).contains(&n) {
        return Err(ChannelSpecError::PortsRange(s.to_string()));
    }
    Ok((m, n))
}

/// The channel models a spec can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ChannelModel {
    /// Port m to port m unchanged (M must equal N).
    Identity,
    /// Static i.i.d. Rayleigh taps with an exponential power-delay profile.
    Rayleigh,
    /// Rayleigh taps each following an AR(1) process, correlation J0(2 pi fd T).
    Ar1,
    /// Rayleigh taps each a Jakes sum of sinusoids (maximum Doppler fd).
    Jakes,
}

/// What to build: a tap file, or a model with its parameters.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ChannelSpec {
    /// A JSON tap file (`.json`) or SigMF cf32 impulse responses; wins over `model`.
    pub taps_file: Option<PathBuf>,
    pub model: ChannelModel,
    /// (inputs, outputs); `None`: the tap file's shape, else `default_ports`.
    pub ports: Option<(usize, usize)>,
    pub default_ports: (usize, usize),
    /// Taps of the model's exponential power-delay profile.
    pub model_taps: usize,
    /// Samples between model taps.
    pub spacing: usize,
    /// Power decay per model tap, dB.
    pub decay_db_per_tap: f32,
    pub seed: u64,
    pub doppler_hz: f64,
    /// Blocks between response updates of a fading model.
    pub update_blocks: usize,
    pub sinusoids: usize,
}

impl ChannelSpec {
    /// Per-tap decay that makes `length` taps decay `total_db` in all.
    pub fn per_tap_decay(length: usize, total_db: f32) -> f32 {
        if length > 1 {
            total_db / (length - 1) as f32
        } else {
            0.0
        }
    }
}

/// A built channel: fixed responses, or a fading model updated every
/// `update_blocks` blocks.
pub enum Channel {
    Static(MimoTaps),
    Fading {
        channel: Box<FadingChannel>,
        update_blocks: usize,
    },
}

impl Channel {
    /// The response in force at the start (the fading model's first one).
    pub fn initial_response(&self) -> Result<MimoTaps, ChannelSpecError> {
        Ok(match self {
            Channel::Static(t) => t.clone(),
            Channel::Fading { channel, .. } => {
                let mut t = channel.make_response();
                channel.write_response(&mut t)?;
                t
            }
        })
    }
}

/// Identity taps: port p to port p.
pub fn identity_taps(ports: usize) -> Result<MimoTaps, DspError> {
    let mut taps = MimoTaps::zeros(ports, ports, 1)?;
    for p in 0..ports {
        taps.path_mut(p, p)[0] = Cf32::new(1.0, 0.0);
    }
    Ok(taps)
}

/// Builds the channel of `spec` for convolution blocks of `block` samples at
/// `sample_rate` (needed by fading models). Returns it with a one-line description.
pub fn build_channel(
    spec: &ChannelSpec,
    block: usize,
    sample_rate: Option<f64>,
) -> Result<(Channel, String), ChannelSpecError> {
    if let Some(path) = &spec.taps_file {
        let taps = read_taps(path, spec.ports)?;
        let what = format!(
            "{}x{} taps from {} ({} taps)",
            taps.inputs(),
            taps.outputs(),
            path.display(),
            taps.max_len()
        );
        return Ok((Channel::Static(taps), what));
    }
    let (m, n) = spec.ports.unwrap_or(spec.default_ports);
    let pdp =
        || PowerDelayProfile::exponential(spec.model_taps, spec.spacing, spec.decay_db_per_tap);
    Ok(match spec.model {
        ChannelModel::Identity => {
            if m != n {
                return Err(ChannelSpecError::IdentityShape(m, n));
            }
            (
                Channel::Static(identity_taps(m)?),
                format!("{m}x{n} identity"),
            )
        }
        ChannelModel::Rayleigh => {
            let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
            let taps = draw_rayleigh(&pdp()?, m, n, &mut rng)?;
            let what = format!(
                "{m}x{n} Rayleigh, {} taps, {} dB/tap decay, seed {}",
                spec.model_taps, spec.decay_db_per_tap, spec.seed
            );
            (Channel::Static(taps), what)
        }
        ChannelModel::Ar1 | ChannelModel::Jakes => {
            let rate = sample_rate.ok_or(ChannelSpecError::NoSampleRate)?;
            if spec.update_blocks == 0 {
                return Err(ChannelSpecError::UpdateBlocks);
            }
            let interval_s = (spec.update_blocks * block) as f64 / rate;
            let max_hz = max_doppler_hz(interval_s);
            if !(0.0..=max_hz).contains(&spec.doppler_hz) {
                return Err(ChannelSpecError::DopplerRange {
                    doppler_hz: spec.doppler_hz,
                    max_hz,
                    update_blocks: spec.update_blocks,
                    interval_ms: interval_s * 1e3,
                });
            }
            let process = if spec.model == ChannelModel::Ar1 {
                FadingProcess::Ar1 {
                    rho: ar1_rho_for_doppler(spec.doppler_hz, interval_s),
                }
            } else {
                FadingProcess::Jakes {
                    doppler_hz: spec.doppler_hz,
                    interval_s,
                    sinusoids: spec.sinusoids,
                }
            };
            let channel = FadingChannel::new(pdp()?, m, n, process, spec.seed)?;
            let what = format!(
                "{m}x{n} {:?} fading, {} taps, fd {} Hz, update every {} blocks ({:.3} ms), seed {}",
                spec.model,
                spec.model_taps,
                spec.doppler_hz,
                spec.update_blocks,
                interval_s * 1e3,
                spec.seed
            );
            let update_blocks = spec.update_blocks;
            (
                Channel::Fading {
                    channel: Box::new(channel),
                    update_blocks,
                },
                what,
            )
        }
    })
}

/// Highest Doppler a fading model updated every `interval_s` represents without
/// aliasing: half the update rate.
pub fn max_doppler_hz(interval_s: f64) -> f64 {
    0.5 / interval_s
}

/// The first `count` responses of `channel`, one per update interval (what a
/// staggered swap applies to consecutive update intervals).
pub fn response_schedule(
    mut channel: FadingChannel,
    count: usize,
) -> Result<Vec<MimoTaps>, FadingError> {
    let mut schedule = Vec::with_capacity(count);
    for r in 0..count {
        if r > 0 {
            channel.advance();
        }
        let mut t = channel.make_response();
        channel.write_response(&mut t)?;
        schedule.push(t);
    }
    Ok(schedule)
}

fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// Reads a JSON tap file or a SigMF cf32 impulse-response recording (channel
/// `n * inputs + m` = path m -> n), checked against `ports` when given.
pub fn read_taps(path: &Path, ports: Option<(usize, usize)>) -> Result<MimoTaps, ChannelSpecError> {
    let taps = if is_json(path) {
        let text = std::fs::read_to_string(path).map_err(|source| ChannelSpecError::Io {
            path: path.into(),
            source,
        })?;
        parse_tap_file(&text)
            .map_err(|source| ChannelSpecError::TapFile {
                path: path.into(),
                source,
            })?
            .taps
    } else {
        let rec = sigmf::read(path).map_err(|source| ChannelSpecError::Sigmf {
            path: path.into(),
            source,
        })?;
        let channels = rec.meta.channels();
        let field = |k: &str| {
            rec.meta
                .global
                .extra
                .get(k)
                .and_then(Value::as_u64)
                .map(|v| v as usize)
        };
        let (inputs, outputs) = match (field("radiohost:inputs"), field("radiohost:outputs"), ports)
        {
            (Some(m), Some(n), _) => (m, n),
            (_, _, Some(p)) => p,
            _ if channels == 1 => (1, 1),
            _ => {
                return Err(ChannelSpecError::UnknownShape {
                    path: path.into(),
                    channels,
                })
            }
        };
        if inputs.checked_mul(outputs) != Some(channels) {
            return Err(ChannelSpecError::ChannelCount {
                path: path.into(),
                channels,
                inputs,
                outputs,
            });
        }
        let samples = rec.samples.to_cf32();
        let paths = (0..channels)
            .map(|c| samples.iter().skip(c).step_by(channels).copied().collect())
            .collect();
        MimoTaps::from_paths(inputs, outputs, paths)?
    };
    let got = (taps.inputs(), taps.outputs());
    match ports {
        Some(want) if want != got => Err(ChannelSpecError::ShapeMismatch {
            path: path.into(),
            want,
            got,
        }),
        _ => Ok(taps),
    }
}

/// Writes responses as a tap file (`.json`) or a SigMF cf32 recording.
pub fn write_taps(
    path: &Path,
    taps: &MimoTaps,
    sample_rate: Option<f64>,
    what: &str,
) -> Result<(), ChannelSpecError> {
    if is_json(path) {
        return std::fs::write(path, write_tap_file(taps, sample_rate, Some(what))).map_err(
            |source| ChannelSpecError::Io {
                path: path.into(),
                source,
            },
        );
    }
    let len = taps.max_len();
    let channels = taps.inputs() * taps.outputs();
    let mut data = vec![Cf32::new(0.0, 0.0); len * channels];
    for (c, p) in taps.paths().iter().enumerate() {
        for (i, v) in p.iter().enumerate() {
            data[i * channels + c] = *v;
        }
    }
    let mut meta = Meta::new(DataType::Cf32Le, sample_rate.unwrap_or(1.0))
        .num_channels(channels)
        .description(what);
    meta.global.sample_rate = sample_rate;
    meta.global
        .extra
        .insert("radiohost:inputs".into(), taps.inputs().into());
    meta.global
        .extra
        .insert("radiohost:outputs".into(), taps.outputs().into());
    sigmf::write_cf32(path, &meta, &data).map_err(|source| ChannelSpecError::Sigmf {
        path: path.into(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("radiohost-spec-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn ports_parse_and_refuse_nonsense() {
        assert_eq!(parse_ports("2x3").unwrap(), (2, 3));
        assert_eq!(parse_ports("4X4").unwrap(), (4, 4));
        for bad in ["", "2", "0x1", "1x0", "ax2", "2x65", "1x1x1"] {
            assert!(parse_ports(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn responses_round_trip_through_sigmf_and_json() {
        let dir = scratch_dir("taps");
        let paths = (0..6)
            .map(|p| {
                (0..5)
                    .map(|i| Cf32::new(p as f32 + 0.5, -(i as f32)))
                    .collect()
            })
            .collect();
        let taps = MimoTaps::from_paths(2, 3, paths).unwrap();
        for name in ["t.json", "t.sigmf-meta"] {
            let path = dir.join(name);
            write_taps(&path, &taps, Some(1e6), "test").unwrap();
            assert_eq!(read_taps(&path, None).unwrap(), taps, "{name}");
            assert!(read_taps(&path, Some((3, 2))).is_err());
        }
        std::fs::remove_dir_all(dir).ok();
    }

    fn spec(model: ChannelModel) -> ChannelSpec {
        ChannelSpec {
            taps_file: None,
            model,
            ports: Some((2, 2)),
            default_ports: (1, 1),
            model_taps: 8,
            spacing: 1,
            decay_db_per_tap: 1.0,
            seed: 3,
            doppler_hz: 10.0,
            update_blocks: 4,
            sinusoids: 8,
        }
    }

    #[test]
    fn models_build_the_shapes_asked_for() {
        let (c, _) = build_channel(&spec(ChannelModel::Rayleigh), 64, None).unwrap();
        let t = c.initial_response().unwrap();
        assert_eq!((t.inputs(), t.outputs(), t.max_len()), (2, 2, 8));
        // Fading models need the sample rate to turn blocks into seconds.
        assert!(matches!(
            build_channel(&spec(ChannelModel::Jakes), 64, None),
            Err(ChannelSpecError::NoSampleRate)
        ));
        let (c, _) = build_channel(&spec(ChannelModel::Ar1), 64, Some(1e6)).unwrap();
        assert!(matches!(
            c,
            Channel::Fading {
                update_blocks: 4,
                ..
            }
        ));
        let mut bad = spec(ChannelModel::Identity);
        bad.ports = Some((1, 2));
        assert!(build_channel(&bad, 64, None).is_err());
    }

    #[test]
    fn doppler_beyond_half_the_update_rate_is_refused_with_the_range() {
        // 4 blocks of 64 samples at 1 MS/s: an update every 256 us, so fd <= 1953.1 Hz.
        for model in [ChannelModel::Ar1, ChannelModel::Jakes] {
            let mut s = spec(model);
            s.doppler_hz = 1953.0;
            assert!(build_channel(&s, 64, Some(1e6)).is_ok());
            for bad in [1e12, 1954.0, -1.0, f64::NAN, f64::INFINITY] {
                s.doppler_hz = bad;
                let err = build_channel(&s, 64, Some(1e6)).err().unwrap().to_string();
                assert!(
                    err.contains("0 to 1953.1 Hz") && err.contains("0.256 ms"),
                    "{bad}: {err}"
                );
            }
        }
    }
}
