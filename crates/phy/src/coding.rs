//! Per-user bit chains shared by the generator, the pipelines and the emulated user:
//! code blocks (payload + CRC24B) -> LDPC -> symbol bits -> scrambling -> QAM, and
//! back from LLRs.
//!
//! Each data symbol of a user carries `blocks_per_symbol` whole code blocks followed by
//! zero padding up to the symbol's bit capacity. Scrambling runs over the user's data
//! symbols of one direction as one sequence (`c_init = rnti * 2^15 + n_id`); data symbol
//! `s` starts at bit `s * symbol_bits`, so any symbol can be processed on its own.

use radiohost_iq::Cf32;
use radiohost_ldpc::{
    BatchDecoder, DecodeOutcome, Decoder, DecoderConfig, Encoder, LdpcError, MinSum,
};

use crate::config::{FrameConfig, BLOCK_CRC_BITS};
use crate::crc::{self, CrcKind};
use crate::qam::{Demodulator, Modulator};
use crate::scramble::{data_c_init, SequenceCache};

/// Scrambling `c_init` of user `k` (RNTI `k + 1`; the cell id comes from the seed).
pub fn user_c_init(cfg: &FrameConfig, user: usize) -> u32 {
    data_c_init((user + 1) as u16, (cfg.seed % 1008) as u16)
}

/// Transmit chain of one user: owns the encoder and scratch.
pub struct TxChain {
    encoder: Encoder,
    modulator: Modulator,
    block: Vec<u8>,
    bits: Vec<u8>,
    payload_bits: usize,
    tx_bits: usize,
    blocks_per_symbol: usize,
    sequences: SequenceCache,
}

impl TxChain {
    pub fn new(cfg: &FrameConfig) -> Self {
        Self {
            encoder: Encoder::new(cfg.code),
            modulator: Modulator::new(cfg.modulation),
            block: vec![0; cfg.code.payload_bits],
            bits: vec![0; cfg.symbol_bits()],
            payload_bits: cfg.block_payload_bits(),
            tx_bits: cfg.code.tx_bits,
            blocks_per_symbol: cfg.blocks_per_symbol,
            sequences: SequenceCache::default(),
        }
    }

    /// Build one data symbol of one user: `payload` holds `blocks_per_symbol` blocks of
    /// `block_payload_bits` each; `symbols` receives `data_num` QAM symbols.
    ///
    /// # Errors
    /// An [`LdpcError`] for payload bytes that are not bits.
    pub fn symbol(
        &mut self,
        payload: &[u8],
        c_init: u32,
        data_symbol_index: usize,
        symbols: &mut [Cf32],
    ) -> Result<(), LdpcError> {
        self.encode(payload)?;
        self.modulate(c_init, data_symbol_index, symbols);
        Ok(())
    }

    /// First half of [`Self::symbol`]: CRC and LDPC encoding of every block into the
    /// chain's bit buffer (zero padding after the last block).
    ///
    /// # Errors
    /// An [`LdpcError`] for payload bytes that are not bits.
    pub fn encode(&mut self, payload: &[u8]) -> Result<(), LdpcError> {
        let pb = self.payload_bits;
        assert_eq!(
            payload.len(),
            pb * self.blocks_per_symbol,
            "tx chain: payload size"
        );
        // Each block's coded bits are all written below; only the symbol's spare
        // bits past the last block are zero.
        self.bits[self.blocks_per_symbol * self.tx_bits..].fill(0);
        for (b, chunk) in payload.chunks_exact(pb).enumerate() {
            self.block[..pb].copy_from_slice(chunk);
            crc::attach(CrcKind::Crc24B, &mut self.block);
            let out = &mut self.bits[b * self.tx_bits..(b + 1) * self.tx_bits];
            self.encoder.encode(&self.block, out)?;
        }
        Ok(())
    }

    /// Second half of [`Self::symbol`]: scrambling and QAM of the encoded bits.
    pub fn modulate(&mut self, c_init: u32, data_symbol_index: usize, symbols: &mut [Cf32]) {
        self.scramble(c_init, data_symbol_index);
        self.modulator.modulate(&self.bits, symbols);
    }

