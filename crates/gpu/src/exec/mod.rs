//! The GPU executor of one frame configuration: device buffers for a ring of frame
//! slots, allocated once (no per-frame allocation), pinned host staging buffers, and
//! [`GpuExecutor::launch`], which enqueues one station instruction on the device's
//! high- or low-priority stream after the events it must wait for, and returns the
//! event that marks its completion (the dependence handle for later instructions).
//!
//! Kernel arguments are raw device addresses (base + offset of the instruction's
//! data), so instructions touching disjoint parts of one buffer run concurrently.

use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    result, CudaEvent, CudaSlice, CudaStream, DevicePtr, DeviceRepr, PinnedHostSlice,
    ValidAsZeroBits,
};
use radiohost_iq::Ci16;
use radiohost_phy::coding::user_c_init;
use radiohost_phy::crc::{self, CrcKind};
use radiohost_phy::csi::pilot_sequence;
use radiohost_phy::scramble::GoldSequence;
use radiohost_phy::FrameConfig;
use radiohost_station::isa::Instr;
use radiohost_station::shape::FrameShape;

use crate::device::GpuDevice;
use crate::kernels::{min_sum_correction, pam_levels};
use crate::layout::FrameLayout;
use crate::ldpc_graph::LiftedGraph;
use crate::GpuError;

mod enqueue;

/// A device allocation with its base address.
struct DevBuf<T> {
    slice: CudaSlice<T>,
    ptr: CUdeviceptr,
}

impl<T: DeviceRepr> DevBuf<T> {
    /// Address of element `i`.
    fn at(&self, i: usize) -> CUdeviceptr {
        debug_assert!(i <= self.slice.len());
        self.ptr + (i * std::mem::size_of::<T>()) as u64
    }
}

/// Device and pinned host buffers of one frame in flight.
struct FrameSlot {
    rx_host: PinnedHostSlice<i16>,
    rx: DevBuf<i16>,
    pilot_freq: DevBuf<f32>,
    pilot_null: DevBuf<f32>,
    up_freq: DevBuf<f32>,
    up_null: DevBuf<f32>,
    csi: DevBuf<f32>,
    w: DevBuf<f32>,
    noise_gain: DevBuf<f32>,
    zf_status: DevBuf<i32>,
    noise: DevBuf<f32>,
    llr: DevBuf<f32>,
    c2v: DevBuf<i8>,
    dec_bits: DevBuf<u8>,
    dec_status: DevBuf<i32>,
    dec_bits_host: PinnedHostSlice<u8>,
    dec_status_host: PinnedHostSlice<i32>,
    zf_status_host: PinnedHostSlice<i32>,
    dl_payload_host: PinnedHostSlice<u8>,
    dl_payload: DevBuf<u8>,
    dl_bits: DevBuf<u8>,
    dl_qam: DevBuf<f32>,
    dl_ant: DevBuf<f32>,
    tx: DevBuf<i16>,
    tx_host: PinnedHostSlice<i16>,
}

/// Constants shared by all slots.
struct Constants {
    pilots: DevBuf<f32>,
    levels: DevBuf<f32>,
    scramble: DevBuf<u32>,
    e_col: DevBuf<i16>,
    e_shift: DevBuf<i16>,
    row_start: DevBuf<i16>,
    st_col: DevBuf<i16>,
    st_shift: DevBuf<i16>,
    st_entry_start: DevBuf<i16>,
    st_entry_col: DevBuf<i16>,
    st_entry_shift: DevBuf<i16>,
}

/// Uplink results of one slot (valid once the slot's `Store` event completed).
#[derive(Debug)]
pub struct UplinkResults<'a> {
    /// `[uplink symbol][user][block][K']` decoded bits (CRC included).
    pub bits: &'a [u8],
    /// Per block: iterations | parity_ok << 16 | NaN input << 17.
    pub status: &'a [i32],
    /// Per data subcarrier: 0, or 1 + the user whose ZF pivot failed.
    pub zf_status: &'a [i32],
}

