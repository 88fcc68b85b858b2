//! The air's state and its block processing (behind [`super::Air`]'s lock).

use std::collections::BTreeMap;

use radiohost_dsp::{MimoConvolver, MimoTaps, SwapMode};
use radiohost_iq::Cf32;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use super::{
    AirChannel, AirConfig, AirError, AirStats, PortKind, MAX_BLOCK, MAX_EMISSIONS, MAX_HISTORY,
    MAX_IDENTITY_PORTS, MAX_PORTS,
};

const ZERO: Cf32 = Cf32::new(0.0, 0.0);
/// In silence, at most this many fading updates are applied per jump (the channel has
/// long decorrelated; the loop must stay bounded for huge jumps).
const MAX_SKIPPED_UPDATES: u64 = 4096;

/// The channel as the block processor sees it.
enum Channel {
    Identity,
    Convolved {
        conv: Box<MimoConvolver>,
        /// Samples the convolver remembers: after this many silent ticks its output is zero.
        memory: u64,
        fading: Option<Box<Fading>>,
    },
}

struct Fading {
    channel: radiohost_dsp::channel::FadingChannel,
    update_ticks: u64,
    response: MimoTaps,
    /// A due update could not start because the previous swap was still taking over.
    due: bool,
    mode: SwapMode,
}

/// One TX port's scheduled emissions, keyed by (start tick, arrival order).
#[derive(Default)]
struct TxQueue {
    emissions: BTreeMap<(u64, u64), Vec<Cf32>>,
    pending: usize,
}

pub(super) struct World {
    block: usize,
    history: usize,
    /// Ring length per RX port: history plus one block, so a request of `history`
    /// samples survives the round-up to a whole block.
    ring: usize,
    max_pending: usize,
    noise_std: Option<f32>,
    seed: u64,
    channel: Channel,
    tx: Vec<TxQueue>,
    /// `[rx][ring]`, sample of tick `t` at `t % ring`.
    rx: Vec<Vec<Cf32>>,
    horizon: u64,
    /// Horizon at the end of the last block that had any TX input.
    last_active: u64,
    seq: u64,
    inputs: Vec<Vec<Cf32>>,
    outputs: Vec<Vec<Cf32>>,
    stats: AirStats,
}

impl World {
    pub(super) fn new(cfg: AirConfig) -> Result<World, AirError> {
        if !(cfg.rate_hz.is_finite() && cfg.rate_hz > 0.0) {
            return Err(AirError::Rate(cfg.rate_hz));
        }
        let max = match cfg.channel {
            AirChannel::Identity => MAX_IDENTITY_PORTS,
            _ => MAX_PORTS,
        };
        let ports_ok = |n: usize| (1..=max).contains(&n);
        if !ports_ok(cfg.tx_ports) || !ports_ok(cfg.rx_ports) {
            return Err(AirError::Ports {
                tx: cfg.tx_ports,
                rx: cfg.rx_ports,
                max,
            });
        }
        if cfg.block == 0 || cfg.block > MAX_BLOCK {
            return Err(AirError::Block(cfg.block));
        }
        if cfg.history < cfg.block || cfg.history > MAX_HISTORY {
            return Err(AirError::History {
                history: cfg.history,
                block: cfg.block,
            });
        }
        let noise_std = match cfg.snr_db {
            None => None,
            Some(s) if s.is_finite() => Some((10f64.powf(-s / 10.0) / 2.0).sqrt() as f32),
            Some(s) => return Err(AirError::Snr(s)),
        };
        let shape = |inputs: usize, outputs: usize| {
            if (inputs, outputs) == (cfg.tx_ports, cfg.rx_ports) {
                Ok(())
            } else {
                Err(AirError::ChannelShape {
                    inputs,
                    outputs,
                    tx: cfg.tx_ports,
                    rx: cfg.rx_ports,
                })
            }
        };
        let block = cfg.block as u64;
        let channel = match cfg.channel {
            AirChannel::Identity => Channel::Identity,
            AirChannel::Static(taps) => {
                shape(taps.inputs(), taps.outputs())?;
                let conv = MimoConvolver::new(cfg.block, &taps)?;
                Channel::Convolved {
                    memory: (conv.partitions() as u64 + 1) * block,
                    conv: Box::new(conv),
                    fading: None,
                }
            }
            AirChannel::Fading {
                channel,
                update_ticks,
            } => {
                if update_ticks == 0 {
                    return Err(AirError::UpdateInterval);
                }
                let mut response = channel.make_response();
                shape(response.inputs(), response.outputs())?;
                channel.write_response(&mut response)?;
                let conv = MimoConvolver::new(cfg.block, &response)?;
                let update_ticks = update_ticks.div_ceil(block) * block;
                // Staggered swaps are exact but take one block per partition; faster
                // updates cross-fade over one block instead.
                let mode = if update_ticks / block >= conv.partitions() as u64 {
                    SwapMode::Staggered
                } else {
                    SwapMode::Crossfade { blocks: 1 }
                };
                Channel::Convolved {
                    memory: (conv.partitions() as u64 + 1) * block,
                    conv: Box::new(conv),
                    fading: Some(Box::new(Fading {
                        channel,
                        update_ticks,
                        response,
                        due: false,
                        mode,
                    })),
                }
            }
        };
        let ring = cfg.history + cfg.block;
        Ok(World {
            block: cfg.block,
            history: cfg.history,
            ring,
            max_pending: cfg.max_pending,
            noise_std,
            seed: cfg.seed,
            channel,
            tx: (0..cfg.tx_ports).map(|_| TxQueue::default()).collect(),
            rx: vec![vec![ZERO; ring]; cfg.rx_ports],
            horizon: 0,
            last_active: 0,
            seq: 0,
            inputs: vec![vec![ZERO; cfg.block]; cfg.tx_ports],
            outputs: vec![vec![ZERO; cfg.block]; cfg.rx_ports],
            stats: AirStats::default(),
        })
    }

