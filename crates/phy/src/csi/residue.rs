//! The frequency-orthogonal estimate at the group centres with AVX-512 where the
//! ZF group is the pilot comb: 16 users and 16 subcarriers per group (the 64x16
//! default). Each antenna's pilots are derotated 16 subcarriers at a time and
//! transposed, so that comb period `j` of residue `c` (subcarrier `16 j + c`) is
//! lane `j % 16` of one vector. Lane `l` of ZF batch `b` is group `16 b + l`,
//! whose interpolation points for user `k` are comb periods `16 b + l - 1 ..=
//! 16 b + l + 1` of residue `k`, so each (batch, user, antenna) output vector is
//! two lane permutes of three such vectors and the interpolation. The scalar
//! path reads and writes each lane on its own: 75% of the csi stage on the Zen 4
//! VM (docs/BENCHMARKS.md, PHY, session 37), where a transposition into this
//! layout done lane by lane cost what it saved.
//!
//! The arithmetic is the scalar path's, operation for operation (no fused
//! multiply-adds), so both give the same bits (tested in `csi`).

use std::arch::x86_64::*;
use std::ops::Range;

use radiohost_iq::Cf32;

use crate::fft::lanes::{Avx512, Lanes, Vector};
use crate::zf::{Lanes as ZfLanes, BATCH};

/// Users, subcarriers per group and lanes per vector: all 16 on this path.
pub(super) const COMB: usize = 16;

/// Where lane `l` of one (batch, user) output vector reads its two points.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
struct Select {
    /// Into (batch `b - 1`, batch `b`) of the residue's vectors (0-31).
    lo: [i32; COMB],
    /// Into (batch `b`, batch `b + 1`).
    hi: [i32; COMB],
    /// Weight of the upper point.
    t: [f32; COMB],
    /// Lanes whose value is the lower point itself (a held edge or a pilot).
    held: u16,
}

/// [`Select`] for every (batch, user), from the scalar path's plan, and the pilots
/// in the form the derotation reads.
#[derive(Clone, Debug)]
pub(super) struct Plan {
    select: Vec<Select>,
    groups: usize,
    pilots: Pilots,
}

impl Plan {
    /// `points[g * 16 + k]`: user `k`'s (lower, upper, weight) at group `g`'s
    /// centre; `None` where a point lies outside the three comb periods around its
    /// lane (never for groups of 16 subcarriers), so the scalar path runs.
    pub(super) fn new(
        points: &[(usize, usize, f32)],
        groups: usize,
        pilots: &[Cf32],
    ) -> Option<Plan> {
        let mut select = Vec::new();
        for b in 0..groups.div_ceil(BATCH) {
            for k in 0..COMB {
                let mut s = Select {
                    lo: [COMB as i32; COMB],
                    hi: [0; COMB],
                    t: [0.0; COMB],
                    held: 0,
                };
                for l in 0..BATCH.min(groups - b * BATCH) {
                    let (lo, hi, t) = points[(b * BATCH + l) * COMB + k];
                    if lo % COMB != k || hi % COMB != k {
                        return None;
                    }
                    if lo == hi {
                        s.held |= 1 << l;
                    }
                    // Comb periods relative to the first lane of batch b - 1 and b.
                    let lo = (lo / COMB + COMB) as isize - (b * BATCH) as isize;
                    let hi = (hi / COMB) as isize - (b * BATCH) as isize;
                    if !(0..32).contains(&lo) || !(0..32).contains(&hi) {
                        return None;
                    }
                    (s.lo[l], s.hi[l], s.t[l]) = (lo as i32, hi as i32, t);
                }
                select.push(s);
            }
        }
        Some(Plan {
            select,
            groups,
            pilots: Pilots::new(pilots),
        })
    }
}

/// The pilots, planar and padded with zeros to whole batches of comb periods:
/// `re[i]` and `-im[i]` (the conjugate's imaginary part).
#[derive(Clone, Debug)]
struct Pilots {
    re: Vec<f32>,
    neg_im: Vec<f32>,
}

impl Pilots {
    fn new(pilots: &[Cf32]) -> Self {
        let len = pilots.len().div_ceil(COMB * BATCH) * COMB * BATCH;
        let (mut re, mut neg_im) = (vec![0.0; len], vec![0.0; len]);
        for (i, p) in pilots.iter().enumerate() {
            (re[i], neg_im[i]) = (p.re, -p.im);
        }
        Self { re, neg_im }
    }
}

/// Antennas derotated together: the outputs of one (batch, user) for these
/// antennas are adjacent, so they are written as one run.
const BLOCK: usize = 8;

/// Per antenna of a block, the derotated pilots by residue: vector
/// `(1 + jb) * 16 + c` of the antenna's part holds comb periods `16 jb ..` of
/// residue `c`; one batch of vectors on either side is never written, so the
/// permutes of the first and last batch read memory.
#[derive(Clone, Debug, Default)]
pub(super) struct Scratch {
    re: Vec<ZfLanes>,
    im: Vec<ZfLanes>,
}

/// What [`super::CsiEstimator::estimate_groups`] needs besides the plan.
pub(super) struct Job<'a> {
    pub received: &'a [Cf32],
    pub pilot_syms: usize,
    pub antennas: usize,
    pub inv: f32,
    pub only: Range<usize>,
    pub h_re: &'a mut [ZfLanes],
    pub h_im: &'a mut [ZfLanes],
}

