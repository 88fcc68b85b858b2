//! Uniformly partitioned overlap-save (UPOLS) convolution, SISO and MIMO, with
//! glitch-free response replacement.
//!
//! Each block of `B` new samples per input is appended to the previous block, the 2B
//! samples are transformed once, and the spectrum enters a frequency-domain delay line
//! (FDL) of `P = ceil(L / B)` slots. Output port `n` is
//! `IFFT( sum_m sum_k X_m[t - k] * H_nm[k] )`, whose last `B` samples are the linear
//! convolution for this block (`H_nm[k]` is the spectrum of taps `kB .. kB+B` padded to
//! 2B). Cost per block: M forward FFTs, N inverse FFTs and M*N*P complex MACs of 2B bins.

use radiohost_iq::Cf32;

use crate::fft::FftPair;
use crate::split::{split_of, split_of_mut, MacKernel};
use crate::taps::{check_ports, MimoTaps};
use crate::DspError;

/// Largest block length accepted.
pub const MAX_BLOCK: usize = 1 << 16;

/// How a new set of impulse responses takes over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapMode {
    /// Partition `k` switches at block `t0 + k`: every input block is filtered wholly by
    /// the old or wholly by the new response, so the output is exactly
    /// `old * x(before t0) + new * x(from t0)`. Takes `P` blocks. Overlap-save spectra
    /// also hold the previous block, so at block `t0 + k` partition `k` would filter the
    /// tail of `x(t0 - 1)` with the new response; one extra FFT of `[x(t0 - 1), 0]` at
    /// `t0` and one correction MAC per block, `Z (H_old[k] - H_new[k])`, make it exact.
    Staggered,
    /// For `blocks` blocks the output is both responses' outputs mixed with a linear
    /// ramp from old to new (costs a second set of MACs and inverse FFTs meanwhile).
    Crossfade {
        /// Length of the ramp in blocks (at least 1).
        blocks: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transition {
    Idle,
    /// Partitions `0..=step` use the new response in the next block.
    Staggered {
        step: usize,
    },
    /// Next block is number `done` of `blocks` in the ramp.
    Crossfade {
        done: usize,
        blocks: usize,
    },
}

/// Frequency-domain partitions of an M x N response set, ready for the MAC.
#[derive(Debug, Clone)]
pub struct ResponseSpectra {
    inputs: usize,
    outputs: usize,
    block: usize,
    partitions: usize,
    /// `[n][m][k]` each `[re (2B) | im (2B)]`, scaled by `1 / 2B`.
    data: Vec<f32>,
}

impl ResponseSpectra {
    fn zeroed(inputs: usize, outputs: usize, block: usize, partitions: usize) -> Self {
        Self {
            inputs,
            outputs,
            block,
            partitions,
            data: vec![0.0; inputs * outputs * partitions * 4 * block],
        }
    }

    fn slot(&self, output: usize, input: usize, k: usize) -> &[f32] {
        let len = 4 * self.block;
        let i = ((output * self.inputs + input) * self.partitions + k) * len;
        &self.data[i..i + len]
    }

    /// Shape `(inputs, outputs, block, partitions)`.
    pub fn shape(&self) -> (usize, usize, usize, usize) {
        (self.inputs, self.outputs, self.block, self.partitions)
    }
}

/// Turns impulse responses into [`ResponseSpectra`] of one convolver shape. Cloneable
/// so another thread can prepare the next response while the convolver runs.
#[derive(Debug, Clone)]
pub struct ResponsePlanner {
    inputs: usize,
    outputs: usize,
    block: usize,
    partitions: usize,
    fft: FftPair,
    kernel: MacKernel,
    scratch: Vec<Cf32>,
    work: Vec<Cf32>,
}

impl ResponsePlanner {
    /// Longest response (in taps) this shape holds.
    pub fn capacity(&self) -> usize {
        self.partitions * self.block
    }

    /// Computes fresh spectra (allocates the result).
    pub fn prepare(&mut self, taps: &MimoTaps) -> Result<ResponseSpectra, DspError> {
        let mut spectra =
            ResponseSpectra::zeroed(self.inputs, self.outputs, self.block, self.partitions);
        self.prepare_into(taps, &mut spectra)?;
        Ok(spectra)
    }

    /// Recomputes `spectra` in place; allocation-free.
    pub fn prepare_into(
        &mut self,
        taps: &MimoTaps,
        spectra: &mut ResponseSpectra,
    ) -> Result<(), DspError> {
        if (taps.inputs(), taps.outputs()) != (self.inputs, self.outputs) {
            return Err(DspError::ShapeMismatch {
                expected: (self.inputs, self.outputs),
                got: (taps.inputs(), taps.outputs()),
            });
        }
        if spectra.shape() != (self.inputs, self.outputs, self.block, self.partitions) {
            return Err(DspError::SpectraShape);
        }
        if taps.max_len() > self.capacity() {
            return Err(DspError::ResponseTooLong {
                len: taps.max_len(),
                capacity: self.capacity(),
            });
        }
        let b = self.block;
        let scale = 1.0 / (2 * b) as f32;
        let slot_len = 4 * b;
        for n in 0..self.outputs {
            for m in 0..self.inputs {
                let h = taps.path(n, m);
                for k in 0..self.partitions {
                    let start = (k * b).min(h.len());
                    let end = ((k + 1) * b).min(h.len());
                    self.work.fill(Cf32::new(0.0, 0.0));
                    for (w, t) in self.work.iter_mut().zip(&h[start..end]) {
                        *w = t * scale;
                    }
                    self.fft.forward(&mut self.work, &mut self.scratch);
                    let i = ((n * self.inputs + m) * self.partitions + k) * slot_len;
                    let dst = split_of_mut(&mut spectra.data[i..i + slot_len]);
                    self.kernel.deinterleave(&self.work, dst.re, dst.im);
                }
            }
        }
        Ok(())
    }
}

/// An M-input, N-output UPOLS convolver with a fixed block length.
#[derive(Debug, Clone)]
pub struct MimoConvolver {
    inputs: usize,
    outputs: usize,
    block: usize,
    partitions: usize,
    planner: ResponsePlanner,
    kernel: MacKernel,
    fft: FftPair,
    scratch: Vec<Cf32>,
    /// 2B time/frequency work buffers (two for crossfade).
    work: Vec<Cf32>,
    work_new: Vec<Cf32>,
    /// Previous block of each input, `[m][B]`.
    history: Vec<Cf32>,
    /// FDL, `[m][slot]` each `[re (2B) | im (2B)]`.
    fdl: Vec<f32>,
    /// Slot of the newest spectrum.
    head: usize,
    /// Spectra of `[x(t0 - 1), 0]` per input for the staggered swap, `[m][re | im]`.
    boundary: Vec<f32>,
    /// MAC accumulators `[re | im]`.
    acc: Vec<f32>,
    acc_new: Vec<f32>,
    active: ResponseSpectra,
    pending: ResponseSpectra,
    transition: Transition,
}

impl MimoConvolver {
    /// A convolver for `taps` (`taps.inputs()` x `taps.outputs()`), sized for responses up
    /// to `taps.max_len()` long.
    pub fn new(block: usize, taps: &MimoTaps) -> Result<Self, DspError> {
        Self::with_capacity(block, taps.max_len(), taps)
    }

    /// As [`Self::new`], but sized for responses up to `max_taps` long, so later swaps may
    /// bring longer responses than the first.
    pub fn with_capacity(block: usize, max_taps: usize, taps: &MimoTaps) -> Result<Self, DspError> {
        let (inputs, outputs) = (taps.inputs(), taps.outputs());
        check_ports(inputs, outputs)?;
        if block == 0 || block > MAX_BLOCK {
            return Err(DspError::Block {
                block,
                max: MAX_BLOCK,
            });
        }
        let max_taps = max_taps.max(taps.max_len());
        if max_taps > crate::taps::MAX_TAPS {
            return Err(DspError::ResponseTooLong {
                len: max_taps,
                capacity: crate::taps::MAX_TAPS,
            });
        }
        let partitions = max_taps.div_ceil(block);
        let fft = FftPair::new(2 * block);
        let kernel = MacKernel::detect();
        let mut planner = ResponsePlanner {
            inputs,
            outputs,
            block,
            partitions,
            fft: fft.clone(),
            kernel,
            scratch: fft.make_scratch(),
            work: vec![Cf32::new(0.0, 0.0); 2 * block],
        };
        let active = planner.prepare(taps)?;
        let pending = active.clone();
        Ok(Self {
            inputs,
            outputs,
            block,
            partitions,
            planner,
            kernel,
            scratch: fft.make_scratch(),
            fft,
            work: vec![Cf32::new(0.0, 0.0); 2 * block],
            work_new: vec![Cf32::new(0.0, 0.0); 2 * block],
            history: vec![Cf32::new(0.0, 0.0); inputs * block],
            fdl: vec![0.0; inputs * partitions * 4 * block],
            boundary: vec![0.0; inputs * 4 * block],
            head: 0,
            acc: vec![0.0; 4 * block],
            acc_new: vec![0.0; 4 * block],
            active,
            pending,
            transition: Transition::Idle,
        })
    }

    /// Forces the scalar MAC kernels (for comparisons; results agree within rounding).
    pub fn set_kernel(&mut self, kernel: MacKernel) {
        self.kernel = kernel;
        self.planner.kernel = kernel;
    }

    /// The MAC kernel in use.
    pub fn kernel(&self) -> MacKernel {
        self.kernel
    }

    /// Number of input ports (M).
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Number of output ports (N).
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// Block length B.
    pub fn block(&self) -> usize {
        self.block
    }

    /// Number of partitions P.
    pub fn partitions(&self) -> usize {
        self.partitions
    }

    /// A planner for this shape (clone it into another thread to prepare responses).
    pub fn response_planner(&self) -> ResponsePlanner {
        self.planner.clone()
    }

    /// True while a swap is still taking over.
    pub fn is_swapping(&self) -> bool {
        self.transition != Transition::Idle
    }

    /// Clears the signal history (the responses stay).
    pub fn reset(&mut self) {
        self.history.fill(Cf32::new(0.0, 0.0));
        self.fdl.fill(0.0);
    }

    /// Computes the spectra of `taps` and starts replacing the active responses with them
    /// from the next block. Allocation-free; costs M*N*P forward FFTs now.
    pub fn swap_responses(&mut self, taps: &MimoTaps, mode: SwapMode) -> Result<(), DspError> {
        self.check_swap(mode)?;
        self.planner.prepare_into(taps, &mut self.pending)?;
        self.start(mode);
        Ok(())
    }

    /// Starts replacing the active responses with spectra prepared elsewhere (see
    /// [`Self::response_planner`]). Returns the spectra buffer it no longer needs, for
    /// reuse. Allocation-free and O(1).
    pub fn swap_prepared(
        &mut self,
        spectra: ResponseSpectra,
        mode: SwapMode,
    ) -> Result<ResponseSpectra, DspError> {
        self.check_swap(mode)?;
        if spectra.shape() != self.active.shape() {
            return Err(DspError::SpectraShape);
        }
        let old = std::mem::replace(&mut self.pending, spectra);
        self.start(mode);
        Ok(old)
    }

    fn check_swap(&self, mode: SwapMode) -> Result<(), DspError> {
        if self.is_swapping() {
            return Err(DspError::SwapInProgress);
        }
        if mode == (SwapMode::Crossfade { blocks: 0 }) {
            return Err(DspError::CrossfadeLength);
        }
        Ok(())
    }

    fn start(&mut self, mode: SwapMode) {
        self.transition = match mode {
            SwapMode::Staggered => Transition::Staggered { step: 0 },
            SwapMode::Crossfade { blocks } => Transition::Crossfade { done: 0, blocks },
        };
    }

    /// SISO convenience: one block in, one block out.
    pub fn process(&mut self, input: &[Cf32], output: &mut [Cf32]) -> Result<(), DspError> {
        self.process_block(&[input], &mut [output])
    }

    /// Filters one block: `inputs[m]` and `outputs[n]` are each exactly B samples.
    /// Allocation-free.
    pub fn process_block(
        &mut self,
        inputs: &[&[Cf32]],
        outputs: &mut [&mut [Cf32]],
    ) -> Result<(), DspError> {
        if inputs.len() != self.inputs || outputs.len() != self.outputs {
            return Err(DspError::ShapeMismatch {
                expected: (self.inputs, self.outputs),
                got: (inputs.len(), outputs.len()),
            });
        }
        let b = self.block;
        if let Some(bad) = inputs
            .iter()
            .map(|s| s.len())
            .chain(outputs.iter().map(|s| s.len()))
            .find(|&l| l != b)
        {
            return Err(DspError::BlockLength {
                expected: b,
                got: bad,
            });
        }
        self.push_inputs(inputs);
        for (n, out) in outputs.iter_mut().enumerate() {
            match self.transition {
                Transition::Idle => {
                    self.accumulate(n, None);
                    self.inverse_into(out, false);
                }
                Transition::Staggered { step } => {
                    self.accumulate(n, Some(step));
                    self.inverse_into(out, false);
                }
                Transition::Crossfade { done, blocks } => {
                    self.accumulate(n, None);
                    self.inverse_into(out, false);
                    self.accumulate(n, Some(usize::MAX));
                    self.inverse_into(out, true);
                    let total = (blocks * b) as f32;
                    for (i, y) in out.iter_mut().enumerate() {
                        let w = (done * b + i + 1) as f32 / total;
                        let new = self.work_new[b + i];
                        *y = *y * (1.0 - w) + new * w;
                    }
                }
            }
        }
        self.advance_transition();
        Ok(())
    }

    /// Transforms each input's `[previous | current]` block into the newest FDL slot.
    fn push_inputs(&mut self, inputs: &[&[Cf32]]) {
        let b = self.block;
        let slot_len = 4 * b;
        self.head = (self.head + 1) % self.partitions;
        let swap_starts = self.transition == Transition::Staggered { step: 0 };
        for (m, input) in inputs.iter().enumerate() {
            let hist = &mut self.history[m * b..(m + 1) * b];
            if swap_starts {
                self.work[..b].copy_from_slice(hist);
                self.work[b..].fill(Cf32::new(0.0, 0.0));
                self.fft.forward(&mut self.work, &mut self.scratch);
                let dst = split_of_mut(&mut self.boundary[m * slot_len..(m + 1) * slot_len]);
                self.kernel.deinterleave(&self.work, dst.re, dst.im);
            }
            self.work[..b].copy_from_slice(hist);
            self.work[b..].copy_from_slice(input);
            hist.copy_from_slice(input);
            self.fft.forward(&mut self.work, &mut self.scratch);
            let i = (m * self.partitions + self.head) * slot_len;
            let dst = split_of_mut(&mut self.fdl[i..i + slot_len]);
            self.kernel.deinterleave(&self.work, dst.re, dst.im);
        }
    }

    /// MACs output `n` into `acc` (or `acc_new` when `new_upto` is `usize::MAX`).
    /// Partitions `k <= new_upto` use the pending response, the rest the active one.
    fn accumulate(&mut self, n: usize, new_upto: Option<usize>) {
        let slot_len = 4 * self.block;
        let p = self.partitions;
        let into_new = new_upto == Some(usize::MAX);
        let acc = if into_new {
            &mut self.acc_new
        } else {
            &mut self.acc
        };
        let mut first = true;
        for m in 0..self.inputs {
            for k in 0..p {
                let slot = (self.head + p - k) % p;
                let xi = (m * p + slot) * slot_len;
                let x = split_of(&self.fdl[xi..xi + slot_len]);
                let use_new = new_upto.is_some_and(|s| k <= s);
                let spectra = if use_new { &self.pending } else { &self.active };
                let h = split_of(spectra.slot(n, m, k));
                let a = split_of_mut(acc);
                if first {
                    self.kernel.mul(a, x, h);
                    first = false;
                } else {
                    self.kernel.mac(a, x, h);
                }
            }
            if let Some(step) = new_upto.filter(|&s| s < p) {
                // Partition `step` just switched: the x(t0 - 1) half of its input still
                // belongs to the old response.
                let z = split_of(&self.boundary[m * slot_len..(m + 1) * slot_len]);
                let old = split_of(self.active.slot(n, m, step));
                let new = split_of(self.pending.slot(n, m, step));
                self.kernel.mac_diff(split_of_mut(acc), z, old, new);
            }
        }
    }

    /// Inverse-transforms `acc` (or `acc_new`) and writes the valid half to `out`
    /// (or leaves it in `work_new`).
    fn inverse_into(&mut self, out: &mut [Cf32], from_new: bool) {
        let b = self.block;
        if from_new {
            let a = split_of(&self.acc_new);
            self.kernel.interleave(a.re, a.im, &mut self.work_new);
            self.fft.inverse(&mut self.work_new, &mut self.scratch);
        } else {
            let a = split_of(&self.acc);
            self.kernel.interleave(a.re, a.im, &mut self.work);
            self.fft.inverse(&mut self.work, &mut self.scratch);
            out.copy_from_slice(&self.work[b..]);
        }
    }

    fn advance_transition(&mut self) {
        self.transition = match self.transition {
            Transition::Idle => Transition::Idle,
            Transition::Staggered { step } if step + 1 < self.partitions => {
                Transition::Staggered { step: step + 1 }
            }
            Transition::Crossfade { done, blocks } if done + 1 < blocks => Transition::Crossfade {
                done: done + 1,
                blocks,
            },
            Transition::Staggered { .. } | Transition::Crossfade { .. } => {
                std::mem::swap(&mut self.active, &mut self.pending);
                Transition::Idle
            }
        };
    }
}
