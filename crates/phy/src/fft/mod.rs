//! Power-of-two FFTs of 16 antennas at once: SIMD lanes are antennas.
//!
//! Why not rustfft (or FFTW): the uplink front end transforms every antenna's copy
//! of the same symbol, and the group equaliser after it reads 16 subcarriers of
//! every antenna as one contiguous planar block. rustfft transforms one antenna at
//! a time in interleaved complex (AVX2 at best), so the front end converted,
//! transformed, then gathered and transposed every bin through memory: 6.1 of the
//! 11.9 ms of a quiet 64x16 uplink frame on one AVX-512 core (docs/BENCHMARKS.md,
//! "PHY benchmarks"). Here the data is `[sample][antenna]` (one [`Row`] of 16
//! lanes per sample, re and im planar), so every pass is full-width vector
//! arithmetic on rows with broadcast twiddles, no shuffles inside the transform;
//! the ci16 conversion with CP removal and the gather into the equaliser's slices
//! are 16 x 16 transposes around it ([`crate::frontend::FrontEnd::frame_planar`]).
//! With AVX2 a row is two registers, and a radix-16 butterfly of whole rows (64
//! registers of 16) spilled every value; there each butterfly runs on one 8-lane
//! half of its rows, then the other ([`lanes::Lanes::Part`]). Measured on a Zen 3
//! core (`phy bench`, 2026-12-02): a 2048-point antenna transform in 3.4-4.7 us,
//! the same time as rustfft's (0.9-1.1x) when rustfft too transforms 16 antennas'
//! symbols in cache (whole rows took 10.1-10.6 us). The 1.3-1.8x reported until
//! then was against rustfft streaming a 14.7 MB batch through the caches. So the
//! front end and the transmit side keep rustfft below AVX-512: with this transform
//! in them the whole 64x16 frames measured 10-40% slower FFT stages on that core
//! (docs/BENCHMARKS.md, PHY, sessions 17 and 36). The portable build (four SSE
//! registers a row) spills too.
//!
//! The transform is in place, decimation in frequency: radix-16 passes (a
//! radix-8, -4 or 8 x 4 tail), each butterfly a codelet in the 32 zmm registers
//! (the radix-16 one parks half its first level in the rows it read, which costs
//! fewer stores than the compiler's spills) with its twiddles (broadcast scalars)
//! fused into its stores (`codelets.rs`): three passes through memory at 2048
//! points where a radix-2 FFT makes eleven. The first pass sweeps the whole
//! buffer; the rest run per first-level sub-transform, which fits L1 up to 2048
//! points. No pass reorders: results are in digit-reversed order, which
//! [`BatchFft::row`] maps (the front end reads bins through a table anyway).
//! Transforms are unnormalised, as rustfft's.
//!
//! Measured on an AVX-512 Zen 4 core against rustfft in cache (`phy bench`
//! `fft16_2048_batch896`, 2026-12-02): 1.9-2.4 us per 2048-point transform against
//! 2.4-3.1 us, 1.2-1.4x (the 1.8-2.1x first reported was against the streamed
//! baseline); inside the 64x16 uplink frame the fft stage was 10-22% faster than
//! with rustfft's grouped path in 5 of 6 alternated runs. The radix-8 Stockham
//! version it replaces was 0.9x rustfft. Zen 4 runs one 512-bit add and one 512-bit
//! FMA per cycle and stores one 512-bit row per two cycles, so the codelets move
//! some additions to the FMA pipe and do two to four butterfly levels per store.

mod codelets;
pub(crate) mod lanes;

pub use lanes::{Row, LANES};

use codelets::Buf;
use lanes::{Lanes, Vector};

use radiohost_iq::Ci16;

use crate::simd::Isa;

