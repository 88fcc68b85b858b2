//! Receive front end shared by the base station and the emulated users: CP removal,
//! FFT, data-subcarrier gather, and the energy of the null subcarriers (the noise
//! measurement); and the transmit side's IFFT with CP and ci16 quantisation.
//!
//! Two paths: per antenna (rustfft, any FFT size: [`FrontEnd::antenna`],
//! [`FrontEnd::antenna_planar`], [`Synthesizer::symbol`]) and, for power-of-two
//! sizes on AVX-512 CPUs, every antenna at once ([`FrontEnd::frame_planar`],
//! [`FrontEnd::frame_rows`], [`Synthesizer::antennas_ci16`]): 16 antennas per
//! transform of [`crate::fft`], the ci16 conversion in 16 x 16 transposes before
//! it, and the subcarrier gather or scatter in 16 x 16 transposes after it (the
//! transmit side's in `frontend/synth.rs`). A whole frame's planar output goes
//! around the caches ([`PlanarBuf`]). The conversion is fused into the transform's
//! first pass, each transform fetching the next one's input into L2 while it reads
//! its own, except on Intel cores, where reading the input in time order without
//! fetching ahead was faster on the one Intel VM measured
//! ([`crate::fft::Ci16Order`]).
//!
//! Below AVX-512 the receive calls run rustfft on groups of 8 antennas (`GROUP`) of
//! one symbol: the planar slices come straight from the spectra (streamed around
//! the caches when there are more than `STREAM_BYTES` of them), while the next
//! group's samples are prefetched (the conversion waited on memory); the transmit
//! side transforms one antenna at a time straight from the spectra the precoder
//! wrote ([`TxLayout`]) and scales, quantises and adds the prefix in one pass. Measured on the AVX2-only Zen 3 (`front_end_frame`, same binary,
//! load 5, best batch per round): 4.4-6.0 ms per 64x16 front end against
//! 7.2-9.9 ms antenna by antenna.

mod synth;
mod tx_layout;

pub use tx_layout::TxLayout;

use std::ops::Range;

use radiohost_iq::{Cf32, Ci16};

use crate::config::FrameConfig;
use crate::csi::null_bin_energy;
use crate::fft::lanes::{Lanes, Portable};
use crate::fft::{dispatch_lanes, BatchFft, Row, LANES};
use crate::ofdm::{bin_runs, data_bin, gather_data, remove_cp_ci16, OfdmFft};
use crate::simd::{CpuModel, Isa};

/// Full-scale ci16 to f32 (as [`remove_cp_ci16`]).
const CI16_SCALE: f32 = 1.0 / i16::MAX as f32;

/// The batched transform of a power-of-two size and the bin maps around it.
#[derive(Debug)]
struct Batched {
    fft: BatchFft,
    /// Result row ([`BatchFft::row`]) of every data subcarrier's bin.
    bins: Vec<usize>,
    /// Result rows of the null subcarriers' bins, ascending.
    null_rows: Vec<usize>,
    /// Highest instruction set used (tests force each build).
    isa: Isa,
}

impl Batched {
    /// `None` where the batched FFT cannot do the size (the per-antenna path runs).
    fn new(cfg: &FrameConfig) -> Option<Self> {
        let n = cfg.fft_size;
        if n < LANES {
            return None;
        }
        let fft = BatchFft::new(n).ok()?;
        let (start, num) = (cfg.data_start, cfg.data_num);
        let null_runs: Vec<Range<usize>> = [(0, start), (start + num, n)]
            .into_iter()
            .flat_map(|(a, b)| bin_runs(n, a, b))
            .filter(|r| !r.is_empty())
            .collect();
        let data_bins: Vec<usize> = (0..num).map(|i| data_bin(n, start, i)).collect();
        Some(Self {
            bins: data_bins.iter().map(|&k| fft.row(k)).collect(),
            // In buffer order, which the caches' prefetchers follow (in bin order
            // consecutive rows are a block apart).
            null_rows: {
                let mut rows: Vec<usize> = null_runs
                    .iter()
                    .flat_map(|r| r.clone())
                    .map(|k| fft.row(k))
                    .collect();
                rows.sort_unstable();
                rows
            },
            fft,
            isa: Isa::Avx512,
        })
    }
}

/// Where [`FrontEnd`]'s batched path writes the data subcarriers.
enum Dest<'a> {
    /// `re`/`im[planar_index(j, s, m, ..)][l]` (see [`FrontEnd::antenna_planar`]).
    Planar {
        re: &'a mut [[f32; SLICE]],
        im: &'a mut [[f32; SLICE]],
    },
    /// `out[(j * antennas + m) * data_num + i]`.
    Rows(&'a mut [Cf32]),
}

/// One batched front-end call: every antenna of `samples`, the listed symbols.
struct FrontJob<'a> {
    batched: &'a mut Batched,
    samples: &'a [Ci16],
    antennas: usize,
    frame_len: usize,
    symbol_len: usize,
    cp_len: usize,
    symbols: &'a [usize],
    dest: Dest<'a>,
}

/// Owns the FFT plans and a batch buffer sized for a whole frame.
#[derive(Debug)]
pub struct FrontEnd {
    fft: OfdmFft,
    batched: Option<Batched>,
    batch: Vec<Cf32>,
    fft_size: usize,
    cp_len: usize,
    symbol_len: usize,
    data_start: usize,
    data_num: usize,
    gathered: Vec<Cf32>,
    /// Per planar slice: the bin of its first subcarrier where its 16 bins are
    /// consecutive (no wrap past the last bin, no padding); `None` otherwise.
    slice_bins: Vec<Option<usize>>,
    /// [`Self::grouped_planar`]'s null-bin energy per antenna.
    energies: Vec<f64>,
}

impl FrontEnd {
    pub fn new(cfg: &FrameConfig) -> Self {
        Self {
            fft: OfdmFft::new(cfg.fft_size),
            batched: Batched::new(cfg),
            batch: vec![Cf32::default(); cfg.fft_size * cfg.schedule.len().max(GROUP)],
            fft_size: cfg.fft_size,
            cp_len: cfg.cp_len,
            symbol_len: cfg.symbol_len(),
            data_start: cfg.data_start,
            data_num: cfg.data_num,
            gathered: vec![Cf32::default(); cfg.data_num],
            slice_bins: slice_bins(cfg),
            energies: Vec::new(),
        }
    }

