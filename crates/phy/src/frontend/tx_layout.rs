//! Where [`super::Synthesizer::antennas_ci16`] reads each antenna's data
//! subcarriers. The per-antenna path reads spectra: each row is the transform's
//! whole input, the data subcarriers at their FFT bins and zeros elsewhere, so
//! whoever fills the rows (the precoder) writes straight into the transform's
//! input and the synthesiser neither copies nor zeroes anything. The batched
//! path reads plain rows of `data_num` subcarriers, which it transposes itself.

use std::ops::Range;

use radiohost_iq::Cf32;

use crate::fft::LANES;
use crate::ofdm::bin_runs;

/// The layout of the synthesiser's input: antenna `m`'s data subcarriers are in
/// row `m` (`stride()` values), in at most two contiguous runs; every other value
/// of a row must stay zero.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxLayout {
    stride: usize,
    /// Contiguous runs of data subcarriers: `(first subcarrier, its position, count)`.
    runs: [(usize, usize, usize); 2],
    /// Rows are spectra ([`FRONT`] zeros, then the transform's input).
    spectra: bool,
}

/// Zeros before each spectrum, so that a slice of [`LANES`] subcarriers cut by the
/// band's wrap past DC still starts inside its row (see [`TxLayout::pieces`]).
const FRONT: usize = LANES;

impl TxLayout {
    /// Plain rows of `data_num` subcarriers.
    pub(super) fn rows(data_num: usize) -> Self {
        Self {
            stride: data_num,
            runs: [(0, 0, data_num), (data_num, data_num, 0)],
            spectra: false,
        }
    }

    /// One `fft_size`-point spectrum per row: data subcarrier `i` at its bin
    /// ([`crate::ofdm::data_bin`]) after a pad of [`FRONT`] zeros.
    pub(super) fn spectra(fft_size: usize, data_start: usize, data_num: usize) -> Self {
        let [a, b] = bin_runs(fft_size, data_start, data_start + data_num);
        Self {
            stride: FRONT + fft_size,
            runs: [
                (0, FRONT + a.start, a.len()),
                (a.len(), FRONT + b.start, b.len()),
            ],
            spectra: true,
        }
    }

    /// Values per antenna row.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// A zeroed buffer for `antennas` rows.
    pub fn zeroed(&self, antennas: usize) -> Vec<Cf32> {
        vec![Cf32::default(); antennas * self.stride]
    }

    /// Whether rows are plain `data_num` subcarriers (what a precoder writes
    /// without this layout).
    pub fn is_rows(&self) -> bool {
        !self.spectra
    }

    /// Where data subcarrier `i` of a row is (the tests' model of the layout).
    #[cfg(test)]
    fn position(&self, i: usize) -> usize {
        let &(first, at, _) = self
            .runs
            .iter()
            .find(|&&(first, _, n)| (first..first + n).contains(&i))
            .expect("TxLayout::position: not a data subcarrier");
        at + i - first
    }

    /// The contiguous pieces of the data subcarriers `s0 + l`, `l` in `lanes`
    /// (`lanes.end <= LANES`): each `(p0, part)` has subcarrier `s0 + l` at
    /// position `p0 + l` for `l` in `part`. At most two pieces, where the band wraps.
    pub fn pieces(
        &self,
        s0: usize,
        lanes: Range<usize>,
    ) -> impl Iterator<Item = (usize, Range<usize>)> + '_ {
        debug_assert!(lanes.end <= LANES);
        self.runs.iter().filter_map(move |&(first, at, n)| {
            let part = lanes.start.max(first.saturating_sub(s0))
                ..lanes.end.min((first + n).saturating_sub(s0));
            // The piece overlaps the run, so `s0 + LANES > first`; spectra runs start at
            // `at >= FRONT = LANES`, plain rows at `at == first`: never below 0.
            (!part.is_empty()).then(|| (at + s0 - first, part))
        })
    }

    /// Writes data subcarriers `first..first + data.len()` of a row at their
    /// positions.
    ///
    /// # Panics
    /// If they are not data subcarriers or `row` is too short (caller bugs).
    pub fn put(&self, first: usize, data: &[Cf32], row: &mut [Cf32]) {
        let end = first + data.len();
        let mut done = 0;
        for &(run, at, n) in &self.runs {
            let (a, b) = (first.max(run), end.min(run + n));
            if a < b {
                row[at + a - run..at + b - run].copy_from_slice(&data[a - first..b - first]);
                done += b - a;
            }
        }
        assert_eq!(done, data.len(), "TxLayout::put: not data subcarriers");
    }

    /// The transform's input in row `m` (spectra only).
    pub(super) fn spectrum<'a>(&self, data: &'a [Cf32], m: usize) -> &'a [Cf32] {
        assert!(self.spectra, "TxLayout::spectrum: plain rows");
        &data[m * self.stride + FRONT..(m + 1) * self.stride]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofdm::data_bin;

    #[test]
    fn positions_are_the_bins_after_the_pad() {
        // A band inside the upper half, one wrapping past DC, one below DC.
        for (n, start, d) in [(256, 150, 100), (2048, 424, 1200), (512, 20, 200)] {
            let l = TxLayout::spectra(n, start, d);
            for i in 0..d {
                assert_eq!(
                    l.position(i),
                    FRONT + data_bin(n, start, i),
                    "{n} {start} {i}"
                );
            }
            let rows = TxLayout::rows(d);
            assert!((0..d).all(|i| rows.position(i) == i));
            assert!(rows.is_rows() && !l.is_rows());
        }
    }

    #[test]
    fn pieces_cover_each_lane_once_at_its_position() {
        for (n, start, d) in [
            (2048, 424, 1200),
            (256, 150, 100),
            (512, 20, 200),
            (64, 4, 40),
        ] {
            for l in [TxLayout::spectra(n, start, d), TxLayout::rows(d)] {
                for s0 in (0..d).step_by(LANES) {
                    for lanes in [0..LANES, 3..11, 0..1, 15..16] {
                        let lanes = lanes.start..lanes.end.min(d - s0);
                        let mut seen = [0; LANES];
                        for (p0, part) in l.pieces(s0, lanes.clone()) {
                            for k in part {
                                assert_eq!(p0 + k, l.position(s0 + k), "{n} {start} {s0} {k}");
                                assert!(p0 + k < l.stride());
                                seen[k] += 1;
                            }
                        }
                        for (k, &c) in seen.iter().enumerate() {
                            assert_eq!(c, lanes.contains(&k) as i32, "{n} {start} {s0} lane {k}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn put_writes_only_the_data_positions() {
        let l = TxLayout::spectra(256, 150, 100);
        let data: Vec<Cf32> = (0..100).map(|i| Cf32::new(i as f32 + 1.0, -1.0)).collect();
        // The whole row, then in two parts that straddle the wrap past DC.
        for cuts in [vec![0, 100], vec![0, 3, 100], vec![0, 60, 100]] {
            let mut row = l.zeroed(1);
            for w in cuts.windows(2) {
                l.put(w[0], &data[w[0]..w[1]], &mut row);
            }
            for (i, v) in data.iter().enumerate() {
                assert_eq!(row[l.position(i)], *v);
            }
            assert_eq!(row.iter().filter(|v| **v != Cf32::default()).count(), 100);
        }
    }

    #[test]
    #[should_panic(expected = "not data subcarriers")]
    fn put_past_the_band_is_refused() {
        let l = TxLayout::rows(10);
        let mut row = l.zeroed(1);
        l.put(8, &[Cf32::default(); 4], &mut row);
    }
}