/// Call `$body::<V>(args)` (an `#[inline(always)]` function generic over
/// [`lanes::Lanes`]) built for the given [`Isa`], clamped to what the CPU has.
macro_rules! dispatch_lanes {
    ($isa:expr, fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $body:ident) => {{
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
        unsafe fn avx512($($arg: $ty),*) $(-> $ret)? {
            $body::<$crate::fft::lanes::Avx512>($($arg),*)
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
            $body::<$crate::fft::lanes::Avx2>($($arg),*)
        }
        match ($isa).min($crate::simd::Isa::cpu()) {
            // SAFETY: `Isa::cpu` established the CPU has these features.
            #[cfg(target_arch = "x86_64")]
            $crate::simd::Isa::Avx512 => unsafe { avx512($($arg),*) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            $crate::simd::Isa::Avx2 => unsafe { avx2($($arg),*) },
            _ => $body::<$crate::fft::lanes::Portable<false>>($($arg),*),
        }
    }};
}
pub(crate) use dispatch_lanes;

/// Why a [`BatchFft`] cannot be planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the batched FFT needs a power-of-two size from 4 to 2^24, got {0}")]
pub struct FftSizeError(pub usize);

/// One in-place decimation-in-frequency pass: `len / radix` butterflies of
/// stride `len / radix` in every block of `len` rows; the butterfly at offset
/// `j` multiplies its output `k` by `w_len^(jk)`, stored from `twiddles[tw]` on.
#[derive(Clone, Copy, Debug)]
struct Pass {
    radix: usize,
    len: usize,
    tw: usize,
}

/// The passes of one size: radix 16 while it divides, then a radix-8, -4 or
/// 8 x 4 tail (every pass does at least two butterfly levels per store).
#[derive(Debug)]
struct Plan {
    passes: Vec<Pass>,
    /// Per pass, per butterfly `j`: `w_len^(jk)` for `k = 1..radix` as (re, im)
    /// pairs, `w_len = exp(-2 pi i / len)` (the inverse conjugates them).
    twiddles: Vec<f32>,
}

impl Plan {
    fn new(n: usize) -> Self {
        let bits = n.trailing_zeros() as usize;
        let mut radices = vec![16; bits / 4];
        match bits % 4 {
            1 => {
                radices.pop();
                radices.extend([8, 4]);
            }
            2 => radices.push(4),
            3 => radices.push(8),
            _ => {}
        }
        let (mut passes, mut twiddles) = (Vec::new(), Vec::new());
        let mut len = n;
        for radix in radices {
            passes.push(Pass {
                radix,
                len,
                tw: twiddles.len(),
            });
            for j in 0..len / radix {
                for k in 1..radix {
                    let (r, i) = root(j * k, len);
                    twiddles.extend([r, i]);
                }
            }
            len /= radix;
        }
        Self { passes, twiddles }
    }
}

/// `exp(-2 pi i k / n)`, computed in f64.
fn root(k: usize, n: usize) -> (f32, f32) {
    let a = -2.0 * std::f64::consts::PI * (k % n) as f64 / n as f64;
    (a.cos() as f32, a.sin() as f32)
}

/// A planned power-of-two transform of 16 lanes, with its work buffer.
///
/// The transform runs in place on [`Self::input_mut`]: the first pass sweeps the
/// whole buffer (from L2: 2 x 128 KiB at 2048 points), the others run block by
/// block on the first pass's `radix` sub-transforms, each small enough for L1.
/// Its results are in digit-reversed order ([`Self::row`]); the blocks are
/// padded by one row so that the first pass's power-of-two stride does not put
/// all its rows in one L1 set.
#[derive(Debug)]
pub struct BatchFft {
    n: usize,
    plan: Plan,
    /// Rows of one first-level block (`n / radix` of the first pass).
    block: usize,
    /// Rows between first-level blocks (`block`, plus one of padding).
    block_stride: usize,
    /// [`Self::row`] of every output.
    rows: Vec<u32>,
    /// `re`, `im`: the input, and in place the result.
    work: [Vec<Row>; 2],
    /// [`Self::forward_ci16_lanes`]'s transposed ci16 input of 16 butterflies.
    stage: Vec<Row>,
}

/// Which work buffer holds a result. The transform is in place, so it is always
/// the input's; callers name it so that they read [`BatchFft::buffers`] after a
/// run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    A,
}

impl BatchFft {
    /// Plan `n`-point transforms.
    ///
    /// # Errors
    /// `n` is not a power of two in `4..=2^24`.
    pub fn new(n: usize) -> Result<Self, FftSizeError> {
        if !n.is_power_of_two() || !(4..=1 << 24).contains(&n) {
            return Err(FftSizeError(n));
        }
        let plan = Plan::new(n);
        let first = plan.passes[0].radix;
        let block = n / first;
        let block_stride = if block > 1 { block + 1 } else { block };
        let mut fft = Self {
            n,
            plan,
            block,
            block_stride,
            rows: Vec::new(),
            work: std::array::from_fn(|_| vec![Row::default(); first * block_stride]),
            stage: vec![Row::default(); LANES * LANES],
        };
        fft.rows = (0..n)
            .map(|k| {
                let (mut at, mut rest, mut len) = (0, k, n);
                for p in &fft.plan.passes {
                    len /= p.radix;
                    at += (rest % p.radix) * len;
                    rest /= p.radix;
                }
                fft.physical(at) as u32
            })
            .collect();
        Ok(fft)
    }

    pub fn size(&self) -> usize {
        self.n
    }

    /// The buffer row of logical row `i` (the padding between blocks).
    #[inline]
    fn physical(&self, i: usize) -> usize {
        // `block` is a power of two.
        (i >> self.block.trailing_zeros()) * self.block_stride + (i & (self.block - 1))
    }

    /// The row of the result buffer that holds output `k` (bin or time sample):
    /// `k`'s digits in the passes' radices, reversed.
    #[inline]
    pub(crate) fn row(&self, k: usize) -> usize {
        self.rows[k] as usize
    }

