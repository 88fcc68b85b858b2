//! The shape of a station frame: which symbols carry what, how subcarriers are cut
//! into parts and users into groups. The DAG builder, the kernels and the simulator
//! all read it, so an instruction's `symbol` and `part` mean the same thing everywhere.

use std::ops::Range;

use radiohost_ldpc::BatchDecoder;
use radiohost_phy::config::SymbolKind;
use radiohost_phy::zf::BATCH;
use radiohost_phy::FrameConfig;

use crate::runtime::DeviceSpec;

/// Errors in choosing a frame shape.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShapeError {
    #[error("subcarrier parts must be between 1 and {max} (the data subcarriers), got {got}")]
    Parts { got: usize, max: usize },
    #[error("the frame schedule has no pilot symbol: zero-forcing needs at least one")]
    NoPilot,
    #[error("the frame schedule has neither uplink nor downlink data symbols")]
    NoData,
}

/// Complex multiply-adds (antennas x users x subcarriers) that one part's
/// equalisation of a symbol should hold at least, for [`FrameShape::default_parts`].
///
/// 2^15 is about 16 us of `EqDemod` on a Zen 3 AVX2 core (16x4's whole symbol,
/// 38,400, took 19.5 us), some four times the 3-4.5 us the scheduler spends
/// dispatching one instruction there (docs/BENCHMARKS.md, session 13): smaller
/// parts pay more in dispatch than their parallelism returns.
pub const MIN_PART_MACS: usize = 1 << 15;

/// Coded bits (all its users' bits of one symbol) that one `Decode` or `Encode`
/// instruction should hold at least, for [`FrameShape::default_user_groups`].
///
/// One 16x4 user's 2,400 bits took 11.5 us to decode and 8.2 us to encode on a Zen 3
/// AVX2 core, against 3-4.5 us of dispatch per instruction (docs/BENCHMARKS.md,
/// session 14). Every instruction goes through the one policy lock, which on many
/// workers bounds the frame rate: on a 16-core Xeon, 64x16 at 1 ms frames on 14
/// workers decoded 1230-1493 of 2000 frames with 2^14 (4 groups) against 994-1102
/// with 2^13 (9 groups), the lock busy 44-48% of the run either way
/// (docs/BENCHMARKS.md, "Station on 16 cores").
pub const MIN_GROUP_BITS: usize = 1 << 14;

/// Symbol roles and subcarrier partition of one frame configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameShape {
    pub antennas: usize,
    pub users: usize,
    /// Data subcarriers per symbol.
    pub data_num: usize,
    /// Schedule indices of the pilot symbols.
    pub pilot_symbols: Vec<usize>,
    /// Schedule indices of the uplink data symbols.
    pub uplink_symbols: Vec<usize>,
    /// Schedule index of the downlink reference symbol (the first downlink symbol).
    pub downlink_reference: Option<usize>,
    /// Schedule indices of the downlink data symbols (after the reference).
    pub downlink_symbols: Vec<usize>,
    /// Number of subcarrier parts ZF, EqDemod and Precode are split into.
    pub parts: usize,
    /// Data subcarriers one ZF batch covers ([`BATCH`] groups of `zf_block`): parts
    /// are cut at multiples of it where they can be (see [`Self::part_range`]).
    pub zf_batch_span: usize,
    /// Number of user groups each symbol's Decode and Encode are split into (an
    /// instruction's `part` is then its group; see [`Self::user_range`]).
    pub user_groups: usize,
}

impl FrameShape {
    /// The shape of `cfg` with data subcarriers cut into `parts` near-equal parts.
    ///
    /// # Errors
    /// `parts` out of range, or a schedule the station cannot run.
    pub fn new(cfg: &FrameConfig, parts: usize) -> Result<Self, ShapeError> {
        if parts == 0 || parts > cfg.data_num {
            return Err(ShapeError::Parts {
                got: parts,
                max: cfg.data_num,
            });
        }
        let pilot_symbols = cfg.symbols_of(SymbolKind::Pilot);
        if pilot_symbols.is_empty() {
            return Err(ShapeError::NoPilot);
        }
        let uplink_symbols = cfg.symbols_of(SymbolKind::Uplink);
        let downlink = cfg.symbols_of(SymbolKind::Downlink);
        if uplink_symbols.is_empty() && downlink.len() < 2 {
            return Err(ShapeError::NoData);
        }
        Ok(Self {
            antennas: cfg.antennas,
            users: cfg.users,
            data_num: cfg.data_num,
            pilot_symbols,
            uplink_symbols,
            downlink_reference: downlink.first().copied(),
            downlink_symbols: downlink.into_iter().skip(1).collect(),
            parts,
            zf_batch_span: BATCH * cfg.zf_block,
            user_groups: Self::default_user_groups(cfg),
        })
    }

