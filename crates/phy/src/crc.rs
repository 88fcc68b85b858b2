//! CRCs of 3GPP TS 38.212 §5.1 over bit sequences (one `u8` of value 0/1 per bit,
//! the format the LDPC codec uses).
//!
//! All NR CRCs start from zero, are not reflected and have no final XOR, so the
//! parity bits appended to `a_0..a_{A-1}` make the whole sequence divisible by the
//! generator. Here the register runs reflected (its lowest bit is the next to leave):
//! 64 bits packed first bit lowest, as the LDPC codec's packer leaves them (one
//! AVX-512 byte test, or two AVX2 byte masks), then go in with one XOR, and eight
//! 256-entry tables per polynomial (built at compile time) take them in one step
//! ("slicing by 8": the register's dependency chain is one step per 64 bits). The
//! result is reflected back at the end. A bit-serial reference checks it in the tests.

use radiohost_ldpc::pack_bits;

/// One of the NR CRC generator polynomials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrcKind {
    /// gCRC24A: transport-block CRC.
    Crc24A,
    /// gCRC24B: code-block CRC after segmentation.
    Crc24B,
    /// gCRC24C: polar-coded control information.
    Crc24C,
    /// gCRC16: small transport blocks.
    Crc16,
}

impl CrcKind {
    /// Generator polynomial without the leading `D^L` term.
    pub const fn poly(self) -> u32 {
        match self {
            CrcKind::Crc24A => 0x86_4CFB,
            CrcKind::Crc24B => 0x80_0063,
            CrcKind::Crc24C => 0xB2_B117,
            CrcKind::Crc16 => 0x1021,
        }
    }

    /// Number of parity bits `L`.
    pub const fn bits(self) -> usize {
        match self {
            CrcKind::Crc16 => 16,
            _ => 24,
        }
    }

    /// `[k][b]`: the reflected register after byte `b` (first bit lowest) and then
    /// `k` zero bytes, from zero.
    fn tables(self) -> &'static Tables {
        match self {
            CrcKind::Crc24A => &TABLES_24A,
            CrcKind::Crc24B => &TABLES_24B,
            CrcKind::Crc24C => &TABLES_24C,
            CrcKind::Crc16 => &TABLES_16,
        }
    }
}

type Tables = [[u32; 256]; 8];

/// `value`'s low `width` bits in reverse order.
const fn reflect(value: u32, width: u32) -> u32 {
    value.reverse_bits() >> (32 - width)
}

/// The reflected register advanced by one input bit.
#[inline(always)]
const fn step_bit(reg: u32, bit: u32, reflected_poly: u32) -> u32 {
    let reg = reg ^ bit;
    (reg >> 1) ^ (reflected_poly & (reg & 1).wrapping_neg())
}

const fn make_tables(poly: u32, width: u32) -> Tables {
    let rpoly = reflect(poly, width);
    let mut t = [[0u32; 256]; 8];
    let mut b = 0;
    while b < 256 {
        let mut reg = b as u32;
        let mut bit = 0;
        while bit < 8 {
            reg = step_bit(reg, 0, rpoly);
            bit += 1;
        }
        t[0][b] = reg;
        b += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut b = 0;
        while b < 256 {
            let reg = t[k - 1][b];
            t[k][b] = (reg >> 8) ^ t[0][(reg & 0xff) as usize];
            b += 1;
        }
        k += 1;
    }
    t
}

static TABLES_24A: Tables = make_tables(CrcKind::Crc24A.poly(), 24);
static TABLES_24B: Tables = make_tables(CrcKind::Crc24B.poly(), 24);
static TABLES_24C: Tables = make_tables(CrcKind::Crc24C.poly(), 24);
static TABLES_16: Tables = make_tables(CrcKind::Crc16.poly(), 16);

/// The reflected register after eight more bytes, `word`'s lowest byte first.
///
/// The register has at most 24 bits, so only the lookups of the first three bytes
/// wait for it; the other five come from `word` alone and are summed first, off the
/// chain that runs from one word to the next.
#[inline(always)]
fn step_word(t: &Tables, reg: u32, word: u64) -> u32 {
    let byte = |v: u64, i: u32| (v >> (8 * i) & 0xff) as usize;
    let ahead = t[4][byte(word, 3)]
        ^ t[3][byte(word, 4)]
        ^ t[2][byte(word, 5)]
        ^ t[1][byte(word, 6)]
        ^ t[0][byte(word, 7)];
    let v = word ^ reg as u64;
    ahead ^ t[7][byte(v, 0)] ^ t[6][byte(v, 1)] ^ t[5][byte(v, 2)]
}

/// The reflected register after one more byte.
#[inline(always)]
fn step_byte(t: &Tables, reg: u32, byte: u8) -> u32 {
    (reg >> 8) ^ t[0][((reg ^ byte as u32) & 0xff) as usize]
}

/// Bits packed per call of the packer: 4096 of them, on the stack.
const PACKED_WORDS: usize = 64;

