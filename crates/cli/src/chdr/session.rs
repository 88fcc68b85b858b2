//! One streaming session: an emulated radio (in-process, on loopback) and the
//! host streamer with a processor between RX and TX. Also the channel processor
//! that runs dsp's UPOLS convolver per packet.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use radiohost_chdr::net::pin_current_thread;
use radiohost_chdr::process::{Block, PacketProcessor};
use radiohost_chdr::radio::{run_radio_on, RadioConfig, RadioReport, RadioSockets};
use radiohost_chdr::streamer::{run_streamer_on, PollMode, StreamerConfig, StreamerReport};
use radiohost_chdr::tx::TxPolicy;
use radiohost_dsp::channel::FadingChannel;
use radiohost_dsp::{MimoConvolver, MimoTaps, ResponseSpectra, SwapMode};
use radiohost_iq::{Cf32, Ci16};

/// EPIDs of the emulated radio's endpoints (RX streams land on the host at
/// `HOST_RX_EPID + port`; TX endpoints are `RADIO_TX_EPID + port`).
pub const HOST_RX_EPID: u16 = 0x0100;
pub const RADIO_TX_EPID: u16 = 0x0200;
pub const HOST_TX_EPID: u16 = 0x0300;

#[derive(Clone, Debug)]
pub struct SessionOpts {
    pub inputs: usize,
    pub outputs: usize,
    pub rate_sps: f64,
    pub samples_per_packet: usize,
    pub packets: u64,
    /// RX timestamp -> TX timestamp budget.
    pub offset: Duration,
    pub poll: PollMode,
    pub cpu: Option<usize>,
    pub radio_cpu: Option<usize>,
    pub radio_spin: bool,
    /// SCHED_FIFO priority for the streamer and radio threads.
    pub rt_priority: Option<i32>,
    pub batch: usize,
    pub policy: TxPolicy,
    pub capacity_pkts: u32,
    pub subscribers: Vec<SocketAddr>,
    pub record: bool,
}

impl SessionOpts {
    pub fn offset_ticks(&self) -> u64 {
        (self.offset.as_secs_f64() * self.rate_sps).round() as u64
    }

    pub fn streamer_config(&self, bind: SocketAddr, radio_tx: SocketAddr) -> StreamerConfig {
        let mut c = StreamerConfig::new(bind, radio_tx, self.samples_per_packet);
        c.rx_epids = (0..self.inputs as u16).map(|p| HOST_RX_EPID + p).collect();
        c.tx_epids = (0..self.outputs as u16)
            .map(|p| RADIO_TX_EPID + p)
            .collect();
        c.host_epid = HOST_TX_EPID;
        c.tx_offset_ticks = self.offset_ticks();
        c.poll = self.poll;
        c.cpu = self.cpu;
        c.rt_priority = self.rt_priority;
        c.batch = self.batch;
        c.subscribers = self.subscribers.clone();
        c.pending_capacity = 1024;
        c.status_period = (self.capacity_pkts as u64 / 4).max(1);
        c
    }
}

pub struct SessionResult {
    pub streamer: StreamerReport,
    pub radio: RadioReport,
    pub wall: Duration,
}

