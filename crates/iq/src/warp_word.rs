//! The WARPLab 32-bit sample word.
//!
//! One word per complex sample, big-endian on the wire, I in bits 31..16 and Q in
//! bits 15..0. Two fixed-point interpretations exist:
//!
//! * **Fix_16_15** (host → node, TX buffers): each half is a signed 16-bit value
//!   with 15 fractional bits.
//! * **Fix_14_13** (node → host, RX buffers): each half holds a 14-bit two's
//!   complement value in bits 13..0 (the 12-bit ADC sample shifted left by 2);
//!   bits 15..14 are sign extension on real hardware but are ignored here.

use crate::{Cf32, Ci16};

/// Scale of a Fix_16_15 half: 2^15.
pub const FIX16_SCALE: f32 = 32768.0;
/// Scale of a Fix_14_13 half: 2^13.
pub const FIX14_SCALE: f32 = 8192.0;

/// A raw WARPLab sample word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WarpWord(pub u32);

impl WarpWord {
    /// Pack two 16-bit halves (used for Fix_16_15 TX samples).
    pub const fn from_halves(i: u16, q: u16) -> Self {
        Self(((i as u32) << 16) | q as u32)
    }

    pub const fn i_half(self) -> u16 {
        (self.0 >> 16) as u16
    }

    pub const fn q_half(self) -> u16 {
        self.0 as u16
    }

    /// Fix_16_15 word from a `Ci16` (the halves are the integers as they are).
    pub const fn from_ci16(s: Ci16) -> Self {
        Self::from_halves(s.re as u16, s.im as u16)
    }

    /// Interpret as Fix_16_15.
    pub const fn to_ci16(self) -> Ci16 {
        Ci16::new(self.i_half() as i16, self.q_half() as i16)
    }

    /// Fix_16_15 word from a float sample in [-1, 1), saturating.
    pub fn from_cf32_fix16(x: Cf32) -> Self {
        let q = |v: f32| (v * FIX16_SCALE).round().clamp(-32768.0, 32767.0) as i16;
        Self::from_ci16(Ci16::new(q(x.re), q(x.im)))
    }

    /// Interpret as Fix_16_15 floats.
    pub fn to_cf32_fix16(self) -> Cf32 {
        let s = self.to_ci16();
        Cf32::new(s.re as f32 / FIX16_SCALE, s.im as f32 / FIX16_SCALE)
    }

    /// The emulated radio's TX → RX path: each Fix_16_15 half becomes the nearest
    /// Fix_14_13 half (value / 4, ties away from zero, saturating at 8191): the
    /// DAC-to-ADC loopback with the ADC's 14-bit alignment. The error is at most
    /// 0.5 Fix_14_13 LSB except for the two largest Fix_16_15 values (32766, 32767),
    /// which saturate.
    pub const fn tx_to_rx(self) -> Self {
        const fn q(v: i16) -> i16 {
            let v = v as i32;
            let r = if v >= 0 {
                (v + 2) >> 2
            } else {
                -((-v + 2) >> 2)
            };
            if r > 8191 {
                8191
            } else {
                r as i16
            }
        }
        let s = self.to_ci16();
        Self::from_ci16(Ci16::new(q(s.re), q(s.im)))
    }

    /// The two 14-bit signed values of a Fix_14_13 word (bits 13..0 of each half,
    /// sign-extended from bit 13).
    pub const fn fix14_values(self) -> (i16, i16) {
        const fn sext14(h: u16) -> i16 {
            ((h << 2) as i16) >> 2
        }
        (sext14(self.i_half()), sext14(self.q_half()))
    }

    /// Interpret as Fix_14_13 floats.
    pub fn to_cf32_fix14(self) -> Cf32 {
        let (i, q) = self.fix14_values();
        Cf32::new(i as f32 / FIX14_SCALE, q as f32 / FIX14_SCALE)
    }

    /// `I ^ Q` of this word, as used by the WARPLab write checksum.
    pub const fn i_xor_q(self) -> u16 {
        self.i_half() ^ self.q_half()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_is_i_high_q_low() {
        let w = WarpWord::from_ci16(Ci16::new(0x1234, -1));
        assert_eq!(w.0, 0x1234_FFFF);
    }

    proptest! {
        #[test]
        fn tx_to_rx_preserves_value_at_fix14_scale(re: i16, im: i16) {
            let tx = WarpWord::from_ci16(Ci16::new(re, im));
            let rx = tx.tx_to_rx();
            let (i, q) = rx.fix14_values();
            let nearest = |v: i16| ((v as f64 / 4.0).round() as i32).min(8191) as i16;
            prop_assert_eq!(i, nearest(re));
            prop_assert_eq!(q, nearest(im));
            // Same physical value within half a Fix_14_13 LSB (below saturation).
            let a = tx.to_cf32_fix16();
            let b = rx.to_cf32_fix14();
            let half = 0.5 / FIX14_SCALE;
            prop_assert!(re > 32765 || (a.re - b.re).abs() <= half);
            prop_assert!(im > 32765 || (a.im - b.im).abs() <= half);
        }

        #[test]
        fn ci16_roundtrip(re: i16, im: i16) {
            let s = Ci16::new(re, im);
            prop_assert_eq!(WarpWord::from_ci16(s).to_ci16(), s);
        }
    }
}
