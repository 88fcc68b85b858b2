//! The per-frame instruction DAG (read-after-write dependences), built once per
//! [`FrameShape`] and shared by every frame of that shape.
//!
//! Instructions are numbered `0..len()` in a topological order; a frame's instruction
//! `i` is `template(i)` with the frame id filled in. Edges follow the table in
//! `station_common`/[`crate::isa`]:
//!
//! - `Load<s>` for every received symbol (ready on `input_ready`);
//! - `PilotFft<p> <- Load<p>`; `Zf<0,k> <- every PilotFft`;
//! - `UpFft<u> <- Load<u>`; `EqDemod<u,k> <- UpFft<u>, Zf<k>`;
//! - `Decode<u,g> <- every EqDemod<u,*>`, one per user group `g`; uplink
//!   `Store<0,0> <- every Decode`;
//! - downlink (when the shape has data symbols): `Encode<d,g>` per user group (no
//!   inputs);
//!   `Precode<d,k> <- Zf<k>, every Encode<d,*>` (`Zf<k>` only for the reference symbol);
//!   `Ifft<d> <- every Precode<d,*>`; `Store<d,0> <- Ifft<d>`.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use crate::isa::{FrameId, Instr, Nanos, Opcode};
use crate::shape::FrameShape;

/// Index of an instruction inside a frame's DAG.
pub type InstrIdx = u32;

/// Instruction list and dependence edges of one frame shape.
#[derive(Clone, Debug)]
pub struct FrameDag {
    /// Instructions with `frame == 0`, in topological order.
    instrs: Vec<Instr>,
    preds: Vec<Vec<InstrIdx>>,
    succs: Vec<Vec<InstrIdx>>,
    /// Looked up on every dispatch: a fast hash.
    index: FxHashMap<(u16, Opcode, u16), InstrIdx>,
    /// `load_of_symbol[s]` = index of `Load<s>` if `s` is a received symbol.
    load_of_symbol: Vec<Option<InstrIdx>>,
}

struct Builder {
    dag: FrameDag,
}

impl Builder {
    fn add(&mut self, symbol: usize, opcode: Opcode, part: usize, preds: &[InstrIdx]) -> InstrIdx {
        let idx = self.dag.instrs.len() as InstrIdx;
        let instr = Instr::new(0, symbol, opcode, part);
        self.dag.instrs.push(instr);
        self.dag.preds.push(preds.to_vec());
        self.dag.succs.push(Vec::new());
        for &p in preds {
            self.dag.succs[p as usize].push(idx);
        }
        self.dag
            .index
            .insert((instr.symbol, instr.opcode, instr.part), idx);
        idx
    }
}

impl FrameDag {
    /// Build the DAG of one frame of `shape`.
    pub fn build(shape: &FrameShape) -> Self {
        let symbols = shape
            .received_symbols()
            .into_iter()
            .chain(shape.downlink_reference)
            .chain(shape.downlink_symbols.iter().copied())
            .max()
            .map_or(1, |m| m + 1);
        let mut b = Builder {
            dag: FrameDag {
                instrs: Vec::new(),
                preds: Vec::new(),
                succs: Vec::new(),
                index: FxHashMap::default(),
                load_of_symbol: vec![None; symbols],
            },
        };
        let mut loads = HashMap::new();
        for s in shape.received_symbols() {
            let l = b.add(s, Opcode::Load, 0, &[]);
            b.dag.load_of_symbol[s] = Some(l);
            loads.insert(s, l);
        }
        let pilot_ffts: Vec<InstrIdx> = shape
            .pilot_symbols
            .iter()
            .map(|&p| b.add(p, Opcode::PilotFft, 0, &[loads[&p]]))
            .collect();
        let zfs: Vec<InstrIdx> = (0..shape.parts)
            .map(|k| b.add(0, Opcode::Zf, k, &pilot_ffts))
            .collect();
        let mut decodes = Vec::new();
        for &u in &shape.uplink_symbols {
            let fft = b.add(u, Opcode::UpFft, 0, &[loads[&u]]);
            let eqs: Vec<InstrIdx> = (0..shape.parts)
                .map(|k| b.add(u, Opcode::EqDemod, k, &[fft, zfs[k]]))
                .collect();
            for g in 0..shape.user_groups {
                decodes.push(b.add(u, Opcode::Decode, g, &eqs));
            }
        }
        if !decodes.is_empty() {
            b.add(0, Opcode::Store, 0, &decodes);
        }
        if shape.has_downlink() {
            if let Some(dref) = shape.downlink_reference {
                let pre: Vec<InstrIdx> = (0..shape.parts)
                    .map(|k| b.add(dref, Opcode::Precode, k, &[zfs[k]]))
                    .collect();
                let ifft = b.add(dref, Opcode::Ifft, 0, &pre);
                b.add(dref, Opcode::Store, 0, &[ifft]);
            }
            for &d in &shape.downlink_symbols {
                let encs: Vec<InstrIdx> = (0..shape.user_groups)
                    .map(|g| b.add(d, Opcode::Encode, g, &[]))
                    .collect();
                let pre: Vec<InstrIdx> = (0..shape.parts)
                    .map(|k| {
                        let mut deps = encs.clone();
                        deps.push(zfs[k]);
                        b.add(d, Opcode::Precode, k, &deps)
                    })
                    .collect();
                let ifft = b.add(d, Opcode::Ifft, 0, &pre);
                b.add(d, Opcode::Store, 0, &[ifft]);
            }
        }
        b.dag
    }

