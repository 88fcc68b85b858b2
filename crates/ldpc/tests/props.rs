//! Property tests: noiseless round trip, and decode never panics on arbitrary LLRs.

use proptest::prelude::*;
use radiohost_ldpc::{
    BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, LdpcError, LIFTING_SIZES,
};

fn params() -> impl Strategy<Value = CodeParams> {
    (
        any::<bool>(),
        0..LIFTING_SIZES.len(),
        0.0f64..1.0,
        0.0f64..1.0,
    )
        .prop_map(|(bg1, zi, kf, ef)| {
            let bg = if bg1 { BaseGraph::Bg1 } else { BaseGraph::Bg2 };
            // Keep blocks small so many cases run quickly.
            let zc = LIFTING_SIZES[zi % 30];
            let k = bg.systematic_cols() * zc;
            let kp = 1 + ((k - 1) as f64 * kf) as usize;
            let n = (bg.cols() - 2) * zc;
            let min_e = kp.saturating_sub(2 * zc).max(1);
            let max_e = n - (k - kp);
            let e = min_e + ((max_e - min_e) as f64 * ef) as usize;
            CodeParams::new(bg, zc, kp, e).unwrap()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn encode_then_decode_noiseless_is_identity(p in params(), seed in any::<u64>()) {
        let payload: Vec<u8> = (0..p.payload_bits).map(|i| ((seed >> (i % 64)) as u8 ^ (i as u8 / 3)) & 1).collect();
        let mut tx = vec![0u8; p.tx_bits];
        Encoder::new(p).encode(&payload, &mut tx).unwrap();
        let llr: Vec<f32> = tx.iter().map(|&b| if b == 0 { 10.0 } else { -10.0 }).collect();
        let mut out = vec![0u8; p.payload_bits];
        let mut dec = Decoder::new(p, DecoderConfig::default());
        let o = dec.decode(&llr, &mut out).unwrap();
        // With at least as many parity bits sent as systematic bits punctured, every
        // payload bit is recoverable and must come back. At higher rates a block can be
        // ambiguous (e.g. one punctured payload bit that no sent bit depends on), so the
        // only requirement there is a clean result.
        if p.tx_bits >= p.payload_bits + 2 * p.zc {
            prop_assert!(o.parity_ok);
            prop_assert_eq!(out, payload);
        } else {
            prop_assert!(out.iter().all(|&b| b <= 1));
        }
    }

    #[test]
    fn decode_never_panics_on_arbitrary_llrs(p in params(), raw in proptest::collection::vec(any::<u32>(), 0..2000)) {
        let llr: Vec<f32> = (0..p.tx_bits).map(|i| f32::from_bits(raw.get(i % raw.len().max(1)).copied().unwrap_or(0))).collect();
        let mut out = vec![0u8; p.payload_bits];
        let mut dec = Decoder::new(p, DecoderConfig { max_iterations: 3, ..Default::default() });
        match dec.decode(&llr, &mut out) {
            Ok(o) => prop_assert!(o.iterations >= 1 && o.iterations <= 3),
            Err(LdpcError::NanLlr { index }) => prop_assert!(llr[index].is_nan()),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
        prop_assert!(out.iter().all(|&b| b <= 1));
    }
}