    pub(super) fn horizon(&self) -> u64 {
        self.horizon
    }

    pub(super) fn stats(&self) -> AirStats {
        self.stats
    }

    pub(super) fn transmit(
        &mut self,
        port: usize,
        start: u64,
        samples: &[Cf32],
    ) -> Result<(), AirError> {
        let ports = self.tx.len();
        if port >= ports {
            return Err(AirError::NoSuchPort {
                kind: PortKind::Tx,
                port,
                ports,
            });
        }
        let end = start
            .checked_add(samples.len() as u64)
            .ok_or(AirError::Range {
                start,
                len: samples.len(),
            })?;
        if samples.is_empty() {
            return Ok(());
        }
        // The part before the horizon can no longer reach anyone.
        let late = self.horizon.saturating_sub(start).min(samples.len() as u64) as usize;
        let mut result = Ok(());
        if late > 0 {
            self.stats.late_emissions += 1;
            self.stats.late_samples += late as u64;
            result = Err(AirError::Late {
                start,
                horizon: self.horizon,
                dropped: late,
            });
        }
        if start.saturating_add(late as u64) >= end {
            return result;
        }
        let queue = &mut self.tx[port];
        let rest = &samples[late..];
        let room = self.max_pending.saturating_sub(queue.pending);
        let room = if queue.emissions.len() >= MAX_EMISSIONS {
            0
        } else {
            room
        };
        let keep = rest.len().min(room);
        if keep < rest.len() {
            let dropped = rest.len() - keep;
            self.stats.dropped_samples += dropped as u64;
            result = Err(AirError::Overflow { port, dropped });
        }
        if keep > 0 {
            self.seq += 1;
            queue.pending += keep;
            queue
                .emissions
                .insert((start + late as u64, self.seq), rest[..keep].to_vec());
            self.stats.emissions += 1;
        }
        result
    }

    pub(super) fn check_request(
        &self,
        ports: &[usize],
        start: u64,
        len: usize,
    ) -> Result<(), AirError> {
        if let Some(&port) = ports.iter().find(|&&p| p >= self.rx.len()) {
            return Err(AirError::NoSuchPort {
                kind: PortKind::Rx,
                port,
                ports: self.rx.len(),
            });
        }
        if len > self.history {
            return Err(AirError::TooLong {
                len,
                history: self.history,
            });
        }
        start
            .checked_add(len as u64)
            .and_then(|e| e.checked_add(self.block as u64))
            .ok_or(AirError::Range { start, len })?;
        Ok(())
    }

    /// Fills `outs[i]` (all the same length) with RX port `ports[i]` from tick `start`.
    pub(super) fn receive(
        &mut self,
        ports: &[usize],
        start: u64,
        outs: &mut [&mut [Cf32]],
    ) -> Result<(), AirError> {
        let len = outs.first().map_or(0, |o| o.len());
        self.check_request(ports, start, len)?;
        if outs.iter().any(|o| o.len() != len) || outs.len() != ports.len() {
            return Err(AirError::Range { start, len });
        }
        let oldest = self.horizon.saturating_sub(self.ring as u64);
        if start < oldest {
            self.stats.too_old_requests += 1;
            return Err(AirError::TooOld { start, oldest });
        }
        if len == 0 {
            return Ok(());
        }
        self.advance_to(start + len as u64)?;
        for (out, &port) in outs.iter_mut().zip(ports) {
            let ring = &self.rx[port];
            let first = (start % self.ring as u64) as usize;
            let head = len.min(self.ring - first);
            out[..head].copy_from_slice(&ring[first..first + head]);
            out[head..].copy_from_slice(&ring[..len - head]);
        }
        Ok(())
    }

    pub(super) fn advance_to(&mut self, tick: u64) -> Result<(), AirError> {
        let block = self.block as u64;
        let target = tick
            .checked_next_multiple_of(block)
            .ok_or(AirError::Range {
                start: tick,
                len: 0,
            })?;
        while self.horizon < target {
            self.skip_silence(target);
            if self.horizon >= target {
                break;
            }
            self.process_block()?;
        }
        Ok(())
    }

