//! Uplink kernels: Load, PilotFft/UpFft, Zf, EqDemod, Decode, Store.

use std::sync::RwLock;

use radiohost_phy::crc::{self, CrcKind};
use radiohost_phy::csi::null_bin_energy;
use radiohost_phy::ofdm::{gather_data, remove_cp_ci16};
use radiohost_phy::scramble::GoldSequence;
use radiohost_phy::zf::{equalize, zf_detector};

use super::slot::{read, write, FreqSymbol};
use super::{FrameSlot, KernelContext, KernelError, Scratch};

/// Fronthaul staging -> the frame's time-domain buffer.
pub(super) fn load(slot: &FrameSlot, rx: usize) {
    let src = read(&slot.staging[rx]);
    write(&slot.time[rx]).copy_from_slice(&src);
}

/// CP removal and one batched FFT over all antennas of received symbol `rx`; data
/// subcarriers and null-bin energy into `out`.
pub(super) fn fft(
    ctx: &KernelContext,
    slot: &FrameSlot,
    rx: usize,
    out: &RwLock<FreqSymbol>,
    s: &mut Scratch,
) {
    let cfg = &ctx.cfg;
    let (n, sl, d) = (cfg.fft_size, cfg.symbol_len(), cfg.data_num);
    {
        let time = read(&slot.time[rx]);
        for (m, dst) in s.batch.chunks_exact_mut(n).enumerate() {
            remove_cp_ci16(&time[m * sl..(m + 1) * sl], cfg.cp_len, dst);
        }
    }
    s.fft.forward_batch(&mut s.batch);
    let mut o = write(out);
    let (mut e, mut c) = (0.0, 0);
    for (m, freq) in s.batch.chunks_exact(n).enumerate() {
        gather_data(freq, cfg.data_start, &mut o.data[m * d..(m + 1) * d]);
        let (e1, c1) = null_bin_energy(freq, cfg.data_start, d);
        e += e1;
        c += c1;
    }
    o.null_energy = e;
    o.null_bins = c;
}

/// CSI from every pilot symbol, then the ZF detector of each subcarrier of part `k`.
pub(super) fn zf(
    ctx: &KernelContext,
    slot: &FrameSlot,
    k: usize,
    s: &mut Scratch,
) -> Result<(), KernelError> {
    let cfg = &ctx.cfg;
    let (m_n, k_n, d) = (cfg.antennas, cfg.users, cfg.data_num);
    let (mut e, mut c) = (0.0, 0);
    for (p, region) in slot.pilot_freq.iter().enumerate() {
        let f = read(region);
        s.pilot_rx[p * m_n * d..(p + 1) * m_n * d].copy_from_slice(&f.data);
        e += f.null_energy;
        c += f.null_bins;
    }
    // The estimator interpolates across the band, so it runs on all subcarriers; it
    // costs O(M d) against the part's O(M K^2 d / parts) detector.
    s.csi_est
        .estimate(&s.pilot_rx, slot.pilot_freq.len(), &mut s.csi);
    let range = ctx.shape.part_range(k);
    let mk = m_n * k_n;
    let mut out = write(&slot.zf[k]);
    let out = &mut *out;
    for (j, i) in range.enumerate() {
        zf_detector(
            &s.csi[i * mk..(i + 1) * mk],
            m_n,
            k_n,
            &mut s.zf,
            &mut out.w[j * mk..(j + 1) * mk],
            &mut out.noise_gain[j * k_n..(j + 1) * k_n],
        )
        .map_err(|source| KernelError::Zf {
            subcarrier: i,
            source,
        })?;
    }
    out.pilot_null_energy = e;
    out.pilot_null_bins = c;
    Ok(())
}

