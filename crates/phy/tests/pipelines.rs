//! End-to-end: generated frames through the reference uplink and downlink.

use std::path::Path;

use radiohost_phy::downlink::{DownlinkPipeline, DownlinkUserOutput, UserEmulator};
use radiohost_phy::generator::{frame_rng, Generator};
use radiohost_phy::recording;
use radiohost_phy::uplink::{ErrorCount, UplinkOutput, UplinkPipeline};
use radiohost_phy::FrameConfig;

fn config(name: &str) -> FrameConfig {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("configs")
        .join(name);
    FrameConfig::load(&p).unwrap()
}

fn with(cfg: &FrameConfig, edit: impl FnOnce(&mut serde_json::Value)) -> FrameConfig {
    let mut v = serde_json::to_value(&cfg.file).unwrap();
    edit(&mut v);
    FrameConfig::from_json(&v.to_string()).unwrap()
}

fn uplink_errors(cfg: &FrameConfig, frames: u64) -> ErrorCount {
    let mut gen = Generator::new(cfg);
    let mut ul = UplinkPipeline::new(cfg).unwrap();
    let mut out = UplinkOutput::for_config(cfg);
    let mut total = ErrorCount::default();
    for f in 0..frames {
        let frame = gen.frame(f).unwrap();
        ul.process_frame(&frame.samples, &mut out).unwrap();
        let c = ErrorCount::compare(
            &frame.uplink_payload,
            &out.payload,
            &out.blocks,
            cfg.block_payload_bits(),
        );
        total.add(&c);
    }
    total
}

fn downlink_errors(cfg: &FrameConfig, frames: u64) -> ErrorCount {
    let mut gen = Generator::new(cfg);
    let mut dl = DownlinkPipeline::new(cfg);
    let mut ues = UserEmulator::new(cfg).unwrap();
    let mut out = DownlinkUserOutput::for_config(cfg);
    let mut tx = vec![Default::default(); cfg.antennas * cfg.frame_len()];
    let mut total = ErrorCount::default();
    for f in 0..frames {
        let frame = gen.frame(f).unwrap();
        let info = dl
            .process_frame(&frame.samples, &frame.downlink_payload, &mut tx)
            .unwrap();
        let mut rng = frame_rng(cfg.seed, f, 1);
        ues.receive(&tx, &info, &frame.channel, &mut rng, &mut out)
            .unwrap();
        let c = ErrorCount::compare(
            &frame.downlink_payload,
            &out.payload,
            &out.blocks,
            cfg.block_payload_bits(),
        );
        total.add(&c);
    }
    total
}

fn assert_clean(c: ErrorCount, what: &str) {
    assert!(c.blocks > 0, "{what}: no blocks were sent");
    assert_eq!(c.bit_errors, 0, "{what}: {c:?}");
    assert_eq!(c.crc_failures, 0, "{what}: {c:?}");
}

#[test]
fn uplink_8x2_and_16x4_error_free() {
    assert_clean(uplink_errors(&config("8x2.json"), 3), "8x2 uplink");
    assert_clean(uplink_errors(&config("16x4.json"), 2), "16x4 uplink");
}

#[test]
fn uplink_64x16_error_free() {
    // One frame of the full-size configuration keeps the test fast.
    assert_clean(uplink_errors(&config("64x16.json"), 1), "64x16 uplink");
}

#[test]
fn uplink_time_orthogonal_pilots_and_other_orders() {
    let base = config("8x2.json");
    for (m, layout, schedule) in [
        ("QPSK", "time_orthogonal", "PPUUUG"),
        ("64QAM", "frequency_orthogonal", "PUUUG"),
        ("256QAM", "time_orthogonal", "PPUUU"),
    ] {
        let cfg = with(&base, |v| {
            v["modulation"] = m.into();
            v["pilot_layout"] = layout.into();
            v["frame_schedule"] = schedule.into();
            v["snr_db"] = 35.0.into();
        });
        assert_clean(uplink_errors(&cfg, 1), m);
    }
}

#[test]
fn uplink_fails_visibly_at_low_snr() {
    // The CRC must flag what the decoder could not fix: at -5 dB per antenna with
    // 16QAM rate 1/3 on 8x2, blocks fail and the CRC says so.
    let cfg = with(&config("8x2.json"), |v| v["snr_db"] = (-5.0).into());
    let c = uplink_errors(&cfg, 1);
    assert!(c.block_errors > 0, "{c:?}");
    assert!(c.crc_failures >= c.block_errors, "{c:?}");
}

#[test]
fn downlink_8x2_and_16x4_error_free() {
    assert_clean(downlink_errors(&config("8x2.json"), 2), "8x2 downlink");
    assert_clean(downlink_errors(&config("16x4.json"), 1), "16x4 downlink");
}

#[test]
fn downlink_64x16_error_free() {
    let cfg = with(&config("64x16_downlink.json"), |v| {
        v["frame_schedule"] = "PDDDD".into()
    });
    assert_clean(downlink_errors(&cfg, 1), "64x16 downlink");
}

#[test]
fn generator_is_reproducible_and_recordings_roundtrip() {
    let cfg = config("8x2.json");
    let a = Generator::new(&cfg).frame(3).unwrap();
    let b = Generator::new(&cfg).frame(3).unwrap();
    assert_eq!(a.samples, b.samples);
    assert_eq!(a.uplink_payload, b.uplink_payload);
    let c = Generator::new(&cfg).frame(4).unwrap();
    assert_ne!(a.samples, c.samples);

    let dir = tempfile::tempdir().unwrap();
    recording::save(dir.path(), &cfg, &[(3, a.clone()), (4, c)]).unwrap();
    let frames = recording::load_frames(dir.path(), &cfg).unwrap();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0], a.samples);
    // Decode the frame read back from disk against the truth file.
    let truth: recording::Truth =
        serde_json::from_slice(&std::fs::read(dir.path().join("truth.json")).unwrap()).unwrap();
    let n = cfg.uplink_blocks() * cfg.block_payload_bits();
    let expect: Vec<Vec<u8>> = truth.frames[0]
        .uplink_payload_hex
        .iter()
        .map(|h| recording::hex_to_bits(h, n).unwrap())
        .collect();
    assert_eq!(expect, a.uplink_payload);
    let mut ul = UplinkPipeline::new(&cfg).unwrap();
    let mut out = UplinkOutput::for_config(&cfg);
    ul.process_frame(&frames[0], &mut out).unwrap();
    assert_clean(
        ErrorCount::compare(&expect, &out.payload, &out.blocks, cfg.block_payload_bits()),
        "read-back uplink",
    );
    let reloaded = FrameConfig::load(&dir.path().join("config.json")).unwrap();
    assert_eq!(reloaded.file, cfg.file);
}

#[test]
fn wrong_sample_count_is_an_error_not_a_panic() {
    let cfg = config("8x2.json");
    let mut ul = UplinkPipeline::new(&cfg).unwrap();
    let mut out = UplinkOutput::for_config(&cfg);
    let err = ul
        .process_frame(&[Default::default(); 10], &mut out)
        .unwrap_err();
    assert!(err.to_string().contains("needs"), "{err}");
}
