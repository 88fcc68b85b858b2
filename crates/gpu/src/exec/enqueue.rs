//! Enqueueing one instruction: the kernel launches and copies of each opcode, with
//! raw device addresses (base + offset of the instruction's data) as arguments.

use std::sync::Arc;

use cudarc::driver::{result, CudaStream, LaunchConfig, PushKernelArg};
use radiohost_station::isa::{Instr, Opcode};

use super::{FrameSlot, GpuExecutor};
use crate::describe::{
    csi_ctas, fft_threads, ldpc_threads, zf_smem, CSI_THREADS, ELEMENTWISE_THREADS,
};
use crate::ldpc_graph::tx_segments;
use crate::GpuError;

impl GpuExecutor {
    fn run(
        &self,
        stream: &Arc<CudaStream>,
        kernel: &'static str,
        grid: u32,
        threads: u32,
        smem: u32,
        args: &[&dyn KernelArg],
    ) -> Result<(), GpuError> {
        let k = self.dev.kernel(kernel)?;
        let mut b = stream.launch_builder(&k.function);
        for a in args {
            a.push(&mut b);
        }
        let cfg = LaunchConfig {
            grid_dim: (grid.max(1), 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: smem,
        };
        // SAFETY: argument lists match the kernel signatures in kernels/*.cu, and
        // every address points into a live allocation sized by FrameLayout.
        unsafe { b.launch(cfg) }
            .map(|_| ())
            .map_err(|e| GpuError::cuda(self.dev.ordinal(), kernel, e))
    }

    pub(super) fn enqueue(
        &self,
        fs: &FrameSlot,
        instr: &Instr,
        idx: usize,
        st: &Arc<CudaStream>,
    ) -> Result<(), GpuError> {
        let l = &self.layout;
        let c = &self.consts;
        let o = self.dev.ordinal();
        let (m, k, d) = (l.antennas as i32, l.users as i32, l.data_num as i32);
        let (mu, ku, du) = (l.antennas, l.users, l.data_num);
        let sym = instr.symbol as usize;
        let part = instr.part as usize;
        let n = l.fft_size as i32;
        let fft = fft_threads(l.fft_size);
        let fft_smem = (l.fft_size * 8) as u32;
        let blocks = l.blocks_per_symbol;
        let zc = self.graph.zc as i32;
        let cols = self.graph.bg.cols() as i32;
        let ldpc_smem = (self.graph.bg.cols() * self.graph.zc) as u32;
        let (seg1_end, seg2_start) = tx_segments(&self.code_params());
        match instr.opcode {
            Opcode::Load => {
                for a in 0..mu {
                    let off = 2 * (a * l.frame_len + sym * l.symbol_len);
                    let len = 2 * l.symbol_len;
                    let host = fs
                        .rx_host
                        .as_ptr()
                        .map_err(|e| GpuError::cuda(o, "staging", e))?;
                    // SAFETY: the range lies inside the pinned buffer, which outlives
                    // the executor's queued work (Drop synchronises).
                    let src = unsafe { std::slice::from_raw_parts(host.add(off), len) };
                    unsafe { result::memcpy_htod_async(fs.rx.at(off), src, st.cu_stream()) }
                        .map_err(|e| GpuError::cuda(o, "load copy", e))?;
                }
            }
            Opcode::PilotFft | Opcode::UpFft => {
                let (out, null) = if instr.opcode == Opcode::PilotFft {
                    (
                        fs.pilot_freq.at(2 * idx * mu * du),
                        fs.pilot_null.at(idx * mu),
                    )
                } else {
                    (fs.up_freq.at(2 * idx * mu * du), fs.up_null.at(idx * mu))
                };
                self.run(
                    st,
                    "ofdm_rx",
                    m as u32,
                    fft,
                    fft_smem,
                    &[
                        &fs.rx.ptr,
                        &(l.frame_len as i32),
                        &(sym as i32),
                        &(l.symbol_len as i32),
                        &(l.cp_len as i32),
                        &n,
                        &(l.log_fft as i32),
                        &(l.data_start as i32),
                        &d,
                        &out,
                        &null,
                    ],
                )?;
            }
            Opcode::Zf => {
                let r = l.part(part);
                let (i0, len) = (r.start as i32, r.len() as i32);
                let np = l.pilots.len() as i32;
                let ctas = csi_ctas(r.len(), ku, mu);
                self.run(
                    st,
                    "csi_estimate",
                    ctas,
                    CSI_THREADS,
                    0,
                    &[
                        &fs.pilot_freq.ptr,
                        &c.pilots.ptr,
                        &np,
                        &l.pilot_layout,
                        &m,
                        &k,
                        &d,
                        &i0,
                        &len,
                        &fs.csi.ptr,
                    ],
                )?;
                let n_null = np * m;
                let inv_bins = 1.0f32 / (n_null as f32 * (l.fft_size - l.data_num).max(1) as f32);
                self.run(
                    st,
                    "zf_detect",
                    len as u32,
                    256,
                    zf_smem(ku),
                    &[
                        &fs.csi.ptr,
                        &m,
                        &k,
                        &i0,
                        &fs.w.ptr,
                        &fs.noise_gain.ptr,
                        &fs.zf_status.ptr,
                        &fs.pilot_null.ptr,
                        &n_null,
                        &inv_bins,
                        &fs.noise.ptr,
                    ],
                )?;
            }
            Opcode::EqDemod => {
                let r = l.part(part);
                let (i0, len) = (r.start as i32, r.len() as i32);
                let y = fs.up_freq.at(2 * idx * mu * du);
                let seq = c.scramble.at(idx * ku * l.seq_words);
                let llr = fs.llr.at(idx * ku * l.symbol_bits);
                let ctas = (r.len() * ku).div_ceil(ELEMENTWISE_THREADS as usize) as u32;
                self.run(
                    st,
                    "eq_demod",
                    ctas,
                    ELEMENTWISE_THREADS,
                    0,
                    &[
                        &y,
                        &fs.w.ptr,
                        &fs.noise_gain.ptr,
                        &fs.noise.ptr,
                        &m,
                        &k,
                        &d,
                        &i0,
                        &len,
                        &c.levels.ptr,
                        &(l.bits_per_axis as i32),
                        &seq,
                        &(l.seq_words as i32),
                        &((blocks * l.tx_bits) as i32),
                        &llr,
                        &(l.symbol_bits as i32),
                    ],
                )?;
            }
            Opcode::Decode => {
                let c2v_stride = self.graph.edges() * self.graph.zc;
                let p = self.code_params();
                // One launch per user of the group (`part` is the group).
                for user in l.groups[part].clone() {
                    let first_block = (idx * ku + user) * blocks;
                    let llr = fs.llr.at((idx * ku + user) * l.symbol_bits);
                    self.run(
                        st,
                        "ldpc_decode",
                        blocks as u32,
                        ldpc_threads(self.graph.zc),
                        ldpc_smem,
                        &[
                            &llr,
                            &c.e_col.ptr,
                            &c.e_shift.ptr,
                            &c.row_start.ptr,
                            &(self.graph.rows as i32),
                            &zc,
                            &cols,
                            &(p.payload_bits as i32),
                            &(p.fillers() as i32),
                            &(p.tx_bits as i32),
                            &(seg1_end as i32),
                            &(seg2_start as i32),
                            &self.llr_scale,
                            &self.correction.0,
                            &self.correction.1,
                            &self.max_iterations,
                            &1i32,
                            &fs.c2v.at(first_block * c2v_stride),
                            &(c2v_stride as i32),
                            &fs.dec_bits.at(first_block * l.block_bits),
                            &fs.dec_status.at(first_block),
                        ],
                    )?;
                }
            }
            Opcode::Encode => {
                let j = idx - 1;
                let len = blocks * l.block_bits;
                let host = fs
                    .dl_payload_host
                    .as_ptr()
                    .map_err(|e| GpuError::cuda(o, "staging", e))?;
                let steps = self.graph.steps.col.len() as i32;
                // One launch per user of the group (`part` is the group).
                for user in l.groups[part].clone() {
                    let first = (j * ku + user) * blocks * l.block_bits;
                    // SAFETY: in bounds of the pinned buffer (see Load).
                    let src = unsafe { std::slice::from_raw_parts(host.add(first), len) };
                    unsafe {
                        result::memcpy_htod_async(fs.dl_payload.at(first), src, st.cu_stream())
                    }
                    .map_err(|e| GpuError::cuda(o, "payload copy", e))?;
                    self.run(
                        st,
                        "ldpc_encode",
                        blocks as u32,
                        ldpc_threads(self.graph.zc),
                        ldpc_smem,
                        &[
                            &fs.dl_payload.at(first),
                            &(l.block_bits as i32),
                            &c.st_col.ptr,
                            &c.st_shift.ptr,
                            &c.st_entry_start.ptr,
                            &c.st_entry_col.ptr,
                            &c.st_entry_shift.ptr,
                            &steps,
                            &zc,
                            &cols,
                            &(l.tx_bits as i32),
                            &(seg1_end as i32),
                            &(seg2_start as i32),
                            &c.scramble.at((j * ku + user) * l.seq_words),
                            &(l.symbol_bits as i32),
                            &fs.dl_bits.at((j * ku + user) * l.symbol_bits),
                        ],
                    )?;
                    // The QAM mapping of the coded bits, on the same stream.
                    let ctas = du.div_ceil(ELEMENTWISE_THREADS as usize) as u32;
                    self.run(
                        st,
                        "modulate",
                        ctas,
                        ELEMENTWISE_THREADS,
                        0,
                        &[
                            &fs.dl_bits.at((j * ku + user) * l.symbol_bits),
                            &(l.symbol_bits as i32),
                            &1i32,
                            &d,
                            &c.levels.ptr,
                            &(l.bits_per_axis as i32),
                            &fs.dl_qam.at(2 * (idx * ku + user) * du),
                        ],
                    )?;
                }
            }
            Opcode::Precode => {
                let r = l.part(part);
                let (i0, len) = (r.start as i32, r.len() as i32);
                let ctas = (r.len() * mu).div_ceil(ELEMENTWISE_THREADS as usize) as u32;
                self.run(
                    st,
                    "precode",
                    ctas,
                    ELEMENTWISE_THREADS,
                    0,
                    &[
                        &fs.dl_qam.at(2 * idx * ku * du),
                        &fs.w.ptr,
                        &m,
                        &k,
                        &d,
                        &i0,
                        &len,
                        &self.precode_gain,
                        &fs.dl_ant.at(2 * idx * mu * du),
                    ],
                )?;
            }
            Opcode::Ifft => {
                let gain = self.tx_gain / (l.fft_size as f32).sqrt();
                self.run(
                    st,
                    "ofdm_tx",
                    m as u32,
                    fft,
                    fft_smem,
                    &[
                        &fs.dl_ant.at(2 * idx * mu * du),
                        &n,
                        &(l.log_fft as i32),
                        &(l.data_start as i32),
                        &d,
                        &gain,
                        &fs.tx.ptr,
                        &(l.frame_len as i32),
                        &(sym as i32),
                        &(l.symbol_len as i32),
                        &(l.cp_len as i32),
                    ],
                )?;
            }
            Opcode::Store => self.store(fs, sym, st)?,
        }
        Ok(())
    }

    /// Uplink (a symbol that is not downlink): decoded bits, block and ZF status to the
    /// host. Downlink symbol: its time samples to the host.
    fn store(&self, fs: &FrameSlot, sym: usize, st: &Arc<CudaStream>) -> Result<(), GpuError> {
        let l = &self.layout;
        let o = self.dev.ordinal();
        let err = |e| GpuError::cuda(o, "store copy", e);
        // SAFETY (all copies): destination ranges lie inside pinned buffers that outlive
        // the queued copies (Drop synchronises); sources are live device allocations.
        if l.downlink_slot(sym).is_some() {
            let host = fs.tx_host.as_ptr().map_err(err)? as *mut i16;
            for a in 0..l.antennas {
                let off = 2 * (a * l.frame_len + sym * l.symbol_len);
                let dst =
                    unsafe { std::slice::from_raw_parts_mut(host.add(off), 2 * l.symbol_len) };
                unsafe { result::memcpy_dtoh_async(dst, fs.tx.at(off), st.cu_stream()) }
                    .map_err(err)?;
            }
        } else {
            let n = fs.dec_bits_host.len();
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    fs.dec_bits_host.as_ptr().map_err(err)? as *mut u8,
                    n,
                )
            };
            unsafe { result::memcpy_dtoh_async(dst, fs.dec_bits.ptr, st.cu_stream()) }
                .map_err(err)?;
            let n = fs.dec_status_host.len();
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    fs.dec_status_host.as_ptr().map_err(err)? as *mut i32,
                    n,
                )
            };
            unsafe { result::memcpy_dtoh_async(dst, fs.dec_status.ptr, st.cu_stream()) }
                .map_err(err)?;
            let n = fs.zf_status_host.len();
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    fs.zf_status_host.as_ptr().map_err(err)? as *mut i32,
                    n,
                )
            };
            unsafe { result::memcpy_dtoh_async(dst, fs.zf_status.ptr, st.cu_stream()) }
                .map_err(err)?;
        }
        Ok(())
    }
}

/// A kernel argument of one of the types the kernels take.
trait KernelArg {
    fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>);
}

impl KernelArg for i32 {
    fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>) {
        b.arg(self);
    }
}
impl KernelArg for f32 {
    fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>) {
        b.arg(self);
    }
}
impl KernelArg for u64 {
    fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>) {
        b.arg(self);
    }
}
