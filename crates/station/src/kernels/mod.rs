//! CPU kernels: one function per opcode, operating on a frame's buffers
//! ([`FrameSlot`]) with a worker's own [`Scratch`].
//!
//! Every kernel is phy's reference kernel (batched front end and synthesis over all
//! antennas, CSI at each ZF group's centre, ZF of 16 groups of `zf_block`
//! subcarriers at once, group matrix products for equalisation and precoding, SIMD
//! demodulation, scrambling) and the LDPC codec; this module only cuts the reference
//! pipelines into the instruction granularity of [`crate::isa`] and moves data
//! between the slot's regions.
//!
//! Concurrency: instructions of one frame run at once on different workers. Each
//! region an instruction writes is its own `RwLock` (see [`slot`]), and the per-frame
//! DAG guarantees a region is written before anyone reads it, so locks are
//! uncontended except for readers sharing an input. No `unsafe`.
//!
//! Two places differ from the single-threaded reference, by design:
//! * the noise estimate of `EqDemod<u, k>` uses the pilot symbols' null bins and
//!   those of symbol `u` only (the reference waits for every uplink symbol);
//! * the downlink precoder normalisation `beta` is computed per subcarrier part from
//!   that part's ZF noise gains, so `Precode<d, k>` needs only `Zf<k>`. The users
//!   measure their gain per subcarrier from the reference symbol, which is precoded
//!   with the same `beta`, so this changes nothing for them.

mod downlink;
pub mod slot;
mod uplink;

use std::ops::Range;

use radiohost_iq::Cf32;
use radiohost_ldpc::Encoder;
use radiohost_phy::coding::{user_c_init, BlockResult, RxChain};
use radiohost_phy::config::SymbolKind;
use radiohost_phy::csi::{pilot_sequence, CsiEstimator};
use radiohost_phy::frontend::{FrontEnd, Synthesizer, SLICE};
use radiohost_phy::generator::TARGET_RMS;
use radiohost_phy::group_product::{lanewise, GroupProduct};
use radiohost_phy::qam::{Demodulator, Modulator};
use radiohost_phy::scramble::{sequence_words, GoldSequence};
use radiohost_phy::zf::{Lanes, ZfBatch, BATCH};
use radiohost_phy::FrameConfig;

use crate::isa::{Instr, Opcode};
use crate::shape::{FrameShape, ShapeError};

use slot::faulted_in;
pub use slot::FrameSlot;

/// Why a kernel could not run.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("instruction {instr} names a symbol or part this frame shape does not have")]
    BadOperand { instr: Instr },
    #[error("zero-forcing at subcarrier {subcarrier}: {source}")]
    Zf {
        subcarrier: usize,
        source: radiohost_phy::zf::ZfError,
    },
    #[error("LDPC: {0}")]
    Ldpc(#[from] radiohost_ldpc::LdpcError),
    #[error("frame shape: {0}")]
    Shape(#[from] ShapeError),
    #[error("downlink payload of user {user} has {got} bits, the configuration needs {expected}")]
    Payload {
        user: usize,
        got: usize,
        expected: usize,
    },
}

/// Role of one schedule symbol and its position among the symbols of that role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolRole {
    /// `pos` among pilots, `rx` among received (pilot + uplink) symbols.
    Pilot {
        pos: usize,
        rx: usize,
    },
    Uplink {
        pos: usize,
        rx: usize,
    },
    /// The downlink reference symbol (`pos` 0 among downlink symbols).
    DownlinkReference,
    /// A downlink data symbol: `pos` among downlink symbols (reference is 0), `data`
    /// among data symbols (scrambling offset and payload position).
    DownlinkData {
        pos: usize,
        data: usize,
    },
    Guard,
}

/// What every kernel of a run shares (read only): configuration, shape, pilots,
/// per-user scrambling seeds and the symbol index maps.
#[derive(Debug)]
pub struct KernelContext {
    pub cfg: FrameConfig,
    pub shape: FrameShape,
    pub roles: Vec<SymbolRole>,
    pub pilots: Vec<Cf32>,
    /// `[symbol][user]`: each user's scrambling sequence positioned at the start of
    /// its `symbol`-th downlink data symbol, so `Encode` clones a generator instead
    /// of stepping it over every earlier symbol's bits.
    scramblers: Vec<GoldSequence>,
    /// Per user, the scrambling sequence's words over every uplink data symbol (what
    /// `EqDemod` descrambles its LLRs with, a slice's bits at a time).
    uplink_sequences: Vec<Vec<u32>>,
    /// Transmit digital gain (the reference downlink's, from the configuration).
    pub tx_gain: f32,
}