/// One decoded code block as the decode kernel reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockStatus {
    pub iterations: u32,
    pub parity_ok: bool,
    /// The block's LLRs contained NaN (decoded as erasures).
    pub nan_input: bool,
    /// The 24-bit block CRC of the decoded bits holds (checked on the host).
    pub crc_ok: bool,
}

impl UplinkResults<'_> {
    /// Status of code block `i` (`[uplink symbol][user][block]` order); `None` past
    /// the end.
    pub fn block(&self, i: usize) -> Option<BlockStatus> {
        let st = *self.status.get(i)?;
        let kbits = self.bits.len() / self.status.len();
        let bits = self.bits.get(i * kbits..(i + 1) * kbits)?;
        Some(BlockStatus {
            iterations: (st & 0xffff) as u32,
            parity_ok: st & (1 << 16) != 0,
            nan_input: st & (1 << 17) != 0,
            crc_ok: crc::check(CrcKind::Crc24B, bits),
        })
    }

    /// The first subcarrier whose zero-forcing failed, as the typed error.
    ///
    /// # Errors
    /// [`GpuError::Zf`] naming the subcarrier and user.
    pub fn check_zf(&self) -> Result<(), GpuError> {
        match self.zf_status.iter().position(|&s| s != 0) {
            Some(i) => Err(GpuError::Zf {
                subcarrier: i,
                user: (self.zf_status[i] - 1).max(0) as usize,
            }),
            None => Ok(()),
        }
    }
}

/// The GPU executor of one configuration on one logical device.
pub struct GpuExecutor {
    dev: Arc<GpuDevice>,
    layout: FrameLayout,
    graph: LiftedGraph,
    llr_scale: f32,
    correction: (i32, i32),
    max_iterations: i32,
    consts: Constants,
    slots: Vec<FrameSlot>,
    /// Downlink precoder normalisation (beta of phy's downlink) and transmit gain.
    precode_gain: f32,
    tx_gain: f32,
}

impl std::fmt::Debug for GpuExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuExecutor")
            .field("device", &self.dev)
            .field("slots", &self.slots.len())
            .finish()
    }
}

fn alloc<T: DeviceRepr + ValidAsZeroBits>(
    dev: &GpuDevice,
    stream: &Arc<CudaStream>,
    len: usize,
) -> Result<DevBuf<T>, GpuError> {
    let slice = stream
        .alloc_zeros::<T>(len.max(1))
        .map_err(|e| GpuError::cuda(dev.ordinal(), "device allocation", e))?;
    let ptr = {
        let (ptr, _sync) = slice.device_ptr(stream);
        ptr
    };
    Ok(DevBuf { slice, ptr })
}

fn upload<T: DeviceRepr>(
    dev: &GpuDevice,
    stream: &Arc<CudaStream>,
    data: &[T],
) -> Result<DevBuf<T>, GpuError> {
    let slice = stream
        .clone_htod(data)
        .map_err(|e| GpuError::cuda(dev.ordinal(), "constant upload", e))?;
    let ptr = {
        let (ptr, _sync) = slice.device_ptr(stream);
        ptr
    };
    Ok(DevBuf { slice, ptr })
}

fn pinned<T: DeviceRepr + ValidAsZeroBits>(
    dev: &GpuDevice,
    len: usize,
    write_combined: bool,
) -> Result<PinnedHostSlice<T>, GpuError> {
    // Write-combined for host->device staging (the CPU only writes it); plain pinned
    // memory for results the CPU reads.
    let flags = if write_combined {
        cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED
    } else {
        0
    };
    // SAFETY: contents are written before they are read (inputs by the caller,
    // results by device copies).
    unsafe {
        dev.context()
            .alloc_pinned_with_flags::<T>(len.max(1), flags)
    }
    .map_err(|e| GpuError::cuda(dev.ordinal(), "pinned host allocation", e))
}

