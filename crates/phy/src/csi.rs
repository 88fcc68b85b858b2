//! Pilots and channel estimation.
//!
//! Every user sends the same known unit-modulus QPSK sequence (drawn from the NR
//! Gold sequence with a fixed seed); users are separated by the layout:
//! * frequency-orthogonal (Agora's default): in a pilot symbol user `k` occupies data
//!   subcarriers `i` with `i % K == k`; the receiver takes the least-squares estimate
//!   there and interpolates linearly in between (holding the edge values);
//! * time-orthogonal: pilot symbol `j` belongs to user `j % K` on every subcarrier.
//!
//! Repeated pilot symbols are averaged. Output layout: per data subcarrier an `M x K`
//! column-major matrix (`csi[(i*K + k)*M + m]`), what [`crate::zf`] consumes.

use radiohost_iq::Cf32;

use crate::config::PilotLayout;
use crate::scramble::GoldSequence;
use crate::simd::{dispatch, Isa};
use crate::zf::{Lanes, BATCH};

#[cfg(target_arch = "x86_64")]
mod residue;

/// Seed of the pilot sequence (any fixed value known to both ends).
const PILOT_C_INIT: u32 = 0x1D_3A5C;

/// The pilot value on each data subcarrier.
pub fn pilot_sequence(data_num: usize) -> Vec<Cf32> {
    let mut bits = vec![0u8; 2 * data_num];
    GoldSequence::new(PILOT_C_INIT).scramble_bits(&mut bits);
    let a = std::f32::consts::FRAC_1_SQRT_2;
    bits.chunks_exact(2)
        .map(|b| Cf32::new(a * (1.0 - 2.0 * b[0] as f32), a * (1.0 - 2.0 * b[1] as f32)))
        .collect()
}

/// Which user (if any) sends its pilot on data subcarrier `i` of pilot symbol `j`.
pub fn pilot_owner(layout: PilotLayout, users: usize, j: usize, i: usize) -> usize {
    match layout {
        PilotLayout::FrequencyOrthogonal => i % users,
        PilotLayout::TimeOrthogonal => j % users,
    }
}

/// Channel estimator for one configuration; owns the pilot sequence and scratch.
#[derive(Clone, Debug)]
pub struct CsiEstimator {
    layout: PilotLayout,
    antennas: usize,
    users: usize,
    pilots: Vec<Cf32>,
    /// Per user, the number of pilot symbols that carried it (time-orthogonal).
    counts: Vec<u32>,
    /// [`Self::estimate_groups`]' interpolation points per (group, user) for
    /// `plan_group`: `(lower pilot, upper pilot, weight of the upper)`.
    plan: Vec<(usize, usize, f32)>,
    plan_group: usize,
    /// [`DEROTATE_BLOCK`] antennas' pilot observations times the conjugate pilots,
    /// `[antenna of the block][subcarrier]`.
    derotated: Vec<Cf32>,
    /// The AVX-512 path's plan, where it applies to `plan_group` (see `residue`).
    #[cfg(target_arch = "x86_64")]
    residue: Option<residue::Plan>,
    #[cfg(target_arch = "x86_64")]
    residue_scratch: residue::Scratch,
}

/// Antennas derotated together before [`CsiEstimator::estimate_groups`]
/// interpolates them: their outputs are adjacent, so each (batch, user) writes
/// this many consecutive output rows instead of one per pass over the plan.
const DEROTATE_BLOCK: usize = 8;

impl CsiEstimator {
    pub fn new(layout: PilotLayout, antennas: usize, users: usize, data_num: usize) -> Self {
        Self {
            layout,
            antennas,
            users,
            #[cfg(target_arch = "x86_64")]
            residue: None,
            #[cfg(target_arch = "x86_64")]
            residue_scratch: residue::Scratch::default(),
            pilots: pilot_sequence(data_num),
            counts: vec![0; users],
            plan: Vec::new(),
            plan_group: 0,
            derotated: vec![Cf32::default(); antennas.min(DEROTATE_BLOCK) * data_num],
        }
    }

    /// The subcarrier whose channel the ZF detector of group `g` (of `group`
    /// subcarriers) uses: the group's centre.
    pub fn group_centre(&self, group: usize, g: usize) -> usize {
        let i0 = g * group;
        i0 + (group.min(self.pilots.len() - i0) - 1) / 2
    }

