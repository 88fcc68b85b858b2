//! Frame configuration: a JSON file with Agora-like field names, parsed strictly
//! (unknown fields are errors) and validated into a [`FrameConfig`] whose derived
//! quantities every kernel and pipeline share.

use std::path::Path;

use radiohost_ldpc::{BaseGraph, CodeParams, LIFTING_SIZES};
use serde::{Deserialize, Serialize};

use crate::qam::Modulation;

/// The file format, exactly as written by people.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameConfigFile {
    /// Base-station antennas M.
    pub bs_ant_num: usize,
    /// Single-antenna users K.
    pub ue_ant_num: usize,
    pub fft_size: usize,
    /// Data subcarriers per OFDM symbol.
    pub ofdm_data_num: usize,
    /// First data subcarrier, counted from the lowest frequency (DC at fft_size/2).
    /// Default: centred, `(fft_size - ofdm_data_num) / 2`.
    #[serde(default)]
    pub ofdm_data_start: Option<usize>,
    pub cp_len: usize,
    /// One letter per symbol: P pilot, U uplink data, D downlink data, G guard.
    pub frame_schedule: String,
    /// "QPSK", "16QAM", "64QAM" or "256QAM".
    pub modulation: String,
    /// LDPC base graph, 1 or 2.
    #[serde(default = "default_base_graph")]
    pub base_graph: u8,
    /// Lifting size; default: the largest whose code block fits one symbol.
    #[serde(default)]
    pub zc: Option<usize>,
    /// Code rate K/E; default 1/3 (BG1) or 1/5 (BG2).
    #[serde(default)]
    pub code_rate: Option<f64>,
    #[serde(default = "default_decoder_iter")]
    pub decoder_iter: usize,
    /// "frequency_orthogonal" (default) or "time_orthogonal".
    #[serde(default = "default_pilot_layout")]
    pub pilot_layout: String,
    /// Per-antenna SNR of each user's signal for generated data, in dB.
    #[serde(default = "default_snr_db")]
    pub snr_db: f64,
    #[serde(default)]
    pub channel: ChannelFile,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Sample rate in Hz recorded in SigMF files; default `fft_size` x 15 kHz.
    #[serde(default)]
    pub sample_rate: Option<f64>,
    /// Adjacent data subcarriers sharing one zero-forcing detector (Agora's
    /// `zf_block_size`). Default: `ue_ant_num` with frequency-orthogonal pilots (each
    /// user's pilot comb measures the channel once per `ue_ant_num` subcarriers, so a
    /// finer detector adds no channel information), 1 with time-orthogonal pilots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zf_block: Option<usize>,
}

/// Channel model section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelFile {
    /// "flat" or "selective".
    pub model: String,
    /// Tap profile for "selective" (delay in samples, relative power in dB).
    #[serde(default)]
    pub taps: Vec<TapFile>,
}

impl Default for ChannelFile {
    fn default() -> Self {
        Self {
            model: "flat".into(),
            taps: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TapFile {
    pub delay: usize,
    pub power_db: f64,
}

fn default_base_graph() -> u8 {
    1
}
fn default_decoder_iter() -> usize {
    5
}
fn default_pilot_layout() -> String {
    "frequency_orthogonal".into()
}
fn default_snr_db() -> f64 {
    30.0
}
fn default_seed() -> u64 {
    1
}

/// A configuration that failed to load, naming the field and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid frame configuration JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("field `{field}`: {reason}")]
    Field { field: &'static str, reason: String },
}

fn bad(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        field,
        reason: reason.into(),
    }
}

/// Kind of one OFDM symbol of the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    Pilot,
    Uplink,
    Downlink,
    Guard,
}

/// How users share the pilot symbols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PilotLayout {
    /// One pilot symbol; user `k` sends on data subcarriers `i` with `i % K == k`,
    /// the receiver interpolates between them.
    FrequencyOrthogonal,
    /// K pilot symbols; user `k` sends on every data subcarrier of pilot symbol `k`.
    TimeOrthogonal,
}

/// Channel model for generated data.
#[derive(Clone, Debug, PartialEq)]
pub enum ChannelModel {
    /// One i.i.d. Rayleigh coefficient per antenna-user pair.
    Flat,
    /// Taps `(delay in samples, linear power)`, powers normalised to sum to 1, each
    /// i.i.d. Rayleigh per antenna-user pair.
    Selective(Vec<(usize, f64)>),
}