    /// The row of the input buffer that input `t` goes to.
    #[inline]
    pub(crate) fn input_row(&self, t: usize) -> usize {
        self.physical(t)
    }

    /// In-place transform of 16 lanes: `re[t].0[l]`, `im[t].0[l]` is sample `t` of
    /// lane `l` (`n` rows each). `inverse`: the unnormalised inverse transform.
    ///
    /// # Panics
    /// If `re` or `im` does not hold exactly `n` rows (a caller bug).
    pub fn transform(&mut self, isa: Isa, inverse: bool, re: &mut [Row], im: &mut [Row]) {
        assert!(re.len() == self.n && im.len() == self.n, "transform: size");
        for t in 0..self.n {
            let at = self.input_row(t);
            self.work[0][at] = re[t];
            self.work[1][at] = im[t];
        }
        let side = self.run(isa, inverse);
        let (r, i) = self.buffers(side);
        for (k, &at) in self.rows.iter().enumerate() {
            re[k] = r[at as usize];
            im[k] = i[at as usize];
        }
    }

    /// The buffers a transform reads (`re`, `im`).
    pub(crate) fn input_mut(&mut self) -> (&mut [Row], &mut [Row]) {
        let [re, im] = &mut self.work;
        (re, im)
    }

    /// The buffers of `side` (`re`, `im`).
    pub(crate) fn buffers(&self, side: Side) -> (&[Row], &[Row]) {
        match side {
            Side::A => (&self.work[0], &self.work[1]),
        }
    }

    /// Transform what is in [`Self::input_mut`]; returns where the result is.
    pub(crate) fn run(&mut self, isa: Isa, inverse: bool) -> Side {
        let fft = self;
        dispatch_lanes!(isa, fn run(fft: &mut BatchFft, inverse: bool) -> Side => run_lanes)
    }

    /// [`Self::run`] with the lanes of the caller's build.
    #[inline(always)]
    pub(crate) fn run_lanes<V: Lanes>(&mut self, inverse: bool) -> Side {
        if inverse {
            self.passes::<V, true>();
        } else {
            self.passes::<V, false>();
        }
        Side::A
    }

    /// Input rows per block of the first pass where it can skip whole blocks of
    /// zero input ([`Self::run_lanes_skipping`]): `n / 16` where that pass is
    /// radix 16, else `None`.
    pub(crate) fn skippable_block(&self) -> Option<usize> {
        (self.plan.passes[0].radix == 16).then_some(self.block)
    }

    /// [`Self::run_lanes`] with the input blocks of `zero` taken as zero: bit `m`
    /// stands for input rows `m b..(m + 1) b` (`b` = [`Self::skippable_block`]),
    /// whose buffer rows the first pass does not read (they may hold anything).
    /// The result is bit for bit that of zeroed rows. A transmitter's band leaves
    /// whole blocks empty (the 64x16 downlink: 6 of 16), which it then neither
    /// zeroes nor loads.
    ///
    /// # Panics
    /// If `zero` is not 0 and the first pass cannot skip (a caller bug).
    #[inline(always)]
    pub(crate) fn run_lanes_skipping<V: Lanes>(&mut self, inverse: bool, zero: u16) -> Side {
        if zero == 0 {
            return self.run_lanes::<V>(inverse);
        }
        assert!(
            self.skippable_block().is_some(),
            "run_lanes_skipping: the first pass is not radix 16"
        );
        if inverse {
            self.first_pass_skipping::<V, true>(zero);
        } else {
            self.first_pass_skipping::<V, false>(zero);
        }
        Side::A
    }

    /// The radix-16 first pass reading zeros for the blocks of `zero`, then the
    /// others.
    #[inline(always)]
    fn first_pass_skipping<V: Lanes, const INV: bool>(&mut self, zero: u16) {
        let x = self.buf();
        let one = V::Part::splat(std::hint::black_box(1.0));
        let tw = self.plan.twiddles.as_ptr();
        let stride = self.block_stride;
        for j in 0..self.block {
            for lane in (0..LANES).step_by(V::Part::WIDTH) {
                let x = x.lanes_from(lane);
                let input = codelets::Masked {
                    x,
                    base: j,
                    stride,
                    zero,
                };
                // SAFETY: butterfly `j < block` of the radix-16 first pass.
                unsafe { first_pass_butterfly::<V, INV>(&input, x, j, stride, tw, one) };
            }
        }
        self.later_passes::<V, INV>(one, |_| {});
    }

    /// The work buffers as codelet rows.
    #[inline(always)]
    fn buf(&mut self) -> Buf {
        let [re, im] = &mut self.work;
        Buf {
            re: re.as_mut_ptr().cast(),
            im: im.as_mut_ptr().cast(),
        }
    }