    /// Jumps over silent ticks that no request for `target` could still read.
    fn skip_silence(&mut self, target: u64) {
        let block = self.block as u64;
        let memory = match &self.channel {
            Channel::Identity => 0,
            Channel::Convolved { memory, .. } => *memory,
        };
        if self.horizon < self.last_active.saturating_add(memory) {
            return;
        }
        let next_emission = self
            .tx
            .iter()
            .filter_map(|q| q.emissions.keys().next().map(|k| k.0))
            .min()
            .unwrap_or(u64::MAX);
        let keep_from = target.saturating_sub(self.ring as u64);
        let jump_to = next_emission.min(keep_from) / block * block;
        if jump_to <= self.horizon {
            return;
        }
        self.stats.samples_skipped += jump_to - self.horizon;
        if let Channel::Convolved {
            conv,
            fading: Some(f),
            ..
        } = &mut self.channel
        {
            let updates = jump_to / f.update_ticks - self.horizon / f.update_ticks;
            for _ in 0..updates.min(MAX_SKIPPED_UPDATES) {
                f.channel.advance();
            }
            if updates > 0 && f.channel.write_response(&mut f.response).is_ok() {
                // The convolver's memory is silent, so a fresh one with the new response
                // is exactly the channel from here on.
                if let Ok(fresh) = MimoConvolver::new(self.block, &f.response) {
                    **conv = fresh;
                    f.due = false;
                    self.stats.channel_updates += 1;
                }
            }
        }
        self.horizon = jump_to;
    }

    fn process_block(&mut self) -> Result<(), AirError> {
        let b = self.block;
        let (h, end) = (self.horizon, self.horizon + b as u64);
        let mut active = false;
        for (queue, input) in self.tx.iter_mut().zip(self.inputs.iter_mut()) {
            input.fill(ZERO);
            let mut done = Vec::new();
            for (&(s, seq), samples) in queue.emissions.range(..(end, 0)) {
                let e = s + samples.len() as u64;
                let from = s.max(h);
                let to = e.min(end);
                if from < to {
                    let dst = &mut input[(from - h) as usize..(to - h) as usize];
                    let src = &samples[(from - s) as usize..(to - s) as usize];
                    for (d, x) in dst.iter_mut().zip(src) {
                        *d += *x;
                    }
                    active = true;
                }
                if e <= end {
                    done.push((s, seq));
                }
            }
            for key in done {
                if let Some(samples) = queue.emissions.remove(&key) {
                    queue.pending -= samples.len();
                }
            }
        }
        if active {
            self.last_active = end;
        }
        match &mut self.channel {
            Channel::Identity => {
                for (n, out) in self.outputs.iter_mut().enumerate() {
                    match self.inputs.get(n) {
                        Some(input) => out.copy_from_slice(input),
                        None => out.fill(ZERO),
                    }
                }
            }
            Channel::Convolved { conv, fading, .. } => {
                if let Some(f) = fading {
                    if h > 0 && h.is_multiple_of(f.update_ticks) {
                        f.channel.advance();
                        f.due = true;
                    }
                    if f.due && !conv.is_swapping() {
                        f.channel.write_response(&mut f.response)?;
                        conv.swap_responses(&f.response, f.mode)?;
                        f.due = false;
                        self.stats.channel_updates += 1;
                    }
                }
                // Port lists on the stack: a convolved air has at most MAX_PORTS a side,
                // and the block loop must not allocate.
                let (tx, rx) = (self.inputs.len(), self.outputs.len());
                let mut ins: [&[Cf32]; MAX_PORTS] = [&[]; MAX_PORTS];
                for (slot, input) in ins.iter_mut().zip(&self.inputs) {
                    *slot = input;
                }
                let mut outs: [&mut [Cf32]; MAX_PORTS] = std::array::from_fn(|_| &mut [][..]);
                for (slot, output) in outs.iter_mut().zip(self.outputs.iter_mut()) {
                    *slot = output;
                }
                conv.process_block(&ins[..tx], &mut outs[..rx])?;
            }
        }
        if let Some(std) = self.noise_std {
            let index = h / b as u64;
            for (n, out) in self.outputs.iter_mut().enumerate() {
                let mut rng = ChaCha8Rng::seed_from_u64(noise_seed(self.seed, n as u64, index));
                for y in out.iter_mut() {
                    let re: f32 = rng.sample(StandardNormal);
                    let im: f32 = rng.sample(StandardNormal);
                    *y += Cf32::new(re * std, im * std);
                }
            }
        }
        let first = (h % self.ring as u64) as usize;
        for (ring, out) in self.rx.iter_mut().zip(&self.outputs) {
            // `ring` is history + block and blocks start on multiples of `block`, but the
            // ring length need not be a multiple of it: write in up to two pieces.
            let head = b.min(self.ring - first);
            ring[first..first + head].copy_from_slice(&out[..head]);
            ring[..b - head].copy_from_slice(&out[head..]);
        }
        self.horizon = end;
        self.stats.samples_processed += b as u64;
        Ok(())
    }
}

/// A seed for (air seed, RX port, block index): SplitMix64 over the three.
fn noise_seed(seed: u64, port: u64, block: u64) -> u64 {
    let mut z =
        seed ^ port.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ block.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
