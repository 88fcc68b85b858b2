//! Downlink kernels: Encode, Modul, Precode, Ifft, Store.

use radiohost_iq::Ci16;
use radiohost_phy::crc::{self, CrcKind};
use radiohost_phy::scramble::GoldSequence;
use radiohost_phy::zf::precode as zf_precode;

use super::slot::{read, write};
use super::{FrameSlot, KernelContext, KernelError, Scratch};

/// CRC, LDPC and scrambling of `user`'s blocks for downlink data symbol `data`.
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
    let mut coded = write(&slot.coded[data * cfg.users + user]);
    coded.fill(0);
    for (b, chunk) in bits.chunks_exact(pb).enumerate() {
        s.block[..pb].copy_from_slice(chunk);
        crc::attach(CrcKind::Crc24B, &mut s.block);
        s.encoder
            .encode(&s.block, &mut coded[b * tx_bits..(b + 1) * tx_bits])?;
    }
    let sb = coded.len();
    GoldSequence::new_at(ctx.c_init[user], data * sb).scramble_bits(&mut coded);
    Ok(())
}

/// QAM-map `user`'s coded bits of downlink data symbol `data`.
pub(super) fn modul(
    ctx: &KernelContext,
    slot: &FrameSlot,
    data: usize,
    user: usize,
    s: &mut Scratch,
) {
    let i = data * ctx.cfg.users + user;
    let coded = read(&slot.coded[i]);
    s.modulator.modulate(&coded, &mut write(&slot.qam[i]));
}

/// ZF-precode part `k` of downlink symbol `pos` (reference when `data` is `None`:
/// every user's pilot sequence), normalised per part.
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
    // beta: total transmit power K per subcarrier on average over the part.
    let total: f64 = zf.noise_gain.iter().map(|&g| g as f64).sum();
    let beta = (k_n as f64 * len as f64 / total.max(f64::MIN_POSITIVE)).sqrt() as f32;
    // Users' symbols of the part into scratch (`eq` is K x max part), so no lock
    // guards are held per user and nothing is allocated.
    for u in 0..k_n {
        let dst = &mut s.eq[u * len..(u + 1) * len];
        match data {
            Some(dd) => dst.copy_from_slice(&read(&slot.qam[dd * k_n + u])[range.clone()]),
            None => dst.copy_from_slice(&ctx.pilots[range.clone()]),
        }
    }
    let mut out = write(&slot.precoded[pos * ctx.shape.parts + k]);
    for j in 0..len {
        for (u, sv) in s.s.iter_mut().enumerate() {
            *sv = s.eq[u * len + j];
        }
        zf_precode(&zf.w[j * mk..(j + 1) * mk], &s.s, beta, &mut s.xm);
        for (m, x) in s.xm.iter().enumerate() {
            out[m * len + j] = *x;
        }
    }
}

/// Per antenna: gather the precoded parts, IFFT + CP, quantise to ci16.
pub(super) fn ifft(ctx: &KernelContext, slot: &FrameSlot, pos: usize, s: &mut Scratch) {
    let cfg = &ctx.cfg;
    let parts = ctx.shape.parts;
    let sl = cfg.symbol_len();
    let mut out = write(&slot.tx_time[pos]);
    for m in 0..cfg.antennas {
        for k in 0..parts {
            let r = ctx.shape.part_range(k);
            let len = r.len();
            let p = read(&slot.precoded[pos * parts + k]);
            s.ant[r].copy_from_slice(&p[m * len..(m + 1) * len]);
        }
        s.synth.symbol(&s.ant, ctx.tx_gain, &mut s.time);
        for (o, t) in out[m * sl..(m + 1) * sl].iter_mut().zip(&s.time) {
            *o = Ci16::from_cf32(*t);
        }
    }
}

/// Hand downlink symbol `pos` to the fronthaul output.
pub(super) fn store(slot: &FrameSlot, pos: usize) {
    let src = read(&slot.tx_time[pos]);
    write(&slot.tx_out[pos]).copy_from_slice(&src);
}
