//! A frame's buffers ("frame slot"): one lock per region an instruction writes.
//!
//! Regions are indexed by the position of a symbol among its role (pilot, uplink,
//! downlink) and by subcarrier part or user, so two instructions of a frame never
//! write the same region. The DAG makes every reader wait for its writer, so the
//! locks only serialise readers that share an input with a (rare) late duplicate
//! writer — e.g. an instruction re-run elsewhere after its device was removed, which
//! writes the same values.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use radiohost_iq::{Cf32, Ci16, Ci16Buf};
use radiohost_phy::coding::BlockResult;
use radiohost_phy::frontend::SLICE;
use radiohost_phy::generator::GeneratedFrame;
use radiohost_phy::group_product::GaussCoefficients;
use radiohost_phy::simd::Isa;

use super::KernelContext;

/// Read a region; a poisoned lock (a panicked writer) still yields the data, which
/// the frame's CRC and truth checks then judge.
pub fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// Write a region (see [`read`] on poisoning).
pub fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// Data subcarriers of one received pilot symbol, all antennas
/// (`[antenna][subcarrier]`, what the channel estimator reads),
/// with the energy and count of its null bins (the noise measurement).
#[derive(Debug, Default)]
pub struct FreqSymbol {
    pub data: Vec<Cf32>,
    pub null_energy: f64,
    pub null_bins: usize,
}

/// Data subcarriers of one received uplink symbol in the planar layout of
/// [`radiohost_phy::frontend::FrontEnd::antenna_planar`] (slices of 16 subcarriers,
/// every antenna's slice contiguous: what the group equaliser reads), with the energy
/// and count of its null bins.
#[derive(Debug, Default)]
pub struct PlanarSymbol {
    pub re: Vec<[f32; SLICE]>,
    pub im: Vec<[f32; SLICE]>,
    pub null_energy: f64,
    pub null_bins: usize,
}

/// ZF output of one subcarrier part: the detectors of every ZF group
/// (`FrameConfig::zf_block` subcarriers) the part's subcarriers touch. A group cut
/// by a part boundary is computed by both parts, with the same result.
#[derive(Debug, Default)]
pub struct ZfPart {
    /// Index of the first group of the part.
    pub first_group: usize,
    /// `[group of the part][antenna][user]`: each group's `W` transposed, what
    /// the per-group equalisation and precoding read; empty when the context is
    /// lanewise (they read `lanes`).
    pub w_transposed: Vec<Cf32>,
    /// `[group of the part]`: each group's detector prepared once per frame for the
    /// equalisation of every uplink symbol (`GroupProduct::apply_gauss_planar`, as
    /// phy's uplink frame does); empty when the context is lanewise or the frame has
    /// no uplink symbol.
    pub equalizers: Vec<GaussCoefficients>,
    /// `[group of the part][user]`: `[(H^H H)^-1]_kk`.
    pub noise_gain: Vec<f32>,
    /// `[slice of the part][antenna][user]`: the detectors spread over each
    /// slice's runs of [`KernelContext::lane_width`] lanes (lanes outside the part
    /// take the nearest lane's group; their outputs are never written); filled only
    /// when the context is lanewise.
    pub lanes: Vec<f32>,
    /// Null-bin energy and bin count of all pilot symbols.
    pub pilot_null_energy: f64,
    pub pilot_null_bins: usize,
}

/// Decoded bits of one uplink symbol and user.
#[derive(Debug, Default)]
pub struct DecodedSymbol {
    pub payload: Vec<u8>,
    pub blocks: Vec<BlockResult>,
}