    /// Transform `symbols` (indices into the frame) of one antenna's frame samples.
    /// Data subcarriers of the `j`-th listed symbol go to
    /// `out[offset + j * stride..][..data_num]`; returns the null-bin energy summed over
    /// all listed symbols and the number of bins.
    ///
    /// # Panics
    /// If `frame` is shorter than the listed symbols need (a caller bug).
    pub fn antenna(
        &mut self,
        frame: &[Ci16],
        symbols: &[usize],
        out: &mut [Cf32],
        offset: usize,
        stride: usize,
    ) -> (f64, usize) {
        let n = self.fft_size;
        let batch = &mut self.batch[..symbols.len() * n];
        for (j, &s) in symbols.iter().enumerate() {
            let sym = &frame[s * self.symbol_len..(s + 1) * self.symbol_len];
            remove_cp_ci16(sym, self.cp_len, &mut batch[j * n..(j + 1) * n]);
        }
        self.fft.forward_batch(batch);
        let (mut energy, mut count) = (0.0, 0);
        for (j, freq) in batch.chunks_exact(n).enumerate() {
            let dst = &mut out[offset + j * stride..][..self.data_num];
            gather_data(freq, self.data_start, dst);
            let (e, c) = null_bin_energy(freq, self.data_start, self.data_num);
            energy += e;
            count += c;
        }
        (energy, count)
    }
}

/// Antennas per rustfft call of [`FrontEnd::grouped_planar`]: their spectra (16
/// KiB each at 2048 points) stay in L2 between the transform and the planar
/// stores, and each slice's stores cover `GROUP` consecutive cache lines.
const GROUP: usize = 8;

/// [`FrontEnd::slice_bins`] of a frame configuration.
fn slice_bins(cfg: &FrameConfig) -> Vec<Option<usize>> {
    let (n, start, d) = (cfg.fft_size, cfg.data_start, cfg.data_num);
    (0..d.div_ceil(SLICE))
        .map(|s| {
            let (first, last) = (s * SLICE, s * SLICE + SLICE - 1);
            let k = data_bin(n, start, first);
            (last < d && data_bin(n, start, last) == k + SLICE - 1).then_some(k)
        })
        .collect()
}

/// Subcarriers per slice of the planar layout [`FrontEnd::antenna_planar`] writes.
pub const SLICE: usize = crate::group_product::LANES;

/// Planar output above which [`FrontEnd::frame_planar`] stores around the caches:
/// more than the L2 cache (1 MiB on Zen 4) holds beside the FFT's work buffer, so
/// it would be written back before the equaliser reads it, and a plain store
/// would first read every line it fills. Measured on a 64x16 frame (13 symbols,
/// 8 MB), same binary, loaded machine: 2.0-2.4 ms for the front end against 3.6-4.4
/// ms with plain stores (docs/BENCHMARKS.md, PHY, session 7).
const STREAM_BYTES: usize = 1 << 20;

/// A zeroed buffer of planar slices (see [`FrontEnd::antenna_planar`]) aligned to
/// cache lines, which [`FrontEnd::frame_planar`] can fill with streaming stores
/// (a `Vec<[f32; 16]>` is aligned to 4 bytes only). Dereferences to the slices.
#[derive(Clone, Debug)]
pub struct PlanarBuf(Vec<Row>);

impl PlanarBuf {
    /// `len` slices of zeros.
    pub fn zeroed(len: usize) -> Self {
        Self(vec![Row::default(); len])
    }
}

impl std::ops::Deref for PlanarBuf {
    type Target = [[f32; SLICE]];
    fn deref(&self) -> &[[f32; SLICE]] {
        // SAFETY: `Row` is `repr(C)` around one `[f32; 16]` and 64 bytes long, so
        // `len` rows are `len` slices.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.0.len()) }
    }
}

impl std::ops::DerefMut for PlanarBuf {
    fn deref_mut(&mut self) -> &mut [[f32; SLICE]] {
        // SAFETY: as in `deref`.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), self.0.len()) }
    }
}

/// Index of antenna `m`'s part of slice `s` of symbol `j` in the planar layout of
/// [`FrontEnd::antenna_planar`] (`slices = ceil(data_num / 16)`).
pub fn planar_index(j: usize, s: usize, m: usize, slices: usize, antennas: usize) -> usize {
    (j * slices + s) * antennas + m
}

impl FrontEnd {
    /// Like [`Self::antenna`], but the data subcarriers go out planar in slices of
    /// 16, `re[planar_index(j, s, m, ..)][l]` for subcarrier `16 s + l` (zero past
    /// `data_num`): one slice of every antenna is then one contiguous block, what
    /// the group equaliser reads without gathers.
    ///
    /// # Panics
    /// If `frame` or the outputs are too short (caller bugs).
    #[allow(clippy::too_many_arguments)]
    pub fn antenna_planar(
        &mut self,
        frame: &[Ci16],
        symbols: &[usize],
        re: &mut [[f32; SLICE]],
        im: &mut [[f32; SLICE]],
        m: usize,
        antennas: usize,
    ) -> (f64, usize) {
        let n = self.fft_size;
        let d = self.data_num;
        let slices = d.div_ceil(SLICE);
        let batch = &mut self.batch[..symbols.len() * n];
        for (j, &s) in symbols.iter().enumerate() {
            let sym = &frame[s * self.symbol_len..(s + 1) * self.symbol_len];
            remove_cp_ci16(sym, self.cp_len, &mut batch[j * n..(j + 1) * n]);
        }
        self.fft.forward_batch(batch);
        let (mut energy, mut count) = (0.0, 0);
        for (j, freq) in batch.chunks_exact(n).enumerate() {
            gather_data(freq, self.data_start, &mut self.gathered);
            for (s, chunk) in self.gathered.chunks(SLICE).enumerate() {
                let at = planar_index(j, s, m, slices, antennas);
                let (r, i) = (&mut re[at], &mut im[at]);
                if chunk.len() < SLICE {
                    *r = [0.0; SLICE];
                    *i = [0.0; SLICE];
                }
                for (l, x) in chunk.iter().enumerate() {
                    r[l] = x.re;
                    i[l] = x.im;
                }
            }
            let (e, c) = null_bin_energy(freq, self.data_start, self.data_num);
            energy += e;
            count += c;
        }
        (energy, count)
    }
}

impl FrontEnd {
    /// [`Self::antenna_planar`] for every antenna of a frame at once: `samples` is
    /// antenna-major (`frame_len` per antenna), `antennas` of them. The batched FFT
    /// runs where the size is a power of two and it was measured to pay on this CPU
    /// (AVX-512; AVX2 on AMD Zen 1 and Zen 3: see `batched_receive_pays`), the
    /// per-antenna path otherwise; both write the same layout. Returns the null-bin
    /// energy and bin count summed over every antenna and listed symbol.
    ///
    /// # Panics
    /// If `samples` or the outputs are too short (caller bugs).
    pub fn frame_planar(
        &mut self,
        samples: &[Ci16],
        antennas: usize,
        symbols: &[usize],
        re: &mut [[f32; SLICE]],
        im: &mut [[f32; SLICE]],
    ) -> (f64, usize) {
        let frame_len = self.frame_len(antennas, samples.len());
        let need = symbols.len() * self.data_num.div_ceil(SLICE) * antennas;
        assert!(
            re.len() >= need && im.len() >= need,
            "frame_planar: output too short"
        );
        if !self.use_batched(OutputOrder::Planar) {
            let isa = Isa::detect();
            return self.grouped_planar(isa, samples, antennas, frame_len, symbols, re, im);
        }
        self.batched_job(
            samples,
            antennas,
            frame_len,
            symbols,
            Dest::Planar { re, im },
        )
    }