    /// The user group count: users are grouped so that one group's coded bits of a
    /// symbol reach [`MIN_GROUP_BITS`] (a smaller instruction pays more in dispatch
    /// than its parallelism returns), and, where the LDPC decoder takes several
    /// blocks per call ([`BatchDecoder::width`] above 1, e.g. 8 at Zc = 72), so that
    /// every group holds at least one batch of users (batches of 8 took the 64x16
    /// uplink's decode stage from about 3.8 to 2.2 us per block, docs/BENCHMARKS.md,
    /// session 39). 8x2 and 16x4 get one group, 32x8 one of eight users (two of four
    /// by the bits alone), 64x16 two of eight (four of four). It does not follow the
    /// cores: a frame has several data symbols, whose groups already run side by side.
    pub fn default_user_groups(cfg: &FrameConfig) -> usize {
        let bits_per_user = cfg.data_num * cfg.modulation.bits_per_symbol();
        let by_bits = cfg.users * bits_per_user / MIN_GROUP_BITS;
        let batch = BatchDecoder::width(cfg.code.zc);
        let by_batch = if batch > 1 && cfg.users >= batch {
            cfg.users / batch
        } else {
            cfg.users
        };
        by_bits.min(by_batch).clamp(1, cfg.users.max(1))
    }

    /// The part count when none is asked for: one per core that can run at once,
    /// but no more than leaves each part [`MIN_PART_MACS`] of equalisation per
    /// symbol, and no more than the ZF batches (so that each part solves only its
    /// own). With 2 cores: 8x2 and 16x4 get 1, 32x8 and 64x16 get 2; with 36 cores
    /// 32x8 gets 9 (by its multiply-adds) and 64x16 5 (its ZF batches).
    pub fn default_parts(cfg: &FrameConfig, cores: usize) -> usize {
        let macs = cfg.antennas * cfg.users * cfg.data_num;
        let batches = cfg.data_num.div_ceil(BATCH * cfg.zf_block);
        (macs / MIN_PART_MACS)
            .clamp(1, cores.max(1))
            .min(batches)
            .min(cfg.data_num)
    }

    /// [`Self::default_parts`] for a pool of devices: one part per CPU worker thread
    /// (at most the cores this process may run on), or per core for a pool with no
    /// CPU device. Workers, not the machine's cores: every part is one more
    /// instruction per symbol through the one policy lock, and on a 16-core Xeon
    /// 64x16 on 8 workers decoded fewer frames with 16 parts than with 8 or 4
    /// (docs/BENCHMARKS.md, "Station on 16 cores").
    pub fn default_parts_for(cfg: &FrameConfig, devices: &[DeviceSpec]) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers: usize = devices.iter().map(DeviceSpec::cpu_workers).sum();
        let units = if workers == 0 {
            cores
        } else {
            workers.min(cores)
        };
        Self::default_parts(cfg, units)
    }

    /// The part count `asked` for, else [`Self::default_parts_for`] the devices.
    pub fn parts_or_default(
        cfg: &FrameConfig,
        asked: Option<usize>,
        devices: &[DeviceSpec],
    ) -> usize {
        asked.unwrap_or_else(|| Self::default_parts_for(cfg, devices))
    }

    /// Data-subcarrier indices (0..data_num) of part `k`. With no more parts than ZF
    /// batches, each part is whole batches (counts differing by at most one; only
    /// the last batch may be short), so no batch is solved by two parts' `Zf`: on a
    /// 16-core Xeon, 64x16 cut evenly into 14 parts solved 18 batches of 5, at
    /// 173-241 us per `Zf` (docs/BENCHMARKS.md, "Station on 16 cores"). More parts
    /// than batches are cut evenly, differing by at most one subcarrier. Part 0 is
    /// the longest either way.
    pub fn part_range(&self, k: usize) -> Range<usize> {
        let span = self.zf_batch_span.max(1);
        let batches = self.data_num.div_ceil(span);
        if self.parts <= batches {
            let b = even_split(batches, self.parts, k);
            b.start * span..(b.end * span).min(self.data_num)
        } else {
            even_split(self.data_num, self.parts, k)
        }
    }

    /// Users (0..users) of group `g`; groups differ by at most one user.
    pub fn user_range(&self, g: usize) -> Range<usize> {
        even_split(self.users, self.user_groups, g)
    }

    /// Symbols whose samples come from the radio units (pilot and uplink), in
    /// schedule order.
    pub fn received_symbols(&self) -> Vec<usize> {
        let mut s: Vec<usize> = self
            .pilot_symbols
            .iter()
            .chain(&self.uplink_symbols)
            .copied()
            .collect();
        s.sort_unstable();
        s
    }

    /// Whether the frame has downlink data to send.
    pub fn has_downlink(&self) -> bool {
        !self.downlink_symbols.is_empty()
    }
}