    /// [`Self::modulate`] into planar slices: symbol `i` to lane `i % 16` of
    /// `re[(i / 16) * stride]` / `im[..]` (see [`Modulator::modulate_planar`]).
    pub fn modulate_planar(
        &mut self,
        c_init: u32,
        data_symbol_index: usize,
        re: &mut [[f32; crate::group_product::LANES]],
        im: &mut [[f32; crate::group_product::LANES]],
        stride: usize,
    ) {
        self.scramble(c_init, data_symbol_index);
        self.modulator.modulate_planar(&self.bits, re, im, stride);
    }

    /// Scramble the encoded bits as data symbol `data_symbol_index` of `c_init`.
    fn scramble(&mut self, c_init: u32, data_symbol_index: usize) {
        let sb = self.bits.len();
        self.sequences
            .scramble_bits(c_init, data_symbol_index * sb, &mut self.bits);
    }
}

/// Result of decoding one code block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockResult {
    pub crc_ok: bool,
    pub iterations: u32,
}

/// Receive chain of one user: demodulation, descrambling, LDPC decoding and CRC.
pub struct RxChain {
    decoder: Decoder,
    /// The same code, several blocks per call (see [`Self::decode_users_quantized`]).
    batch: BatchDecoder,
    batch_bits: Vec<u8>,
    batch_outcomes: Vec<DecodeOutcome>,
    demodulator: Demodulator,
    llrs: Vec<f32>,
    block: Vec<u8>,
    payload_bits: usize,
    tx_bits: usize,
    blocks_per_symbol: usize,
    sequences: SequenceCache,
}

/// Decoder settings the pipelines use: normalised min-sum, early termination, the
/// kernel level of [`crate::simd::Isa::detect`].
pub fn decoder_config(iterations: usize) -> DecoderConfig {
    DecoderConfig {
        max_iterations: iterations,
        min_sum: MinSum::Normalized(0.75),
        early_termination: true,
        simd: crate::simd::Isa::ldpc_level(),
    }
}

impl RxChain {
    pub fn new(cfg: &FrameConfig) -> Result<Self, LdpcError> {
        let batch = BatchDecoder::try_new(cfg.code, decoder_config(cfg.decoder_iter))?;
        let nb = batch.blocks();
        Ok(Self {
            decoder: Decoder::try_new(cfg.code, decoder_config(cfg.decoder_iter))?,
            batch,
            batch_bits: vec![0; nb * cfg.code.payload_bits],
            batch_outcomes: vec![
                DecodeOutcome {
                    iterations: 0,
                    parity_ok: false
                };
                nb
            ],
            demodulator: Demodulator::new(cfg.modulation),
            llrs: vec![0.0; cfg.symbol_bits()],
            block: vec![0; cfg.code.payload_bits],
            payload_bits: cfg.block_payload_bits(),
            tx_bits: cfg.code.tx_bits,
            blocks_per_symbol: cfg.blocks_per_symbol,
            sequences: SequenceCache::default(),
        })
    }

    /// Decode one data symbol of one user from its equalised symbols and their noise
    /// variances; the recovered payload of each block goes to `payload`.
    ///
    /// # Errors
    /// An [`LdpcError`] if the decoder rejects its input (e.g. NaN LLRs).
    pub fn symbol(
        &mut self,
        symbols: &[Cf32],
        noise_var: &[f32],
        c_init: u32,
        data_symbol_index: usize,
        payload: &mut [u8],
        results: &mut [BlockResult],
    ) -> Result<(), LdpcError> {
        self.soft_bits(symbols, noise_var, c_init, data_symbol_index);
        self.decode(payload, results)
    }

    /// First half of [`Self::symbol`]: soft demodulation and descrambling into the
    /// chain's LLR buffer.
    pub fn soft_bits(
        &mut self,
        symbols: &[Cf32],
        noise_var: &[f32],
        c_init: u32,
        data_symbol_index: usize,
    ) {
        self.demodulator
            .demodulate(symbols, noise_var, &mut self.llrs);
        let used = self.blocks_per_symbol * self.tx_bits;
        let sb = self.llrs.len();
        self.sequences
            .descramble_llrs(c_init, data_symbol_index * sb, &mut self.llrs[..used]);
    }