    /// [`Self::antenna`] for every antenna of a frame at once (see
    /// [`Self::frame_planar`]): data subcarrier `i` of antenna `m` in the `j`-th
    /// listed symbol goes to `out[(j * antennas + m) * data_num + i]`.
    ///
    /// # Panics
    /// If `samples` or `out` is too short (caller bugs).
    pub fn frame_rows(
        &mut self,
        samples: &[Ci16],
        antennas: usize,
        symbols: &[usize],
        out: &mut [Cf32],
    ) -> (f64, usize) {
        let frame_len = self.frame_len(antennas, samples.len());
        let d = self.data_num;
        assert!(
            out.len() >= symbols.len() * antennas * d,
            "frame_rows: output too short"
        );
        if !self.use_batched(OutputOrder::Rows) {
            let (mut e, mut c) = (0.0, 0);
            for m in 0..antennas {
                let frame = &samples[m * frame_len..(m + 1) * frame_len];
                let (e1, c1) = self.antenna(frame, symbols, out, m * d, antennas * d);
                e += e1;
                c += c1;
            }
            return (e, c);
        }
        self.batched_job(samples, antennas, frame_len, symbols, Dest::Rows(out))
    }

    /// [`Self::frame_planar`] with rustfft: per listed symbol and group of
    /// [`GROUP`] antennas, CP removal and conversion, one batched transform, the
    /// null-bin energy, and the data subcarriers straight from the spectra into
    /// the planar slices. Bit for bit what [`Self::antenna_planar`] of each
    /// antenna gives, energies summed in its order; symbol by symbol so that
    /// each slice's stores cover consecutive antennas. `isa`: the build of the
    /// slice copies (rustfft picks its own).
    #[allow(clippy::too_many_arguments)]
    fn grouped_planar(
        &mut self,
        isa: Isa,
        samples: &[Ci16],
        antennas: usize,
        frame_len: usize,
        symbols: &[usize],
        re: &mut [[f32; SLICE]],
        im: &mut [[f32; SLICE]],
    ) -> (f64, usize) {
        let n = self.fft_size;
        let slices = self.slice_bins.len();
        self.energies.clear();
        self.energies.resize(antennas, 0.0);
        let stream = symbols.len() * slices * antennas * 2 * std::mem::size_of::<[f32; SLICE]>()
            > STREAM_BYTES
            && re.as_ptr().cast::<Row>().is_aligned()
            && im.as_ptr().cast::<Row>().is_aligned();
        // (listed symbol, first antenna) of the group after `(j, m0)`, in the
        // order they run (no list: the steady state allocates nothing).
        let next = |j: usize, m0: usize| match m0 + GROUP < antennas {
            true => Some((j, m0 + GROUP)),
            false => (j + 1 < symbols.len()).then_some((j + 1, 0)),
        };
        let mut count = 0;
        let mut here = (!symbols.is_empty() && antennas > 0).then_some((0, 0));
        while let Some((j, m0)) = here {
            here = next(j, m0);
            let group = GROUP.min(antennas - m0);
            let starts = |m0: usize, sym: usize| {
                std::array::from_fn(|a| (m0 + a) * frame_len + sym * self.symbol_len + self.cp_len)
            };
            let batch = &mut self.batch[..group * n];
            let current: [usize; GROUP] = starts(m0, symbols[j]);
            for (time, &at) in batch.chunks_exact_mut(n).zip(&current) {
                remove_cp_ci16(&samples[at - self.cp_len..at + n], self.cp_len, time);
            }
            self.fft.forward_batch(batch);
            for (e, freq) in self.energies[m0..].iter_mut().zip(batch.chunks_exact(n)) {
                let (e1, c1) = null_bin_energy(freq, self.data_start, self.data_num);
                *e += e1;
                count += c1;
            }
            let prefetch = match here {
                Some((j, m0)) => Prefetch {
                    samples,
                    starts: starts(m0, symbols[j]),
                    antennas: GROUP.min(antennas - m0),
                    len: n,
                },
                None => Prefetch::NOTHING,
            };
            let spectra = Spectra {
                freq: batch,
                n,
                data_start: self.data_start,
                data_num: self.data_num,
                slice_bins: &self.slice_bins,
                stream,
                prefetch,
            };
            let at = planar_index(j, 0, m0, slices, antennas);
            spectra.to_planar(isa, &mut re[at..], &mut im[at..], antennas);
        }
        if stream {
            // One `sfence` orders the stores of whichever build `to_planar` ran.
            Portable::<false>::store_fence();
        }
        (self.energies.iter().fold(0.0, |sum, e| sum + e), count)
    }

    /// Whether a call writing `out` takes the batched path: see
    /// [`batched_receive_pays`].
    fn use_batched(&self, out: OutputOrder) -> bool {
        self.batched.is_some() && batched_receive_pays(Isa::detect(), CpuModel::get(), out)
    }

    /// Samples per antenna of a frame buffer holding `antennas` frames.
    fn frame_len(&self, antennas: usize, len: usize) -> usize {
        assert!(
            antennas > 0 && len.is_multiple_of(antennas),
            "front end: ragged frame buffer"
        );
        len / antennas
    }