    /// Every pass; each butterfly runs on every part of its rows
    /// ([`Lanes::Part`]) before the next.
    #[inline(always)]
    fn passes<V: Lanes, const INV: bool>(&mut self) {
        let x = self.buf();
        // Hidden from the optimiser so that `a - one * b` stays an FMA.
        let one = V::Part::splat(std::hint::black_box(1.0));
        let (first, tw) = (self.plan.passes[0], self.plan.twiddles.as_ptr());
        // SAFETY: the buffers hold `first.radix * block_stride` rows; the first
        // pass touches rows `j + m block_stride` (`j < block`, `m < radix`); its
        // twiddles hold `2 (radix - 1)` values per butterfly.
        unsafe {
            butterflies::<V, INV>(
                first.radix,
                x,
                0,
                self.block,
                self.block_stride,
                tw.add(first.tw),
                one,
            );
        }
        self.later_passes::<V, INV>(one, |_| {});
    }

    /// Forward transform of 16 lanes of ci16 samples, lane `a` being `src[a][..n]`
    /// times `scale` (re and im): what writing them to [`Self::input_mut`] and
    /// [`Self::run`] compute, bit for bit, the result where `run` leaves it,
    /// whichever `order` ([`Ci16Order`]) reads them. `next`: the input of the
    /// caller's next transform, fetched into L2 while this one reads its own with
    /// [`Ci16Order::Fused`] (changes nothing computed).
    ///
    /// # Panics
    /// If `n < 16` or a lane of `src` or `next` holds fewer than `n` samples
    /// (caller bugs).
    #[inline(always)]
    pub(crate) fn forward_ci16_lanes<V: Lanes>(
        &mut self,
        src: &[&[Ci16]; LANES],
        next: Option<&[&[Ci16]; LANES]>,
        scale: f32,
        order: Ci16Order,
    ) {
        let n = self.n;
        assert!(n >= LANES, "forward_ci16_lanes: {n} points");
        let src: [&[Ci16]; LANES] = std::array::from_fn(|a| &src[a][..n]);
        let next: Option<[&[Ci16]; LANES]> = next
            .filter(|_| order == Ci16Order::Fused)
            .map(|s| std::array::from_fn(|a| &s[a][..n]));
        let fetch_next = |t: usize| {
            if let Some(next) = &next {
                prefetch_ci16_rows(next, t);
            }
        };
        let first = self.plan.passes[0];
        if order == Ci16Order::TimeOrder || first.radix != 16 || self.block < LANES {
            for t0 in (0..n).step_by(LANES) {
                fetch_next(t0);
                for (i, row) in load_ci16_rows::<V>(&src, t0).iter().enumerate() {
                    let k = self.input_row(t0 + i);
                    let (re, im) = row.ci16_to_f32(scale);
                    let (xr, xi) = self.input_mut();
                    // SAFETY: a row holds 16 f32.
                    unsafe {
                        re.store(xr[k].0.as_mut_ptr());
                        im.store(xi[k].0.as_mut_ptr());
                    }
                }
            }
            self.passes::<V, false>();
            return;
        }
        let tw = self.plan.twiddles.as_ptr();
        let (block, stride) = (self.block, self.block_stride);
        // Row `16 i + m`: input `m` of butterfly `j0 + i`, as ci16 bits.
        let stage: *mut f32 = self.stage.as_mut_ptr().cast();
        let one = V::Part::splat(std::hint::black_box(1.0));
        for j0 in (0..block).step_by(LANES) {
            for m in 0..16 {
                for (i, row) in load_ci16_rows::<V>(&src, j0 + m * block).iter().enumerate() {
                    // SAFETY: `stage` holds 256 rows.
                    unsafe { row.store(stage.add(16 * (16 * i + m))) };
                }
            }
            for i in 0..LANES {
                let j = j0 + i;
                // Each part of the butterfly's rows in turn.
                for lane in (0..LANES).step_by(V::Part::WIDTH) {
                    let x = self.buf().lanes_from(lane);
                    let input = Staged {
                        rows: stage.wrapping_add(16 * 16 * i + lane),
                        scale,
                    };
                    // SAFETY: butterfly `j < block` of the radix-16 first pass.
                    unsafe { first_pass_butterfly::<V, false>(&input, x, j, stride, tw, one) };
                }
            }
        }
        // The next transform's input is fetched while the later passes run (they
        // read only this transform's buffers), one block's share of its rows
        // before each block. Fetched among this first pass's own loads, as before
        // session 47, the fft stage was 5-9% slower on Zen 5 (docs/BENCHMARKS.md,
        // PHY, session 47).
        self.later_passes::<V, false>(one, |m| {
            for t in (m * block..(m + 1) * block).step_by(LANES) {
                fetch_next(t);
            }
        });
    }