/// Run the emulated radio and the streamer on loopback until the radio's
/// packets are through.
pub fn run_session<P: PacketProcessor + 'static>(
    o: &SessionOpts,
    proc: P,
) -> Result<SessionResult> {
    ensure!(
        o.inputs >= 1 && o.outputs >= 1,
        "need at least one input and one output port"
    );
    ensure!(o.packets > 0, "--packets must be at least 1");
    let host = UdpSocket::bind("127.0.0.1:0").context("binding the streamer socket on loopback")?;
    let host_addr = host.local_addr()?;
    let radio_cfg = RadioConfig {
        host: host_addr,
        rx_bind: "127.0.0.1:0".parse()?,
        tx_bind: "127.0.0.1:0".parse()?,
        rx_dst_epids: (0..o.inputs as u16).map(|p| HOST_RX_EPID + p).collect(),
        tx_epids: (0..o.outputs as u16).map(|p| RADIO_TX_EPID + p).collect(),
        rate_sps: o.rate_sps,
        samples_per_packet: o.samples_per_packet,
        packets: o.packets,
        start_delay: Duration::from_millis(30),
        tx_capacity_pkts: o.capacity_pkts,
        policy: o.policy,
        linger: o.offset * 2 + Duration::from_millis(100),
        record: o.record,
        spin: o.radio_spin,
    };
    let sockets = RadioSockets::bind(&radio_cfg)?;
    let mut cfg = o.streamer_config(host_addr, sockets.tx.local_addr()?);
    cfg.stop_after_frames = Some(o.packets);
    cfg.idle_timeout = Duration::from_millis(300) + o.offset;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_streamer = stop.clone();
    let start = Instant::now();
    let streamer = thread::Builder::new()
        .name("chdr-streamer".into())
        .spawn(move || run_streamer_on(host, cfg, proc, &stop_streamer))?;
    let radio_cpu = o.radio_cpu;
    let rt_priority = o.rt_priority;
    let stop_radio = stop.clone();
    let radio = thread::Builder::new()
        .name("chdr-radio".into())
        .spawn(move || {
            if let Some(cpu) = radio_cpu {
                if let Err(e) = pin_current_thread(cpu) {
                    tracing::warn!(
                        "pinning the emulated radio to CPU {cpu} refused: {e}; running unpinned"
                    );
                }
            }
            if let Some(prio) = rt_priority {
                if let Err(e) = radiohost_chdr::net::set_fifo_priority(prio) {
                    tracing::warn!("SCHED_FIFO {prio} for the emulated radio refused: {e}");
                }
            }
            run_radio_on(sockets, radio_cfg, &stop_radio)
        })?;
    let radio = radio
        .join()
        .map_err(|_| anyhow::anyhow!("the emulated radio thread panicked"))?;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let streamer = streamer
        .join()
        .map_err(|_| anyhow::anyhow!("the streamer thread panicked"))?;
    Ok(SessionResult {
        streamer: streamer.context("host streamer failed")?,
        radio: radio.context("emulated radio failed")?,
        wall: start.elapsed(),
    })
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
}

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
    pub fn new(taps: &MimoTaps, block: usize, samples_per_packet: usize) -> Result<Self> {
        ensure!(block > 0, "--block must be positive");
        if !samples_per_packet.is_multiple_of(block) {
            bail!(
                "packet size {samples_per_packet} is not a multiple of the convolution block {block}: \
                 choose --spp as k * --block"
            );
        }
        let (m, n) = (taps.inputs(), taps.outputs());
        ensure!(
            m <= MAX_CHANNEL_PORTS && n <= MAX_CHANNEL_PORTS,
            "{m}x{n} ports: the live channel emulator handles up to {MAX_CHANNEL_PORTS} per side"
        );
        let conv = MimoConvolver::new(block, taps).context("building the UPOLS convolver")?;
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
        mut channel: FadingChannel,
        update_blocks: usize,
        block: usize,
        samples_per_packet: usize,
    ) -> Result<Self> {
        ensure!(update_blocks >= 1, "--update-blocks must be at least 1");
        let mut next = channel.make_response();
        channel.write_response(&mut next)?;
        let mut proc = Self::new(&next, block, samples_per_packet)?;
        let partitions = proc.conv.partitions();
        ensure!(
            update_blocks >= partitions,
            "--update-blocks {update_blocks} is shorter than one staggered swap ({partitions} blocks \
             for a {}-tap response at --block {block}); raise it or the block size",
            channel.len()
        );
        let mut planner = proc.conv.response_planner();
        let (ready_tx, ready) = sync_channel::<ResponseSpectra>(SPECTRA_BUFFERS);
        let (recycle, recycle_rx) = sync_channel::<ResponseSpectra>(SPECTRA_BUFFERS + 2);
        for _ in 0..SPECTRA_BUFFERS {
            recycle
                .send(planner.prepare(&next)?)
                .map_err(|_| anyhow::anyhow!("fading worker channel closed"))?;
        }
        thread::Builder::new()
            .name("chanemu-fading".into())
            .spawn(move || {
                // Ends when the processor (both channel ends) is dropped.
                while let Ok(mut spectra) = recycle_rx.recv() {
                    channel.advance();
                    if channel.write_response(&mut next).is_err()
                        || planner.prepare_into(&next, &mut spectra).is_err()
                        || ready_tx.send(spectra).is_err()
                    {
                        break;
                    }
                }
            })
            .context("starting the fading-model worker thread")?;
        proc.fading = Some(LiveFading {
            update_blocks: update_blocks as u64,
            ready,
            recycle,
            blocks: 0,
            swaps: 0,
        });
        Ok(proc)
    }

    /// Response replacements so far (0 for a static channel).
    #[cfg(test)]
    pub fn swaps(&self) -> u64 {
        self.fading.as_ref().map_or(0, |f| f.swaps)
    }

    /// Advance the fading model and start the swap when block `blocks` is due.
    fn maybe_update(&mut self) {
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

    fn outputs(&self) -> usize {
        self.outputs
    }

    fn process(&mut self, input: &Block, output: &mut Block) {
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
    use radiohost_chdr::rx::test_signal;

    /// Feed `packets` packets of the test signal through `proc`; returns each
    /// output port's samples.
    fn run_packets(
        proc: &mut ChannelProcessor,
        m: usize,
        n: usize,
        spp: usize,
        packets: usize,
    ) -> Vec<Vec<Ci16>> {
        let mut input = Block::new(m, spp);
        let mut output = Block::new(n, spp);
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
        assert!(err.to_string().contains("--update-blocks"), "{err}");
    }

    #[test]
    fn packet_size_must_be_a_multiple_of_the_block() {
        let taps = MimoTaps::siso(vec![Cf32::new(1.0, 0.0)]).unwrap();
        let err = ChannelProcessor::new(&taps, 256, 300).err().unwrap();
        assert!(err.to_string().contains("multiple"), "{err}");
    }
}