/// Everything one frame reads and writes, sized once for a configuration and reused
/// frame after frame through [`crate::pool`].
#[derive(Debug)]
pub struct FrameSlot {
    /// Fronthaul staging of each received symbol: what the radio-unit receiver writes
    /// before `input_ready` (and never after: it drops duplicates), and what the CPU
    /// FFT kernels read in place.
    pub staging: Vec<RwLock<StagedSymbol>>,
    pub pilot_freq: Vec<RwLock<FreqSymbol>>,
    pub up_freq: Vec<RwLock<PlanarSymbol>>,
    pub zf: Vec<RwLock<ZfPart>>,
    /// Per (uplink symbol, part): `[user][bit of the part]` LLRs, descrambled and
    /// quantised as the LDPC decoder reads them.
    pub llr: Vec<RwLock<Vec<i8>>>,
    /// Per (uplink symbol, user).
    pub decoded: Vec<RwLock<DecodedSymbol>>,
    /// `Store` (uplink) output: per user all payload bits and block verdicts.
    pub uplink_payload: RwLock<Vec<Vec<u8>>>,
    pub uplink_blocks: RwLock<Vec<Vec<BlockResult>>>,
    /// Per user, the frame's downlink payload (set when the frame arrives).
    pub downlink_payload: RwLock<Vec<Vec<u8>>>,
    /// Per (downlink data symbol, user): QAM symbols.
    pub qam: Vec<RwLock<Vec<Cf32>>>,
    /// Per (downlink symbol incl. reference, part): `[antenna][subcarrier of the part]`.
    pub precoded: Vec<RwLock<Vec<Cf32>>>,
    /// Per downlink symbol incl. reference: the fronthaul output to the RU,
    /// `[antenna][sample]` with CP (written by the CPU `Ifft`, or a GPU's `Store`).
    pub tx_out: Vec<RwLock<Vec<Ci16>>>,
}

/// One received symbol of every antenna, with CP: copied into the slot (UDP
/// packets, recorded blocks), or left where the in-process radio unit generated it
/// when every antenna's packet referred to the same frame (no copy, as a receiver
/// that hands the FFT its packet buffers).
#[derive(Debug)]
pub struct StagedSymbol {
    /// `[antenna][sample]`, when copied; from a cache-line boundary, as the
    /// generated frames ([`Ci16Buf`]).
    copied: Ci16Buf,
    /// The frame that holds every antenna's samples, and the symbol's index in it.
    in_place: Option<(Arc<GeneratedFrame>, usize)>,
}

impl StagedSymbol {
    fn new(antennas: usize, symbol_len: usize) -> Self {
        Self {
            copied: Ci16Buf::zeroed(antennas * symbol_len),
            in_place: None,
        }
    }

    /// The samples, antenna-major, and the symbol's index in them: with `antennas`
    /// antennas, antenna `m`'s symbol is `symbol_len` samples at
    /// `m * samples.len() / antennas + index * symbol_len` (the front end's layout).
    pub fn view(&self) -> (&[Ci16], usize) {
        match &self.in_place {
            Some((frame, index)) => (&frame.samples, *index),
            None => (&self.copied, 0),
        }
    }

    /// The frame this symbol is read from in place, if any.
    pub fn in_place_frame(&self) -> Option<&Arc<GeneratedFrame>> {
        self.in_place.as_ref().map(|(frame, _)| frame)
    }

    /// Read every antenna of schedule symbol `symbol` from `frame` in place.
    pub fn set_in_place(&mut self, frame: Arc<GeneratedFrame>, symbol: usize) {
        self.in_place = Some((frame, symbol));
    }

    /// The copy buffer `[antenna][sample]`, for writers that fill every antenna.
    pub fn copied_mut(&mut self) -> &mut [Ci16] {
        self.in_place = None;
        &mut self.copied
    }

    /// Switch to the copy buffer for the rest of the symbol, first copying in the
    /// antennas for which `staged` is true from the frame read in place until now.
    pub fn leave_in_place(&mut self, antennas: usize, staged: impl Fn(usize) -> bool) {
        let Some((frame, index)) = self.in_place.take() else {
            return;
        };
        let sl = self.copied.len() / antennas.max(1);
        let fl = frame.samples.len() / antennas.max(1);
        for m in (0..antennas).filter(|&m| staged(m)) {
            self.copied[m * sl..(m + 1) * sl]
                .copy_from_slice(&frame.samples[m * fl + index * sl..][..sl]);
        }
    }
}