    /// Number of instructions per frame.
    pub fn len(&self) -> usize {
        self.instrs.len()
    }

    /// Whether the DAG has no instruction (never true for a valid shape).
    pub fn is_empty(&self) -> bool {
        self.instrs.is_empty()
    }

    /// Instruction `i` of `frame`.
    pub fn instr(&self, frame: FrameId, i: InstrIdx) -> Instr {
        Instr {
            frame,
            ..self.instrs[i as usize]
        }
    }

    /// Index of `instr` (its frame is ignored), if it belongs to this shape.
    pub fn index_of(&self, instr: &Instr) -> Option<InstrIdx> {
        self.index
            .get(&(instr.symbol, instr.opcode, instr.part))
            .copied()
    }

    /// Index of `Load<symbol>`, if `symbol` is received from the radio units.
    pub fn load_of_symbol(&self, symbol: usize) -> Option<InstrIdx> {
        self.load_of_symbol.get(symbol).copied().flatten()
    }

    /// Opcode of instruction `i`.
    pub fn opcode(&self, i: InstrIdx) -> Opcode {
        self.instrs[i as usize].opcode
    }

    /// Instructions `i` reads from.
    pub fn preds(&self, i: InstrIdx) -> &[InstrIdx] {
        &self.preds[i as usize]
    }

    /// Instructions that read what `i` writes.
    pub fn succs(&self, i: InstrIdx) -> &[InstrIdx] {
        &self.succs[i as usize]
    }

    /// A topological order (indices are assigned in one, so this is `0..len`).
    pub fn topo_order(&self) -> impl Iterator<Item = InstrIdx> {
        0..self.instrs.len() as InstrIdx
    }

    /// Count of instructions per opcode (indexed by [`Opcode::index`]).
    pub fn opcode_counts(&self) -> [usize; Opcode::ALL.len()] {
        let mut c = [0; Opcode::ALL.len()];
        for i in &self.instrs {
            c[i.opcode.index()] += 1;
        }
        c
    }