impl KernelContext {
    /// # Errors
    /// If the configuration cannot be cut into `parts` subcarrier parts.
    pub fn new(cfg: &FrameConfig, parts: usize) -> Result<Self, KernelError> {
        let shape = FrameShape::new(cfg, parts)?;
        let (mut p, mut u, mut d, mut rx) = (0, 0, 0, 0);
        let roles = cfg
            .schedule
            .iter()
            .map(|k| match k {
                SymbolKind::Pilot => {
                    p += 1;
                    rx += 1;
                    SymbolRole::Pilot {
                        pos: p - 1,
                        rx: rx - 1,
                    }
                }
                SymbolKind::Uplink => {
                    u += 1;
                    rx += 1;
                    SymbolRole::Uplink {
                        pos: u - 1,
                        rx: rx - 1,
                    }
                }
                SymbolKind::Downlink => {
                    d += 1;
                    if d == 1 {
                        SymbolRole::DownlinkReference
                    } else {
                        SymbolRole::DownlinkData {
                            pos: d - 1,
                            data: d - 2,
                        }
                    }
                }
                SymbolKind::Guard => SymbolRole::Guard,
            })
            .collect();
        let per_antenna = (cfg.users * cfg.data_num) as f64 / (cfg.fft_size * cfg.antennas) as f64;
        let (sb, symbols) = (cfg.symbol_bits(), d.saturating_sub(1));
        let scramblers = (0..symbols)
            .flat_map(|i| (0..cfg.users).map(move |k| (i, k)))
            .map(|(i, k)| GoldSequence::new_at(user_c_init(cfg, k), i * sb))
            .collect();
        let uplink_sequences = (0..cfg.users)
            .map(|k| sequence_words(user_c_init(cfg, k), u * sb))
            .collect();
        Ok(Self {
            roles,
            pilots: pilot_sequence(cfg.data_num),
            scramblers,
            uplink_sequences,
            tx_gain: TARGET_RMS / per_antenna.sqrt() as f32,
            shape,
            cfg: cfg.clone(),
        })
    }

    /// `user`'s scrambling sequence at the start of its `symbol`-th downlink data
    /// symbol (`symbol * symbol_bits` bits in).
    ///
    /// # Panics
    /// If `symbol` or `user` is outside the frame (a caller bug).
    pub fn scrambler(&self, symbol: usize, user: usize) -> GoldSequence {
        self.scramblers[symbol * self.cfg.users + user].clone()
    }

    /// `user`'s uplink scrambling sequence as words (bit `i` of the sequence is bit
    /// `i % 32` of word `i / 32`; uplink data symbol `u` starts at bit
    /// `u * symbol_bits`).
    ///
    /// # Panics
    /// If `user` is outside the frame (a caller bug).
    pub fn uplink_sequence(&self, user: usize) -> &[u32] {
        &self.uplink_sequences[user]
    }

    /// Role of schedule symbol `s` (`None` past the schedule).
    pub fn role(&self, s: usize) -> Option<SymbolRole> {
        self.roles.get(s).copied()
    }

    /// The ZF groups (`cfg.zf_block` adjacent subcarriers each) that part `k`'s
    /// subcarriers touch.
    pub fn part_groups(&self, k: usize) -> Range<usize> {
        let r = self.shape.part_range(k);
        let zb = self.cfg.zf_block;
        r.start / zb..(r.end - 1) / zb + 1
    }

    /// The ZF batches ([`BATCH`] groups each) that part `k`'s groups fall in.
    pub fn part_batches(&self, k: usize) -> Range<usize> {
        let g = self.part_groups(k);
        g.start / BATCH..(g.end - 1) / BATCH + 1
    }

    /// The subcarriers of ZF group `g` that lie in part `k`.
    pub fn group_in_part(&self, g: usize, k: usize) -> Range<usize> {
        let r = self.shape.part_range(k);
        let zb = self.cfg.zf_block;
        (g * zb).max(r.start)..((g + 1) * zb).min(r.end)
    }

