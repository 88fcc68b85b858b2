//! Uplink kernels: PilotFft/UpFft (reading the fronthaul staging in place), Zf,
//! EqDemod, Decode, Store.

use std::ops::Range;
use std::sync::RwLock;

use radiohost_iq::Cf32;
use radiohost_ldpc::LdpcError;
use radiohost_phy::frontend::{planar_index, SLICE};
use radiohost_phy::group_product::lanewise::{self, LaneCoefficients};
use radiohost_phy::group_product::{Coefficients, GroupProduct};
use radiohost_phy::qam::inverse_noise;
use radiohost_phy::scramble::sequence_bits;
use radiohost_phy::simd::Isa;
use radiohost_phy::soft::SoftSlice;
use radiohost_phy::zf::{BatchIo, Lanes, BATCH};

use super::slot::{read, write, FreqSymbol, PlanarSymbol, ZfPart};
use super::{FrameSlot, KernelContext, KernelError, Scratch};

/// CP removal and FFT of every antenna of received pilot symbol `rx` (one batched
/// call of phy's front end): data subcarriers `[antenna][subcarrier]` and null-bin
/// energy into `out`.
pub(super) fn pilot_fft(
    ctx: &KernelContext,
    slot: &FrameSlot,
    rx: usize,
    out: &RwLock<FreqSymbol>,
    s: &mut Scratch,
) {
    let staged = read(&slot.staging[rx]);
    let (samples, at) = staged.view();
    let mut o = write(out);
    let o = &mut *o;
    (o.null_energy, o.null_bins) =
        s.front
            .frame_rows(samples, ctx.cfg.antennas, &[at], &mut o.data);
}

/// CP removal and FFT of every antenna of received uplink symbol `rx` (one batched
/// call of phy's front end): data subcarriers in the planar layout the group
/// equaliser reads, and null-bin energy, into `out`.
pub(super) fn up_fft(
    ctx: &KernelContext,
    slot: &FrameSlot,
    rx: usize,
    out: &RwLock<PlanarSymbol>,
    s: &mut Scratch,
) {
    let staged = read(&slot.staging[rx]);
    let (samples, at) = staged.view();
    let mut o = write(out);
    let o = &mut *o;
    (o.null_energy, o.null_bins) =
        s.front
            .frame_planar(samples, ctx.cfg.antennas, &[at], &mut o.re, &mut o.im);
}

/// Channel at the centre of every ZF group from the pilot symbols, then the ZF
/// detectors of every batch of 16 groups that part `k` touches.
pub(super) fn zf(
    ctx: &KernelContext,
    slot: &FrameSlot,
    k: usize,
    s: &mut Scratch,
) -> Result<(), KernelError> {
    let cfg = &ctx.cfg;
    let (m_n, k_n, d) = (cfg.antennas, cfg.users, cfg.data_num);
    let (zb, pilots) = (cfg.zf_block, slot.pilot_freq.len());
    let (mut e, mut c) = (0.0, 0);
    // The estimator reads every pilot symbol as one `[symbol][antenna][subcarrier]`
    // buffer; one pilot symbol is read in place, more are gathered first. Only the
    // ZF batches of part `k` are estimated (the gather still copies every pilot).
    let batches = ctx.part_batches(k);
    if pilots == 1 {
        let f = read(&slot.pilot_freq[0]);
        (e, c) = (f.null_energy, f.null_bins);
        s.csi_est
            .estimate_groups(&f.data, 1, zb, batches.clone(), &mut s.h_re, &mut s.h_im);
    } else {
        for (p, region) in slot.pilot_freq.iter().enumerate() {
            let f = read(region);
            s.pilot_rx[p * m_n * d..(p + 1) * m_n * d].copy_from_slice(&f.data);
            e += f.null_energy;
            c += f.null_bins;
        }
        s.csi_est.estimate_groups(
            &s.pilot_rx,
            pilots,
            zb,
            batches.clone(),
            &mut s.h_re,
            &mut s.h_im,
        );
    }
    let groups = cfg.zf_groups();
    let part = ctx.part_groups(k);
    let mk = m_n * k_n;
    let mut out = write(&slot.zf[k]);
    let out = &mut *out;
    out.first_group = part.start;
    for b in ctx.part_batches(k) {
        let io = BatchIo {
            hr: &s.h_re[b * mk..(b + 1) * mk],
            hi: &s.h_im[b * mk..(b + 1) * mk],
            wtr: &mut s.batch_wt_re,
            wti: &mut s.batch_wt_im,
            noise_gain: &mut s.batch_gain,
        };
        s.zf.solve(io, BATCH.min(groups - b * BATCH))
            .map_err(|e| KernelError::Zf {
                subcarrier: s.csi_est.group_centre(zb, b * BATCH + e.lane),
                source: e.source,
            })?;
        // Each group of the part in this batch: its noise gains, and (per-group
        // kernels) its contiguous matrix; lanewise kernels read the batch spread.
        let lanes = part.start.max(b * BATCH)..part.end.min((b + 1) * BATCH);
        for g in lanes {
            let (j, l) = (g - part.start, g % BATCH);
            if !ctx.lanewise() {
                let wt = &mut out.w_transposed[j * mk..(j + 1) * mk];
                for (o, (r, i)) in wt.iter_mut().zip(s.batch_wt_re.iter().zip(&s.batch_wt_im)) {
                    *o = Cf32::new(r[l], i[l]);
                }
                if let Some(prepared) = out.equalizers.get_mut(j) {
                    prepared.fill(Isa::detect(), &Coefficients::detector(wt, k_n, m_n));
                }
            }
            for (o, gain) in out.noise_gain[j * k_n..(j + 1) * k_n]
                .iter_mut()
                .zip(&s.batch_gain)
            {
                *o = gain[l];
            }
        }
        if ctx.lanewise() {
            spread_batch(ctx, k, b, &s.batch_wt_re, &s.batch_wt_im, out);
        }
    }
    out.pilot_null_energy = e;
    out.pilot_null_bins = c;
    Ok(())
}