    fn batched_job(
        &mut self,
        samples: &[Ci16],
        antennas: usize,
        frame_len: usize,
        symbols: &[usize],
        dest: Dest<'_>,
    ) -> (f64, usize) {
        let batched = self.batched.as_mut().expect("batched path planned");
        let last = symbols.iter().max().map_or(0, |s| s + 1);
        assert!(
            last * self.symbol_len <= frame_len,
            "front end: frame too short"
        );
        let job = &mut FrontJob {
            batched,
            samples,
            antennas,
            frame_len,
            symbol_len: self.symbol_len,
            cp_len: self.cp_len,
            symbols,
            dest,
        };
        let isa = Isa::detect().min(job.batched.isa);
        dispatch_lanes!(isa, fn run(job: &mut FrontJob<'_>) -> (f64, usize) => front_batch)
    }
}

/// The layout a front-end call writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutputOrder {
    /// [`FrontEnd::frame_planar`]'s slices of 16 subcarriers.
    Planar,
    /// [`FrontEnd::frame_rows`]'s `[symbol][antenna][subcarrier]` rows.
    Rows,
}

/// Whether the batched receive path beats the per-antenna one at `isa` on `cpu`
/// for output `out` (docs/BENCHMARKS.md, PHY, each session's alternated pairs):
/// - AVX-512: always.
/// - AVX2 on Zen 1, whose 256-bit operations split in two halves: it transforms
///   1.3x faster than rustfft in cache, and the 64x16 uplink's fft stage took
///   about 6% less time (session 52, 8 of 8 pairs).
/// - AVX2 on Zen 3, planar output: the 64x16 uplink's fft stage 18% less
///   (session 56, 10 of 10 pairs), the station 16x4's `up_fft` about 9% less
///   (13 of 16). Rows, the pilots' output, go back to antennas through the
///   lanes' transposes: the station's pilot transform was slower with them in 13
///   of 16 pairs, so rows stay per antenna.
/// - Other AVX2 cores (Intel, Zen 2, Zen 4 and 5 under `--isa avx2`): not
///   measured to pay.
fn batched_receive_pays(isa: Isa, cpu: CpuModel, out: OutputOrder) -> bool {
    match isa {
        Isa::Avx512 => true,
        Isa::Avx2 => cpu.is_zen1() || (cpu.is_zen3() && out == OutputOrder::Planar),
        _ => false,
    }
}

/// The batched front end: per group of 16 antennas and listed symbol, CP removal
/// and ci16 conversion through a transpose, one 16-lane FFT, the null-bin energy,
/// and the data subcarriers out through a transpose.
#[inline(always)]
fn front_batch<V: Lanes>(job: &mut FrontJob<'_>) -> (f64, usize) {
    let stream = match &job.dest {
        Dest::Planar { re, im } => {
            let bytes = job.symbols.len() * job.batched.bins.len() * job.antennas * 8;
            bytes > STREAM_BYTES
                && re.as_ptr().cast::<Row>().is_aligned()
                && im.as_ptr().cast::<Row>().is_aligned()
        }
        Dest::Rows(_) => false,
    };
    let b = &mut *job.batched;
    let n = b.fft.size();
    let d = b.bins.len();
    let slices = d.div_ceil(SLICE);
    let (samples, antennas, symbols) = (job.samples, job.antennas, job.symbols);
    let (frame_len, symbol_len, cp_len) = (job.frame_len, job.symbol_len, job.cp_len);
    let order = crate::fft::Ci16Order::for_cpu();
    // The input of the transform of antennas `m0..` and symbol `sym`. Lanes past
    // the last antenna repeat it (their results are dropped), so every lane loads
    // without a branch.
    let sources = |m0: usize, sym: usize| -> [&[Ci16]; LANES] {
        let last = antennas - 1;
        let at = sym * symbol_len + cp_len;
        std::array::from_fn(|a| &samples[(m0 + a).min(last) * frame_len + at..][..n])
    };
    let (mut energy, mut count) = (0.0, 0);
    for m0 in (0..antennas).step_by(LANES) {
        let valid = LANES.min(antennas - m0);
        for (j, &sym) in symbols.iter().enumerate() {
            let next = match symbols.get(j + 1) {
                Some(&next) => Some(sources(m0, next)),
                None if m0 + LANES < antennas => Some(sources(m0 + LANES, symbols[0])),
                // The last transform of the call: the first antennas of the symbol
                // after, which the uplink's next call (one symbol each) reads first.
                // A guess for other callers: the lines fetched in vain cost only
                // memory bandwidth.
                None => {
                    let after = symbols.last().map_or(0, |s| s + 1);
                    ((after + 1) * symbol_len <= frame_len).then(|| sources(0, after))
                }
            };
            b.fft
                .forward_ci16_lanes::<V>(&sources(m0, sym), next.as_ref(), CI16_SCALE, order);
            let (fr, fi) = b.fft.buffers(crate::fft::Side::A);
            let lanes = null_energy::<V>(fr, fi, &b.null_rows);
            energy += lanes[..valid].iter().map(|&v| v as f64).sum::<f64>();
            count += b.null_rows.len() * valid;
            for s in 0..slices {
                let bins = &b.bins[s * SLICE..d.min((s + 1) * SLICE)];
                match &mut job.dest {
                    Dest::Planar { re, im } => {
                        let at = planar_index(j, s, m0, slices, job.antennas);
                        let re = &mut re[at..at + valid];
                        let im = &mut im[at..at + valid];
                        slice_out::<V>(fr, bins, re, stream);
                        slice_out::<V>(fi, bins, im, stream);
                    }
                    Dest::Rows(out) => {
                        let rr = gather_transposed::<V>(fr, bins);
                        let ri = gather_transposed::<V>(fi, bins);
                        for a in 0..valid {
                            let row = (j * antennas + m0 + a) * d + s * SLICE;
                            rows_out::<V>(rr[a], ri[a], &mut out[row..row + bins.len()]);
                        }
                    }
                }
            }
        }
    }
    if stream {
        V::store_fence();
    }
    (energy, count)
}

/// The spectra of a group of antennas (`n` bins each, rustfft order) and where
/// their data subcarriers are.
struct Spectra<'a> {
    freq: &'a [Cf32],
    n: usize,
    data_start: usize,
    data_num: usize,
    /// [`FrontEnd::slice_bins`].
    slice_bins: &'a [Option<usize>],
    /// Store the slices around the caches (the output is aligned for it).
    stream: bool,
    prefetch: Prefetch<'a>,
}

impl Spectra<'_> {
    /// Every antenna's data subcarriers to its planar slices: slice `s` of the
    /// group's antenna `a` goes to `re`/`im[s * antennas + a]` (the slices of
    /// one symbol, from the group's first antenna on).
    fn to_planar(
        &self,
        isa: Isa,
        re: &mut [[f32; SLICE]],
        im: &mut [[f32; SLICE]],
        antennas: usize,
    ) {
        let spectra = self;
        dispatch_lanes!(isa, fn run(
            spectra: &Spectra<'_>,
            re: &mut [[f32; SLICE]],
            im: &mut [[f32; SLICE]],
            antennas: usize,
        ) => spectra_to_planar)
    }

    /// Subcarriers `16 s ..` of the spectrum `freq`, one at a time (zero past
    /// `data_num`): the slices that wrap past the last bin or end the band.
    fn slice_by_bins(&self, freq: &[Cf32], s: usize, re: &mut [f32; SLICE], im: &mut [f32; SLICE]) {
        for l in 0..SLICE {
            let i = s * SLICE + l;
            let x = if i < self.data_num {
                freq[data_bin(self.n, self.data_start, i)]
            } else {
                Cf32::default()
            };
            re[l] = x.re;
            im[l] = x.im;
        }
    }
}