    /// Whether ZF groups are narrower than a slice: then equalisation and
    /// precoding read per-lane coefficients ([`ZfPart::lanes`]) and fill whole
    /// vectors, instead of a quarter of one per group (16x4).
    pub fn lanewise(&self) -> bool {
        self.cfg.zf_block < SLICE
    }

    /// Adjacent lanes sharing one stored coefficient in [`ZfPart::lanes`].
    pub fn lane_width(&self) -> usize {
        lanewise::run_width(self.cfg.zf_block)
    }

    /// Floats one slice's coefficients take in [`ZfPart::lanes`].
    pub fn lane_table_len(&self) -> usize {
        self.cfg.antennas * self.cfg.users * lanewise::entry_len(self.lane_width())
    }

    /// The 16-subcarrier slices part `k`'s subcarriers touch.
    pub fn part_slices(&self, k: usize) -> Range<usize> {
        let r = self.shape.part_range(k);
        r.start / SLICE..r.end.div_ceil(SLICE)
    }

    /// Largest subcarrier part (scratch sizing).
    pub fn max_part_len(&self) -> usize {
        self.shape.part_range(0).len()
    }

    /// Every instruction of frame `frame` in one valid DAG order (dependences first):
    /// what a single thread runs, and the set a policy must commit.
    pub fn frame_program(&self, frame: u64) -> Vec<Instr> {
        let s = &self.shape;
        let mut v = Vec::new();
        for sym in s.received_symbols() {
            v.push(Instr::new(frame, sym, Opcode::Load, 0));
        }
        for &p in &s.pilot_symbols {
            v.push(Instr::new(frame, p, Opcode::PilotFft, 0));
        }
        for &u in &s.uplink_symbols {
            v.push(Instr::new(frame, u, Opcode::UpFft, 0));
        }
        for k in 0..s.parts {
            v.push(Instr::new(frame, 0, Opcode::Zf, k));
        }
        for &u in &s.uplink_symbols {
            for k in 0..s.parts {
                v.push(Instr::new(frame, u, Opcode::EqDemod, k));
            }
        }
        for &u in &s.uplink_symbols {
            for g in 0..s.user_groups {
                v.push(Instr::new(frame, u, Opcode::Decode, g));
            }
        }
        if !s.uplink_symbols.is_empty() {
            v.push(Instr::new(frame, 0, Opcode::Store, 0));
        }
        if s.has_downlink() {
            for &d in &s.downlink_symbols {
                for g in 0..s.user_groups {
                    v.push(Instr::new(frame, d, Opcode::Encode, g));
                }
            }
            let all_dl: Vec<usize> = s
                .downlink_reference
                .iter()
                .chain(&s.downlink_symbols)
                .copied()
                .collect();
            for &d in &all_dl {
                for k in 0..s.parts {
                    v.push(Instr::new(frame, d, Opcode::Precode, k));
                }
            }
            for &d in &all_dl {
                v.push(Instr::new(frame, d, Opcode::Ifft, 0));
            }
            for &d in &all_dl {
                v.push(Instr::new(frame, d, Opcode::Store, 0));
            }
        }
        v
    }
}