    /// Every pass after the first, block by block, calling `fetch(m)` before
    /// block `m`.
    #[inline(always)]
    fn later_passes<V: Lanes, const INV: bool>(&mut self, one: V::Part, fetch: impl Fn(usize)) {
        let x = self.buf();
        let (passes, tw) = (&self.plan.passes, self.plan.twiddles.as_ptr());
        let first = passes[0];
        // SAFETY: the other passes touch rows inside one block (`Plan::new` makes
        // `len / radix` butterflies of stride `len / radix` per block of `len`,
        // `len` dividing `block`); every pass's twiddles hold `2 (radix - 1)`
        // values per butterfly.
        unsafe {
            for m in 0..first.radix {
                fetch(m);
                let block = m * self.block_stride;
                for p in &passes[1..] {
                    let count = p.len / p.radix;
                    for b in (0..self.block).step_by(p.len) {
                        butterflies::<V, INV>(
                            p.radix,
                            x,
                            block + b,
                            count,
                            count,
                            tw.add(p.tw),
                            one,
                        );
                    }
                }
            }
        }
    }
}

/// Butterfly `j` of a radix-16 first pass with its inputs from `input`: the
/// first (`j = 0`) without twiddles, the others with theirs (30 values each from
/// the plan's twiddles `tw`, the first pass's being at the start).
///
/// # Safety
/// `j < block` of a plan whose first pass is radix 16, `x` its buffers, `stride`
/// its block stride and `tw` its twiddles.
#[inline(always)]
unsafe fn first_pass_butterfly<V: Lanes, const INV: bool>(
    input: &impl codelets::Input<V::Part>,
    x: Buf,
    j: usize,
    stride: usize,
    tw: *const f32,
    one: V::Part,
) {
    // SAFETY: as in `passes`: the first pass touches rows `j + m stride`, and its
    // twiddles hold 30 values per butterfly.
    unsafe {
        if j == 0 {
            codelets::dft16_from::<V::Part, INV, false, 0x3f>(input, x, 0, stride, tw, one);
        } else {
            codelets::dft16_from::<V::Part, INV, true, 0x05>(
                input,
                x,
                j,
                stride,
                tw.add(30 * j),
                one,
            );
        }
    }
}

/// Samples `t..t + 16` of the 16 lanes `src` as rows of ci16 bits (row `i`:
/// sample `t + i` of every lane).
///
/// # Panics
/// If a lane holds fewer than `t + 16` samples.
#[inline(always)]
fn load_ci16_rows<V: Lanes>(src: &[&[Ci16]; LANES], t: usize) -> [V; LANES] {
    let mut rows = [V::zero(); LANES];
    for (row, s) in rows.iter_mut().zip(src) {
        let s = &s[t..t + LANES];
        // SAFETY: `s` holds 16 samples.
        *row = unsafe { V::load_ci16(s.as_ptr()) };
    }
    V::transpose(&mut rows);
    rows
}

/// How [`BatchFft::forward_ci16_lanes`] reads its ci16 input; both give the same
/// bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ci16Order {
    /// Where the first pass is radix 16 on blocks of at least 16 rows (`n >= 256`),
    /// the conversion is fused into it: per 16 butterflies, 16 transposes of 16
    /// samples of the 16 lanes into a 16 KiB staging area that stays in L1, where
    /// writing the f32 input (2 x 128 KiB at 2048 points) and reading it back in
    /// the first pass go through L2. It reads each lane at 256 places 128 samples
    /// apart, which hardware prefetchers do not follow, so the next transform's
    /// input is fetched ahead ([`prefetch_ci16_rows`]). Smaller transforms are
    /// read in time order, still fetching ahead.
    Fused,
    /// Sixteen samples of every lane at a time in time order into the input rows
    /// (16 sequential streams, which hardware prefetchers follow), then the
    /// transform; nothing fetched ahead.
    TimeOrder,
}

impl Ci16Order {
    /// The faster order on this CPU, as measured on the 64x16 uplink's fft stage
    /// (docs/BENCHMARKS.md, PHY): on the AMD Zen 4 VM fetching ahead took 15% off
    /// (session 40); on the Intel AVX-512 VM the stage ran 5-8% faster without it
    /// (session 44, 3% in session 46) and, in time order, about 3-4% faster again
    /// (session 46, 14 of 17 alternated pairs). On the Zen 5 VM the fused order
    /// took 17-27% less time than time order (session 47, 6 of 6 pairs). Other vendors
    /// keep the fused order, as before those measurements.
    pub(crate) fn for_cpu() -> Self {
        if crate::simd::CpuModel::get().intel {
            Self::TimeOrder
        } else {
            Self::Fused
        }
    }
}