/// [`Spectra::to_planar`]'s body, compiled per instruction set: 16 consecutive
/// complex bins are two vectors, split into re and im by [`Lanes::deinterleave`]
/// (the compiler's own split of the per-bin copy went through the stack, 24% of
/// the AVX2 front end's time: docs/BENCHMARKS.md, PHY, session 25).
#[inline(always)]
fn spectra_to_planar<V: Lanes>(
    spectra: &Spectra<'_>,
    re: &mut [[f32; SLICE]],
    im: &mut [[f32; SLICE]],
    antennas: usize,
) {
    let n = spectra.n;
    let slices = spectra.slice_bins.len();
    let lines = spectra.prefetch.lines();
    let mut fetch = PrefetchCursor::default();
    for (s, first) in spectra.slice_bins.iter().enumerate() {
        spectra
            .prefetch
            .touch_until(&mut fetch, (s + 1) * lines / slices);
        for (a, freq) in spectra.freq.chunks_exact(n).enumerate() {
            let (r, i) = match *first {
                Some(k) => {
                    let bins: &[Cf32; SLICE] = freq[k..k + SLICE].try_into().expect("16 bins");
                    let p: *const f32 = bins.as_ptr().cast();
                    // SAFETY: 16 complex bins are 32 f32.
                    let (lo, hi) = unsafe { (V::load(p), V::load(p.add(LANES))) };
                    V::deinterleave(lo, hi)
                }
                None => {
                    let (mut r, mut i) = (Row::default(), Row::default());
                    spectra.slice_by_bins(freq, s, &mut r.0, &mut i.0);
                    (load::<V>(&r), load::<V>(&i))
                }
            };
            let at = s * antennas + a;
            put_slice(r, &mut re[at], spectra.stream);
            put_slice(i, &mut im[at], spectra.stream);
        }
    }
}

/// `v` to one planar slice; `stream`: `dst` is 64-byte aligned, store around the
/// caches.
#[inline(always)]
fn put_slice<V: Lanes>(v: V, dst: &mut [f32; SLICE], stream: bool) {
    // SAFETY: a slice holds 16 f32; with `stream` it is 64-byte aligned (the
    // callers checked the buffer's start; slices are 64 bytes).
    unsafe {
        if stream {
            v.store_stream(dst.as_mut_ptr());
        } else {
            v.store(dst.as_mut_ptr());
        }
    }
}

/// The input of the next group of [`FrontEnd::grouped_planar`]: `antennas`
/// symbols of `len` samples at `starts`, fetched into the caches line by line
/// while this group's slices are stored (the conversion otherwise waits on
/// memory).
struct Prefetch<'a> {
    samples: &'a [Ci16],
    starts: [usize; GROUP],
    antennas: usize,
    len: usize,
}

/// Ci16 samples per cache line.
const LINE_SAMPLES: usize = 16;

impl Prefetch<'_> {
    /// No lines (after the last group).
    const NOTHING: Prefetch<'static> = Prefetch {
        samples: &[],
        starts: [0; GROUP],
        antennas: 0,
        len: 0,
    };

    /// Lines to fetch (none past the last group).
    fn lines(&self) -> usize {
        self.antennas * self.len.div_ceil(LINE_SAMPLES)
    }

    /// Fetch the lines from `at` up to line `upto` of [`Self::lines`], in order
    /// (antenna by antenna), and move `at` there: no division per line.
    #[inline(always)]
    fn touch_until(&self, at: &mut PrefetchCursor, upto: usize) {
        while at.line < upto {
            let line = &self.samples[self.starts[at.antenna] + at.sample..];
            #[cfg(target_arch = "x86_64")]
            // SAFETY: SSE is baseline on x86-64; a prefetch reads nothing.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast());
            }
            let _ = line;
            at.line += 1;
            at.sample += LINE_SAMPLES;
            if at.sample >= self.len {
                at.sample = 0;
                at.antenna += 1;
            }
        }
    }
}

/// Where [`Prefetch::touch_until`] goes on: line `line` of [`Prefetch::lines`],
/// `sample` samples into antenna `antenna`'s symbol.
#[derive(Default)]
struct PrefetchCursor {
    line: usize,
    antenna: usize,
    sample: usize,
}

/// Per lane, the energy of the rows `null_rows` of (`fr`, `fi`).
///
/// Eight accumulators: with one FMA chain per two rows the loop waited on FMA
/// latency, not on its loads (2% of a 64x16 uplink frame's profile on Zen 5,
/// docs/BENCHMARKS.md, PHY, session 49).
#[inline(always)]
fn null_energy<V: Lanes>(fr: &[Row], fi: &[Row], null_rows: &[usize]) -> [f32; LANES] {
    const CHAINS: usize = 8;
    let mut acc = [V::zero(); CHAINS];
    let groups = null_rows.chunks_exact(CHAINS);
    let rest = groups.remainder();
    for g in groups {
        for (a, &k) in acc.iter_mut().zip(g) {
            let (r, i) = (load::<V>(&fr[k]), load::<V>(&fi[k]));
            *a = i.mul_add(i, r.mul_add(r, *a));
        }
    }
    for (a, &k) in acc.iter_mut().zip(rest) {
        let (r, i) = (load::<V>(&fr[k]), load::<V>(&fi[k]));
        *a = i.mul_add(i, r.mul_add(r, *a));
    }
    let [a0, a1, a2, a3, a4, a5, a6, a7] = acc;
    a0.add(a1)
        .add(a2.add(a3))
        .add(a4.add(a5).add(a6.add(a7)))
        .to_array()
}

/// Rows `bins` (at most 16) of `x`, transposed: lane `l` of row `a` is bin
/// `bins[l]` of lane `a` (zero past `bins.len()`).
#[inline(always)]
fn gather_transposed<V: Lanes>(x: &[Row], bins: &[usize]) -> [V; LANES] {
    let mut rows = [V::zero(); LANES];
    for (row, &k) in rows.iter_mut().zip(bins) {
        *row = load(&x[k]);
    }
    V::transpose(&mut rows);
    rows
}

/// One component of one planar slice of `out.len()` antennas (lanes): see
/// [`gather_transposed`]; `stream`: `out` is 64-byte aligned, store around the
/// caches.
#[inline(always)]
fn slice_out<V: Lanes>(x: &[Row], bins: &[usize], out: &mut [[f32; SLICE]], stream: bool) {
    if let (Ok(bins), Ok(out)) = (
        <&[usize; LANES]>::try_from(bins),
        <&mut [[f32; SLICE]; LANES]>::try_from(&mut *out),
    ) {
        // A whole slice of 16 antennas, every count a constant: the rows stay in
        // registers from the loads through the transpose to the stores. The general
        // path below returns its rows through the stack and a 1 KiB `memcpy` call:
        // for every slice, that was 2.3% of a 64x16 uplink frame's profile and made
        // the fft stage 10-14% slower (Zen 4 VM, docs/BENCHMARKS.md, PHY, session 38).
        // (Not `array::from_fn`: its closure is compiled without the caller's target
        // features, so the loads became calls.)
        let mut rows = [V::zero(); LANES];
        for (row, &k) in rows.iter_mut().zip(bins) {
            *row = load(&x[k]);
        }
        V::transpose(&mut rows);
        for (row, o) in rows.into_iter().zip(out.iter_mut()) {
            put_slice(row, o, stream);
        }
        return;
    }
    let rows = gather_transposed::<V>(x, bins);
    for (&row, o) in rows.iter().zip(out) {
        put_slice(row, o, stream);
    }
}