/// Piece `k` of `0..n` cut into `pieces` near-equal runs (the first `n % pieces` one
/// longer).
fn even_split(n: usize, pieces: usize, k: usize) -> Range<usize> {
    let pieces = pieces.max(1);
    let (base, extra) = (n / pieces, n % pieces);
    let start = k * base + k.min(extra);
    start..start + base + usize::from(k < extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(data_num: usize, parts: usize) -> FrameShape {
        FrameShape {
            antennas: 8,
            users: 2,
            data_num,
            pilot_symbols: vec![0],
            uplink_symbols: vec![1],
            downlink_reference: None,
            downlink_symbols: vec![],
            parts,
            zf_batch_span: 1,
            user_groups: 2,
        }
    }

    #[test]
    fn parts_tile_the_data_subcarriers() {
        for span in [1, 32, 256] {
            for data_num in [1, 7, 64, 1200] {
                for parts in 1..=data_num.min(13) {
                    let s = FrameShape {
                        zf_batch_span: span,
                        ..shape(data_num, parts)
                    };
                    let aligned = parts <= data_num.div_ceil(span);
                    let mut next = 0;
                    for k in 0..parts {
                        let r = s.part_range(k);
                        assert_eq!(r.start, next);
                        assert!(!r.is_empty());
                        assert!(r.len() <= s.part_range(0).len());
                        if aligned {
                            assert_eq!(r.start % span, 0, "span {span}, {parts} parts");
                        }
                        next = r.end;
                    }
                    assert_eq!(next, data_num);
                }
            }
        }
        // 64x16's 1200 subcarriers in ZF batches of 256: 5 parts are its batches.
        let s = FrameShape {
            zf_batch_span: 256,
            ..shape(1200, 5)
        };
        let ends: Vec<usize> = (0..5).map(|k| s.part_range(k).end).collect();
        assert_eq!(ends, [256, 512, 768, 1024, 1200]);
    }

    #[test]
    fn user_groups_tile_the_users() {
        for users in 1..=16 {
            for groups in 1..=users {
                let s = FrameShape {
                    users,
                    user_groups: groups,
                    ..shape(64, 1)
                };
                let all: Vec<usize> = (0..groups).flat_map(|g| s.user_range(g)).collect();
                assert_eq!(all, (0..users).collect::<Vec<_>>());
                assert!((0..groups).all(|g| !s.user_range(g).is_empty()));
            }
        }
    }

    #[test]
    fn default_user_groups_follow_the_coded_bits() {
        let groups = |name: &str| {
            let (cfg, _) = crate::setup::load_config(std::path::Path::new(name)).unwrap();
            FrameShape::default_user_groups(&cfg)
        };
        // 16x4: 4 users x 600 subcarriers x 4 bits = 9,600 bits, one group (Zc = 36
        // batches 16 blocks, more than its users); 32x8: 8 x 1,200 x 4 = 38,400 bits,
        // 2 groups by the bits but Zc = 72 batches 8 users, so one; 64x16: 76,800
        // bits, 4 groups by the bits, 2 of 8 users by the batches.
        assert_eq!(["8x2", "16x4", "32x8", "64x16"].map(groups), [1, 1, 1, 2]);
    }

    #[test]
    fn default_parts_follow_the_work_and_the_cores() {
        let parts = |name: &str, cores: usize| {
            let (cfg, _) = crate::setup::load_config(std::path::Path::new(name)).unwrap();
            FrameShape::default_parts(&cfg, cores)
        };
        let two_cores = ["8x2", "16x4", "32x8", "64x16"].map(|c| parts(c, 2));
        assert_eq!(two_cores, [1, 1, 2, 2]);
        assert_eq!(
            [parts("16x4", 36), parts("32x8", 36), parts("64x16", 36)],
            [1, 9, 5]
        );
        // No cores reported still gives a runnable shape.
        assert_eq!(parts("64x16", 0), 1);
    }

    #[test]
    fn default_parts_follow_the_pools_workers() {
        let (cfg, _) = crate::setup::load_config(std::path::Path::new("64x16")).unwrap();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu = |w| DeviceSpec::cpu(w, Vec::new());
        let parts = |d: &[DeviceSpec]| FrameShape::default_parts_for(&cfg, d);
        assert_eq!(parts(&[cpu(1)]), 1);
        assert_eq!(parts(&[cpu(1), cpu(1)]), 2.min(cores));
        // More workers than cores: as many parts as for the cores.
        assert_eq!(parts(&[cpu(64)]), FrameShape::default_parts(&cfg, cores));
        assert_eq!(parts(&[]), FrameShape::default_parts(&cfg, cores));
    }

    #[test]
    fn shape_of_the_8x2_config() {
        let cfg = FrameConfig::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../phy/configs/8x2.json"
        )))
        .unwrap();
        let s = FrameShape::new(&cfg, 4).unwrap();
        assert_eq!(s.antennas, 8);
        assert!(!s.pilot_symbols.is_empty());
        assert!(FrameShape::new(&cfg, 0).is_err());
        assert!(FrameShape::new(&cfg, cfg.data_num + 1).is_err());
    }
}
