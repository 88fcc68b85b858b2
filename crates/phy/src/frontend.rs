//! Receive front end shared by the base station and the emulated users: per antenna,
//! CP removal of a batch of symbols, one batched FFT, data-subcarrier gather, and the
//! energy of the null subcarriers (the noise measurement).

use radiohost_iq::{Cf32, Ci16};

use crate::config::FrameConfig;
use crate::csi::null_bin_energy;
use crate::ofdm::{gather_data, remove_cp_ci16, OfdmFft};

/// Owns the FFT plan and a batch buffer sized for a whole frame.
#[derive(Debug)]
pub struct FrontEnd {
    fft: OfdmFft,
    batch: Vec<Cf32>,
    fft_size: usize,
    cp_len: usize,
    symbol_len: usize,
    data_start: usize,
    data_num: usize,
    gathered: Vec<Cf32>,
}

impl FrontEnd {
    pub fn new(cfg: &FrameConfig) -> Self {
        Self {
            fft: OfdmFft::new(cfg.fft_size),
            batch: vec![Cf32::default(); cfg.fft_size * cfg.schedule.len()],
            fft_size: cfg.fft_size,
            cp_len: cfg.cp_len,
            symbol_len: cfg.symbol_len(),
            data_start: cfg.data_start,
            data_num: cfg.data_num,
            gathered: vec![Cf32::default(); cfg.data_num],
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

/// Subcarriers per slice of the planar layout [`FrontEnd::antenna_planar`] writes.
pub const SLICE: usize = crate::group_product::LANES;

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

/// Transmit side: data subcarriers of one symbol to time samples with cyclic prefix.
#[derive(Debug)]
pub struct Synthesizer {
    fft: OfdmFft,
    freq: Vec<Cf32>,
    cp_len: usize,
    data_start: usize,
}

impl Synthesizer {
    pub fn new(cfg: &FrameConfig) -> Self {
        Self {
            fft: OfdmFft::new(cfg.fft_size),
            freq: vec![Cf32::default(); cfg.fft_size],
            cp_len: cfg.cp_len,
            data_start: cfg.data_start,
        }
    }

    /// `out` (`cp_len + fft_size` samples) = `gain / sqrt(N)` x IFFT of `data` placed on
    /// the data subcarriers, prefixed by its cyclic prefix. With `gain = 1` a
    /// unit-energy subcarrier keeps unit energy (orthonormal transform).
    pub fn symbol(&mut self, data: &[Cf32], gain: f32, out: &mut [Cf32]) {
        crate::ofdm::scatter_data(data, self.data_start, &mut self.freq);
        self.fft.inverse_batch(&mut self.freq);
        let scale = gain / (self.fft.size() as f32).sqrt();
        crate::ofdm::add_cp(&self.freq, self.cp_len, scale, out);
    }
}