// A batch's groups span whole slices (`zb` of them), so each slice's lanes come
// from one batch.
const _: () = assert!(BATCH == SLICE);

/// Spread batch `b`'s detectors over the lanes of the slices of part `k` it
/// covers (slices `b * zb .. (b + 1) * zb`).
fn spread_batch(
    ctx: &KernelContext,
    k: usize,
    b: usize,
    w_re: &[Lanes],
    w_im: &[Lanes],
    out: &mut ZfPart,
) {
    let (range, zb) = (ctx.shape.part_range(k), ctx.cfg.zf_block);
    let part = ctx.part_slices(k);
    let len = ctx.lane_table_len();
    for sl in (b * zb).max(part.start)..((b + 1) * zb).min(part.end) {
        // A lane outside the part takes its nearest lane's group: a run of lanes
        // cut by the part's edge is then one group, and such lanes' outputs are
        // never written.
        let group_of_lane = |l: usize| (sl * SLICE + l).clamp(range.start, range.end - 1) / zb;
        let entries = &mut out.lanes[(sl - part.start) * len..][..len];
        let width = ctx.lane_width();
        lanewise::spread_batch(w_re, w_im, b * BATCH, width, group_of_lane, entries);
    }
}

/// Equalise part `k` of uplink symbol `u` slice by slice (each ZF group as one
/// planar matrix product) and soft-demodulate every user's symbols of the slice
/// straight into the decoder's input: descrambled, quantised LLRs.
pub(super) fn eq_demod(
    ctx: &KernelContext,
    slot: &FrameSlot,
    u: usize,
    k: usize,
    s: &mut Scratch,
) -> Result<(), KernelError> {
    let cfg = &ctx.cfg;
    let (m_n, k_n, d, zb) = (cfg.antennas, cfg.users, cfg.data_num, cfg.zf_block);
    let range = ctx.shape.part_range(k);
    let qm = cfg.modulation.bits_per_symbol();
    let (slices, sb) = (d.div_ceil(SLICE), cfg.symbol_bits());
    let isa = Isa::detect();
    let zf = read(&slot.zf[k]);
    let freq = read(&slot.up_freq[u]);
    let noise = (zf.pilot_null_energy + freq.null_energy)
        / (zf.pilot_null_bins + freq.null_bins).max(1) as f64;
    let mut llr = write(&slot.llr[u * ctx.shape.parts + k]);
    let (user_bits, table_len) = (range.len() * qm, ctx.lane_table_len());
    for (i, sl) in ctx.part_slices(k).enumerate() {
        let s0 = sl * SLICE;
        let lanes = range.start.max(s0) - s0..range.end.min(s0 + SLICE) - s0;
        let at = planar_index(0, sl, 0, slices, m_n);
        let (x_re, x_im) = (&freq.re[at..at + m_n], &freq.im[at..at + m_n]);
        let (y_re, y_im) = (&mut s.slice_re[..k_n], &mut s.slice_im[..k_n]);
        if ctx.lanewise() {
            let entries = &zf.lanes[i * table_len..][..table_len];
            let w = LaneCoefficients::detector(entries, ctx.lane_width(), k_n, m_n);
            lanewise::apply_planar(isa, &w, x_re, x_im, lanes.clone(), y_re, y_im);
        } else {
            for (g, own) in slice_groups(s0, lanes.clone(), zb) {
                let w = &zf.equalizers[g - zf.first_group];
                GroupProduct::apply_gauss_planar(isa, w, x_re, x_im, own, y_re, y_im);
            }
        }
        let inv_noise = &mut s.inv_noise[..k_n];
        for (g, own) in slice_groups(s0, lanes.clone(), zb) {
            let j = g - zf.first_group;
            for (user, row) in inv_noise.iter_mut().enumerate() {
                let nv = (noise * zf.noise_gain[j * k_n + user] as f64) as f32;
                row[own.clone()].fill(inverse_noise(nv));
            }
        }
        if lanes.start > 0 {
            // A part that starts inside the slice: its lanes to the front, where the
            // demodulator reads a slice's symbols.
            for row in y_re
                .iter_mut()
                .chain(y_im.iter_mut())
                .chain(inv_noise.iter_mut())
            {
                row.copy_within(lanes.clone(), 0);
            }
        }
        let first_bit = (s0 + lanes.start) * qm;
        for (user, flips) in s.flips[..k_n].iter_mut().enumerate() {
            let words = ctx.uplink_sequence(user);
            *flips = sequence_bits(words, u * sb + first_bit, lanes.len() * qm);
        }
        let slice = SoftSlice {
            re: y_re,
            im: y_im,
            inv_noise,
            flips: &s.flips[..k_n],
            symbols: lanes.len(),
        };
        let offset = first_bit - range.start * qm;
        if !s
            .demod
            .slice_llrs_i8(isa, &slice, &mut llr, user_bits, offset)
        {
            return Err(LdpcError::NanLlr { index: first_bit }.into());
        }
    }
    Ok(())
}