impl GpuExecutor {
    /// Allocate everything for `slots` frames in flight of `cfg` cut as `shape`.
    ///
    /// # Errors
    /// An unsupported configuration or a CUDA allocation failure.
    pub fn new(
        dev: Arc<GpuDevice>,
        cfg: &FrameConfig,
        shape: &FrameShape,
        slots: usize,
    ) -> Result<Self, GpuError> {
        let layout = FrameLayout::new(cfg, shape)?;
        let graph = LiftedGraph::new(&cfg.code)?;
        let dcfg = radiohost_phy::coding::decoder_config(cfg.decoder_iter);
        let correction = min_sum_correction(dcfg.min_sum)
            .ok_or_else(|| GpuError::Config(format!("min-sum {:?}", dcfg.min_sum)))?;
        let s = dev.stream(false).clone();
        let l = &layout;
        let (m, k, d) = (l.antennas, l.users, l.data_num);
        // Scrambling sequences [data symbol][user][words]: fixed per configuration.
        let mut seq = vec![0u32; l.sequence_symbols() * k * l.seq_words];
        let mut bits = vec![0u8; l.symbol_bits];
        for u in 0..l.sequence_symbols() {
            for user in 0..k {
                bits.fill(0);
                GoldSequence::new_at(user_c_init(cfg, user), u * l.symbol_bits)
                    .scramble_bits(&mut bits);
                let base = (u * k + user) * l.seq_words;
                for (p, &b) in bits.iter().enumerate() {
                    seq[base + p / 32] |= u32::from(b) << (p % 32);
                }
            }
        }
        let pilots: Vec<f32> = pilot_sequence(d)
            .iter()
            .flat_map(|c| [c.re, c.im])
            .collect();
        let consts = Constants {
            pilots: upload(&dev, &s, &pilots)?,
            levels: upload(&dev, &s, &pam_levels(cfg.modulation))?,
            scramble: upload(&dev, &s, &seq)?,
            e_col: upload(&dev, &s, &graph.col)?,
            e_shift: upload(&dev, &s, &graph.shift)?,
            row_start: upload(&dev, &s, &graph.row_start)?,
            st_col: upload(&dev, &s, &graph.steps.col)?,
            st_shift: upload(&dev, &s, &graph.steps.shift)?,
            st_entry_start: upload(&dev, &s, &graph.steps.entry_start)?,
            st_entry_col: upload(&dev, &s, &graph.steps.entry_col)?,
            st_entry_shift: upload(&dev, &s, &graph.steps.entry_shift)?,
        };
        let (np, nu, ndl) = (l.pilots.len(), l.uplink.len(), l.downlink.len());
        let nd = ndl.saturating_sub(1);
        let code_blocks = nu * k * l.blocks_per_symbol;
        let mut frame_slots = Vec::with_capacity(slots);
        for _ in 0..slots.max(1) {
            let slot = FrameSlot {
                rx_host: pinned(&dev, 2 * m * l.frame_len, true)?,
                rx: alloc(&dev, &s, 2 * m * l.frame_len)?,
                pilot_freq: alloc(&dev, &s, 2 * np * m * d)?,
                pilot_null: alloc(&dev, &s, np * m)?,
                up_freq: alloc(&dev, &s, 2 * nu * m * d)?,
                up_null: alloc(&dev, &s, nu * m)?,
                csi: alloc(&dev, &s, 2 * d * k * m)?,
                w: alloc(&dev, &s, 2 * d * k * m)?,
                noise_gain: alloc(&dev, &s, d * k)?,
                zf_status: alloc(&dev, &s, d)?,
                noise: alloc(&dev, &s, 1)?,
                llr: alloc(&dev, &s, nu * k * l.symbol_bits)?,
                c2v: alloc(&dev, &s, code_blocks * graph.edges() * graph.zc)?,
                dec_bits: alloc(&dev, &s, code_blocks * l.block_bits)?,
                dec_status: alloc(&dev, &s, code_blocks)?,
                dec_bits_host: pinned(&dev, code_blocks * l.block_bits, false)?,
                dec_status_host: pinned(&dev, code_blocks, false)?,
                zf_status_host: pinned(&dev, d, false)?,
                dl_payload_host: pinned(&dev, nd * k * l.blocks_per_symbol * l.block_bits, true)?,
                dl_payload: alloc(&dev, &s, nd * k * l.blocks_per_symbol * l.block_bits)?,
                dl_bits: alloc(&dev, &s, nd * k * l.symbol_bits)?,
                dl_qam: alloc(&dev, &s, 2 * ndl * k * d)?,
                dl_ant: alloc(&dev, &s, 2 * ndl * m * d)?,
                tx: alloc(&dev, &s, 2 * m * l.frame_len)?,
                tx_host: pinned(&dev, 2 * m * l.frame_len, false)?,
            };
            if l.has_reference {
                // The reference symbol carries the pilot sequence for every user.
                let refq: Vec<f32> = (0..k).flat_map(|_| pilots.iter().copied()).collect();
                // SAFETY: dl_qam holds at least k*d complex values; refq outlives the
                // copy because the stream is synchronised below.
                unsafe { result::memcpy_htod_async(slot.dl_qam.ptr, &refq, s.cu_stream()) }
                    .map_err(|e| GpuError::cuda(dev.ordinal(), "reference symbol upload", e))?;
                s.synchronize()
                    .map_err(|e| GpuError::cuda(dev.ordinal(), "setup", e))?;
            }
            frame_slots.push(slot);
        }
        s.synchronize()
            .map_err(|e| GpuError::cuda(dev.ordinal(), "setup", e))?;
        Ok(Self {
            dev,
            llr_scale: radiohost_ldpc::DEFAULT_LLR_SCALE,
            correction,
            max_iterations: cfg.decoder_iter as i32,
            graph,
            layout,
            consts,
            slots: frame_slots,
            precode_gain: 1.0,
            tx_gain: 1.0,
        })
    }