    /// For every instruction, the calibrated time of it and its longest chain of
    /// successors to the end of the frame (the "critical path to end" slack uses).
    pub fn critical_path_to_end(&self, latency: impl Fn(Opcode) -> Nanos) -> Vec<Nanos> {
        let mut cp = vec![0; self.len()];
        for i in (0..self.len()).rev() {
            let tail = self.succs[i]
                .iter()
                .map(|&s| cp[s as usize])
                .max()
                .unwrap_or(0);
            cp[i] = latency(self.instrs[i].opcode).saturating_add(tail);
        }
        cp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shape(pilots: usize, up: usize, down: usize, users: usize, parts: usize) -> FrameShape {
        let mut next = 0..;
        let pilot_symbols: Vec<usize> = (&mut next).take(pilots).collect();
        let uplink_symbols: Vec<usize> = (&mut next).take(up).collect();
        let dl: Vec<usize> = (&mut next).take(down).collect();
        FrameShape {
            antennas: 8,
            users,
            data_num: 64,
            pilot_symbols,
            uplink_symbols,
            downlink_reference: dl.first().copied(),
            downlink_symbols: dl.iter().skip(1).copied().collect(),
            parts,
            zf_batch_span: 1,
            user_groups: users,
        }
    }

    fn expected_len(s: &FrameShape) -> usize {
        let (p, u, k, n) = (
            s.pilot_symbols.len(),
            s.uplink_symbols.len(),
            s.parts,
            s.user_groups,
        );
        let mut len = (p + u) + p + k + u + u * k + u * n + usize::from(u > 0);
        if s.has_downlink() {
            let d = s.downlink_symbols.len();
            len += d * n + (d + 1) * k + 2 * (d + 1);
        }
        len
    }

    #[test]
    fn uplink_only_counts_and_edges() {
        let s = shape(1, 2, 0, 2, 3);
        let dag = FrameDag::build(&s);
        assert_eq!(dag.len(), expected_len(&s));
        let c = dag.opcode_counts();
        assert_eq!(c[Opcode::EqDemod.index()], 6);
        assert_eq!(c[Opcode::Decode.index()], 4);
        assert_eq!(c[Opcode::Store.index()], 1);
        assert_eq!(c[Opcode::Encode.index()], 0);
        let eq = dag.index_of(&Instr::new(0, 1, Opcode::EqDemod, 2)).unwrap();
        let preds: Vec<Instr> = dag.preds(eq).iter().map(|&p| dag.instr(0, p)).collect();
        assert_eq!(
            preds,
            vec![
                Instr::new(0, 1, Opcode::UpFft, 0),
                Instr::new(0, 0, Opcode::Zf, 2)
            ]
        );
        assert_eq!(
            dag.load_of_symbol(2),
            dag.index_of(&Instr::new(0, 2, Opcode::Load, 0))
        );
        assert_eq!(dag.load_of_symbol(7), None);
    }

    #[test]
    fn reference_precode_depends_on_zf_only() {
        let s = shape(1, 1, 3, 2, 2);
        let dag = FrameDag::build(&s);
        assert_eq!(dag.len(), expected_len(&s));
        let dref = s.downlink_reference.unwrap();
        let p = dag
            .index_of(&Instr::new(0, dref, Opcode::Precode, 1))
            .unwrap();
        assert_eq!(dag.preds(p).len(), 1);
        assert_eq!(dag.opcode(dag.preds(p)[0]), Opcode::Zf);
        let d = s.downlink_symbols[0];
        let p = dag.index_of(&Instr::new(0, d, Opcode::Precode, 0)).unwrap();
        assert_eq!(dag.preds(p).len(), s.user_groups + 1);
    }

    #[test]
    fn user_groups_cut_decode_and_encode() {
        let s = FrameShape {
            zf_batch_span: 1,
            user_groups: 2,
            ..shape(1, 2, 3, 5, 1)
        };
        let dag = FrameDag::build(&s);
        assert_eq!(dag.len(), expected_len(&s));
        let c = dag.opcode_counts();
        // 2 uplink and 2 downlink data symbols, 2 groups each.
        assert_eq!(
            [c[Opcode::Decode.index()], c[Opcode::Encode.index()]],
            [4, 4]
        );
        let d = s.downlink_symbols[1];
        let p = dag.index_of(&Instr::new(0, d, Opcode::Precode, 0)).unwrap();
        let preds: Vec<Instr> = dag.preds(p).iter().map(|&p| dag.instr(0, p)).collect();
        assert!(preds.contains(&Instr::new(0, d, Opcode::Encode, 1)));
        assert_eq!(dag.index_of(&Instr::new(0, d, Opcode::Encode, 2)), None);
    }

    #[test]
    fn critical_path_is_longest_chain() {
        let s = shape(1, 1, 0, 1, 1);
        let dag = FrameDag::build(&s);
        // Load(pilot) -> PilotFft -> Zf -> EqDemod -> Decode -> Store: 6 instructions.
        let cp = dag.critical_path_to_end(|_| 10);
        assert_eq!(cp.iter().max(), Some(&60));
        let store = dag.index_of(&Instr::new(0, 0, Opcode::Store, 0)).unwrap();
        assert_eq!(cp[store as usize], 10);
    }

    #[test]
    fn every_stored_config_builds() {
        for name in ["8x2", "16x4", "64x16", "64x16_downlink"] {
            let path = format!("{}/../phy/configs/{name}.json", env!("CARGO_MANIFEST_DIR"));
            let cfg = radiohost_phy::FrameConfig::load(std::path::Path::new(&path)).unwrap();
            let s = FrameShape::new(&cfg, 4).unwrap();
            let dag = FrameDag::build(&s);
            assert_eq!(dag.len(), expected_len(&s), "{name}");
        }
    }

    proptest! {
        #[test]
        fn dag_is_acyclic_and_consistent(
            pilots in 1usize..3, up in 0usize..5, down in 0usize..5,
            users in 1usize..5, parts in 1usize..6,
        ) {
            let s = shape(pilots, up, down, users, parts);
            prop_assume!(up > 0 || s.has_downlink());
            let dag = FrameDag::build(&s);
            prop_assert_eq!(dag.len(), expected_len(&s));
            for i in dag.topo_order() {
                for &p in dag.preds(i) {
                    // Topological numbering: every edge goes forward, so no cycle.
                    prop_assert!(p < i);
                    prop_assert!(dag.succs(p).contains(&i));
                    let (a, b) = (dag.instr(0, p), dag.instr(0, i));
                    let ok = matches!(
                        (a.opcode, b.opcode),
                        (Opcode::Load, Opcode::PilotFft | Opcode::UpFft)
                            | (Opcode::PilotFft, Opcode::Zf)
                            | (Opcode::UpFft | Opcode::Zf, Opcode::EqDemod)
                            | (Opcode::EqDemod, Opcode::Decode)
                            | (Opcode::Decode, Opcode::Store)
                            | (Opcode::Encode | Opcode::Zf, Opcode::Precode)
                            | (Opcode::Precode, Opcode::Ifft)
                            | (Opcode::Ifft, Opcode::Store)
                    );
                    prop_assert!(ok, "unexpected edge {} -> {}", a, b);
                    // Same symbol except where the table crosses symbols.
                    let crosses = matches!(b.opcode, Opcode::Zf | Opcode::EqDemod | Opcode::Precode)
                        || (b.opcode == Opcode::Store && a.opcode == Opcode::Decode);
                    if !crosses {
                        prop_assert_eq!(a.symbol, b.symbol);
                    }
                }
                let instr = dag.instr(5, i);
                prop_assert_eq!(instr.frame, 5);
                prop_assert_eq!(dag.index_of(&instr), Some(i));
            }
        }
    }
}