/// CRC register over a bit sequence (each element 0 or 1; any non-zero counts as 1).
///
/// The bits are packed a few thousand at a time ([`pack_bits`], vector code where the
/// CPU has it) into words that the table steps then read. The steps stay scalar code:
/// inlined into an AVX-512 function with the packing, they became slow gathers.
pub fn crc_bits(kind: CrcKind, bits: &[u8]) -> u32 {
    let t = kind.tables();
    let width = kind.bits() as u32;
    let mut reg = 0u32;
    let mut words = [0u64; PACKED_WORDS];
    for chunk in bits.chunks(64 * PACKED_WORDS) {
        let words = &mut words[..chunk.len().div_ceil(64)];
        pack_bits(chunk, words);
        let whole = chunk.len() / 64;
        reg = words[..whole]
            .iter()
            .fold(reg, |reg, &w| step_word(t, reg, w));
        // Only the last chunk can end inside a word: its bytes, then its bits.
        let tail = chunk.len() % 64;
        if tail > 0 {
            let mut word = words[whole];
            for _ in 0..tail / 8 {
                reg = step_byte(t, reg, word as u8);
                word >>= 8;
            }
            for _ in 0..tail % 8 {
                reg = step_bit(reg, (word & 1) as u32, reflect(kind.poly(), width));
                word >>= 1;
            }
        }
    }
    reflect(reg, width)
}

/// CRC register over whole bytes (MSB first), e.g. for the standard check strings.
pub fn crc_bytes(kind: CrcKind, bytes: &[u8]) -> u32 {
    let t = kind.tables();
    let reg = bytes
        .iter()
        .fold(0, |reg, &byte| step_byte(t, reg, byte.reverse_bits()));
    reflect(reg, kind.bits() as u32)
}

/// Write the CRC of `bits[..bits.len() - L]` into the last `L` elements of `bits`
/// (MSB first), as 38.212 appends `p_0..p_{L-1}`.
///
/// # Panics
/// If `bits` is shorter than the CRC (a caller bug).
pub fn attach(kind: CrcKind, bits: &mut [u8]) {
    let l = kind.bits();
    assert!(bits.len() >= l, "crc::attach: buffer shorter than the CRC");
    let (data, parity) = bits.split_at_mut(bits.len() - l);
    let crc = crc_bits(kind, data);
    for (i, p) in parity.iter_mut().enumerate() {
        *p = ((crc >> (l - 1 - i)) & 1) as u8;
    }
}

/// Whether `bits` (data followed by its `L` parity bits) passes the CRC.
/// A sequence shorter than the CRC never passes.
pub fn check(kind: CrcKind, bits: &[u8]) -> bool {
    bits.len() >= kind.bits() && crc_bits(kind, bits) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KINDS: [CrcKind; 4] = [
        CrcKind::Crc24A,
        CrcKind::Crc24B,
        CrcKind::Crc24C,
        CrcKind::Crc16,
    ];

    /// Bit-serial CRC as 38.212 defines it: unreflected, highest register bit out.
    fn naive(kind: CrcKind, bits: &[u8]) -> u32 {
        let width = kind.bits() as u32;
        let mask = (1u32 << width) - 1;
        bits.iter().fold(0, |reg, &b| {
            let feedback = (reg >> (width - 1) & 1) ^ (b != 0) as u32;
            (reg << 1 & mask) ^ (kind.poly() & feedback.wrapping_neg())
        })
    }

    fn unpack(bytes: &[u8]) -> Vec<u8> {
        bytes
            .iter()
            .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1))
            .collect()
    }

    #[test]
    fn standard_check_values() {
        // Catalogue check values of CRC-24/LTE-A, CRC-24/LTE-B, CRC-16/XMODEM.
        let s = b"123456789";
        assert_eq!(crc_bytes(CrcKind::Crc24A, s), 0xCDE703);
        assert_eq!(crc_bytes(CrcKind::Crc24B, s), 0x23EF52);
        assert_eq!(crc_bytes(CrcKind::Crc16, s), 0x31C3);
        assert_eq!(crc_bits(CrcKind::Crc24A, &unpack(s)), 0xCDE703);
    }

    #[test]
    fn detects_every_single_bit_error() {
        let mut bits: Vec<u8> = (0..200).map(|i| ((i * 7 + 3) % 5 == 0) as u8).collect();
        attach(CrcKind::Crc24B, &mut bits);
        assert!(check(CrcKind::Crc24B, &bits));
        for i in 0..bits.len() {
            bits[i] ^= 1;
            assert!(!check(CrcKind::Crc24B, &bits), "missed flip at {i}");
            bits[i] ^= 1;
        }
        assert!(!check(CrcKind::Crc24A, &[1, 0, 1]));
    }

    #[test]
    fn lengths_around_the_packed_chunks() {
        // The bits are packed 4096 at a time: check both sides of each chunk edge.
        let bits: Vec<u8> = (0..12_400u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 31) as u8)
            .collect();
        for len in [4031, 4095, 4096, 4097, 4160, 8191, 8192, 8193, 8448, 12_400] {
            assert_eq!(
                crc_bits(CrcKind::Crc24B, &bits[..len]),
                naive(CrcKind::Crc24B, &bits[..len]),
                "{len} bits"
            );
        }
    }

    proptest! {
        #[test]
        fn table_matches_bit_serial(bits in proptest::collection::vec(0u8..2, 0..700)) {
            for kind in KINDS {
                prop_assert_eq!(crc_bits(kind, &bits), naive(kind, &bits));
            }
        }

        #[test]
        fn any_non_zero_byte_is_a_one(
            bits in proptest::collection::vec(prop_oneof![Just(0u8), 0u8..=255], 0..300)
        ) {
            for kind in [CrcKind::Crc24A, CrcKind::Crc16] {
                prop_assert_eq!(crc_bits(kind, &bits), naive(kind, &bits));
            }
        }

        #[test]
        fn attached_crc_checks(mut bits in proptest::collection::vec(0u8..2, 24..300)) {
            attach(CrcKind::Crc24A, &mut bits);
            prop_assert!(check(CrcKind::Crc24A, &bits));
        }
    }
}
