//! Arbitrary bytes as code parameters, decoder configuration and LLRs: every call must
//! return a value or a typed error, never panic, and decoded bits must be bits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use radiohost_ldpc::{
    BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, LdpcError, MinSum, SimdLevel,
    LIFTING_SIZES,
};

fn u16_at(d: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([
        d.get(i).copied().unwrap_or(0),
        d.get(i + 1).copied().unwrap_or(0),
    ])
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 12 {
        return;
    }
    let bg = if data[0] & 1 == 0 {
        BaseGraph::Bg1
    } else {
        BaseGraph::Bg2
    };
    // Raw lifting size half the time (invalid values must be rejected), a valid one
    // (kept small for speed) otherwise.
    let zc = if data[1] & 0x80 != 0 {
        data[1] as usize & 0x7f
    } else {
        LIFTING_SIZES[data[1] as usize % 36]
    };
    let payload_bits = u16_at(data, 2) as usize;
    let tx_bits = u16_at(data, 4) as usize;
    let rate = f64::from(f32::from_bits(u32::from_le_bytes([
        data[6], data[7], data[8], data[9],
    ])));
    let _ = CodeParams::for_rate(bg, zc, rate);
    let Ok(p) = CodeParams::new(bg, zc, payload_bits, tx_bits) else {
        return;
    };
    let x = f32::from_bits(u32::from_le_bytes([data[8], data[9], data[10], data[11]]));
    let min_sum = if data[10] & 1 == 0 {
        MinSum::Normalized(x)
    } else {
        MinSum::Offset(x)
    };
    let simd = match data[11] % 4 {
        0 => SimdLevel::Auto,
        1 => SimdLevel::Scalar,
        2 => SimdLevel::Avx2,
        _ => SimdLevel::Avx512,
    };
    let cfg = DecoderConfig {
        max_iterations: (data[7] % 5) as usize,
        min_sum,
        early_termination: data[6] & 1 == 0,
        simd,
    };
    let body = &data[12..];
    let mut dec = Decoder::new(p, cfg);
    let mut out = vec![0u8; p.payload_bits];
    // LLRs as f32 (NaN and infinities included) from the remaining bytes, cycled.
    let llr: Vec<f32> = (0..p.tx_bits)
        .map(|i| {
            let j = (4 * i) % body.len().max(4);
            let b = |k: usize| body.get(j + k).copied().unwrap_or(0);
            f32::from_bits(u32::from_le_bytes([b(0), b(1), b(2), b(3)]))
        })
        .collect();
    match dec.decode(&llr, &mut out) {
        Ok(o) => {
            assert!(o.iterations >= 1 && o.iterations <= cfg.max_iterations);
            assert!(out.iter().all(|&b| b <= 1));
        }
        Err(LdpcError::NanLlr { index }) => assert!(llr[index].is_nan()),
        Err(LdpcError::ZeroIterations | LdpcError::InvalidMinSum(_)) => {}
        Err(e) => panic!("unexpected error: {e}"),
    }
    // The same bytes as i8 LLRs.
    let q: Vec<i8> = (0..p.tx_bits)
        .map(|i| body.get(i % body.len().max(1)).copied().unwrap_or(0) as i8)
        .collect();
    let _ = dec.decode_quantized(&q, &mut out);
    // And as an encoder payload: non-bits must be rejected, bits encoded.
    let payload: Vec<u8> = (0..p.payload_bits)
        .map(|i| body.get(i).copied().unwrap_or(0) & 3)
        .collect();
    let mut tx = vec![0u8; p.tx_bits];
    let r = Encoder::new(p).encode(&payload, &mut tx);
    assert_eq!(r.is_ok(), payload.iter().all(|&b| b <= 1));
});