    pub fn layout(&self) -> &FrameLayout {
        &self.layout
    }

    pub fn device(&self) -> &Arc<GpuDevice> {
        &self.dev
    }

    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Downlink gains: `beta` scales the precoder (phy's total-power normalisation) and
    /// `tx_gain` the time samples (before the 1/sqrt(N) of the orthonormal IFFT).
    pub fn set_downlink_gains(&mut self, beta: f32, tx_gain: f32) {
        self.precode_gain = beta;
        self.tx_gain = tx_gain;
    }

    fn slot(&self, slot: usize) -> Result<&FrameSlot, GpuError> {
        self.slots
            .get(slot)
            .ok_or_else(|| GpuError::Config(format!("frame slot {slot} of {}", self.slots.len())))
    }

    /// Copy a received frame (antenna-major, `frame_len` per antenna) into the slot's
    /// pinned staging buffer; `Load` instructions then move it symbol by symbol. The
    /// slot's previous frame must be finished (its `Store` event completed).
    ///
    /// # Errors
    /// A wrong sample count or a bad slot.
    pub fn set_input(&mut self, slot: usize, samples: &[Ci16]) -> Result<(), GpuError> {
        let need = self.layout.antennas * self.layout.frame_len;
        if samples.len() != need {
            return Err(GpuError::Config(format!(
                "frame has {} samples, the configuration needs {need}",
                samples.len()
            )));
        }
        let ordinal = self.dev.ordinal();
        let s = self
            .slots
            .get_mut(slot)
            .ok_or_else(|| GpuError::Config(format!("frame slot {slot}")))?;
        let host = s
            .rx_host
            .as_mut_slice()
            .map_err(|e| GpuError::cuda(ordinal, "staging", e))?;
        for (h, x) in host.chunks_exact_mut(2).zip(samples) {
            h[0] = x.re;
            h[1] = x.im;
        }
        Ok(())
    }

    /// Copy one received symbol into the slot's pinned staging buffer at frame
    /// symbol `sym`; its `Load` then moves it to the device. `samples` is
    /// antenna-major with the symbol at index `at` (a station frame slot's staged
    /// view): antenna `a`'s samples are `symbol_len` at
    /// `a * samples.len() / antennas + at * symbol_len`.
    ///
    /// # Errors
    /// A wrong sample count, a symbol outside the frame or a bad slot.
    pub fn set_input_symbol(
        &mut self,
        slot: usize,
        sym: usize,
        samples: &[Ci16],
        at: usize,
    ) -> Result<(), GpuError> {
        let (m, fl, sl) = (
            self.layout.antennas,
            self.layout.frame_len,
            self.layout.symbol_len,
        );
        let per_antenna = samples.len() / m.max(1);
        if per_antenna * m != samples.len() || (at + 1) * sl > per_antenna || (sym + 1) * sl > fl {
            return Err(GpuError::Config(format!(
                "symbol {sym}: {} samples with the symbol at {at}, the configuration needs {} per symbol",
                samples.len(),
                m * sl
            )));
        }
        let ordinal = self.dev.ordinal();
        let s = self
            .slots
            .get_mut(slot)
            .ok_or_else(|| GpuError::Config(format!("frame slot {slot}")))?;
        let host = s
            .rx_host
            .as_mut_slice()
            .map_err(|e| GpuError::cuda(ordinal, "staging", e))?;
        for a in 0..m {
            let dst = &mut host[2 * (a * fl + sym * sl)..][..2 * sl];
            let src = &samples[a * per_antenna + at * sl..][..sl];
            for (h, x) in dst.chunks_exact_mut(2).zip(src) {
                h[0] = x.re;
                h[1] = x.im;
            }
        }
        Ok(())
    }

    /// Stage one user's downlink payload for downlink data symbol `data_index`
    /// (`blocks_per_symbol` blocks of K' - 24 bits); the 24-bit block CRC is attached
    /// here on the host.
    ///
    /// # Errors
    /// A wrong length, a bad index, or a byte that is not a bit.
    pub fn set_downlink_payload(
        &mut self,
        slot: usize,
        data_index: usize,
        user: usize,
        payload: &[u8],
    ) -> Result<(), GpuError> {
        let l = &self.layout;
        let pb = l.block_bits - 24;
        let nd = l.downlink.len().saturating_sub(1);
        if data_index >= nd || user >= l.users || payload.len() != pb * l.blocks_per_symbol {
            return Err(GpuError::Config(format!(
                "downlink payload: data symbol {data_index} of {nd}, user {user} of {}, {} bits (need {})",
                l.users,
                payload.len(),
                pb * l.blocks_per_symbol
            )));
        }
        if let Some(i) = payload.iter().position(|&b| b > 1) {
            return Err(GpuError::Config(format!(
                "payload[{i}] = {} is not a bit",
                payload[i]
            )));
        }
        let (kbits, blocks, users) = (l.block_bits, l.blocks_per_symbol, l.users);
        let ordinal = self.dev.ordinal();
        let s = self
            .slots
            .get_mut(slot)
            .ok_or_else(|| GpuError::Config(format!("frame slot {slot}")))?;
        let host = s
            .dl_payload_host
            .as_mut_slice()
            .map_err(|e| GpuError::cuda(ordinal, "staging", e))?;
        let base = (data_index * users + user) * blocks * kbits;
        for (b, chunk) in payload.chunks_exact(pb).enumerate() {
            let block = &mut host[base + b * kbits..base + (b + 1) * kbits];
            block[..pb].copy_from_slice(chunk);
            crc::attach(CrcKind::Crc24B, block);
        }
        Ok(())
    }

    /// Uplink results of `slot` (call after its uplink `Store` event completed).
    ///
    /// # Errors
    /// A bad slot.
    pub fn uplink_results(&self, slot: usize) -> Result<UplinkResults<'_>, GpuError> {
        let s = self.slot(slot)?;
        let o = self.dev.ordinal();
        let e = |e| GpuError::cuda(o, "results", e);
        Ok(UplinkResults {
            bits: s.dec_bits_host.as_slice().map_err(e)?,
            status: s.dec_status_host.as_slice().map_err(e)?,
            zf_status: s.zf_status_host.as_slice().map_err(e)?,
        })
    }