    /// Second half of [`Self::symbol`]: LDPC decoding and CRC of the blocks whose
    /// LLRs [`Self::soft_bits`] left.
    ///
    /// # Errors
    /// An [`LdpcError`] if the decoder rejects its input (e.g. NaN LLRs).
    pub fn decode(
        &mut self,
        payload: &mut [u8],
        results: &mut [BlockResult],
    ) -> Result<(), LdpcError> {
        let (llrs, decoder) = (&self.llrs, &mut self.decoder);
        let tx = self.tx_bits;
        Self::decode_blocks(
            self.payload_bits,
            self.blocks_per_symbol,
            &mut self.block,
            payload,
            results,
            |b, out| decoder.decode(&llrs[b * tx..(b + 1) * tx], out),
        )
    }

    /// [`Self::decode`] for every user of one data symbol, from their LLRs already
    /// descrambled and quantised as the decoder's input (user `k`'s `symbol_bits`
    /// bytes at `k * stride` of `llrs`, from
    /// [`crate::qam::Demodulator::slice_llrs_i8`]). Where the lifting size is not a
    /// multiple of 64, whole batches of blocks (users' blocks in order) go through
    /// the [`BatchDecoder`], the rest one by one: the same bits either way. Each
    /// block's payload and result go to `sink(user, block, payload, result)`.
    ///
    /// # Errors
    /// An [`LdpcError`] if `llrs` is shorter than the users' code blocks.
    pub fn decode_users_quantized(
        &mut self,
        llrs: &[i8],
        stride: usize,
        users: usize,
        mut sink: impl FnMut(usize, usize, &[u8], BlockResult),
    ) -> Result<(), LdpcError> {
        let (tx, blocks, pb) = (self.tx_bits, self.blocks_per_symbol, self.payload_bits);
        let used = users.saturating_sub(1) * stride + blocks * tx;
        if users > 0 && (stride < blocks * tx || llrs.len() < used) {
            return Err(LdpcError::LengthMismatch {
                what: "quantised LLRs of a data symbol",
                expected: used.max(stride),
                got: llrs.len(),
            });
        }
        let all = users * blocks;
        let block_llrs = |g: usize| {
            let at = g / blocks * stride + g % blocks * tx;
            &llrs[at..at + tx]
        };
        let mut result = |g: usize, bits: &[u8], outcome: DecodeOutcome| {
            let r = BlockResult {
                crc_ok: crc::check(CrcKind::Crc24B, bits),
                iterations: outcome.iterations as u32,
            };
            sink(g / blocks, g % blocks, &bits[..pb], r);
        };
        let nb = self.batch.blocks();
        let batched = if nb > 1 { all / nb * nb } else { 0 };
        // On the stack: no allocation per symbol (a batch holds at most 64 blocks).
        let mut views: [&[i8]; 64] = [&[]; 64];
        for first in (0..batched).step_by(nb) {
            for (v, g) in views.iter_mut().zip(first..first + nb) {
                *v = block_llrs(g);
            }
            let (bits, outcomes) = (&mut self.batch_bits, &mut self.batch_outcomes);
            self.batch.decode_quantized(&views[..nb], bits, outcomes)?;
            let per_block = bits.chunks_exact(self.block.len());
            for (i, (bits, &outcome)) in per_block.zip(outcomes.iter()).enumerate() {
                result(first + i, bits, outcome);
            }
        }
        for g in batched..all {
            let outcome = self
                .decoder
                .decode_quantized(block_llrs(g), &mut self.block)?;
            result(g, &self.block, outcome);
        }
        Ok(())
    }

    /// Decode every block with `decode(block, out)` and check its CRC.
    fn decode_blocks(
        pb: usize,
        blocks: usize,
        block: &mut [u8],
        payload: &mut [u8],
        results: &mut [BlockResult],
        mut decode: impl FnMut(usize, &mut [u8]) -> Result<DecodeOutcome, LdpcError>,
    ) -> Result<(), LdpcError> {
        assert_eq!(payload.len(), pb * blocks, "rx chain: payload size");
        assert_eq!(results.len(), blocks, "rx chain: results size");
        for b in 0..blocks {
            let DecodeOutcome { iterations, .. } = decode(b, block)?;
            let ok = crc::check(CrcKind::Crc24B, block);
            payload[b * pb..(b + 1) * pb].copy_from_slice(&block[..pb]);
            results[b] = BlockResult {
                crc_ok: ok,
                iterations: iterations as u32,
            };
        }
        Ok(())
    }
}

/// Payload bits per block (re-exported for callers sizing buffers).
pub fn block_payload_bits(cfg: &FrameConfig) -> usize {
    cfg.code.payload_bits - BLOCK_CRC_BITS
}