/// Ask for the cache lines of samples `t..t + 16` of every lane of `src` (a row
/// may straddle two lines) into L2, where the next transform's input waits: its
/// first pass reads 256 places 128 samples apart per lane, which Zen 4's hardware
/// prefetchers do not follow, so without this its loads waited on memory there (30%
/// of the front end's time in a 64x16 uplink frame's profile, docs/BENCHMARKS.md,
/// PHY, session 40). Run only in [`Ci16Order::Fused`].
///
/// # Panics
/// If a lane holds fewer than `t + 16` samples.
#[inline(always)]
fn prefetch_ci16_rows(src: &[&[Ci16]; LANES], t: usize) {
    for s in src {
        let s = &s[t..t + LANES];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE is baseline on x86-64; a prefetch reads nothing.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
            _mm_prefetch::<_MM_HINT_T1>(s.as_ptr().cast());
            _mm_prefetch::<_MM_HINT_T1>(s[LANES - 1..].as_ptr().cast());
        }
        let _ = s;
    }
}

/// A first-pass butterfly's 16 inputs staged as ci16 bits (rows of 16 lanes,
/// `rows` pointing at the part read), converted as read.
struct Staged {
    rows: *const f32,
    scale: f32,
}

impl<V: Vector> codelets::Input<V> for Staged {
    #[inline(always)]
    unsafe fn at(&self, m: usize) -> codelets::C<V> {
        // SAFETY: the caller's: `rows` holds 16 rows.
        unsafe { V::load(self.rows.add(16 * m)) }.ci16_to_f32(self.scale)
    }
}

/// `count` butterflies of `radix` at rows `base + j + m stride` (`j < count`,
/// `m < radix`), butterfly `j` with twiddles `tw[2 (radix - 1) j..]` (none for
/// `j = 0`, where they are all 1), each on every part of its rows in turn (the
/// rows stay in L1 between the parts).
///
/// The `F` masks (which 4-point DFTs subtract on the FMA pipe) balance the add
/// and FMA pipes of each codelet by its operation counts: a twiddled radix-16
/// codelet has 128 additions and 92 multiplies or FMAs, one without twiddles
/// 128 and 32.
///
/// # Safety
/// Those rows exist and `tw` holds `2 (radix - 1) count` values.
#[inline(always)]
unsafe fn butterflies<V: Lanes, const INV: bool>(
    radix: usize,
    x: Buf,
    base: usize,
    count: usize,
    stride: usize,
    tw: *const f32,
    one: V::Part,
) {
    let parts = (0..LANES).step_by(V::Part::WIDTH);
    // SAFETY: the caller's.
    unsafe {
        match radix {
            16 => {
                for lane in parts.clone() {
                    let x = x.lanes_from(lane);
                    codelets::dft16::<V::Part, INV, false, 0x3f>(x, base, stride, tw, one);
                }
                for j in 1..count {
                    let tw = tw.add(30 * j);
                    for lane in parts.clone() {
                        let x = x.lanes_from(lane);
                        codelets::dft16::<V::Part, INV, true, 0x05>(x, base + j, stride, tw, one);
                    }
                }
            }
            8 => {
                for lane in parts.clone() {
                    let x = x.lanes_from(lane);
                    codelets::dft8::<V::Part, INV, false, 1>(x, base, stride, tw, one);
                }
                for j in 1..count {
                    let tw = tw.add(14 * j);
                    for lane in parts.clone() {
                        let x = x.lanes_from(lane);
                        codelets::dft8::<V::Part, INV, true, 0>(x, base + j, stride, tw, one);
                    }
                }
            }
            _ => {
                for lane in parts.clone() {
                    let x = x.lanes_from(lane);
                    codelets::dft4_at::<V::Part, INV, false>(x, base, stride, tw, one);
                }
                for j in 1..count {
                    let tw = tw.add(6 * j);
                    for lane in parts.clone() {
                        let x = x.lanes_from(lane);
                        codelets::dft4_at::<V::Part, INV, true>(x, base + j, stride, tw, one);
                    }
                }
            }
        }
    }
}

#[inline(always)]
fn run_lanes<V: Lanes>(fft: &mut BatchFft, inverse: bool) -> Side {
    fft.run_lanes::<V>(inverse)
}

#[cfg(test)]
mod tests {
    use super::*;
    use radiohost_iq::{Cf32, Ci16};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use rustfft::FftPlanner;

    fn naive(x: &[Cf32], sign: f64) -> Vec<Cf32> {
        let n = x.len();
        (0..n)
            .map(|k| {
                let (mut re, mut im) = (0f64, 0f64);
                for (t, v) in x.iter().enumerate() {
                    let a = sign * 2.0 * std::f64::consts::PI * ((k * t) % n) as f64 / n as f64;
                    re += v.re as f64 * a.cos() - v.im as f64 * a.sin();
                    im += v.re as f64 * a.sin() + v.im as f64 * a.cos();
                }
                Cf32::new(re as f32, im as f32)
            })
            .collect()
    }