    /// Transmitted samples of `slot` as int16 pairs, antenna-major (after the downlink
    /// `Store` events completed).
    ///
    /// # Errors
    /// A bad slot.
    pub fn tx_samples(&self, slot: usize) -> Result<&[i16], GpuError> {
        self.slot(slot)?
            .tx_host
            .as_slice()
            .map_err(|e| GpuError::cuda(self.dev.ordinal(), "results", e))
    }

    /// Enqueue `instr` of the frame in `slot` on the high (or, over-committed, the low)
    /// priority stream after `wait_for`; returns its completion event.
    ///
    /// # Errors
    /// An instruction outside the layout, or a CUDA error ([`GpuError::is_device_lost`]
    /// tells whether the device must leave the pool).
    pub fn launch(
        &self,
        slot: usize,
        instr: &Instr,
        low_priority: bool,
        wait_for: &[&CudaEvent],
    ) -> Result<CudaEvent, GpuError> {
        let idx = self.layout.check(instr)?;
        let fs = self.slot(slot)?;
        let stream = self.dev.stream(low_priority);
        let o = self.dev.ordinal();
        for ev in wait_for {
            stream
                .wait(ev)
                .map_err(|e| GpuError::cuda(o, "stream wait", e))?;
        }
        self.enqueue(fs, instr, idx, stream)?;
        stream
            .record_event(None)
            .map_err(|e| GpuError::cuda(o, format!("event after {instr}"), e))
    }

