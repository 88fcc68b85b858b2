//! [`Ci16Buf`]: ci16 samples that start on a cache line.
//!
//! Why: a `Vec<Ci16>` is aligned to 4 bytes and the system allocator promises no
//! more than 16 (glibc put the generator's frame 16 bytes into a line), so every
//! 16-sample (64-byte) vector load of it could span two lines. The batched OFDM
//! front end reads each antenna's symbol as such loads; with the frame on a line
//! boundary its fft stage took about 6% less time on a Zen 5 core
//! (docs/BENCHMARKS.md, PHY, sessions 49-50). A NIC's or radio's DMA buffers start
//! on a line boundary too.

use std::ops::{Deref, DerefMut};

use crate::Ci16;

/// Samples per cache line.
const PER_LINE: usize = 16;

/// One cache line of samples.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
#[repr(C, align(64))]
struct Line([Ci16; PER_LINE]);

/// A fixed-length run of [`Ci16`] whose first sample starts a 64-byte cache line.
/// Dereferences to `[Ci16]`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Ci16Buf {
    lines: Vec<Line>,
    len: usize,
}

impl Ci16Buf {
    /// `len` zero samples.
    pub fn zeroed(len: usize) -> Self {
        Self {
            lines: vec![Line::default(); len.div_ceil(PER_LINE)],
            len,
        }
    }

    /// A copy of `samples`.
    pub fn from_slice(samples: &[Ci16]) -> Self {
        let mut buf = Self::zeroed(samples.len());
        buf.copy_from_slice(samples);
        buf
    }
}

impl Deref for Ci16Buf {
    type Target = [Ci16];
    fn deref(&self) -> &[Ci16] {
        // SAFETY: `Line` is `repr(C)` around 16 `Ci16` with no padding (64 bytes,
        // aligned to 64), so the lines are `16 * lines.len() >= len` samples.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast(), self.len) }
    }
}

impl DerefMut for Ci16Buf {
    fn deref_mut(&mut self) -> &mut [Ci16] {
        // SAFETY: as in `deref`.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast(), self.len) }
    }
}

impl std::fmt::Debug for Ci16Buf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ci16Buf").field("len", &self.len).finish()
    }
}

impl FromIterator<Ci16> for Ci16Buf {
    fn from_iter<I: IntoIterator<Item = Ci16>>(samples: I) -> Self {
        Self::from_slice(&samples.into_iter().collect::<Vec<_>>())
    }
}

impl PartialEq<Vec<Ci16>> for Ci16Buf {
    fn eq(&self, other: &Vec<Ci16>) -> bool {
        **self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_a_line_and_holds_its_length() {
        for len in [0, 1, 15, 16, 17, 1000] {
            let mut buf = Ci16Buf::zeroed(len);
            assert_eq!(buf.len(), len);
            assert_eq!(buf.as_ptr() as usize % 64, 0, "len {len}");
            assert!(buf.iter().all(|&s| s == Ci16::default()));
            for (i, s) in buf.iter_mut().enumerate() {
                *s = Ci16::new(i as i16, -(i as i16));
            }
            let want: Vec<Ci16> = (0..len).map(|i| Ci16::new(i as i16, -(i as i16))).collect();
            assert_eq!(buf, want);
            assert_eq!(Ci16Buf::from_slice(&want), buf);
            assert_eq!(buf.clone().as_ptr() as usize % 64, 0);
        }
    }
}