    /// Largest error over all lanes and bins against `want(lane)`, relative to
    /// `sqrt(n) * eps * rms(input)`.
    fn check(n: usize, isa: Isa, inverse: bool, reference: &str) {
        let mut rng = ChaCha8Rng::seed_from_u64(n as u64 + inverse as u64);
        let mut re = vec![Row::default(); n];
        let mut im = vec![Row::default(); n];
        for t in 0..n {
            for l in 0..LANES {
                re[t].0[l] = rng.gen_range(-1.0..1.0);
                im[t].0[l] = rng.gen_range(-1.0..1.0);
            }
        }
        let lane =
            |l: usize| -> Vec<Cf32> { (0..n).map(|t| Cf32::new(re[t].0[l], im[t].0[l])).collect() };
        let want: Vec<Vec<Cf32>> = (0..LANES)
            .map(|l| {
                let x = lane(l);
                if reference == "naive" {
                    naive(&x, if inverse { 1.0 } else { -1.0 })
                } else {
                    let mut planner = FftPlanner::<f32>::new();
                    let f = if inverse {
                        planner.plan_fft_inverse(n)
                    } else {
                        planner.plan_fft_forward(n)
                    };
                    let mut y = x;
                    f.process(&mut y);
                    y
                }
            })
            .collect();
        let mut fft = BatchFft::new(n).unwrap();
        fft.transform(isa, inverse, &mut re, &mut im);
        // Random inputs in [-1, 1): rms 0.58 per component, output rms sqrt(n) * 0.82.
        let tol = 8.0 * (n as f32).sqrt() * (n as f32).log2() * f32::EPSILON;
        for (l, w) in want.iter().enumerate() {
            for (k, v) in w.iter().enumerate() {
                let got = Cf32::new(re[k].0[l], im[k].0[l]);
                assert!(
                    (got - v).norm() <= tol,
                    "n {n} {} inverse {inverse} vs {reference}: lane {l} bin {k}: {got} vs {v} (tol {tol})",
                    isa.name()
                );
            }
        }
    }

    #[test]
    fn matches_naive_dft_every_build() {
        for isa in Isa::available() {
            for n in [4usize, 8, 16, 32, 64, 128, 256, 512] {
                for inverse in [false, true] {
                    check(n, isa, inverse, "naive");
                }
            }
        }
    }

    #[test]
    fn matches_rustfft_every_build() {
        for isa in Isa::available() {
            for n in [256usize, 1024, 2048, 4096, 8192] {
                for inverse in [false, true] {
                    check(n, isa, inverse, "rustfft");
                }
            }
        }
        if Isa::cpu() < Isa::Avx512 {
            println!(
                "SKIPPED: AVX-512 build (this CPU has {})",
                Isa::cpu().name()
            );
        }
    }

    /// The front end's path (write `input_row`, run, read `row`) is the same
    /// transform, and `row` maps the outputs one to one onto buffer rows.
    #[test]
    fn rows_are_a_permutation_and_run_matches_transform() {
        for n in [4usize, 32, 512, 2048] {
            let fft = BatchFft::new(n).unwrap();
            let len = fft.buffers(Side::A).0.len();
            let mut seen = vec![false; len];
            for k in 0..n {
                assert!(
                    !std::mem::replace(&mut seen[fft.row(k)], true),
                    "n {n}: bin {k}"
                );
            }
            let mut seen = vec![false; len];
            for t in 0..n {
                assert!(
                    !std::mem::replace(&mut seen[fft.input_row(t)], true),
                    "n {n}: input {t}"
                );
            }
        }
        for isa in Isa::available() {
            let n = 2048;
            let mut fft = BatchFft::new(n).unwrap();
            let re: Vec<Row> = (0..n)
                .map(|t| Row([(t % 13) as f32 - 6.0; LANES]))
                .collect();
            let im: Vec<Row> = (0..n)
                .map(|t| Row([(t % 11) as f32 - 5.0; LANES]))
                .collect();
            let at: Vec<usize> = (0..n).map(|t| fft.input_row(t)).collect();
            let (xr, xi) = fft.input_mut();
            for t in 0..n {
                xr[at[t]] = re[t];
                xi[at[t]] = im[t];
            }
            let side = fft.run(isa, true);
            let (mut wr, mut wi) = (re.clone(), im.clone());
            BatchFft::new(n)
                .unwrap()
                .transform(isa, true, &mut wr, &mut wi);
            let (fr, fi) = fft.buffers(side);
            for k in 0..n {
                assert_eq!(fr[fft.row(k)], wr[k], "{} bin {k}", isa.name());
                assert_eq!(fi[fft.row(k)], wi[k], "{} bin {k}", isa.name());
            }
        }
    }