    fn code_params(&self) -> radiohost_ldpc::CodeParams {
        radiohost_ldpc::CodeParams {
            bg: self.graph.bg,
            zc: self.graph.zc,
            payload_bits: self.layout.block_bits,
            tx_bits: self.layout.tx_bits,
        }
    }

    /// Copy a device buffer of the slot to the host, synchronously (tests and the
    /// self-test compare intermediate results with the CPU kernels).
    ///
    /// # Errors
    /// A bad slot or a CUDA error.
    pub fn read_back(&self, slot: usize, what: Intermediate) -> Result<Vec<f32>, GpuError> {
        let fs = self.slot(slot)?;
        let buf = match what {
            Intermediate::PilotFreq => &fs.pilot_freq,
            Intermediate::UplinkFreq => &fs.up_freq,
            Intermediate::Csi => &fs.csi,
            Intermediate::Detector => &fs.w,
            Intermediate::NoiseGain => &fs.noise_gain,
            Intermediate::Noise => &fs.noise,
            Intermediate::Llr => &fs.llr,
            Intermediate::DownlinkQam => &fs.dl_qam,
            Intermediate::DownlinkAntenna => &fs.dl_ant,
        };
        let st = self.dev.stream(false);
        st.clone_dtoh(&buf.slice)
            .map_err(|e| GpuError::cuda(self.dev.ordinal(), "read back", e))
    }
}

/// Intermediate buffers [`GpuExecutor::read_back`] can fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intermediate {
    PilotFreq,
    UplinkFreq,
    Csi,
    Detector,
    NoiseGain,
    Noise,
    Llr,
    DownlinkQam,
    DownlinkAntenna,
}

impl Drop for GpuExecutor {
    fn drop(&mut self) {
        // Queued copies read and write the pinned buffers about to be freed.
        let _ = self.dev.synchronize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_decode_kernel_status_words() {
        let mut block = vec![0u8; 64];
        block[3] = 1;
        crc::attach(CrcKind::Crc24B, &mut block);
        let mut bits = block.clone();
        let mut bad = block.clone();
        bad[5] ^= 1;
        bits.extend_from_slice(&bad);
        let status = [3 | 1 << 16, 10 | 1 << 17];
        let r = UplinkResults {
            bits: &bits,
            status: &status,
            zf_status: &[0, 0, 3, 0],
        };
        assert_eq!(
            r.block(0),
            Some(BlockStatus {
                iterations: 3,
                parity_ok: true,
                nan_input: false,
                crc_ok: true
            })
        );
        assert_eq!(
            r.block(1),
            Some(BlockStatus {
                iterations: 10,
                parity_ok: false,
                nan_input: true,
                crc_ok: false
            })
        );
        assert_eq!(r.block(2), None);
        match r.check_zf() {
            Err(GpuError::Zf {
                subcarrier: 2,
                user: 2,
            }) => {}
            other => panic!("{other:?}"),
        }
    }
}