    /// The channel at the centre subcarrier of every group of `group` adjacent data
    /// subcarriers, exactly what [`Self::estimate`] gives there, written as the ZF
    /// batches read it ([`crate::zf::ZfBatch`]): group `g` is lane `g % 16` of batch
    /// `g / 16`, and `h_re/h_im[(batch*K + k)*M + m]` hold user `k`'s channel at
    /// antenna `m` (lanes past the last group are left as they were).
    ///
    /// `received` is laid out `[symbol][antenna][subcarrier]` as for `estimate`. Each
    /// antenna's row is de-rotated by the pilots once, in order (no gathers), and every
    /// output vector of 16 groups is written whole. Only the ZF batches in `only` are
    /// estimated (a subcarrier part's; `0..usize::MAX` for all), and only the subcarriers they
    /// interpolate from are de-rotated. With AVX-512, frequency-orthogonal pilots of 16
    /// users and groups of 16 subcarriers (the 64x16 default), `residue` computes the
    /// same bits in vectors.
    ///
    /// # Panics
    /// If the buffer sizes disagree with the configuration or `group` is 0 (caller bugs).
    pub fn estimate_groups(
        &mut self,
        received: &[Cf32],
        pilot_syms: usize,
        group: usize,
        only: std::ops::Range<usize>,
        h_re: &mut [Lanes],
        h_im: &mut [Lanes],
    ) {
        let isa = Isa::detect();
        self.estimate_groups_isa(isa, received, pilot_syms, group, only, h_re, h_im);
    }