/// One antenna's slice (re and im parts of up to 16 subcarriers) to its complex
/// values `out`: a whole slice in two vector stores, not a value at a time through
/// the stack (the pilot symbol's transform, which writes rows, went from 1.25-1.43x
/// to 1.19-1.40x an uplink symbol's: docs/BENCHMARKS.md, PHY, session 40).
#[inline(always)]
fn rows_out<V: Lanes>(re: V, im: V, out: &mut [Cf32]) {
    if let Ok(out) = <&mut [Cf32; LANES]>::try_from(&mut *out) {
        let (lo, hi) = V::interleave(re, im);
        let p: *mut f32 = out.as_mut_ptr().cast();
        // SAFETY: 16 complex values are 32 f32.
        unsafe {
            lo.store(p);
            hi.store(p.add(LANES));
        }
        return;
    }
    let (r, i) = (re.to_array(), im.to_array());
    for (l, o) in out.iter_mut().enumerate() {
        *o = Cf32::new(r[l], i[l]);
    }
}

#[inline(always)]
fn load<V: Lanes>(row: &Row) -> V {
    // SAFETY: a row holds 16 f32.
    unsafe { V::load(row.0.as_ptr()) }
}

#[inline(always)]
fn store<V: Lanes>(v: V, row: &mut Row) {
    // SAFETY: a row holds 16 f32.
    unsafe { v.store(row.0.as_mut_ptr()) }
}

/// Transmit side: data subcarriers of one symbol to time samples with cyclic prefix.
#[derive(Debug)]
pub struct Synthesizer {
    fft: OfdmFft,
    /// The batched path, where it runs (chosen once, with the layout it reads).
    batched: Option<synth::BatchedSynth>,
    layout: TxLayout,
    /// One symbol's spectrum ([`Self::symbol`]) or time samples.
    work: Vec<Cf32>,
    cp_len: usize,
    data_start: usize,
}

impl Synthesizer {
    pub fn new(cfg: &FrameConfig) -> Self {
        let batched = synth::BatchedSynth::new(cfg).filter(|_| Isa::detect() >= Isa::Avx512);
        let layout = if batched.is_some() {
            TxLayout::rows(cfg.data_num)
        } else {
            TxLayout::spectra(cfg.fft_size, cfg.data_start, cfg.data_num)
        };
        Self {
            fft: OfdmFft::new(cfg.fft_size),
            batched,
            layout,
            work: vec![Cf32::default(); cfg.fft_size],
            cp_len: cfg.cp_len,
            data_start: cfg.data_start,
        }
    }

    /// The per-antenna path whatever the CPU (tests compare the two).
    #[cfg(test)]
    fn per_antenna(cfg: &FrameConfig) -> Self {
        Self {
            batched: None,
            layout: TxLayout::spectra(cfg.fft_size, cfg.data_start, cfg.data_num),
            ..Self::new(cfg)
        }
    }

    /// Where [`Self::antennas_ci16`] reads each antenna's data subcarriers.
    pub fn layout(&self) -> &TxLayout {
        &self.layout
    }

    /// One symbol of every antenna, quantised: `data` holds `antennas` rows laid
    /// out as [`Self::layout`] (zero outside the data subcarriers); antenna `m`'s
    /// `cp_len + fft_size` samples go to `out[m * out_stride + offset..]`: what
    /// [`Self::symbol`] computes, rounded to nearest and saturated to ci16. With
    /// AVX-512 and a power-of-two size, 16 antennas per batched inverse transform
    /// (`frontend/synth.rs`; each sample within one quantiser step of the
    /// per-antenna path); otherwise one antenna per rustfft call, straight from its
    /// row, each transform scaled and quantised in one pass by
    /// [`crate::ofdm::add_cp_ci16`] (gain `gain / sqrt(N)`).
    ///
    /// # Panics
    /// If `data` or `out` is too short (caller bugs).
    pub fn antennas_ci16(
        &mut self,
        data: &[Cf32],
        antennas: usize,
        gain: f32,
        out: &mut [Ci16],
        out_stride: usize,
        offset: usize,
    ) {
        let len = self.cp_len + self.fft.size();
        assert!(
            data.len() >= antennas * self.layout.stride(),
            "antennas_ci16: data too short"
        );
        if antennas == 0 {
            return;
        }
        assert!(
            out.len() >= (antennas - 1) * out_stride + offset + len,
            "antennas_ci16: output too short"
        );
        if let Some(b) = self.batched.as_mut() {
            b.antennas_ci16(data, antennas, gain, out, out_stride, offset);
            return;
        }
        let n = self.fft.size();
        let scale = self.scale(gain);
        // One antenna at a time: its time samples (16 KiB at 2048 points) stay in
        // L1 from the transform to the quantiser (measured on the 64x16 downlink:
        // the stage's median 4% lower than with 8 antennas per rustfft call, over
        // 20 alternated runs). The transform reads the row itself, which keeps its
        // zeros for the next symbol.
        let time = &mut self.work[..n];
        for m in 0..antennas {
            self.fft.inverse_into(self.layout.spectrum(data, m), time);
            let dst = &mut out[m * out_stride + offset..][..len];
            crate::ofdm::add_cp_ci16(time, self.cp_len, scale, dst);
        }
    }

    /// `gain / sqrt(N)`: the orthonormal transform's factor times `gain`.
    fn scale(&self, gain: f32) -> f32 {
        gain / (self.fft.size() as f32).sqrt()
    }

    /// `out` (`cp_len + fft_size` samples) = `gain / sqrt(N)` x IFFT of `data` placed on
    /// the data subcarriers, prefixed by its cyclic prefix. With `gain = 1` a
    /// unit-energy subcarrier keeps unit energy (orthonormal transform).
    pub fn symbol(&mut self, data: &[Cf32], gain: f32, out: &mut [Cf32]) {
        let scale = self.scale(gain);
        let freq = &mut self.work[..self.fft.size()];
        crate::ofdm::scatter_data(data, self.data_start, freq);
        self.fft.inverse_batch(freq);
        crate::ofdm::add_cp(freq, self.cp_len, scale, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn batched_receive_runs_where_measured_to_pay() {
        let amd = |family, model| CpuModel {
            amd: true,
            family,
            model,
            ..CpuModel::default()
        };
        let (zen1, zen3, zen4) = (amd(0x17, 0x01), amd(0x19, 0x01), amd(0x19, 0x11));
        let intel = CpuModel {
            intel: true,
            family: 6,
            model: 0x55,
            ..CpuModel::default()
        };
        use OutputOrder::{Planar, Rows};
        for cpu in [zen1, zen3, zen4, intel] {
            for out in [Planar, Rows] {
                assert!(batched_receive_pays(Isa::Avx512, cpu, out));
                assert!(!batched_receive_pays(Isa::Portable, cpu, out));
            }
        }
        assert!(batched_receive_pays(Isa::Avx2, zen1, Planar));
        assert!(batched_receive_pays(Isa::Avx2, zen1, Rows));
        assert!(batched_receive_pays(Isa::Avx2, zen3, Planar));
        assert!(!batched_receive_pays(Isa::Avx2, zen3, Rows));
        for cpu in [zen4, intel] {
            assert!(!batched_receive_pays(Isa::Avx2, cpu, Planar));
            assert!(!batched_receive_pays(Isa::Avx2, cpu, Rows));
        }
    }

    fn config(antennas: usize, fft: usize, data: usize, cp: usize) -> FrameConfig {
        FrameConfig::from_json(&format!(
            r#"{{"bs_ant_num": {antennas}, "ue_ant_num": 2, "fft_size": {fft}, "ofdm_data_num": {data},
            "cp_len": {cp}, "frame_schedule": "PUUUG", "modulation": "16QAM", "zc": 11}}"#
        ))
        .unwrap()
    }