/// A validated frame configuration with its derived quantities.
#[derive(Clone, Debug)]
pub struct FrameConfig {
    pub file: FrameConfigFile,
    pub antennas: usize,
    pub users: usize,
    pub fft_size: usize,
    pub cp_len: usize,
    pub data_num: usize,
    pub data_start: usize,
    pub schedule: Vec<SymbolKind>,
    pub modulation: Modulation,
    pub pilot_layout: PilotLayout,
    pub channel: ChannelModel,
    pub code: CodeParams,
    pub decoder_iter: usize,
    /// Code blocks each user sends per data symbol.
    pub blocks_per_symbol: usize,
    pub snr_db: f64,
    pub seed: u64,
    pub sample_rate: f64,
    /// Data subcarriers per zero-forcing group (see [`FrameConfigFile::zf_block`]).
    pub zf_block: usize,
}

/// Bits of payload (before CRC) per code block: K minus the 24-bit code-block CRC.
pub const BLOCK_CRC_BITS: usize = 24;

impl FrameConfig {
    /// Read and validate a JSON file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json(&text)
    }

    /// Parse and validate JSON text.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let file: FrameConfigFile = serde_json::from_str(text)?;
        Self::validate(file)
    }

    /// Validate a parsed file.
    pub fn validate(file: FrameConfigFile) -> Result<Self, ConfigError> {
        let m = file.bs_ant_num;
        let k = file.ue_ant_num;
        if m == 0 || m > 1024 {
            return Err(bad("bs_ant_num", format!("{m} antennas; must be 1..=1024")));
        }
        if k == 0 || k > 256 {
            return Err(bad("ue_ant_num", format!("{k} users; must be 1..=256")));
        }
        if k > m {
            return Err(bad(
                "ue_ant_num",
                format!("{k} users exceed {m} base-station antennas; zero-forcing needs ue_ant_num <= bs_ant_num"),
            ));
        }
        let n = file.fft_size;
        if !(16..=65536).contains(&n) {
            return Err(bad("fft_size", format!("{n}; must be 16..=65536")));
        }
        let data_num = file.ofdm_data_num;
        if data_num == 0 || data_num + 8 > n {
            return Err(bad(
                "ofdm_data_num",
                format!("{data_num} data subcarriers in a {n}-point FFT; must be 1..={} (at least 8 null subcarriers are kept, the receiver measures noise on them)", n.saturating_sub(8)),
            ));
        }
        let data_start = file.ofdm_data_start.unwrap_or((n - data_num) / 2);
        if data_start.saturating_add(data_num) > n {
            return Err(bad(
                "ofdm_data_start",
                format!("{data_start} + {data_num} data subcarriers run past fft_size {n}"),
            ));
        }
        if file.cp_len >= n {
            return Err(bad(
                "cp_len",
                format!("{} must be shorter than fft_size {n}", file.cp_len),
            ));
        }
        let schedule = parse_schedule(&file.frame_schedule)?;
        let modulation = Modulation::from_name(&file.modulation).ok_or_else(|| {
            bad(
                "modulation",
                format!(
                    "{:?} is not one of \"QPSK\", \"16QAM\", \"64QAM\", \"256QAM\"",
                    file.modulation
                ),
            )
        })?;
        let pilot_layout = match file.pilot_layout.as_str() {
            "frequency_orthogonal" => PilotLayout::FrequencyOrthogonal,
            "time_orthogonal" => PilotLayout::TimeOrthogonal,
            other => {
                return Err(bad(
                    "pilot_layout",
                    format!("{other:?} is not \"frequency_orthogonal\" or \"time_orthogonal\""),
                ))
            }
        };
        let pilots = schedule.iter().filter(|s| **s == SymbolKind::Pilot).count();
        let needed = match pilot_layout {
            PilotLayout::FrequencyOrthogonal => 1,
            PilotLayout::TimeOrthogonal => k,
        };
        if pilots < needed {
            return Err(bad(
                "frame_schedule",
                format!(
                    "{pilots} pilot symbol(s) but the {:?} layout with {k} users needs {needed}",
                    file.pilot_layout
                ),
            ));
        }
        if pilot_layout == PilotLayout::FrequencyOrthogonal && data_num < 2 * k {
            return Err(bad(
                "ofdm_data_num",
                format!("{data_num} subcarriers give fewer than 2 pilots per user for {k} users"),
            ));
        }
        if let Some(first_data) = schedule
            .iter()
            .position(|s| matches!(s, SymbolKind::Uplink | SymbolKind::Downlink))
        {
            let last_pilot = schedule.iter().rposition(|s| *s == SymbolKind::Pilot);
            if last_pilot.is_some_and(|p| p > first_data) {
                return Err(bad(
                    "frame_schedule",
                    "pilot symbols must come before every U or D symbol (CSI is needed first)",
                ));
            }
        }
        let downlink = schedule
            .iter()
            .filter(|s| **s == SymbolKind::Downlink)
            .count();
        if downlink == 1 {
            return Err(bad(
                "frame_schedule",
                "a single D symbol leaves no room for data: the first D symbol carries the beamformed reference the users equalise with",
            ));
        }
        let bg = match file.base_graph {
            1 => BaseGraph::Bg1,
            2 => BaseGraph::Bg2,
            other => return Err(bad("base_graph", format!("{other}; must be 1 or 2"))),
        };
        let rate = file.code_rate.unwrap_or(match bg {
            BaseGraph::Bg1 => 1.0 / 3.0,
            BaseGraph::Bg2 => 1.0 / 5.0,
        });
        let min_rate = match bg {
            BaseGraph::Bg1 => 22.0 / 66.0,
            BaseGraph::Bg2 => 10.0 / 50.0,
        };
        if !rate.is_finite() || rate < min_rate - 1e-9 || rate >= 1.0 {
            return Err(bad(
                "code_rate",
                format!("{rate}; {bg} supports {min_rate:.4} <= rate < 1"),
            ));
        }
        let symbol_bits = data_num * modulation.bits_per_symbol();
        let zc = match file.zc {
            Some(z) => {
                if !LIFTING_SIZES.contains(&z) {
                    return Err(bad("zc", format!("{z} is not an NR lifting size (2..=384, a*2^j with a in 2,3,5,7,9,11,13,15)")));
                }
                z
            }
            None => *LIFTING_SIZES
                .iter()
                .rev()
                .find(|&&z| ((bg.systematic_cols() * z) as f64 / rate).round() as usize <= symbol_bits)
                .ok_or_else(|| bad("ofdm_data_num", format!("{symbol_bits} bits per symbol cannot hold even the smallest code block at rate {rate}; add subcarriers, raise modulation or code_rate")))?,
        };
        let code =
            CodeParams::for_rate(bg, zc, rate).map_err(|e| bad("code_rate", e.to_string()))?;
        if code.k() <= BLOCK_CRC_BITS {
            return Err(bad(
                "zc",
                format!(
                    "{zc} gives K = {} bits, no room beside the 24-bit block CRC",
                    code.k()
                ),
            ));
        }
        let blocks_per_symbol = symbol_bits / code.tx_bits;
        if blocks_per_symbol == 0 {
            return Err(bad(
                "zc",
                format!("a code block of E = {} bits (Zc {zc}, rate {rate:.3}) does not fit one symbol's {symbol_bits} bits; use a smaller zc or a higher code_rate", code.tx_bits),
            ));
        }
        if file.decoder_iter == 0 || file.decoder_iter > 100 {
            return Err(bad(
                "decoder_iter",
                format!("{}; must be 1..=100", file.decoder_iter),
            ));
        }
        if !file.snr_db.is_finite() || !(-20.0..=100.0).contains(&file.snr_db) {
            return Err(bad(
                "snr_db",
                format!("{}; must be within -20..=100 dB", file.snr_db),
            ));
        }
        let channel = parse_channel(&file.channel, file.cp_len)?;
        let sample_rate = file.sample_rate.unwrap_or(n as f64 * 15e3);
        if !sample_rate.is_finite() || sample_rate <= 0.0 {
            return Err(bad(
                "sample_rate",
                format!("{sample_rate}; must be a positive number of Hz"),
            ));
        }
        let zf_block = file.zf_block.unwrap_or(match pilot_layout {
            PilotLayout::FrequencyOrthogonal => k,
            PilotLayout::TimeOrthogonal => 1,
        });
        if zf_block == 0 || zf_block > data_num {
            return Err(bad(
                "zf_block",
                format!("{zf_block}; must be 1..={data_num} (ofdm_data_num)"),
            ));
        }
        Ok(FrameConfig {
            zf_block,
            sample_rate,
            antennas: m,
            users: k,
            fft_size: n,
            cp_len: file.cp_len,
            data_num,
            data_start,
            schedule,
            modulation,
            pilot_layout,
            channel,
            code,
            decoder_iter: file.decoder_iter,
            blocks_per_symbol,
            snr_db: file.snr_db,
            seed: file.seed,
            file,
        })
    }

    /// Samples per OFDM symbol including the cyclic prefix.
    pub fn symbol_len(&self) -> usize {
        self.fft_size + self.cp_len
    }

    /// Samples per frame per antenna.
    pub fn frame_len(&self) -> usize {
        self.symbol_len() * self.schedule.len()
    }

    /// Indices of symbols of one kind, in order.
    pub fn symbols_of(&self, kind: SymbolKind) -> Vec<usize> {
        (0..self.schedule.len())
            .filter(|&i| self.schedule[i] == kind)
            .collect()
    }

    /// Payload bits per code block (K' minus the block CRC).
    pub fn block_payload_bits(&self) -> usize {
        self.code.payload_bits - BLOCK_CRC_BITS
    }

    /// Coded bits each user sends per data symbol (whole code blocks; the rest of the
    /// symbol carries scrambled zero padding).
    pub fn coded_bits_per_symbol(&self) -> usize {
        self.blocks_per_symbol * self.code.tx_bits
    }

    /// Bits per symbol per user at this modulation.
    pub fn symbol_bits(&self) -> usize {
        self.data_num * self.modulation.bits_per_symbol()
    }

    /// Number of symbols of one kind (no allocation, unlike [`Self::symbols_of`]).
    pub fn count_of(&self, kind: SymbolKind) -> usize {
        self.schedule.iter().filter(|s| **s == kind).count()
    }

    /// Uplink code blocks per user per frame.
    pub fn uplink_blocks(&self) -> usize {
        self.count_of(SymbolKind::Uplink) * self.blocks_per_symbol
    }

    /// Downlink data symbols (the first D symbol is the reference).
    pub fn downlink_data_symbols(&self) -> Vec<usize> {
        self.symbols_of(SymbolKind::Downlink)
            .into_iter()
            .skip(1)
            .collect()
    }

    /// Downlink code blocks per user per frame.
    pub fn downlink_blocks(&self) -> usize {
        self.count_of(SymbolKind::Downlink).saturating_sub(1) * self.blocks_per_symbol
    }

    /// Zero-forcing groups per symbol (the last may be shorter than `zf_block`).
    pub fn zf_groups(&self) -> usize {
        self.data_num.div_ceil(self.zf_block)
    }

    /// Noise variance per (unit-power) subcarrier for `snr_db`.
    pub fn noise_var(&self) -> f64 {
        10f64.powf(-self.snr_db / 10.0)
    }
}