/// A worker's private scratch: FFT plans, estimator, detector, codec and buffers,
/// allocated once so kernels do not allocate per frame.
pub struct Scratch {
    front: FrontEnd,
    csi_est: CsiEstimator,
    pilot_rx: Vec<Cf32>,
    /// `[batch][user][antenna]` lanes: the channel at every ZF group's centre.
    h_re: Vec<Lanes>,
    h_im: Vec<Lanes>,
    zf: ZfBatch,
    /// One batch's detectors `W^T` (`[antenna][user]` lanes) and noise gains.
    batch_wt_re: Vec<Lanes>,
    batch_wt_im: Vec<Lanes>,
    batch_gain: Vec<Lanes>,
    /// `[user][subcarrier of the part]`: the part's user symbols (downlink
    /// precoding's input).
    eq: Vec<Cf32>,
    /// One slice of every user's equalised symbols, planar, and their inverse noise
    /// variances (what the soft demodulator reads).
    slice_re: Vec<[f32; SLICE]>,
    slice_im: Vec<[f32; SLICE]>,
    inv_noise: Vec<[f32; SLICE]>,
    /// Per user, the scrambling bits of one slice's LLRs.
    flips: Vec<u128>,
    demod: Demodulator,
    /// The decoders (one block at a time, and batches).
    rx: RxChain,
    /// `[user][symbol bit]`: a user group's LLRs of a symbol gathered from its parts.
    llrs: Vec<i8>,
    /// A user group's decoded payloads and verdicts of a symbol, `[user][block]`.
    decoded: Vec<u8>,
    results: Vec<BlockResult>,
    /// One block with its CRC (downlink encoding's input).
    block: Vec<u8>,
    /// One user's scrambled coded bits of one downlink symbol.
    coded: Vec<u8>,
    encoder: Encoder,
    modulator: Modulator,
    product: GroupProduct,
    synth: Synthesizer,
    /// One downlink symbol's precoded bins of every antenna, in `synth`'s layout.
    ant: Vec<Cf32>,
    /// One slice of every user's symbols, planar (lanewise precoding's input).
    users_re: Vec<[f32; SLICE]>,
    users_im: Vec<[f32; SLICE]>,
}

impl Scratch {
    /// A worker's buffers, the large ones faulted in ([`faulted_in`]: a 64x16 worker
    /// took about 200 page faults in its first frame).
    ///
    /// # Errors
    /// If the LDPC decoder rejects the configuration's code.
    pub fn new(ctx: &KernelContext) -> Result<Self, KernelError> {
        let cfg = &ctx.cfg;
        let (m, k, d) = (cfg.antennas, cfg.users, cfg.data_num);
        let p = ctx.shape.pilot_symbols.len();
        let synth = Synthesizer::new(cfg);
        Ok(Self {
            front: FrontEnd::new(cfg),
            csi_est: CsiEstimator::new(cfg.pilot_layout, m, k, d),
            pilot_rx: faulted_in(vec![Cf32::default(); p * m * d]),
            h_re: faulted_in(vec![[0.0; BATCH]; cfg.zf_groups().div_ceil(BATCH) * k * m]),
            h_im: faulted_in(vec![[0.0; BATCH]; cfg.zf_groups().div_ceil(BATCH) * k * m]),
            zf: ZfBatch::new(m, k),
            batch_wt_re: faulted_in(vec![[0.0; BATCH]; k * m]),
            batch_wt_im: faulted_in(vec![[0.0; BATCH]; k * m]),
            batch_gain: vec![[0.0; BATCH]; k],
            eq: faulted_in(vec![Cf32::default(); k * d]),
            slice_re: vec![[0.0; SLICE]; k],
            slice_im: vec![[0.0; SLICE]; k],
            inv_noise: vec![[0.0; SLICE]; k],
            flips: vec![0; k],
            demod: Demodulator::new(cfg.modulation),
            rx: RxChain::new(cfg)?,
            llrs: faulted_in(vec![0; k * cfg.symbol_bits()]),
            decoded: faulted_in(vec![
                0;
                k * cfg.blocks_per_symbol * cfg.block_payload_bits()
            ]),
            results: vec![BlockResult::default(); k * cfg.blocks_per_symbol],
            block: faulted_in(vec![0; cfg.code.payload_bits]),
            coded: faulted_in(vec![0; cfg.symbol_bits()]),
            encoder: Encoder::new(cfg.code),
            modulator: Modulator::new(cfg.modulation),
            product: GroupProduct::new(k),
            ant: faulted_in(synth.layout().zeroed(m)),
            synth,
            users_re: vec![[0.0; SLICE]; k],
            users_im: vec![[0.0; SLICE]; k],
        })
    }
}

/// The uplink `Store` (symbol 0, part 0, when the shape has uplink symbols).
fn is_uplink_store(ctx: &KernelContext, instr: Instr) -> bool {
    instr.opcode == Opcode::Store
        && instr.symbol == 0
        && instr.part == 0
        && !ctx.shape.uplink_symbols.is_empty()
}