/// Equalise part `k` of uplink symbol `u` and soft-demodulate every user's part.
pub(super) fn eq_demod(ctx: &KernelContext, slot: &FrameSlot, u: usize, k: usize, s: &mut Scratch) {
    let cfg = &ctx.cfg;
    let (m_n, k_n, d) = (cfg.antennas, cfg.users, cfg.data_num);
    let range = ctx.shape.part_range(k);
    let len = range.len();
    let mk = m_n * k_n;
    let qm = cfg.modulation.bits_per_symbol();
    {
        let zf = read(&slot.zf[k]);
        let freq = read(&slot.up_freq[u]);
        let noise = (zf.pilot_null_energy + freq.null_energy)
            / (zf.pilot_null_bins + freq.null_bins).max(1) as f64;
        for (j, i) in range.enumerate() {
            for (m, y) in s.y.iter_mut().enumerate() {
                *y = freq.data[m * d + i];
            }
            equalize(&zf.w[j * mk..(j + 1) * mk], &s.y, &mut s.x);
            for user in 0..k_n {
                s.eq[user * len + j] = s.x[user];
                s.nv[user * len + j] = (noise * zf.noise_gain[j * k_n + user] as f64) as f32;
            }
        }
    }
    let mut llr = write(&slot.llr[u * ctx.shape.parts + k]);
    for user in 0..k_n {
        s.demod.demodulate(
            &s.eq[user * len..(user + 1) * len],
            &s.nv[user * len..(user + 1) * len],
            &mut llr[user * len * qm..(user + 1) * len * qm],
        );
    }
}

/// Gather `user`'s LLRs of uplink symbol `u` from every part, descramble, LDPC-decode
/// and CRC-check each block.
pub(super) fn decode(
    ctx: &KernelContext,
    slot: &FrameSlot,
    u: usize,
    user: usize,
    s: &mut Scratch,
) -> Result<(), KernelError> {
    let cfg = &ctx.cfg;
    let qm = cfg.modulation.bits_per_symbol();
    let parts = ctx.shape.parts;
    for k in 0..parts {
        let r = ctx.shape.part_range(k);
        let len = r.len() * qm;
        let llr = read(&slot.llr[u * parts + k]);
        s.llrs[r.start * qm..r.end * qm].copy_from_slice(&llr[user * len..(user + 1) * len]);
    }
    let tx_bits = cfg.code.tx_bits;
    let used = cfg.blocks_per_symbol * tx_bits;
    let sb = s.llrs.len();
    GoldSequence::new_at(ctx.c_init[user], u * sb).descramble_llrs(&mut s.llrs[..used]);
    let pb = cfg.block_payload_bits();
    let mut out = write(&slot.decoded[u * cfg.users + user]);
    let out = &mut *out;
    for b in 0..cfg.blocks_per_symbol {
        let outcome = s
            .decoder
            .decode(&s.llrs[b * tx_bits..(b + 1) * tx_bits], &mut s.block)?;
        out.payload[b * pb..(b + 1) * pb].copy_from_slice(&s.block[..pb]);
        out.blocks[b] = radiohost_phy::coding::BlockResult {
            crc_ok: crc::check(CrcKind::Crc24B, &s.block),
            iterations: outcome.iterations as u32,
        };
    }
    Ok(())
}

/// Collect every decoded symbol into the frame's per-user uplink output.
pub(super) fn store(ctx: &KernelContext, slot: &FrameSlot) {
    let cfg = &ctx.cfg;
    let blocks = cfg.blocks_per_symbol;
    let pb = cfg.block_payload_bits();
    let mut payload = write(&slot.uplink_payload);
    let mut results = write(&slot.uplink_blocks);
    for u in 0..ctx.shape.uplink_symbols.len() {
        for user in 0..cfg.users {
            let dec = read(&slot.decoded[u * cfg.users + user]);
            payload[user][u * blocks * pb..(u + 1) * blocks * pb].copy_from_slice(&dec.payload);
            results[user][u * blocks..(u + 1) * blocks].copy_from_slice(&dec.blocks);
        }
    }
}
