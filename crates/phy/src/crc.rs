//! CRCs of 3GPP TS 38.212 §5.1 over bit sequences (one `u8` of value 0/1 per bit,
//! the format the LDPC codec uses).
//!
//! All NR CRCs start from zero, are not reflected and have no final XOR, so the
//! parity bits appended to `a_0..a_{A-1}` make the whole sequence divisible by the
//! generator. Four 256-entry tables per polynomial (built at compile time) process 32
//! bits per step ("slicing by 4": the register's dependency chain is one step per 32
//! bits, not per 8), the bits packed eight at a time by one multiply; a bit-serial
//! reference checks it in the tests.

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

    /// `[k][b]`: the register after byte `b` and then `k` zero bytes, from zero.
    fn tables(self) -> &'static [[u32; 256]; 4] {
        match self {
            CrcKind::Crc24A => &TABLES_24A,
            CrcKind::Crc24B => &TABLES_24B,
            CrcKind::Crc24C => &TABLES_24C,
            CrcKind::Crc16 => &TABLES_16,
        }
    }

    fn table(self) -> &'static [u32; 256] {
        &self.tables()[0]
    }
}

const fn make_table(poly: u32, width: u32) -> [u32; 256] {
    let mut table = [0u32; 256];
    let top = 1u32 << (width - 1);
    let mask = if width == 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    };
    let mut byte = 0;
    while byte < 256 {
        let mut reg = (byte as u32) << (width - 8);
        let mut bit = 0;
        while bit < 8 {
            reg = if reg & top != 0 {
                (reg << 1) ^ poly
            } else {
                reg << 1
            };
            bit += 1;
        }
        table[byte] = reg & mask;
        byte += 1;
    }
    table
}

/// [`make_table`] and its continuations: `[k][b]` is `[0][b]` advanced by `k` zero bytes.
const fn make_tables(poly: u32, width: u32) -> [[u32; 256]; 4] {
    let mask = (1u32 << width) - 1;
    let mut t = [make_table(poly, width); 4];
    let mut k = 1;
    while k < 4 {
        let mut b = 0;
        while b < 256 {
            let reg = t[k - 1][b];
            t[k][b] = ((reg << 8) ^ t[0][(reg >> (width - 8)) as usize]) & mask;
            b += 1;
        }
        k += 1;
    }
    t
}

static TABLES_24A: [[u32; 256]; 4] = make_tables(CrcKind::Crc24A.poly(), 24);
static TABLES_24B: [[u32; 256]; 4] = make_tables(CrcKind::Crc24B.poly(), 24);
static TABLES_24C: [[u32; 256]; 4] = make_tables(CrcKind::Crc24C.poly(), 24);
static TABLES_16: [[u32; 256]; 4] = make_tables(CrcKind::Crc16.poly(), 16);

/// Eight bits (one per byte, any non-zero byte counting as 1) as one byte, the first
/// bit in the most significant place: each byte's "non-zero" flag (its low seven bits
/// plus 0x7f carry into bit 7; the OR adds bit 7 itself), then one multiply that moves
/// byte `i`'s flag to bit `63 - i` with no two partial products on the same bit.
#[inline(always)]
fn pack8(bits: &[u8; 8]) -> u32 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let x = u64::from_le_bytes(*bits);
    let flags = ((((x & LOW7) + LOW7) | x) >> 7) & 0x0101_0101_0101_0101;
    (flags.wrapping_mul(0x8040_2010_0804_0201) >> 56) as u32
}

/// CRC register over a bit sequence (each element 0 or 1; any non-zero counts as 1).
pub fn crc_bits(kind: CrcKind, bits: &[u8]) -> u32 {
    let width = kind.bits() as u32;
    let mask = (1u32 << width) - 1;
    let [t0, t1, t2, t3] = kind.tables();
    let mut reg = 0u32;
    let mut words = bits.chunks_exact(32);
    for word in &mut words {
        let byte = |i: usize| pack8(word[8 * i..8 * i + 8].try_into().expect("8 bits"));
        let w = byte(0) << 24 | byte(1) << 16 | byte(2) << 8 | byte(3);
        // 32 bits on, the register is the CRC from zero of the word XOR `reg` (moved to
        // its top bits): the sum over its bytes `i` of byte `i` then `3 - i` zero bytes.
        let v = (reg << (32 - width)) ^ w;
        reg = t3[(v >> 24) as usize]
            ^ t2[(v >> 16 & 0xff) as usize]
            ^ t1[(v >> 8 & 0xff) as usize]
            ^ t0[(v & 0xff) as usize];
    }
    let mut bytes = words.remainder().chunks_exact(8);
    for chunk in &mut bytes {
        let idx = ((reg >> (width - 8)) ^ pack8(chunk.try_into().expect("8 bits"))) & 0xFF;
        reg = ((reg << 8) ^ t0[idx as usize]) & mask;
    }
    for &b in bytes.remainder() {
        reg = step_bit(reg, b != 0, kind.poly(), width);
    }
    reg
}

/// CRC register over whole bytes (MSB first), e.g. for the standard check strings.
pub fn crc_bytes(kind: CrcKind, bytes: &[u8]) -> u32 {
    let width = kind.bits() as u32;
    let mask = (1u32 << width) - 1;
    let table = kind.table();
    bytes.iter().fold(0u32, |reg, &byte| {
        let idx = ((reg >> (width - 8)) ^ byte as u32) & 0xFF;
        ((reg << 8) ^ table[idx as usize]) & mask
    })
}

fn step_bit(reg: u32, bit: bool, poly: u32, width: u32) -> u32 {
    let feedback = ((reg >> (width - 1)) & 1 != 0) ^ bit;
    let shifted = (reg << 1) & ((1u32 << width) - 1);
    if feedback {
        shifted ^ poly
    } else {
        shifted
    }
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

    fn naive(kind: CrcKind, bits: &[u8]) -> u32 {
        let w = kind.bits() as u32;
        bits.iter()
            .fold(0, |reg, &b| step_bit(reg, b != 0, kind.poly(), w))
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

    proptest! {
        #[test]
        fn table_matches_bit_serial(bits in proptest::collection::vec(0u8..2, 0..700)) {
            for kind in [CrcKind::Crc24A, CrcKind::Crc24B, CrcKind::Crc24C, CrcKind::Crc16] {
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