/// [`super::CsiEstimator::estimate_groups`] for frequency-orthogonal pilots on
/// this path.
///
/// # Safety
/// The CPU has AVX-512F, BW and VL; the buffer sizes were checked by the caller.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn estimate(plan: &Plan, scratch: &mut Scratch, job: Job<'_>) {
    let d = job.received.len() / (job.pilot_syms * job.antennas);
    let batches = plan.groups.div_ceil(BATCH);
    let part = (batches + 2) * COMB;
    if scratch.re.len() != BLOCK * part {
        scratch.re = vec![[0.0; BATCH]; BLOCK * part];
        scratch.im = vec![[0.0; BATCH]; BLOCK * part];
    }
    // The batches whose comb periods the wanted batches read.
    let span = job.only.start.saturating_sub(1)..(job.only.end + 1).min(batches);
    for m0 in (0..job.antennas).step_by(BLOCK) {
        let block = m0..(m0 + BLOCK).min(job.antennas);
        for m in block.clone() {
            let (re, im) = (
                &mut scratch.re[(m - m0) * part..],
                &mut scratch.im[(m - m0) * part..],
            );
            for jb in span.clone() {
                // SAFETY: the caller's.
                unsafe { derotate(&plan.pilots, re, im, &job, m, jb, d) };
            }
        }
        for b in job.only.clone() {
            let lanes = BATCH.min(plan.groups - b * BATCH);
            let mask = (u32::MAX >> (32 - lanes)) as __mmask16;
            for k in 0..COMB {
                let s = &plan.select[b * COMB + k];
                // SAFETY: 16 lanes each.
                let (lo, hi, t) =
                    unsafe { (ld_i(&s.lo), ld_i(&s.hi), _mm512_loadu_ps(s.t.as_ptr())) };
                for m in block.clone() {
                    let out = (b * COMB + k) * job.antennas + m;
                    let at = (m - m0) * part + b * COMB + k;
                    // SAFETY: vectors `at`, `at + 16` and `at + 32` are in the
                    // antenna's part (it has a batch on either side); `out` is in
                    // the output.
                    unsafe {
                        for (src, dst) in
                            [(&scratch.re, &mut *job.h_re), (&scratch.im, &mut *job.h_im)]
                        {
                            let (prev, cur, next) =
                                (ld(&src[at]), ld(&src[at + COMB]), ld(&src[at + 2 * COMB]));
                            let a = _mm512_permutex2var_ps(prev, lo, cur);
                            let c = _mm512_permutex2var_ps(cur, hi, next);
                            // `a + (c - a) * t`, or `a` itself, as the scalar path.
                            let v = _mm512_add_ps(a, _mm512_mul_ps(_mm512_sub_ps(c, a), t));
                            let v = _mm512_mask_mov_ps(v, s.held, a);
                            if lanes == BATCH {
                                _mm512_storeu_ps(dst[out].as_mut_ptr(), v);
                            } else {
                                _mm512_mask_storeu_ps(dst[out].as_mut_ptr(), mask, v);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Comb periods `16 jb ..` of antenna `m`, derotated and averaged over the pilot
/// symbols, into its part of the scratch (`res_re`, `res_im`) by residue.
///
/// # Safety
/// As [`estimate`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn derotate(
    pilots: &Pilots,
    res_re: &mut [ZfLanes],
    res_im: &mut [ZfLanes],
    job: &Job<'_>,
    m: usize,
    jb: usize,
    d: usize,
) {
    let inv = Avx512::splat(job.inv);
    let mut re = [Avx512::zero(); COMB];
    let mut im = [Avx512::zero(); COMB];
    for j in 0..COMB {
        let s0 = (jb * BATCH + j) * COMB;
        if s0 >= d {
            continue;
        }
        // SAFETY: the pilots are padded to whole batches.
        let (pr, pn) = unsafe {
            (
                Avx512::load(pilots.re[s0..].as_ptr()),
                Avx512::load(pilots.neg_im[s0..].as_ptr()),
            )
        };
        let (mut acc_r, mut acc_i) = (Avx512::zero(), Avx512::zero());
        for sym in 0..job.pilot_syms {
            let row = &job.received[(sym * job.antennas + m) * d..][..d];
            let mut pad = [Cf32::default(); COMB];
            let y: &[Cf32] = match row.get(s0..s0 + COMB) {
                Some(y) => y,
                None => {
                    // The band ends inside this period: zeros past it.
                    pad[..d - s0].copy_from_slice(&row[s0..]);
                    &pad
                }
            };
            let p: *const f32 = y.as_ptr().cast();
            // SAFETY: 16 complex values are 32 f32.
            let (yr, yi) =
                unsafe { Avx512::deinterleave(Avx512::load(p), Avx512::load(p.add(COMB))) };
            // y * conj(p) as `Complex` multiplies, summed from zero as the scalar
            // path sums.
            acc_r = acc_r.add(yr.mul(pr).sub(yi.mul(pn)));
            acc_i = acc_i.add(yr.mul(pn).add(yi.mul(pr)));
        }
        (re[j], im[j]) = (acc_r.mul(inv), acc_i.mul(inv));
    }
    Avx512::transpose(&mut re);
    Avx512::transpose(&mut im);
    for c in 0..COMB {
        let at = (1 + jb) * COMB + c;
        // SAFETY: a scratch vector holds 16 f32.
        unsafe {
            re[c].store(res_re[at].as_mut_ptr());
            im[c].store(res_im[at].as_mut_ptr());
        }
    }
}

#[inline(always)]
unsafe fn ld(v: &ZfLanes) -> __m512 {
    // SAFETY: 16 f32.
    unsafe { _mm512_loadu_ps(v.as_ptr()) }
}

#[inline(always)]
unsafe fn ld_i(v: &[i32; COMB]) -> __m512i {
    // SAFETY: 16 i32.
    unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
}