/// The verdict on an instruction that only orders the DAG on a CPU device, `None`
/// for the others. `Load` and a downlink `Store` copy nothing here: the staged
/// samples already are where the FFT reads them, and `Ifft` wrote the fronthaul
/// output (on a GPU they are the copies host <-> device). Only their operands are
/// checked, so a CPU device completes them without a worker.
pub fn ordering_only(ctx: &KernelContext, instr: Instr) -> Option<Result<(), KernelError>> {
    let ok = instr.part == 0;
    let role = ctx.role(instr.symbol as usize);
    let valid = match instr.opcode {
        Opcode::Load => {
            ok && matches!(
                role,
                Some(SymbolRole::Pilot { .. } | SymbolRole::Uplink { .. })
            )
        }
        Opcode::Store if !is_uplink_store(ctx, instr) => {
            ok && matches!(
                role,
                Some(SymbolRole::DownlinkReference | SymbolRole::DownlinkData { .. })
            )
        }
        _ => return None,
    };
    Some(if valid {
        Ok(())
    } else {
        Err(KernelError::BadOperand { instr })
    })
}

/// Run `instr` on `slot` with this worker's `scratch`.
///
/// # Errors
/// An operand outside the frame shape, a rank-deficient channel, or an LDPC error.
pub fn execute(
    ctx: &KernelContext,
    slot: &FrameSlot,
    instr: Instr,
    scratch: &mut Scratch,
) -> Result<(), KernelError> {
    if let Some(verdict) = ordering_only(ctx, instr) {
        return verdict;
    }
    let bad = || KernelError::BadOperand { instr };
    let sym = instr.symbol as usize;
    let part = instr.part as usize;
    let role = ctx.role(sym);
    match instr.opcode {
        Opcode::PilotFft => match role {
            Some(SymbolRole::Pilot { pos, rx }) if part == 0 => {
                uplink::pilot_fft(ctx, slot, rx, &slot.pilot_freq[pos], scratch);
                Ok(())
            }
            _ => Err(bad()),
        },
        Opcode::UpFft => match role {
            Some(SymbolRole::Uplink { pos, rx }) if part == 0 => {
                uplink::up_fft(ctx, slot, rx, &slot.up_freq[pos], scratch);
                Ok(())
            }
            _ => Err(bad()),
        },
        Opcode::Zf if sym == 0 && part < ctx.shape.parts => uplink::zf(ctx, slot, part, scratch),
        Opcode::EqDemod => match role {
            Some(SymbolRole::Uplink { pos, .. }) if part < ctx.shape.parts => {
                uplink::eq_demod(ctx, slot, pos, part, scratch)
            }
            _ => Err(bad()),
        },
        Opcode::Decode => match role {
            Some(SymbolRole::Uplink { pos, .. }) if part < ctx.shape.user_groups => {
                uplink::decode(ctx, slot, pos, ctx.shape.user_range(part), scratch)
            }
            _ => Err(bad()),
        },
        Opcode::Store if is_uplink_store(ctx, instr) => {
            uplink::store(ctx, slot);
            Ok(())
        }
        Opcode::Encode => match role {
            Some(SymbolRole::DownlinkData { data, .. }) if part < ctx.shape.user_groups => ctx
                .shape
                .user_range(part)
                .try_for_each(|user| downlink::encode(ctx, slot, data, user, scratch)),
            _ => Err(bad()),
        },
        Opcode::Precode => match role {
            Some(SymbolRole::DownlinkReference) if part < ctx.shape.parts => {
                downlink::precode(ctx, slot, 0, None, part, scratch);
                Ok(())
            }
            Some(SymbolRole::DownlinkData { pos, data }) if part < ctx.shape.parts => {
                downlink::precode(ctx, slot, pos, Some(data), part, scratch);
                Ok(())
            }
            _ => Err(bad()),
        },
        Opcode::Ifft => match role {
            Some(SymbolRole::DownlinkReference) if part == 0 => {
                downlink::ifft(ctx, slot, 0, scratch);
                Ok(())
            }
            Some(SymbolRole::DownlinkData { pos, .. }) if part == 0 => {
                downlink::ifft(ctx, slot, pos, scratch);
                Ok(())
            }
            _ => Err(bad()),
        },
        // `ordering_only` took Load and every other Store.
        Opcode::Load | Opcode::Store | Opcode::Zf => Err(bad()),
    }
}

#[cfg(test)]
pub(crate) mod tests;