    #[inline(always)]
    fn forward_ci16<V: Lanes>(fft: &mut BatchFft, src: &[&[Ci16]; LANES], order: Ci16Order) {
        fft.forward_ci16_lanes::<V>(src, Some(src), 0.5, order);
    }

    /// The ci16 entry in either order (fused into the first pass from 256 points,
    /// or rows in time order then `run`) is writing the converted samples and
    /// `run`, bit for bit.
    #[test]
    fn ci16_input_is_converted_rows_bit_for_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for (n, order) in [16usize, 64, 256, 2048]
            .into_iter()
            .flat_map(|n| [(n, Ci16Order::Fused), (n, Ci16Order::TimeOrder)])
        {
            let lanes: Vec<Vec<Ci16>> = (0..LANES)
                .map(|_| (0..n).map(|_| Ci16::new(rng.gen(), rng.gen())).collect())
                .collect();
            let src: [&[Ci16]; LANES] = std::array::from_fn(|a| &lanes[a][..]);
            for isa in Isa::available() {
                let mut want = BatchFft::new(n).unwrap();
                let at: Vec<usize> = (0..n).map(|t| want.input_row(t)).collect();
                let (xr, xi) = want.input_mut();
                for t in 0..n {
                    for (l, lane) in lanes.iter().enumerate() {
                        xr[at[t]].0[l] = lane[t].re as f32 * 0.5;
                        xi[at[t]].0[l] = lane[t].im as f32 * 0.5;
                    }
                }
                let side = want.run(isa, false);
                let mut got = BatchFft::new(n).unwrap();
                let fft = &mut got;
                let src = &src;
                dispatch_lanes!(isa, fn f(fft: &mut BatchFft, src: &[&[Ci16]; LANES], order: Ci16Order) => forward_ci16);
                for k in 0..n {
                    let (r, i) = (got.row(k), want.row(k));
                    assert_eq!(
                        got.buffers(side).0[r],
                        want.buffers(side).0[i],
                        "n {n} {} bin {k}",
                        isa.name()
                    );
                    assert_eq!(
                        got.buffers(side).1[r],
                        want.buffers(side).1[i],
                        "n {n} {} bin {k}",
                        isa.name()
                    );
                }
            }
        }
    }

    #[inline(always)]
    fn skipping<V: Lanes>(fft: &mut BatchFft, inverse: bool, zero: u16) -> Side {
        fft.run_lanes_skipping::<V>(inverse, zero)
    }

    /// Skipped input blocks give bit for bit the result of zeroed ones, whatever
    /// their rows held; other sizes cannot skip and refuse a mask.
    #[test]
    fn skipped_blocks_are_zero_blocks_bit_for_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for n in [256usize, 2048] {
            let b = BatchFft::new(n)
                .unwrap()
                .skippable_block()
                .expect("radix 16");
            assert_eq!(b, n / 16);
            // Blocks 0, 5 to 10 and 15: both ends and a run in the middle.
            let zero: u16 = 0b1000_0111_1110_0001;
            for isa in Isa::available() {
                for inverse in [false, true] {
                    let mut want = BatchFft::new(n).unwrap();
                    let mut got = BatchFft::new(n).unwrap();
                    for t in 0..n {
                        let skipped = zero & 1 << (t / b) != 0;
                        let value = Row(std::array::from_fn(|_| rng.gen_range(-1.0..1.0)));
                        let row = want.input_row(t);
                        let (wr, wi) = want.input_mut();
                        (wr[row], wi[row]) = match skipped {
                            true => (Row::default(), Row::default()),
                            false => (value, Row([0.25; LANES])),
                        };
                        let (gr, gi) = got.input_mut();
                        (gr[row], gi[row]) = match skipped {
                            true => (Row([f32::NAN; LANES]), Row([1e30; LANES])),
                            false => (value, Row([0.25; LANES])),
                        };
                    }
                    let side = want.run(isa, inverse);
                    let fft = &mut got;
                    dispatch_lanes!(isa, fn f(fft: &mut BatchFft, inverse: bool, zero: u16) -> Side => skipping);
                    let what = format!("n {n} {} inverse {inverse}", isa.name());
                    assert_eq!(got.buffers(side).0, want.buffers(side).0, "{what}");
                    assert_eq!(got.buffers(side).1, want.buffers(side).1, "{what}");
                }
            }
        }
        // 32 points: a radix-8 first pass.
        assert_eq!(BatchFft::new(32).unwrap().skippable_block(), None);
    }

    #[test]
    fn refuses_other_sizes() {
        for n in [0usize, 1, 2, 3, 12, 300, 1 << 25] {
            assert_eq!(BatchFft::new(n).unwrap_err(), FftSizeError(n));
        }
        let msg = BatchFft::new(300).unwrap_err().to_string();
        assert!(msg.contains("power-of-two") && msg.contains("300"), "{msg}");
    }
}