/// `v` with every page it spans written once (its own values written back). A
/// zeroed `Vec` comes from pages the kernel has not mapped yet, and the first write
/// to each costs a page fault. The first frames of a run paid ~400 of them on the
/// worker (16x4): frame 0 took 1.4-2.0 ms against 0.7 later, and runs lost frames
/// at their start (docs/BENCHMARKS.md, station runtime, session 32).
pub(crate) fn faulted_in<T: Copy>(mut v: Vec<T>) -> Vec<T> {
    let step = (radiohost_rt::sys::page_size() / std::mem::size_of::<T>().max(1)).max(1);
    let p = v.as_mut_ptr();
    for i in (0..v.len()).step_by(step) {
        // SAFETY: `i < v.len()`; a volatile read and write of an initialised element
        // (volatile so the compiler keeps the write to memory it knows is zero).
        unsafe { std::ptr::write_volatile(p.add(i), std::ptr::read_volatile(p.add(i))) };
    }
    v
}

/// One `f()` per user, behind one lock.
fn per_user<T>(users: usize, f: impl Fn() -> T) -> RwLock<Vec<T>> {
    RwLock::new((0..users).map(|_| f()).collect())
}

fn regions<T>(n: usize, f: impl Fn() -> T) -> Vec<RwLock<T>> {
    (0..n).map(|_| RwLock::new(f())).collect()
}

impl FrameSlot {
    /// Buffers for one frame of `ctx`'s configuration, faulted in ([`faulted_in`];
    /// the detectors sized for this CPU's form, [`GaussCoefficients::sized`]). The
    /// staging copies are not: the in-process ring reads most symbols in place and
    /// never writes them, and a 64x16 slot's are 7.9 MB.
    pub fn new(ctx: &KernelContext) -> Self {
        let cfg = &ctx.cfg;
        let s = &ctx.shape;
        let (m, k, d) = (cfg.antennas, cfg.users, cfg.data_num);
        let sym = m * cfg.symbol_len();
        let rx = s.pilot_symbols.len() + s.uplink_symbols.len();
        let (nu, np) = (s.uplink_symbols.len(), s.parts);
        let nd = s.downlink_symbols.len();
        let nd_all = nd + usize::from(s.downlink_reference.is_some());
        let qm = cfg.modulation.bits_per_symbol();
        let blocks = cfg.blocks_per_symbol;
        let pb = cfg.block_payload_bits();
        let freq = || FreqSymbol {
            data: faulted_in(vec![Cf32::default(); m * d]),
            ..FreqSymbol::default()
        };
        Self {
            staging: regions(rx, || StagedSymbol::new(m, cfg.symbol_len())),
            pilot_freq: regions(s.pilot_symbols.len(), freq),
            up_freq: regions(nu, || PlanarSymbol {
                re: faulted_in(vec![[0.0; SLICE]; d.div_ceil(SLICE) * m]),
                im: faulted_in(vec![[0.0; SLICE]; d.div_ceil(SLICE) * m]),
                ..PlanarSymbol::default()
            }),
            zf: (0..np)
                .map(|p| {
                    let groups = ctx.part_groups(p).len();
                    let (w_transposed, lanes) = match ctx.lanewise() {
                        true => (
                            Vec::new(),
                            faulted_in(vec![0.0; ctx.part_slices(p).len() * ctx.lane_table_len()]),
                        ),
                        false => (
                            faulted_in(vec![Cf32::default(); groups * k * m]),
                            Vec::new(),
                        ),
                    };
                    let prepared = !ctx.lanewise() && nu > 0;
                    RwLock::new(ZfPart {
                        w_transposed,
                        equalizers: (0..groups * usize::from(prepared))
                            .map(|_| GaussCoefficients::sized(Isa::detect(), k, m))
                            .collect(),
                        noise_gain: vec![0.0; groups * k],
                        lanes,
                        ..ZfPart::default()
                    })
                })
                .collect(),
            llr: (0..nu * np)
                .map(|i| RwLock::new(faulted_in(vec![0; k * s.part_range(i % np).len() * qm])))
                .collect(),
            decoded: regions(nu * k, || DecodedSymbol {
                payload: faulted_in(vec![0; blocks * pb]),
                blocks: faulted_in(vec![BlockResult::default(); blocks]),
            }),
            uplink_payload: per_user(k, || faulted_in(vec![0; cfg.uplink_blocks() * pb])),
            uplink_blocks: per_user(k, || {
                faulted_in(vec![BlockResult::default(); cfg.uplink_blocks()])
            }),
            downlink_payload: per_user(k, || faulted_in(vec![0; cfg.downlink_blocks() * pb])),
            qam: regions(nd * k, || faulted_in(vec![Cf32::default(); d])),
            precoded: (0..nd_all * np)
                .map(|i| {
                    RwLock::new(faulted_in(vec![
                        Cf32::default();
                        m * s.part_range(i % np).len()
                    ]))
                })
                .collect(),
            tx_out: regions(nd_all, || faulted_in(vec![Ci16::default(); sym])),
        }
    }

