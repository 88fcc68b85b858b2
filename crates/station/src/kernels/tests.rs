use std::path::Path;

use radiohost_iq::Ci16;
use radiohost_phy::downlink::{DownlinkInfo, DownlinkUserOutput, UserEmulator};
use radiohost_phy::generator::{frame_rng, Generator};
use radiohost_phy::uplink::ErrorCount;
use radiohost_phy::FrameConfig;

use super::*;
use crate::kernels::slot::{read, write};

/// A configuration from phy's configs, else from the station's own (32x8).
pub(crate) fn phy_config(name: &str) -> FrameConfig {
    let phy = format!("{}/../phy/configs/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let own = format!("{}/configs/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let path = if Path::new(&phy).exists() { phy } else { own };
    FrameConfig::load(Path::new(&path)).unwrap()
}

/// Stage a generated frame's received symbols and downlink payload into `slot`.
pub(crate) fn stage(ctx: &KernelContext, slot: &FrameSlot, samples: &[Ci16], dl: &[Vec<u8>]) {
    for (rx, sym) in ctx.shape.received_symbols().into_iter().enumerate() {
        slot.stage_symbol_from_frame(ctx, rx, sym, samples);
    }
    write(&slot.downlink_payload).clone_from_slice(dl);
}

fn run_config(name: &str, parts: usize, frames: u64) {
    run_frames(name, &phy_config(name), parts, frames);
}

fn run_frames(name: &str, cfg: &FrameConfig, parts: usize, frames: u64) {
    let ctx = KernelContext::new(cfg, parts).unwrap();
    let slot = FrameSlot::new(&ctx);
    let mut scratch = Scratch::new(&ctx).unwrap();
    let mut gen = Generator::new(cfg);
    let mut ues = UserEmulator::new(cfg).unwrap();
    let mut dl_out = DownlinkUserOutput::for_config(cfg);
    let mut tx = vec![Ci16::default(); cfg.antennas * cfg.frame_len()];
    for f in 0..frames {
        let truth = gen.frame(f).unwrap();
        stage(&ctx, &slot, &truth.samples, &truth.downlink_payload);
        for instr in ctx.frame_program(f) {
            execute(&ctx, &slot, instr, &mut scratch).unwrap();
        }
        let payload = read(&slot.uplink_payload);
        let blocks = read(&slot.uplink_blocks);
        let c = ErrorCount::compare(
            &truth.uplink_payload,
            &payload,
            &blocks,
            cfg.block_payload_bits(),
        );
        assert!(c.blocks > 0);
        assert_eq!(
            (c.bit_errors, c.crc_failures),
            (0, 0),
            "{name} uplink frame {f}: {c:?}"
        );
        assert_eq!(*payload, truth.uplink_payload);

        slot.assemble_downlink(&ctx, &mut tx);
        let info = DownlinkInfo {
            tx_gain: ctx.tx_gain,
            beta: 1.0,
        };
        let mut rng = frame_rng(cfg.seed, f, 1);
        ues.receive(&tx, &info, &truth.channel, &mut rng, &mut dl_out)
            .unwrap();
        let c = ErrorCount::compare(
            &truth.downlink_payload,
            &dl_out.payload,
            &dl_out.blocks,
            cfg.block_payload_bits(),
        );
        assert!(c.blocks > 0);
        assert_eq!(
            (c.bit_errors, c.crc_failures),
            (0, 0),
            "{name} downlink frame {f}: {c:?}"
        );
    }
}

#[test]
fn dag_order_decodes_8x2_uplink_and_downlink() {
    run_config("8x2", 3, 2);
}

/// One part (the default for 8x2 and 16x4 on a few cores): the IFFT reads the
/// precoded part in place instead of gathering it.
#[test]
fn dag_order_decodes_8x2_at_one_part() {
    run_config("8x2", 1, 2);
}

/// Parts whose boundaries cut ZF groups and 16-group ZF batches (300 subcarriers in
/// 11 parts of 27-28, more parts than the 10 batches, so cut evenly; groups of 2):
/// both parts solve the shared group, and every subcarrier is equalised and
/// precoded with its own group's detector.
#[test]
fn parts_cutting_zf_groups_and_batches_decode_8x2() {
    let cfg = phy_config("8x2");
    let ctx = KernelContext::new(&cfg, 11).unwrap();
    let cut = (0..11).any(|k| !ctx.shape.part_range(k).start.is_multiple_of(cfg.zf_block));
    assert!(
        cut,
        "no part boundary inside a ZF group: the test proves nothing"
    );
    run_config("8x2", 11, 2);
}

/// ZF groups as wide as a slice (the per-group kernels, as 64x16's groups of 16
/// take) in parts that start inside slices and groups.
#[test]
fn slice_wide_zf_groups_in_parts_cutting_slices_decode_8x2() {
    let mut cfg = phy_config("8x2");
    cfg.zf_block = 16;
    let ctx = KernelContext::new(&cfg, 7).unwrap();
    assert!(!ctx.lanewise(), "groups of 16 take the per-group kernels");
    let cut = (0..7).any(|k| !ctx.shape.part_range(k).start.is_multiple_of(SLICE));
    assert!(
        cut,
        "no part starts inside a slice: the test proves nothing"
    );
    run_frames("8x2, groups of 16", &cfg, 7, 2);
    // Two parts are its two ZF batches (256 + 44 subcarriers), cut on a batch.
    let ctx = KernelContext::new(&cfg, 2).unwrap();
    assert_eq!(ctx.shape.part_range(1), 256..300);
    run_frames("8x2, groups of 16, parts on batches", &cfg, 2, 2);
}

#[test]
fn dag_order_decodes_16x4_uplink_and_downlink() {
    run_config("16x4", 4, 1);
}

#[test]
fn dag_order_decodes_32x8_uplink_and_downlink() {
    run_config("32x8", 5, 1);
}

#[test]
fn frame_program_is_the_dag_in_topological_order() {
    let cfg = phy_config("8x2");
    for parts in [1, 3] {
        let ctx = KernelContext::new(&cfg, parts).unwrap();
        let dag = crate::dag::FrameDag::build(&ctx.shape);
        let prog = ctx.frame_program(7);
        assert_eq!(prog.len(), dag.len());
        let mut seen = std::collections::HashSet::new();
        for i in &prog {
            let idx = dag.index_of(i).expect("instruction of the DAG");
            for p in dag.preds(idx) {
                assert!(seen.contains(p), "{i} before its dependence");
            }
            seen.insert(idx);
        }
    }
}

#[test]
fn wrong_input_fails_the_crc_instead_of_passing() {
    // A frame whose pilots come from another frame: the detector is wrong, so blocks
    // must fail their CRC (the check above can fail).
    let cfg = phy_config("8x2");
    let ctx = KernelContext::new(&cfg, 2).unwrap();
    let slot = FrameSlot::new(&ctx);
    let mut scratch = Scratch::new(&ctx).unwrap();
    let mut gen = Generator::new(&cfg);
    let a = gen.frame(0).unwrap();
    let b = gen.frame(1).unwrap();
    stage(&ctx, &slot, &a.samples, &a.downlink_payload);
    slot.stage_symbol_from_frame(&ctx, 0, ctx.shape.pilot_symbols[0], &b.samples);
    for instr in ctx.frame_program(0) {
        execute(&ctx, &slot, instr, &mut scratch).unwrap();
    }
    let blocks = read(&slot.uplink_blocks);
    assert!(blocks.iter().flatten().any(|r| !r.crc_ok));
}

#[test]
fn operands_outside_the_shape_are_errors() {
    let cfg = phy_config("8x2");
    let ctx = KernelContext::new(&cfg, 2).unwrap();
    let slot = FrameSlot::new(&ctx);
    let mut scratch = Scratch::new(&ctx).unwrap();
    let u = ctx.shape.uplink_symbols[0];
    for bad in [
        Instr::new(0, u, Opcode::PilotFft, 0),
        Instr::new(0, 0, Opcode::Zf, 2),
        Instr::new(0, u, Opcode::Decode, 2),
        Instr::new(0, 99, Opcode::Load, 0),
        Instr::new(0, u, Opcode::Precode, 0),
        Instr::new(0, 0, Opcode::Encode, 0),
    ] {
        assert!(
            matches!(
                execute(&ctx, &slot, bad, &mut scratch),
                Err(KernelError::BadOperand { .. })
            ),
            "{bad}"
        );
    }
    write(&slot.downlink_payload)[1].clear();
    let d = ctx.shape.downlink_symbols[0];
    assert!(matches!(
        execute(
            &ctx,
            &slot,
            Instr::new(0, d, Opcode::Encode, 0),
            &mut scratch
        ),
        // 8x2's one user group: user 0 encodes, user 1's payload is refused.
        Err(KernelError::Payload { user: 1, .. })
    ));
}

#[test]
fn only_load_and_downlink_store_are_ordering_only() {
    let cfg = phy_config("8x2");
    let ctx = KernelContext::new(&cfg, 2).unwrap();
    let s = &ctx.shape;
    let (p, u, d) = (
        s.pilot_symbols[0],
        s.uplink_symbols[0],
        s.downlink_symbols[0],
    );
    for instr in [
        Instr::new(0, p, Opcode::Load, 0),
        Instr::new(0, u, Opcode::Load, 0),
        Instr::new(0, d, Opcode::Store, 0),
        Instr::new(0, s.downlink_reference.unwrap(), Opcode::Store, 0),
    ] {
        assert!(
            matches!(ordering_only(&ctx, instr), Some(Ok(()))),
            "{instr}"
        );
    }
    // Wrong operands are refused there too, as `execute` refuses them.
    for instr in [
        Instr::new(0, d, Opcode::Load, 0),
        Instr::new(0, u, Opcode::Load, 1),
        Instr::new(0, u, Opcode::Store, 0),
    ] {
        assert!(
            matches!(
                ordering_only(&ctx, instr),
                Some(Err(KernelError::BadOperand { .. }))
            ),
            "{instr}"
        );
    }
    // The uplink Store copies the payload, and every other opcode runs a kernel.
    let work: Vec<Instr> = ctx
        .frame_program(0)
        .into_iter()
        .filter(|i| ordering_only(&ctx, *i).is_none())
        .collect();
    assert!(work.contains(&Instr::new(0, 0, Opcode::Store, 0)));
    assert!(work
        .iter()
        .all(|i| i.opcode != Opcode::Load && (i.opcode != Opcode::Store || i.symbol == 0)));
}