/// The ZF groups of `zb` subcarriers with lanes among `lanes` of the slice that
/// starts at subcarrier `s0`, each with those lanes.
fn slice_groups(
    s0: usize,
    lanes: Range<usize>,
    zb: usize,
) -> impl Iterator<Item = (usize, Range<usize>)> {
    let (first, end) = (s0 + lanes.start, s0 + lanes.end);
    (first / zb..end.div_ceil(zb))
        .map(move |g| (g, (g * zb).max(first) - s0..((g + 1) * zb).min(end) - s0))
}

/// Gather the LLRs of uplink symbol `u` of every user in `users` from every part,
/// LDPC-decode and CRC-check each block (several users' blocks at once where the
/// code batches them, see `RxChain::decode_users_quantized`).
pub(super) fn decode(
    ctx: &KernelContext,
    slot: &FrameSlot,
    u: usize,
    users: Range<usize>,
    s: &mut Scratch,
) -> Result<(), KernelError> {
    let cfg = &ctx.cfg;
    let qm = cfg.modulation.bits_per_symbol();
    let parts = ctx.shape.parts;
    let sb = cfg.symbol_bits();
    // One part: the users' bytes are read where EqDemod wrote them.
    let whole = (parts == 1).then(|| read(&slot.llr[u]));
    let (llrs, stride): (&[i8], usize) = match &whole {
        Some(part) => {
            let len = ctx.shape.part_range(0).len() * qm;
            (&part[users.start * len..users.end * len], len)
        }
        None => {
            for (i, user) in users.clone().enumerate() {
                for k in 0..parts {
                    let r = ctx.shape.part_range(k);
                    let len = r.len() * qm;
                    let llr = read(&slot.llr[u * parts + k]);
                    s.llrs[i * sb + r.start * qm..i * sb + r.end * qm]
                        .copy_from_slice(&llr[user * len..(user + 1) * len]);
                }
            }
            (&s.llrs[..users.len() * sb], sb)
        }
    };
    let (blocks, pb) = (cfg.blocks_per_symbol, cfg.block_payload_bits());
    let (payload, results) = (&mut s.decoded, &mut s.results);
    s.rx.decode_users_quantized(llrs, stride, users.len(), |k, b, bits, result| {
        let at = k * blocks + b;
        payload[at * pb..(at + 1) * pb].copy_from_slice(bits);
        results[at] = result;
    })?;
    for (k, user) in users.enumerate() {
        let mut out = write(&slot.decoded[u * cfg.users + user]);
        out.payload[..blocks * pb]
            .copy_from_slice(&payload[k * blocks * pb..(k + 1) * blocks * pb]);
        out.blocks[..blocks].copy_from_slice(&results[k * blocks..(k + 1) * blocks]);
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