/// Serialise a configuration file back to JSON (what `generate` writes beside a
/// recording).
pub fn to_json(file: &FrameConfigFile) -> String {
    serde_json::to_string_pretty(file).unwrap_or_default()
}

fn parse_schedule(s: &str) -> Result<Vec<SymbolKind>, ConfigError> {
    if s.is_empty() || s.len() > 256 {
        return Err(bad(
            "frame_schedule",
            format!("{} symbols; must be 1..=256", s.chars().count()),
        ));
    }
    s.chars()
        .enumerate()
        .map(|(i, c)| match c {
            'P' => Ok(SymbolKind::Pilot),
            'U' => Ok(SymbolKind::Uplink),
            'D' => Ok(SymbolKind::Downlink),
            'G' => Ok(SymbolKind::Guard),
            other => Err(bad(
                "frame_schedule",
                format!(
                    "symbol {i} is {other:?}; use P (pilot), U (uplink), D (downlink) or G (guard)"
                ),
            )),
        })
        .collect()
}

fn parse_channel(c: &ChannelFile, cp_len: usize) -> Result<ChannelModel, ConfigError> {
    match c.model.as_str() {
        "flat" => {
            if !c.taps.is_empty() {
                return Err(bad(
                    "channel.taps",
                    "a flat channel takes no taps; set model to \"selective\"",
                ));
            }
            Ok(ChannelModel::Flat)
        }
        "selective" => {
            if c.taps.is_empty() || c.taps.len() > 64 {
                return Err(bad(
                    "channel.taps",
                    format!("{} taps; a selective channel needs 1..=64", c.taps.len()),
                ));
            }
            let mut taps = Vec::with_capacity(c.taps.len());
            for t in &c.taps {
                if t.delay > cp_len {
                    return Err(bad(
                        "channel.taps",
                        format!("delay {} exceeds cp_len {cp_len}: the cyclic prefix must cover the delay spread", t.delay),
                    ));
                }
                if !t.power_db.is_finite() || !(-60.0..=30.0).contains(&t.power_db) {
                    return Err(bad(
                        "channel.taps",
                        format!("power_db {}; must be within -60..=30", t.power_db),
                    ));
                }
                taps.push((t.delay, 10f64.powf(t.power_db / 10.0)));
            }
            let total: f64 = taps.iter().map(|t| t.1).sum();
            for t in &mut taps {
                t.1 /= total;
            }
            Ok(ChannelModel::Selective(taps))
        }
        other => Err(bad(
            "channel.model",
            format!("{other:?} is not \"flat\" or \"selective\""),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"{"bs_ant_num": 8, "ue_ant_num": 2, "fft_size": 256, "ofdm_data_num": 192,
        "cp_len": 32, "frame_schedule": "PUUUG", "modulation": "16QAM", "zc": 11}"#;

    fn with(field: &str, value: &str) -> String {
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v[field] = serde_json::from_str(value).unwrap();
        v.to_string()
    }

    fn field_error(json: &str) -> (String, String) {
        match FrameConfig::from_json(json) {
            Err(ConfigError::Field { field, reason }) => (field.to_string(), reason),
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn base_config_derives_layout() {
        let c = FrameConfig::from_json(BASE).unwrap();
        assert_eq!(c.data_start, 32);
        assert_eq!(c.code.k(), 22 * 11);
        assert_eq!(c.code.tx_bits, 66 * 11);
        assert_eq!(c.blocks_per_symbol, 1);
        assert_eq!(c.uplink_blocks(), 3 * c.blocks_per_symbol);
        assert_eq!(c.frame_len(), 5 * 288);
        assert_eq!(
            (c.zf_block, c.zf_groups()),
            (2, 96),
            "zf_block defaults to K"
        );
        let c = FrameConfig::from_json(&with("zf_block", "5")).unwrap();
        assert_eq!((c.zf_block, c.zf_groups()), (5, 39));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("ue_ant_num", "9", "ue_ant_num", "exceed"),
            ("modulation", "\"32QAM\"", "modulation", "not one of"),
            ("frame_schedule", "\"PUX\"", "frame_schedule", "symbol 2"),
            ("frame_schedule", "\"UP\"", "frame_schedule", "before"),
            ("frame_schedule", "\"PUD\"", "frame_schedule", "single D"),
            ("zc", "57", "zc", "lifting size"),
            ("zc", "384", "zc", "does not fit"),
            ("base_graph", "3", "base_graph", "1 or 2"),
            ("code_rate", "0.1", "code_rate", "supports"),
            ("ofdm_data_num", "250", "ofdm_data_num", "null subcarriers"),
            ("cp_len", "300", "cp_len", "shorter"),
            (
                "pilot_layout",
                "\"comb\"",
                "pilot_layout",
                "frequency_orthogonal",
            ),
            (
                "pilot_layout",
                "\"time_orthogonal\"",
                "frame_schedule",
                "needs 2",
            ),
            ("decoder_iter", "0", "decoder_iter", "1..=100"),
            ("snr_db", "1000", "snr_db", "within"),
            (
                "channel",
                r#"{"model": "selective", "taps": [{"delay": 40, "power_db": 0}]}"#,
                "channel.taps",
                "cp_len",
            ),
            ("channel", r#"{"model": "rician"}"#, "channel.model", "flat"),
            ("zf_block", "0", "zf_block", "1..=192"),
            ("zf_block", "193", "zf_block", "1..=192"),
        ];
        for (f, v, field, needle) in cases {
            let (got_field, reason) = field_error(&with(f, v));
            assert_eq!(got_field, field, "{f}={v}: {reason}");
            assert!(reason.contains(needle), "{f}={v}: {reason}");
        }
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = FrameConfig::from_json(&with("bs_ant", "8")).unwrap_err();
        assert!(err.to_string().contains("unknown field `bs_ant`"), "{err}");
        let err =
            FrameConfig::from_json(&with("channel", r#"{"model":"flat","tapz":[]}"#)).unwrap_err();
        assert!(err.to_string().contains("tapz"), "{err}");
    }

    #[test]
    fn default_zc_is_largest_that_fits() {
        let mut v: serde_json::Value = serde_json::from_str(BASE).unwrap();
        v.as_object_mut().unwrap().remove("zc");
        let c = FrameConfig::from_json(&v.to_string()).unwrap();
        assert!(c.code.tx_bits <= 192 * 4);
        let next = LIFTING_SIZES.iter().find(|&&z| z > c.code.zc).unwrap();
        assert!(66 * next > 192 * 4);
    }

    #[test]
    fn shipped_configs_validate() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                FrameConfig::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 3);
    }
}