    /// Copy one received symbol, antenna-major `[antenna][sample]`, into staging
    /// position `rx` (what an in-process source does instead of packets).
    pub fn stage_symbol_from_frame(
        &self,
        ctx: &KernelContext,
        rx: usize,
        sym: usize,
        frame: &[Ci16],
    ) {
        let cfg = &ctx.cfg;
        let (fl, sl) = (cfg.frame_len(), cfg.symbol_len());
        let mut st = write(&self.staging[rx]);
        let st = st.copied_mut();
        for m in 0..cfg.antennas {
            st[m * sl..(m + 1) * sl].copy_from_slice(&frame[m * fl + sym * sl..][..sl]);
        }
    }

    /// Stage received symbol `rx` (schedule symbol `sym`) to be read in place from
    /// `frame` (what the in-process ring's receiver does).
    pub fn stage_symbol_in_place(&self, rx: usize, sym: usize, frame: Arc<GeneratedFrame>) {
        write(&self.staging[rx]).set_in_place(frame, sym);
    }

    /// The transmitted downlink frame, antenna-major (`frame_len` per antenna; only
    /// downlink symbols non-zero), assembled from the `Store` outputs into `out`.
    pub fn assemble_downlink(&self, ctx: &KernelContext, out: &mut [Ci16]) {
        let cfg = &ctx.cfg;
        let (fl, sl) = (cfg.frame_len(), cfg.symbol_len());
        out.fill(Ci16::default());
        let s = &ctx.shape;
        for (pos, &sym) in s
            .downlink_reference
            .iter()
            .chain(&s.downlink_symbols)
            .enumerate()
        {
            let t = read(&self.tx_out[pos]);
            for m in 0..cfg.antennas {
                out[m * fl + sym * sl..][..sl].copy_from_slice(&t[m * sl..(m + 1) * sl]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::faulted_in;
    use std::hint::black_box;

    /// Minor page faults of the calling thread so far (Linux).
    fn thread_minor_faults() -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
        // Fields after the command name: state, ppid, pgrp, session, tty_nr, tpgid,
        // flags, minflt.
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(7)?
            .parse()
            .ok()
    }

    /// Page faults taken by writing one byte of every page of `v`.
    fn faults_of_first_writes(v: &mut [u8]) -> u64 {
        let before = thread_minor_faults().expect("fault counter");
        for i in (0..v.len()).step_by(radiohost_rt::sys::page_size()) {
            v[i] = 1;
        }
        black_box(&v);
        thread_minor_faults().expect("fault counter") - before
    }

    #[test]
    fn faulted_in_leaves_no_page_fault_for_the_first_frame() {
        if thread_minor_faults().is_none() {
            println!("SKIPPED: no /proc/thread-self/stat to count page faults");
            return;
        }
        // Above glibc's largest mmap threshold (32 MiB): fresh pages every time.
        const LEN: usize = 64 << 20;
        let lazy = faults_of_first_writes(&mut vec![0u8; LEN]);
        let ready = faults_of_first_writes(&mut faulted_in(vec![0u8; LEN]));
        assert!(lazy > 0, "writing fresh zeroed pages counted no fault");
        assert!(
            ready < 8,
            "{ready} faults after faulted_in (untouched: {lazy})"
        );
        let kept = faulted_in((0..10_000u32).collect::<Vec<_>>());
        assert!(kept.iter().enumerate().all(|(i, &x)| x == i as u32));
    }
}