    /// [`Self::estimate_groups`] with the kernels of `isa` (the tests run each).
    #[allow(clippy::too_many_arguments)]
    fn estimate_groups_isa(
        &mut self,
        isa: Isa,
        received: &[Cf32],
        pilot_syms: usize,
        group: usize,
        only: std::ops::Range<usize>,
        h_re: &mut [Lanes],
        h_im: &mut [Lanes],
    ) {
        #[cfg(not(target_arch = "x86_64"))]
        let _ = isa;
        let (m_n, k_n, d) = (self.antennas, self.users, self.pilots.len());
        assert!(group > 0, "csi: empty group");
        let groups = d.div_ceil(group);
        let batches = groups.div_ceil(BATCH);
        assert_eq!(received.len(), pilot_syms * m_n * d, "csi: received size");
        assert_eq!(h_re.len(), batches * k_n * m_n, "csi: output size");
        assert_eq!(h_im.len(), batches * k_n * m_n, "csi: output size");
        assert!(pilot_syms > 0, "csi: no pilot symbols");
        let only = only.start..only.end.min(batches);
        if only.is_empty() {
            return;
        }
        let inv = 1.0 / pilot_syms as f32;
        match self.layout {
            PilotLayout::FrequencyOrthogonal => {
                self.plan_groups(group);
                #[cfg(target_arch = "x86_64")]
                if let (Some(plan), true) = (&self.residue, isa.min(Isa::cpu()) >= Isa::Avx512) {
                    let job = residue::Job {
                        received,
                        pilot_syms,
                        antennas: m_n,
                        inv,
                        only,
                        h_re,
                        h_im,
                    };
                    // SAFETY: the CPU has AVX-512 (`Isa::cpu`); the sizes are checked above.
                    unsafe { residue::estimate(plan, &mut self.residue_scratch, job) };
                    return;
                }
                // The subcarriers the batches' groups interpolate from.
                let points =
                    &self.plan[only.start * BATCH * k_n..(only.end * BATCH).min(groups) * k_n];
                let first = points.iter().map(|p| p.0).min().unwrap_or(0);
                let span = first..points.iter().map(|p| p.1 + 1).max().unwrap_or(0);
                for m0 in (0..m_n).step_by(DEROTATE_BLOCK) {
                    let block = m0..(m0 + DEROTATE_BLOCK).min(m_n);
                    for m in block.clone() {
                        // y * conj(p) averaged over the pilot symbols, as `estimate`
                        // sums it.
                        let derotated = &mut self.derotated[(m - m0) * d..][..d][span.clone()];
                        derotated.fill(Cf32::default());
                        for j in 0..pilot_syms {
                            let row = &received[(j * m_n + m) * d..][span.clone()];
                            for ((o, y), p) in derotated
                                .iter_mut()
                                .zip(row)
                                .zip(&self.pilots[span.clone()])
                            {
                                *o += y * p.conj();
                            }
                        }
                        derotated.iter_mut().for_each(|v| *v *= inv);
                    }
                    for b in only.clone() {
                        let lanes = BATCH.min(groups - b * BATCH);
                        for k in 0..k_n {
                            let plan = |l: usize| self.plan[(b * BATCH + l) * k_n + k];
                            for m in block.clone() {
                                let row = &self.derotated[(m - m0) * d..][..d];
                                let at = (b * k_n + k) * m_n + m;
                                let (hr, hi) = (&mut h_re[at], &mut h_im[at]);
                                for l in 0..lanes {
                                    let (lo, hi_, t) = plan(l);
                                    let (a, c) = (row[lo], row[hi_]);
                                    // The same expression as `interpolate`, so both
                                    // agree exactly.
                                    let v = if lo == hi_ { a } else { a + (c - a) * t };
                                    hr[l] = v.re;
                                    hi[l] = v.im;
                                }
                            }
                        }
                    }
                }
            }
            PilotLayout::TimeOrthogonal => {
                self.counts.fill(0);
                for j in 0..pilot_syms {
                    self.counts[j % k_n] += 1;
                }
                for b in only {
                    let lanes = BATCH.min(groups - b * BATCH);
                    for k in 0..k_n {
                        let c = self.counts[k].max(1) as f32;
                        for m in 0..m_n {
                            let at = (b * k_n + k) * m_n + m;
                            for l in 0..lanes {
                                let i = self.group_centre(group, b * BATCH + l);
                                let mut v = Cf32::default();
                                for j in (k..pilot_syms).step_by(k_n) {
                                    v += received[(j * m_n + m) * d + i] * self.pilots[i].conj();
                                }
                                v /= c;
                                h_re[at][l] = v.re;
                                h_im[at][l] = v.im;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Interpolation points of every (group, user) for frequency-orthogonal pilots
    /// (recomputed only when the group size changes).
    fn plan_groups(&mut self, group: usize) {
        if self.plan_group == group && !self.plan.is_empty() {
            return;
        }
        let (k_n, d) = (self.users, self.pilots.len());
        self.plan.clear();
        for g in 0..d.div_ceil(group) {
            let i = self.group_centre(group, g);
            for k in 0..k_n {
                let last = k + (d - 1 - k) / k_n * k_n;
                let point = if i % k_n == k {
                    (i, i, 0.0)
                } else if i < k {
                    (k, k, 0.0)
                } else if i > last {
                    (last, last, 0.0)
                } else {
                    let lo = i - (i - k) % k_n;
                    (lo, lo + k_n, ((i - lo) as f32) / k_n as f32)
                };
                self.plan.push(point);
            }
        }
        self.plan_group = group;
        #[cfg(target_arch = "x86_64")]
        {
            let groups = d.div_ceil(group);
            self.residue = (k_n == residue::COMB && group == residue::COMB)
                .then(|| residue::Plan::new(&self.plan, groups, &self.pilots))
                .flatten();
        }
    }

    pub fn pilots(&self) -> &[Cf32] {
        &self.pilots
    }

    /// Estimate the channel from `pilot_syms` received pilot symbols given as data
    /// subcarriers, laid out `[symbol][antenna][subcarrier]`.
    ///
    /// # Panics
    /// If the buffer sizes disagree with the configuration (caller bugs).
    pub fn estimate(&mut self, received: &[Cf32], pilot_syms: usize, csi: &mut [Cf32]) {
        let (m_n, k_n, d) = (self.antennas, self.users, self.pilots.len());
        assert_eq!(received.len(), pilot_syms * m_n * d, "csi: received size");
        assert_eq!(csi.len(), d * k_n * m_n, "csi: output size");
        assert!(pilot_syms > 0, "csi: no pilot symbols");
        csi.fill(Cf32::default());
        self.counts.fill(0);
        for j in 0..pilot_syms {
            if self.layout == PilotLayout::TimeOrthogonal {
                self.counts[j % k_n] += 1;
            }
            for m in 0..m_n {
                let y = &received[(j * m_n + m) * d..][..d];
                for (i, (yi, p)) in y.iter().zip(&self.pilots).enumerate() {
                    let k = pilot_owner(self.layout, k_n, j, i);
                    csi[(i * k_n + k) * m_n + m] += yi * p.conj();
                }
            }
        }
        match self.layout {
            PilotLayout::TimeOrthogonal => {
                for (i_k, h) in csi.chunks_exact_mut(m_n).enumerate() {
                    let c = self.counts[i_k % k_n].max(1) as f32;
                    h.iter_mut().for_each(|v| *v /= c);
                }
            }
            PilotLayout::FrequencyOrthogonal => {
                let inv = 1.0 / pilot_syms as f32;
                csi.iter_mut().for_each(|v| *v *= inv);
                self.interpolate(csi);
            }
        }
    }

    /// Fill the subcarriers between each user's pilot comb by linear interpolation.
    fn interpolate(&self, csi: &mut [Cf32]) {
        let (m_n, k_n, d) = (self.antennas, self.users, self.pilots.len());
        let idx = |i: usize, k: usize, m: usize| (i * k_n + k) * m_n + m;
        for k in 0..k_n {
            let last = k + (d - 1 - k) / k_n * k_n; // last pilot of user k
            for i in 0..d {
                if i % k_n == k {
                    continue;
                }
                let (lo, hi, t) = if i < k {
                    (k, k, 0.0)
                } else if i > last {
                    (last, last, 0.0)
                } else {
                    let lo = i - (i - k) % k_n;
                    (lo, lo + k_n, ((i - lo) as f32) / k_n as f32)
                };
                for m in 0..m_n {
                    let a = csi[idx(lo, k, m)];
                    let b = csi[idx(hi, k, m)];
                    csi[idx(i, k, m)] = a + (b - a) * t;
                }
            }
        }
    }
}

/// Group `g`'s `M x K` column-major channel (what [`crate::zf::zf_detector`] takes)
/// out of the lane layout [`CsiEstimator::estimate_groups`] writes.
///
/// # Panics
/// If the buffers are too short for group `g` (caller bugs).
pub fn group_channel(
    h_re: &[Lanes],
    h_im: &[Lanes],
    users: usize,
    antennas: usize,
    g: usize,
    out: &mut [Cf32],
) {
    let mk = users * antennas;
    assert_eq!(out.len(), mk, "csi: group channel size");
    let (b, l) = (g / BATCH, g % BATCH);
    let (re, im) = (&h_re[b * mk..(b + 1) * mk], &h_im[b * mk..(b + 1) * mk]);
    for ((o, r), i) in out.iter_mut().zip(re).zip(im) {
        *o = Cf32::new(r[l], i[l]);
    }
}

/// Sum of `|Y|^2` over the null (non-data) bins of one frequency-domain symbol and
/// how many there were: the receiver's noise measurement.
pub fn null_bin_energy(freq: &[Cf32], data_start: usize, data_num: usize) -> (f64, usize) {
    let n = freq.len();
    let (mut sum, mut count) = (0f64, 0);
    for (s, e) in [(0, data_start), (data_start + data_num, n)] {
        for run in crate::ofdm::bin_runs(n, s, e) {
            count += run.len();
            let bins = &freq[run];
            sum += dispatch!(Isa::detect(), fn run(bins: &[Cf32]) -> f64 => energy);
        }
    }
    (sum, count)
}

/// `sum |x|^2` as the sum of the squares of the re and im values taken as one flat
/// run, in 64 f32 lanes (each lane sums at most a few hundred terms), added up in
/// f64 at the end. Flat, the loop needs no de-interleaving shuffle, and the lanes are eight
/// independent FMA chains with AVX2 (complex lanes, with two dependent FMAs per
/// chunk, were latency bound: 2% of a 64x16 uplink frame in `perf`).
#[inline(always)]
fn energy<const FMA: bool>(x: &[Cf32]) -> f64 {
    const LANES: usize = 64;
    let flat: &[f32] = bytemuck::cast_slice(x);
    let mut acc = [0f32; LANES];
    let chunks = flat.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            acc[l] = crate::simd::fmadd::<FMA>(c[l], c[l], acc[l]);
        }
    }
    // Folded to 8 lanes in f32 first: a serial f64 sum of all 64 lanes cost more
    // than the loop over a symbol's null bins.
    let mut folded = [0f32; 8];
    for part in acc.chunks_exact(8) {
        for (f, &v) in folded.iter_mut().zip(part) {
            *f += v;
        }
    }
    folded.iter().map(|&v| v as f64).sum::<f64>()
        + tail.iter().map(|&v| (v * v) as f64).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Smooth synthetic channel (a two-tap response) per antenna-user pair.
    fn channel(i: usize, k: usize, m: usize, d: usize) -> Cf32 {
        let a = Cf32::new(0.3 + 0.1 * m as f32, -0.2 + 0.05 * k as f32);
        let b = Cf32::new(0.1 * k as f32, 0.2);
        a + b * Cf32::from_polar(
            1.0,
            -2.0 * std::f32::consts::PI * i as f32 * 2.0 / d as f32 / 8.0,
        )
    }

    fn run(layout: PilotLayout, syms: usize) -> (Vec<Cf32>, usize, usize, usize) {
        let (m_n, k_n, d) = (4, 3, 60);
        let mut est = CsiEstimator::new(layout, m_n, k_n, d);
        let p = est.pilots().to_vec();
        let mut rx = vec![Cf32::default(); syms * m_n * d];
        for j in 0..syms {
            for m in 0..m_n {
                for i in 0..d {
                    let k = pilot_owner(layout, k_n, j, i);
                    rx[(j * m_n + m) * d + i] = channel(i, k, m, d) * p[i];
                }
            }
        }
        let mut csi = vec![Cf32::default(); d * k_n * m_n];
        est.estimate(&rx, syms, &mut csi);
        (csi, m_n, k_n, d)
    }

    #[test]
    fn time_orthogonal_is_exact() {
        let (csi, m_n, k_n, d) = run(PilotLayout::TimeOrthogonal, 6);
        for i in 0..d {
            for k in 0..k_n {
                for m in 0..m_n {
                    assert!((csi[(i * k_n + k) * m_n + m] - channel(i, k, m, d)).norm() < 1e-5);
                }
            }
        }
    }

    #[test]
    fn frequency_orthogonal_interpolates_smooth_channels() {
        let (csi, m_n, k_n, d) = run(PilotLayout::FrequencyOrthogonal, 1);
        for i in 0..d {
            for k in 0..k_n {
                for m in 0..m_n {
                    let err = (csi[(i * k_n + k) * m_n + m] - channel(i, k, m, d)).norm();
                    let tol = if i % k_n == k { 1e-5 } else { 0.02 };
                    assert!(err < tol, "i {i} k {k} m {m} err {err}");
                }
            }
        }
    }

    /// The group-centre estimates are exactly the full estimate at the centres.
    #[test]
    fn group_centres_match_full_estimate() {
        let layouts = [
            (PilotLayout::FrequencyOrthogonal, 1),
            (PilotLayout::FrequencyOrthogonal, 2),
            (PilotLayout::TimeOrthogonal, 7),
        ];
        // 11 antennas: one whole block of derotated antennas and a partial one.
        let cases = layouts.into_iter().flat_map(|c| [(c, 4), (c, 11)]);
        for ((layout, syms), m_n) in cases {
            let (k_n, d) = (3, 60);
            let mut est = CsiEstimator::new(layout, m_n, k_n, d);
            let rx: Vec<Cf32> = (0..syms * m_n * d)
                .map(|i| Cf32::new((i % 13) as f32 - 6.0, (i % 7) as f32 * 0.5))
                .collect();
            let mut full = vec![Cf32::default(); d * k_n * m_n];
            est.estimate(&rx, syms, &mut full);
            for group in [1, 3, 7, 60] {
                let groups = d.div_ceil(group);
                let len = groups.div_ceil(BATCH) * k_n * m_n;
                let (mut hr, mut hi) = (vec![[0.0; BATCH]; len], vec![[0.0; BATCH]; len]);
                est.estimate_groups(&rx, syms, group, 0..usize::MAX, &mut hr, &mut hi);
                // One batch at a time (a station part's range) gives the same bits.
                for b in 0..groups.div_ceil(BATCH) {
                    let (mut br, mut bi) = (vec![[9.0; BATCH]; len], vec![[9.0; BATCH]; len]);
                    est.estimate_groups(&rx, syms, group, b..b + 1, &mut br, &mut bi);
                    let lanes = BATCH.min(groups - b * BATCH);
                    for at in b * k_n * m_n..(b + 1) * k_n * m_n {
                        assert_eq!(br[at][..lanes], hr[at][..lanes], "{layout:?} {group} {b}");
                        assert_eq!(bi[at][..lanes], hi[at][..lanes], "{layout:?} {group} {b}");
                    }
                }
                for g in 0..groups {
                    let i = est.group_centre(group, g);
                    assert!(i >= g * group && i < ((g + 1) * group).min(d));
                    for k in 0..k_n {
                        for m in 0..m_n {
                            let at = ((g / BATCH) * k_n + k) * m_n + m;
                            let a = Cf32::new(hr[at][g % BATCH], hi[at][g % BATCH]);
                            let b = full[(i * k_n + k) * m_n + m];
                            assert!(
                                (a - b).norm() <= 1e-6 * (1.0 + b.norm()),
                                "{layout:?} group {group} g {g} k {k} m {m}: {a} vs {b}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The AVX-512 path (16 users, groups of 16) gives the scalar path's bits, for
    /// every batch range, and leaves the lanes past the last group alone.
    #[test]
    fn residue_path_is_the_scalar_path_bit_for_bit() {
        if Isa::cpu() < Isa::Avx512 {
            println!(
                "SKIPPED: the residue path needs AVX-512 (this CPU has {})",
                Isa::cpu().name()
            );
            return;
        }
        let k_n = 16;
        // 1200: the 64x16 band; 200: a band ending inside a comb period; 256: one
        // whole batch of groups.
        for (d, syms, m_n) in [(1200, 1, 5), (1200, 2, 3), (200, 1, 4), (256, 3, 2)] {
            let mut est = CsiEstimator::new(PilotLayout::FrequencyOrthogonal, m_n, k_n, d);
            let rx: Vec<Cf32> = (0..syms * m_n * d)
                .map(|i| {
                    Cf32::new(
                        ((i * 37) % 101) as f32 * 0.03 - 1.5,
                        ((i * 11) % 29) as f32 * -0.07 + 1.0,
                    )
                })
                .collect();
            let groups = d.div_ceil(16);
            let batches = groups.div_ceil(BATCH);
            let len = batches * k_n * m_n;
            let run = |est: &mut CsiEstimator, isa, only: std::ops::Range<usize>| {
                let (mut hr, mut hi) = (vec![[9.0; BATCH]; len], vec![[9.0; BATCH]; len]);
                est.estimate_groups_isa(isa, &rx, syms, 16, only, &mut hr, &mut hi);
                (hr, hi)
            };
            let want = run(&mut est, Isa::Portable, 0..usize::MAX);
            assert!(est.residue.is_some(), "groups of 16 take the residue path");
            let bits = |h: &(Vec<Lanes>, Vec<Lanes>)| -> Vec<u32> {
                h.0.iter()
                    .chain(&h.1)
                    .flatten()
                    .map(|v| v.to_bits())
                    .collect()
            };
            assert_eq!(
                bits(&run(&mut est, Isa::Avx512, 0..usize::MAX)),
                bits(&want),
                "d {d}"
            );
            for b in 0..batches {
                let got = run(&mut est, Isa::Avx512, b..b + 1);
                let part = run(&mut est, Isa::Portable, b..b + 1);
                assert_eq!(bits(&got), bits(&part), "d {d} batch {b}");
            }
            // Past the last group: untouched.
            let lanes = groups - (batches - 1) * BATCH;
            let got = run(&mut est, Isa::Avx512, 0..usize::MAX);
            for at in (batches - 1) * k_n * m_n..len {
                assert!(got.0[at][lanes..].iter().all(|&v| v == 9.0), "d {d}");
            }
        }
    }

    #[test]
    fn pilots_have_unit_modulus_and_nulls_are_counted() {
        assert!(pilot_sequence(100)
            .iter()
            .all(|p| (p.norm() - 1.0).abs() < 1e-6));
        let mut freq = vec![Cf32::new(1.0, 0.0); 16];
        for i in 0..8 {
            freq[(4 + i + 8) % 16] = Cf32::new(10.0, 0.0);
        }
        assert_eq!(null_bin_energy(&freq, 4, 8), (8.0, 8));
        // Against the plain modulo definition on a long symbol.
        let freq: Vec<Cf32> = (0..2048)
            .map(|i| Cf32::new((i % 11) as f32 * 0.1, (i % 7) as f32 * -0.2))
            .collect();
        let (start, num) = (424, 1200);
        let want: f64 = (0..start)
            .chain(start + num..2048)
            .map(|t| freq[(t + 1024) % 2048].norm_sqr() as f64)
            .sum();
        let (got, count) = null_bin_energy(&freq, start, num);
        assert_eq!(count, 848);
        assert!((got - want).abs() < 1e-5 * want, "{got} vs {want}");
    }
}
