//! The live channel: dsp's UPOLS convolver run on every CHDR packet between
//! RX and TX, static or slowly time-varying (a worker thread prepares each
//! next response; the packet path swaps it in without allocating).

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread;

use radiohost_dsp::channel::{FadingChannel, FadingError};
use radiohost_dsp::{
    DspError, MimoConvolver, MimoTaps, ResponsePlanner, ResponseSpectra, SwapMode,
};
use radiohost_iq::{Cf32, Ci16};

use crate::process::{Block, PacketProcessor};

/// Why a channel processor cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum LiveChannelError {
    #[error("the convolution block must be at least 1 sample")]
    Block,
    #[error("packet size {spp} is not a multiple of the convolution block {block}: choose samples per packet as k * block")]
    NotMultiple { spp: usize, block: usize },
    #[error("{0}x{1} ports: the live channel emulator handles up to {MAX_CHANNEL_PORTS} per side")]
    Ports(usize, usize),
    #[error("update interval must be at least 1 block")]
    UpdateBlocks,
    #[error("an update every {update_blocks} blocks is shorter than one staggered swap ({partitions} blocks for a {taps}-tap response at block {block}); raise it or the block size")]
    UpdateTooShort {
        update_blocks: usize,
        partitions: usize,
        taps: usize,
        block: usize,
    },
    #[error("building the UPOLS convolver: {0}")]
    Dsp(#[from] DspError),
    #[error("fading model: {0}")]
    Fading(#[from] FadingError),
}

/// Most ports the channel processor handles.
pub const MAX_CHANNEL_PORTS: usize = 16;

/// A slowly time-varying channel: a worker thread advances the fading model
/// and turns each new response into spectra ahead of time; before every
/// `update_blocks`-th block the processor takes the next spectra and starts a
/// staggered swap (each input block is filtered wholly by one response).
/// Spectra buffers circulate between the two (bounded channels, no allocation).
struct LiveFading {
    update_blocks: u64,
    ready: Receiver<ResponseSpectra>,
    recycle: SyncSender<ResponseSpectra>,
    blocks: u64,
    swaps: u64,
    /// The worker until it starts (see [`FadingWorker::start`]).
    worker: Option<FadingWorker>,
}

/// What the fading worker thread owns: the model, its next response and the
/// planner that turns it into spectra.
struct FadingWorker {
    channel: FadingChannel,
    next: MimoTaps,
    planner: ResponsePlanner,
    ready: SyncSender<ResponseSpectra>,
    recycled: Receiver<ResponseSpectra>,
    /// CPUs the process may use, read before the packet thread was pinned.
    cpus: Vec<usize>,
}

impl FadingWorker {
    /// Starts the worker from the packet thread, after that thread took its
    /// real-time policy. The worker runs one priority above it (its work is a
    /// short burst per update that the packet path waits on: with a
    /// time-sharing worker, SCHED_FIFO packet and radio threads on every core
    /// starve it until the kernel's RT throttling lets it run, and the stream
    /// stalls), and on any CPU of the process, not only the packet thread's.
    fn start(self) -> std::io::Result<()> {
        let inherited = radiohost_rt::sys::current_scheduling();
        thread::Builder::new()
            .name("chanemu-fading".into())
            .spawn(move || {
                let mut w = self;
                if !w.cpus.is_empty() {
                    if let Err(e) = radiohost_rt::sys::set_affinity(&w.cpus) {
                        tracing::warn!("fading worker: CPU affinity {:?} refused: {e}", w.cpus);
                    }
                }
                if let Ok((policy, priority)) = inherited {
                    if policy == libc::SCHED_FIFO || policy == libc::SCHED_RR {
                        let above = (priority + 1).min(99);
                        if let Err(e) = radiohost_rt::sys::set_scheduling(policy, above) {
                            tracing::warn!("fading worker: priority {above} refused: {e}");
                        }
                    }
                }
                // Ends when the processor (both channel ends) is dropped.
                while let Ok(mut spectra) = w.recycled.recv() {
                    w.channel.advance();
                    if w.channel.write_response(&mut w.next).is_err()
                        || w.planner.prepare_into(&w.next, &mut spectra).is_err()
                        || w.ready.send(spectra).is_err()
                    {
                        break;
                    }
                }
            })
            .map(drop)
    }
}

/// Packets of zeros [`ChannelProcessor`] filters before the stream starts.
const WARM_UP_PACKETS: usize = 4;

/// Spectra buffers in circulation between the processor and the worker.
const SPECTRA_BUFFERS: usize = 3;

/// The live channel: dsp's UPOLS convolver run on every packet, in B-sample
/// blocks (the packet size must be a multiple of B).
pub struct ChannelProcessor {
    conv: MimoConvolver,
    block: usize,
    spp: usize,
    inputs: usize,
    outputs: usize,
    in_f: Vec<Cf32>,
    out_f: Vec<Cf32>,
    fading: Option<LiveFading>,
    /// Blocks the convolver refused (cannot happen once construction checked shapes).
    pub errors: u64,
}

impl ChannelProcessor {
    pub fn new(
        taps: &MimoTaps,
        block: usize,
        samples_per_packet: usize,
    ) -> Result<Self, LiveChannelError> {
        if block == 0 {
            return Err(LiveChannelError::Block);
        }
        if !samples_per_packet.is_multiple_of(block) {
            return Err(LiveChannelError::NotMultiple {
                spp: samples_per_packet,
                block,
            });
        }
        let (m, n) = (taps.inputs(), taps.outputs());
        if m > MAX_CHANNEL_PORTS || n > MAX_CHANNEL_PORTS {
            return Err(LiveChannelError::Ports(m, n));
        }
        let conv = MimoConvolver::new(block, taps)?;
        Ok(ChannelProcessor {
            conv,
            block,
            spp: samples_per_packet,
            inputs: m,
            outputs: n,
            in_f: vec![Cf32::new(0.0, 0.0); m * samples_per_packet],
            out_f: vec![Cf32::new(0.0, 0.0); n * samples_per_packet],
            fading: None,
            errors: 0,
        })
    }

    /// A time-varying channel: starts with `channel`'s current response and,
    /// every `update_blocks` blocks, swaps in the model's next response
    /// (staggered, glitch-free). The model steps and the response FFTs run on
    /// a worker thread a few updates ahead; the packet path only exchanges
    /// preallocated spectra buffers (O(1), no allocation). If the worker falls
    /// behind, the packet path waits for it (the response sequence stays exact).
    pub fn fading(
        channel: FadingChannel,
        update_blocks: usize,
        block: usize,
        samples_per_packet: usize,
    ) -> Result<Self, LiveChannelError> {
        if update_blocks == 0 {
            return Err(LiveChannelError::UpdateBlocks);
        }
        let mut next = channel.make_response();
        channel.write_response(&mut next)?;
        let mut proc = Self::new(&next, block, samples_per_packet)?;
        let partitions = proc.conv.partitions();
        if update_blocks < partitions {
            return Err(LiveChannelError::UpdateTooShort {
                update_blocks,
                partitions,
                taps: channel.len(),
                block,
            });
        }
        let mut planner = proc.conv.response_planner();
        let (ready_tx, ready) = sync_channel::<ResponseSpectra>(SPECTRA_BUFFERS);
        let (recycle, recycle_rx) = sync_channel::<ResponseSpectra>(SPECTRA_BUFFERS + 2);
        for _ in 0..SPECTRA_BUFFERS {
            // Capacity exceeds the buffers sent: never blocks, never fails.
            let _ = recycle.try_send(planner.prepare(&next)?);
        }
        let worker = FadingWorker {
            channel,
            next,
            planner,
            ready: ready_tx,
            recycled: recycle_rx,
            cpus: radiohost_rt::sys::current_affinity().unwrap_or_default(),
        };
        proc.fading = Some(LiveFading {
            update_blocks: update_blocks as u64,
            ready,
            recycle,
            blocks: 0,
            swaps: 0,
            worker: Some(worker),
        });
        Ok(proc)
    }

    /// Starts the fading worker (once) on the calling thread's policy; see
    /// [`FadingWorker::start`]. A worker that cannot start leaves the updates
    /// to fail, each counted in `errors`.
    fn start_fading_worker(&mut self) {
        let Some(worker) = self.fading.as_mut().and_then(|f| f.worker.take()) else {
            return;
        };
        if let Err(e) = worker.start() {
            tracing::error!("starting the fading-model worker thread: {e}");
        }
    }

    /// Response replacements so far (0 for a static channel).
    pub fn swaps(&self) -> u64 {
        self.fading.as_ref().map_or(0, |f| f.swaps)
    }

    /// Advance the fading model and start the swap when block `blocks` is due.
    fn maybe_update(&mut self) {
        if self.fading.as_ref().is_some_and(|f| f.worker.is_some()) {
            self.start_fading_worker();
        }
        let Some(f) = self.fading.as_mut() else {
            return;
        };
        if f.blocks > 0 && f.blocks.is_multiple_of(f.update_blocks) {
            let swapped = f
                .ready
                .recv()
                .ok()
                .and_then(|spectra| self.conv.swap_prepared(spectra, SwapMode::Staggered).ok());
            match swapped {
                Some(old) => {
                    // Capacity exceeds the buffers in circulation: never blocks.
                    let _ = f.recycle.try_send(old);
                    f.swaps += 1;
                }
                None => self.errors += 1,
            }
        }
        f.blocks += 1;
    }
}

impl PacketProcessor for ChannelProcessor {
    fn inputs(&self) -> usize {
        self.inputs
    }

    /// Filters a few packets of zeros (first-touch page faults, cold caches),
    /// then clears the signal history; the fading schedule is not advanced.
    fn warm_up(&mut self) {
        self.start_fading_worker();
        let b = self.block;
        let zero = Cf32::new(0.0, 0.0);
        self.in_f.fill(zero);
        self.out_f.fill(zero);
        for _ in 0..WARM_UP_PACKETS * self.spp / b {
            let ins: Vec<&[Cf32]> = self.in_f.chunks_exact(self.spp).map(|p| &p[..b]).collect();
            let mut outs: Vec<&mut [Cf32]> = self
                .out_f
                .chunks_exact_mut(self.spp)
                .map(|p| &mut p[..b])
                .collect();
            if self.conv.process_block(&ins, &mut outs).is_err() {
                self.errors += 1;
            }
        }
        self.conv.reset();
    }

    fn outputs(&self) -> usize {
        self.outputs
    }

    fn process(&mut self, input: &Block<Ci16>, output: &mut Block<Ci16>) {
        let (spp, b) = (self.spp, self.block);
        for p in 0..self.inputs {
            for (f, s) in self.in_f[p * spp..(p + 1) * spp]
                .iter_mut()
                .zip(input.port(p))
            {
                *f = s.to_cf32();
            }
        }
        for j in 0..spp / b {
            self.maybe_update();
            let mut ins: [&[Cf32]; MAX_CHANNEL_PORTS] = [&[]; MAX_CHANNEL_PORTS];
            for (k, port) in self.in_f.chunks_exact(spp).enumerate() {
                ins[k] = &port[j * b..(j + 1) * b];
            }
            let mut outs: [&mut [Cf32]; MAX_CHANNEL_PORTS] = Default::default();
            for (k, port) in self.out_f.chunks_exact_mut(spp).enumerate() {
                outs[k] = &mut port[j * b..(j + 1) * b];
            }
            if self
                .conv
                .process_block(&ins[..self.inputs], &mut outs[..self.outputs])
                .is_err()
            {
                self.errors += 1;
                for o in outs[..self.outputs].iter_mut() {
                    o.fill(Cf32::new(0.0, 0.0));
                }
            }
        }
        for p in 0..self.outputs {
            for (s, f) in output
                .port_mut(p)
                .iter_mut()
                .zip(&self.out_f[p * spp..(p + 1) * spp])
            {
                *s = Ci16::from_cf32(*f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rx::test_signal;

    /// Feed `packets` packets of the test signal through `proc`; returns each
    /// output port's samples.
    fn run_packets(
        proc: &mut ChannelProcessor,
        m: usize,
        n: usize,
        spp: usize,
        packets: usize,
    ) -> Vec<Vec<Ci16>> {
        let mut input = Block::<Ci16>::zeros(m, spp, 0.0, 0).unwrap();
        let mut output = Block::<Ci16>::zeros(n, spp, 0.0, 0).unwrap();
        let mut got: Vec<Vec<Ci16>> = vec![Vec::new(); n];
        for k in 0..packets {
            for p in 0..m {
                for (i, s) in input.port_mut(p).iter_mut().enumerate() {
                    *s = test_signal(p as u16, (k * spp + i) as u64);
                }
            }
            proc.process(&input, &mut output);
            for (q, g) in got.iter_mut().enumerate() {
                g.extend_from_slice(output.port(q));
            }
        }
        got
    }

    /// Packets of 2 blocks through the processor equal the direct convolution
    /// (summed over inputs), quantised: the per-packet wrapping adds no error.
    #[test]
    fn channel_processor_matches_direct_convolution() {
        let (m, n, spp, block, packets) = (2, 2, 512, 256, 3);
        let paths: Vec<Vec<Cf32>> = (0..m * n)
            .map(|p| {
                (0..40)
                    .map(|j| Cf32::new(0.3 / (1 + j + p) as f32, 0.1 * ((j % 3) as f32 - 1.0)))
                    .collect()
            })
            .collect();
        let taps = MimoTaps::from_paths(m, n, paths).unwrap();
        let mut proc = ChannelProcessor::new(&taps, block, spp).unwrap();
        let got = run_packets(&mut proc, m, n, spp, packets);
        assert_eq!(proc.errors, 0);
        for (q, g) in got.iter().enumerate() {
            for (i, s) in g.iter().enumerate() {
                let mut acc = Cf32::new(0.0, 0.0);
                for p in 0..m {
                    for (j, h) in taps.path(q, p).iter().enumerate().take(i + 1) {
                        acc += h * test_signal(p as u16, (i - j) as u64).to_cf32();
                    }
                }
                let want = Ci16::from_cf32(acc);
                let err = (s.re as i32 - want.re as i32)
                    .abs()
                    .max((s.im as i32 - want.im as i32).abs());
                assert!(err <= 1, "out {q} sample {i}: {s:?} vs {want:?}");
            }
        }
    }

    /// A fading channel through the processor: over several updates every
    /// input block is filtered wholly by the response active when it arrived
    /// (the replayed model's r-th response for blocks r*U .. (r+1)*U).
    #[test]
    fn fading_processor_swaps_follow_the_block_identity() {
        use radiohost_dsp::channel::{FadingProcess, PowerDelayProfile};
        let (m, n, spp, block, update, packets) = (2, 2, 64, 16, 3, 10);
        let pdp = PowerDelayProfile::exponential(40, 1, 0.1).unwrap();
        let channel = FadingChannel::new(pdp, m, n, FadingProcess::Ar1 { rho: 0.3 }, 5).unwrap();
        let mut replay = channel.clone();
        let mut proc = ChannelProcessor::fading(channel, update, block, spp).unwrap();
        let blocks = packets * spp / block;
        let mut schedule = Vec::new();
        for r in 0..blocks.div_ceil(update) {
            if r > 0 {
                replay.advance();
            }
            let mut t = replay.make_response();
            replay.write_response(&mut t).unwrap();
            schedule.push(t);
        }
        assert_ne!(schedule[0].path(0, 0), schedule[1].path(0, 0));
        let got = run_packets(&mut proc, m, n, spp, packets);
        assert_eq!(proc.errors, 0);
        assert_eq!(proc.swaps() as usize, schedule.len() - 1);
        let per = update * block;
        let (mut worst_new, mut worst_static) = (0, 0);
        for (q, g) in got.iter().enumerate() {
            for (i, s) in g.iter().enumerate() {
                let (mut acc, mut acc0) = (Cf32::new(0.0, 0.0), Cf32::new(0.0, 0.0));
                for p in 0..m {
                    for j in 0..40.min(i + 1) {
                        let x = test_signal(p as u16, (i - j) as u64).to_cf32();
                        acc += schedule[(i - j) / per].path(q, p)[j] * x;
                        acc0 += schedule[0].path(q, p)[j] * x;
                    }
                }
                let err = |want: Ci16| {
                    (s.re as i32 - want.re as i32)
                        .abs()
                        .max((s.im as i32 - want.im as i32).abs())
                };
                worst_new = worst_new.max(err(Ci16::from_cf32(acc)));
                worst_static = worst_static.max(err(Ci16::from_cf32(acc0)));
            }
        }
        assert!(
            worst_new <= 1,
            "error {worst_new} LSB against the swap identity"
        );
        // The check can fail: the first response alone does not explain the output.
        assert!(
            worst_static > 10,
            "channel did not vary ({worst_static} LSB)"
        );
    }

    #[test]
    fn update_interval_must_cover_a_swap() {
        use radiohost_dsp::channel::{FadingProcess, PowerDelayProfile};
        let pdp = PowerDelayProfile::exponential(40, 1, 0.1).unwrap();
        let channel = FadingChannel::new(pdp, 1, 1, FadingProcess::Ar1 { rho: 0.9 }, 1).unwrap();
        let err = ChannelProcessor::fading(channel, 2, 16, 64).err().unwrap();
        assert!(
            matches!(err, LiveChannelError::UpdateTooShort { .. }),
            "{err}"
        );
    }

    #[test]
    fn packet_size_must_be_a_multiple_of_the_block() {
        let taps = MimoTaps::siso(vec![Cf32::new(1.0, 0.0)]).unwrap();
        let err = ChannelProcessor::new(&taps, 256, 300).err().unwrap();
        assert!(err.to_string().contains("multiple"), "{err}");
    }
}
