//! Downlink kernels: Encode, Precode, Ifft, Store.

use radiohost_iq::Cf32;
use radiohost_phy::crc::{self, CrcKind};
use radiohost_phy::frontend::SLICE;
use radiohost_phy::group_product::lanewise::{self, LaneCoefficients};
use radiohost_phy::group_product::Coefficients;
use radiohost_phy::simd::Isa;

use super::slot::{read, write};
use super::{FrameSlot, KernelContext, KernelError, Scratch};

/// CRC, LDPC, scrambling and QAM mapping of `user`'s blocks for downlink data
/// symbol `data`. One instruction: the mapping alone is a few microseconds, less
/// than dispatching it separately costs.
pub(super) fn encode(
    ctx: &KernelContext,
    slot: &FrameSlot,
    data: usize,
    user: usize,
    s: &mut Scratch,
) -> Result<(), KernelError> {
    let cfg = &ctx.cfg;
    let pb = cfg.block_payload_bits();
    let blocks = cfg.blocks_per_symbol;
    let tx_bits = cfg.code.tx_bits;
    let payload = read(&slot.downlink_payload);
    let expected = cfg.downlink_blocks() * pb;
    let bits = payload
        .get(user)
        .filter(|p| p.len() == expected)
        .ok_or_else(|| KernelError::Payload {
            user,
            got: payload.get(user).map_or(0, Vec::len),
            expected,
        })?;
    let bits = &bits[data * blocks * pb..(data + 1) * blocks * pb];
    let coded = &mut s.coded;
    coded.fill(0);
    for (b, chunk) in bits.chunks_exact(pb).enumerate() {
        s.block[..pb].copy_from_slice(chunk);
        crc::attach(CrcKind::Crc24B, &mut s.block);
        s.encoder
            .encode(&s.block, &mut coded[b * tx_bits..(b + 1) * tx_bits])?;
    }
    ctx.scrambler(data, user).scramble_bits(coded);
    s.modulator
        .modulate(coded, &mut write(&slot.qam[data * cfg.users + user]));
    Ok(())
}

/// ZF-precode part `k` of downlink symbol `pos` (reference when `data` is `None`:
/// every user's pilot sequence), each ZF group as one matrix product, normalised per
/// part.
pub(super) fn precode(
    ctx: &KernelContext,
    slot: &FrameSlot,
    pos: usize,
    data: Option<usize>,
    k: usize,
    s: &mut Scratch,
) {
    let cfg = &ctx.cfg;
    let (m_n, k_n) = (cfg.antennas, cfg.users);
    let mk = m_n * k_n;
    let range = ctx.shape.part_range(k);
    let len = range.len();
    let zf = read(&slot.zf[k]);
    // beta: total transmit power K per subcarrier on average over the part (each
    // group's noise gains count once per subcarrier of the group in the part).
    let total: f64 = ctx
        .part_groups(k)
        .map(|g| {
            let j = g - zf.first_group;
            let gains = &zf.noise_gain[j * k_n..(j + 1) * k_n];
            ctx.group_in_part(g, k).len() as f64 * gains.iter().map(|&x| x as f64).sum::<f64>()
        })
        .sum();
    let beta = (k_n as f64 * len as f64 / total.max(f64::MIN_POSITIVE)).sqrt() as f32;
    // Users' symbols of the part into scratch (`[user][subcarrier of the part]`), so
    // no lock guards are held per user and nothing is allocated.
    for u in 0..k_n {
        let dst = &mut s.eq[u * len..(u + 1) * len];
        match data {
            Some(dd) => dst.copy_from_slice(&read(&slot.qam[dd * k_n + u])[range.clone()]),
            None => dst.copy_from_slice(&ctx.pilots[range.clone()]),
        }
    }
    let isa = Isa::detect();
    let mut out = write(&slot.precoded[pos * ctx.shape.parts + k]);
    if ctx.lanewise() {
        let table = zf.lanes.chunks_exact(ctx.lane_table_len());
        for (sl, entries) in ctx.part_slices(k).zip(table) {
            let s0 = sl * SLICE;
            let lanes = range.start.max(s0) - s0..range.end.min(s0 + SLICE) - s0;
            // The users' lanes of this slice, planar (zero outside the part).
            for u in 0..k_n {
                let (re, im) = (&mut s.users_re[u], &mut s.users_im[u]);
                let src = &s.eq[u * len + s0 + lanes.start - range.start..][..lanes.len()];
                if let Ok(whole) = <&[Cf32; SLICE]>::try_from(src) {
                    // A fixed-length loop, so it vectorises.
                    for (l, x) in whole.iter().enumerate() {
                        (re[l], im[l]) = (x.re, x.im);
                    }
                    continue;
                }
                (*re, *im) = ([0.0; SLICE], [0.0; SLICE]);
                for (l, x) in lanes.clone().zip(src) {
                    (re[l], im[l]) = (x.re, x.im);
                }
            }
            lanewise::apply(
                isa,
                &LaneCoefficients::precoder(entries, ctx.lane_width(), k_n, m_n, beta),
                &s.users_re,
                &s.users_im,
                lanes.clone(),
                &mut out[s0 + lanes.start - range.start..],
                len,
            );
        }
        return;
    }
    for g in ctx.part_groups(k) {
        let j = g - zf.first_group;
        let sub = ctx.group_in_part(g, k);
        let a = sub.start - range.start;
        let wt = &zf.w_transposed[j * mk..(j + 1) * mk];
        let p = Coefficients::precoder_transposed(wt, k_n, m_n, beta);
        s.product
            .apply(isa, p, &s.eq[a..], len, sub.len(), &mut out[a..], len);
    }
}

/// Gather the precoded parts into the synthesiser's input layout (phy's
/// `TxLayout`), then IFFT + CP and ci16 quantisation of every antenna into the
/// symbol's fronthaul output.
pub(super) fn ifft(ctx: &KernelContext, slot: &FrameSlot, pos: usize, s: &mut Scratch) {
    let cfg = &ctx.cfg;
    let m_n = cfg.antennas;
    let parts = ctx.shape.parts;
    if parts == 1 && s.synth.layout().is_rows() {
        // One part is already every antenna's subcarriers in order: no gather.
        let p = read(&slot.precoded[pos]);
        let mut out = write(&slot.tx_out[pos]);
        s.synth
            .antennas_ci16(&p, m_n, ctx.tx_gain, &mut out, cfg.symbol_len(), 0);
        return;
    }
    let layout = s.synth.layout();
    for k in 0..parts {
        let r = ctx.shape.part_range(k);
        let len = r.len();
        let p = read(&slot.precoded[pos * parts + k]);
        for (m, row) in s.ant.chunks_exact_mut(layout.stride()).enumerate() {
            layout.put(r.start, &p[m * len..(m + 1) * len], row);
        }
    }
    let mut out = write(&slot.tx_out[pos]);
    s.synth
        .antennas_ci16(&s.ant, m_n, ctx.tx_gain, &mut out, cfg.symbol_len(), 0);
}
