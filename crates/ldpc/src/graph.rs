//! The lifted parity-check matrix: base graph entries reduced to shifts for one Zc.

use crate::params::lifting_set_index;
use crate::tables::{Entry, BG1, BG2};
use crate::BaseGraph;

/// One non-zero Zc x Zc block: the identity cyclically shifted by `shift`, meaning check
/// lane `i` of the row block touches bit `(i + shift) mod Zc` of column block `col`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub col: usize,
    pub shift: usize,
}

/// Parity-check matrix of (bg, Zc) in block form, row by row.
#[derive(Clone, Debug)]
pub(crate) struct Graph {
    pub bg: BaseGraph,
    pub zc: usize,
    /// `blocks[row_start[r]..row_start[r + 1]]` are the blocks of row r, columns ascending.
    pub blocks: Vec<Block>,
    pub row_start: Vec<usize>,
}

pub(crate) fn table(bg: BaseGraph) -> &'static [Entry] {
    match bg {
        BaseGraph::Bg1 => &BG1,
        BaseGraph::Bg2 => &BG2,
    }
}

impl Graph {
    /// Lifts the base graph; `None` when `zc` is not a lifting size.
    pub fn new(bg: BaseGraph, zc: usize) -> Option<Graph> {
        Graph::interleaved(bg, zc, 1)
    }

    /// The graph of `count` codewords of lifting size `zc` decoded together, their
    /// bits interleaved (bit `i` of block `b` at lane `i * count + b`): one graph of
    /// lifting size `zc * count` whose shifts are `count` times the code's, since a
    /// cyclic shift by `s * count` of the interleaved lanes shifts every block by `s`
    /// and keeps each lane in its block. `None` when `zc` is not a lifting size.
    pub fn interleaved(bg: BaseGraph, zc: usize, count: usize) -> Option<Graph> {
        let ils = lifting_set_index(zc).ok()?;
        let entries = table(bg);
        let mut blocks = Vec::with_capacity(entries.len());
        let mut row_start = vec![0usize; bg.rows() + 1];
        for e in entries {
            blocks.push(Block {
                col: e.col as usize,
                shift: e.shift[ils] as usize % zc * count,
            });
            row_start[e.row as usize + 1] += 1;
        }
        for r in 0..bg.rows() {
            row_start[r + 1] += row_start[r];
        }
        Some(Graph {
            bg,
            zc: zc * count,
            blocks,
            row_start,
        })
    }

    pub fn row(&self, r: usize) -> &[Block] {
        &self.blocks[self.row_start[r]..self.row_start[r + 1]]
    }

    pub fn max_row_degree(&self) -> usize {
        (0..self.bg.rows())
            .map(|r| self.row(r).len())
            .max()
            .unwrap_or(0)
    }
}

/// `acc[i] ^= block[(i + shift) mod Zc]` for one-bit-per-byte vectors of length Zc.
pub(crate) fn xor_rotated(acc: &mut [u8], block: &[u8], shift: usize) {
    let zc = acc.len();
    let (head, tail) = acc.split_at_mut(zc - shift);
    for (a, b) in head.iter_mut().zip(&block[shift..]) {
        *a ^= *b;
    }
    for (a, b) in tail.iter_mut().zip(&block[..shift]) {
        *a ^= *b;
    }
}

/// H * c == 0 for a full unpunctured codeword (68*Zc or 52*Zc bits, one per byte).
/// False for a wrong length, an invalid Zc, or a byte that is not 0 or 1.
pub fn parity_check(bg: BaseGraph, zc: usize, full_codeword: &[u8]) -> bool {
    let Some(graph) = Graph::new(bg, zc) else {
        return false;
    };
    if full_codeword.len() != bg.cols() * zc || full_codeword.iter().any(|&b| b > 1) {
        return false;
    }
    let mut acc = vec![0u8; zc];
    (0..bg.rows()).all(|r| {
        acc.fill(0);
        for b in graph.row(r) {
            xor_rotated(
                &mut acc,
                &full_codeword[b.col * zc..(b.col + 1) * zc],
                b.shift,
            );
        }
        acc.iter().all(|&x| x == 0)
    })
}