    fn samples(cfg: &FrameConfig, seed: u64) -> Vec<Ci16> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..cfg.antennas * cfg.frame_len())
            .map(|_| Ci16::new(rng.gen_range(-9000..9000), rng.gen_range(-9000..9000)))
            .collect()
    }

    /// Largest difference relative to the rms of `want`.
    fn rel_err(got: impl Iterator<Item = f32>, want: impl Iterator<Item = f32>) -> f32 {
        let (mut err, mut power, mut n) = (0f32, 0f64, 0);
        for (g, w) in got.zip(want) {
            err = err.max((g - w).abs());
            power += (w as f64).powi(2);
            n += 1;
        }
        err / (power / n as f64).sqrt() as f32
    }

    /// Isa caps to force: every build this CPU has.
    fn builds() -> Vec<Isa> {
        if Isa::cpu() < Isa::Avx512 {
            println!(
                "SKIPPED: AVX-512 build (this CPU has {})",
                Isa::cpu().name()
            );
        }
        Isa::available()
    }

    #[test]
    fn batched_front_end_matches_per_antenna_path() {
        // 20 antennas: one full group of 16 and a partial one; 200 subcarriers: a
        // partial last slice; a band wrapping past DC. Also the 64x16 frame's shape.
        for (antennas, fft, data, cp) in [
            (20, 256, 200, 32),
            (64, 2048, 1200, 144),
            (5, 1024, 600, 72),
            (16, 512, 320, 36),
        ] {
            let cfg = config(antennas, fft, data, cp);
            let x = samples(&cfg, fft as u64);
            // Five symbols: the 64x2048 frame's planar output (3 MB) goes around
            // the caches ([`STREAM_BYTES`]).
            let syms = [0usize, 1, 2, 3, 4];
            let d = cfg.data_num;
            let slices = d.div_ceil(SLICE);
            let mut reference = FrontEnd::new(&cfg);
            reference.batched = None;
            let (mut want_re, mut want_im) = (
                vec![[0.0; SLICE]; 5 * slices * antennas],
                vec![[0.0; SLICE]; 5 * slices * antennas],
            );
            let want_e = reference.frame_planar(&x, antennas, &syms, &mut want_re, &mut want_im);
            let mut want_rows = vec![Cf32::default(); 5 * antennas * d];
            let want_e2 = reference.frame_rows(&x, antennas, &syms, &mut want_rows);
            assert_eq!(want_e, want_e2);
            for isa in builds() {
                let mut front = FrontEnd::new(&cfg);
                front.batched.as_mut().unwrap().isa = isa;
                // Cache-line aligned (streamed where big enough), NaN until written.
                let (mut re, mut im) = (
                    PlanarBuf::zeroed(want_re.len()),
                    PlanarBuf::zeroed(want_re.len()),
                );
                re.iter_mut()
                    .chain(im.iter_mut())
                    .for_each(|v| *v = [f32::NAN; SLICE]);
                // The batched path itself, whether or not it pays on this CPU.
                let frame_len = front.frame_len(antennas, x.len());
                let dest = Dest::Planar {
                    re: &mut re[..],
                    im: &mut im[..],
                };
                let (e, c) = front.batched_job(&x, antennas, frame_len, &syms, dest);
                let what = format!("{antennas}x{fft} {}", isa.name());
                assert_eq!(c, want_e.1, "{what}");
                assert!(
                    (e - want_e.0).abs() <= 1e-4 * want_e.0,
                    "{what}: energy {e} vs {}",
                    want_e.0
                );
                let flat = |v: &[[f32; SLICE]]| v.iter().flatten().copied().collect::<Vec<f32>>();
                let err = rel_err(
                    flat(&re).into_iter().chain(flat(&im)),
                    flat(&want_re).into_iter().chain(flat(&want_im)),
                );
                assert!(err <= 1e-4, "{what}: planar error {err}");
                let mut rows = vec![Cf32::new(f32::NAN, 0.0); want_rows.len()];
                let dest = Dest::Rows(&mut rows);
                let (e2, _) = front.batched_job(&x, antennas, frame_len, &syms, dest);
                assert_eq!(e2, e, "{what}");
                let err = rel_err(
                    rows.iter().flat_map(|v| [v.re, v.im]),
                    want_rows.iter().flat_map(|v| [v.re, v.im]),
                );
                assert!(err <= 1e-4, "{what}: row error {err}");
            }
        }
    }

    #[test]
    fn grouped_front_end_is_each_antenna_bit_for_bit() {
        // 20 antennas: two full groups and a partial one; bands wrapping past DC
        // (a slice straddling the wrap at 256 and 2048 points), a partial last
        // slice (200), a band that does not wrap (start 600).
        for (antennas, fft, data, cp, start) in [
            (20, 256, 200, 32, None),
            (64, 2048, 1200, 144, None),
            (5, 1024, 400, 72, Some(600)),
            (3, 300, 200, 20, None),
            (9, 512, 320, 36, None),
        ] {
            let mut cfg = config(antennas, fft, data, cp);
            if let Some(s) = start {
                cfg.data_start = s;
            }
            let x = samples(&cfg, fft as u64 + 1);
            let syms = [4usize, 1, 2];
            let slices = cfg.data_num.div_ceil(SLICE);
            let len = syms.len() * slices * antennas;
            let mut reference = FrontEnd::new(&cfg);
            let (mut want_re, mut want_im) = (vec![[0.0; SLICE]; len], vec![[0.0; SLICE]; len]);
            let frame_len = cfg.frame_len();
            let mut want_e = (0.0, 0);
            for m in 0..antennas {
                let frame = &x[m * frame_len..(m + 1) * frame_len];
                let (e, c) =
                    reference.antenna_planar(frame, &syms, &mut want_re, &mut want_im, m, antennas);
                want_e = (want_e.0 + e, want_e.1 + c);
            }
            for isa in builds() {
                let mut front = FrontEnd::new(&cfg);
                // Cache-line aligned: the 64x2048 output (1.8 MB) is streamed.
                let (mut re, mut im) = (PlanarBuf::zeroed(len), PlanarBuf::zeroed(len));
                re.iter_mut()
                    .chain(im.iter_mut())
                    .for_each(|v| *v = [f32::NAN; SLICE]);
                let got_e =
                    front.grouped_planar(isa, &x, antennas, frame_len, &syms, &mut re, &mut im);
                let what = format!("{antennas}x{fft} {}", isa.name());
                assert_eq!(got_e, want_e, "{what}");
                let bits = |v: &[[f32; SLICE]]| {
                    v.iter()
                        .flatten()
                        .map(|f| f.to_bits())
                        .collect::<Vec<u32>>()
                };
                assert!(bits(&re) == bits(&want_re), "{what}: re");
                assert!(bits(&im) == bits(&want_im), "{what}: im");
            }
        }
    }

    /// Rows of `d` data subcarriers, laid out as `layout` says.
    fn laid_out(layout: &TxLayout, rows: &[Cf32], d: usize) -> Vec<Cf32> {
        let mut out = layout.zeroed(rows.len() / d);
        for (row, x) in out
            .chunks_exact_mut(layout.stride())
            .zip(rows.chunks_exact(d))
        {
            layout.put(0, x, row);
        }
        out
    }

    #[test]
    fn synthesis_of_every_antenna_is_each_symbol_quantised() {
        for antennas in [3, 2 * GROUP + 3] {
            synthesis_matches_symbols(antennas);
        }
    }

    fn synthesis_matches_symbols(antennas: usize) {
        let cfg = config(antennas, 256, 200, 32);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let d = cfg.data_num;
        let data: Vec<Cf32> = (0..antennas * d)
            .map(|_| Cf32::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
            .collect();
        let len = cfg.symbol_len();
        let (stride, offset) = (2 * len, len);
        // The per-antenna path (the batched one is checked against it below).
        let mut synth = Synthesizer::per_antenna(&cfg);
        let spectra = laid_out(synth.layout(), &data, d);
        let mut got = vec![Ci16::new(1, 1); antennas * stride];
        // Twice: the transform leaves its input as it was.
        for _ in 0..2 {
            synth.antennas_ci16(&spectra, antennas, 2.0, &mut got, stride, offset);
        }
        let mut time = vec![Cf32::default(); len];
        for m in 0..antennas {
            synth.symbol(&data[m * d..(m + 1) * d], 16.0, &mut time);
            // Gain sqrt(N) = 16 is the unscaled transform (times exactly 1.0).
            let scale = synth.scale(2.0) * crate::ofdm::FULL_SCALE;
            let level = |v: f32| crate::ofdm::ci16_level(v * scale);
            let want: Vec<Ci16> = time
                .iter()
                .map(|v| Ci16::new(level(v.re), level(v.im)))
                .collect();
            assert_eq!(&got[m * stride + offset..][..len], &want[..], "antenna {m}");
            assert!(got[m * stride..m * stride + offset]
                .iter()
                .all(|&v| v == Ci16::new(1, 1)));
        }
    }

    #[test]
    fn batched_synthesis_matches_per_antenna_path() {
        // 20 antennas: a partial group; 200 subcarriers: a partial 8-subcarrier
        // block; prefixes of 32 (whole blocks), 36 and 72 (a block straddling the
        // prefix's start); a band wrapping past DC; the 64x16 frame's shape.
        for (antennas, fft, data, cp, start) in [
            (20, 256, 200, 32, None),
            (64, 2048, 1200, 144, None),
            (5, 1024, 600, 72, Some(700)),
            (16, 512, 316, 36, None),
        ] {
            let mut cfg = config(antennas, fft, data, cp);
            if let Some(s) = start {
                cfg.data_start = s;
            }
            let mut rng = ChaCha8Rng::seed_from_u64(fft as u64);
            let d = cfg.data_num;
            let x: Vec<Cf32> = (0..antennas * d)
                .map(|_| Cf32::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
                .collect();
            // Each component's rms at 0.35 of full scale: about 0.5% saturate.
            let gain = 0.5 / (d as f32 / fft as f32 * 2.0 / 3.0).sqrt();
            let len = cfg.symbol_len();
            let (stride, offset) = (len + 40, 24);
            let mut reference = Synthesizer::per_antenna(&cfg);
            let spectra = laid_out(reference.layout(), &x, d);
            let mut want = vec![Ci16::new(3, 3); antennas * stride];
            reference.antennas_ci16(&spectra, antennas, gain, &mut want, stride, offset);
            for isa in builds() {
                // The batched path reads plain rows.
                let mut batched = synth::BatchedSynth::new(&cfg).expect("a power-of-two size");
                batched.isa = isa;
                let mut got = vec![Ci16::new(3, 3); antennas * stride];
                batched.antennas_ci16(&x, antennas, gain, &mut got, stride, offset);
                let what = format!("{antennas}x{fft} cp {cp} {}", isa.name());
                // The two transforms round differently (about 1e-6 of the rms):
                // a sample may land on the other side of a quantiser step, never
                // further; the samples outside the symbols are untouched.
                let mut off_by_one = 0;
                let mut saturated = 0;
                for (at, (g, w)) in got.iter().zip(&want).enumerate() {
                    let (dr, di) = (g.re as i32 - w.re as i32, g.im as i32 - w.im as i32);
                    assert!(
                        dr.abs() <= 1 && di.abs() <= 1,
                        "{what}: sample {at}: {g:?} vs {w:?}"
                    );
                    off_by_one += (dr != 0) as usize + (di != 0) as usize;
                    saturated += (w.re == i16::MAX || w.re == i16::MIN) as usize;
                }
                assert!(
                    off_by_one * 100 < got.len(),
                    "{what}: {off_by_one} samples differ"
                );
                assert!(saturated > 0, "{what}: the test should reach saturation");
            }
        }
    }

    #[test]
    fn other_sizes_take_the_per_antenna_path() {
        let cfg = config(4, 300, 200, 20);
        assert!(FrontEnd::new(&cfg).batched.is_none());
        let x = samples(&cfg, 1);
        let d = cfg.data_num;
        let mut front = FrontEnd::new(&cfg);
        let mut rows = vec![Cf32::default(); 4 * d];
        let got = front.frame_rows(&x, 4, &[1], &mut rows);
        let mut want = vec![Cf32::default(); 4 * d];
        let mut e = (0.0, 0);
        for m in 0..4 {
            let f = &x[m * cfg.frame_len()..(m + 1) * cfg.frame_len()];
            let (e1, c1) = front.antenna(f, &[1], &mut want, m * d, 4 * d);
            e = (e.0 + e1, e.1 + c1);
        }
        assert_eq!(got, e);
        assert_eq!(rows, want);
    }
}
