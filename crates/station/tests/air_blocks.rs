//! The uplink over the emulated air, decoded from sample blocks: users -> air ->
//! antenna blocks -> block ingest -> scheduler + CPU devices -> decoded payloads,
//! checked against the generator's truth.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use radiohost_iq::Block;
use radiohost_phy::FrameConfig;
use radiohost_station::kernels::KernelContext;
use radiohost_station::policy::{make_policy, PolicyParams};
use radiohost_station::report::FrameFate;
use radiohost_station::ru::air::UplinkAir;
use radiohost_station::ru::{pack_bits, run_blocks, BlockFrame, BlockRunConfig};
use radiohost_station::runtime::DeviceSpec;

fn config(name: &str) -> FrameConfig {
    FrameConfig::load(Path::new(&format!(
        "{}/../phy/configs/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    )))
    .unwrap()
}

#[test]
fn blocks_from_the_air_decode_to_the_users_payload() {
    let cfg = config("8x2");
    let ctx = Arc::new(KernelContext::new(&cfg, 4).unwrap());
    let mut air = UplinkAir::new(&cfg).unwrap();
    let mut frames = Vec::new();
    let mut truth = Vec::new();
    for f in 0..6 {
        let (block, users) = air.frame(f).unwrap();
        assert_eq!(block.ports(), cfg.antennas);
        assert_eq!(block.start_tick, f * cfg.frame_len() as u64);
        truth.push(users.uplink_payload);
        frames.push(BlockFrame {
            frame: f,
            block,
            truth: None,
        });
    }
    assert_eq!(air.stats().late_emissions, 0);
    // One malformed block: recorded as rejected, the run goes on.
    frames.push(BlockFrame {
        frame: 6,
        block: Block::zeros(cfg.antennas - 1, cfg.frame_len(), cfg.sample_rate, 0).unwrap(),
        truth: None,
    });
    let mut rc = BlockRunConfig::new("8x2", DeviceSpec::split(2, 1, &[]));
    rc.deadline_ns = 2_000_000_000;
    let policy = make_policy("lroc", &ctx.shape, &PolicyParams::default()).unwrap();
    let r = run_blocks(ctx, &rc, policy, frames).unwrap();
    assert_eq!(r.ingest.frames, 6, "{:?}", r.ingest);
    assert_eq!(r.ingest.bad_shape, 1);
    assert_eq!(r.report.frames, 7, "{:?}", r.report);
    assert_eq!(r.report.completed, 6, "{:?}", r.report);
    assert_eq!(r.report.rejected, 1, "{:?}", r.report);
    assert!(r
        .report
        .records
        .iter()
        .any(|x| x.frame == 6 && x.fate == FrameFate::Rejected));
    assert_eq!(r.payloads.len(), 6);
    for p in &r.payloads {
        let want = &truth[p.frame as usize];
        assert!(p.crc_ok, "frame {}: CRC", p.frame);
        assert_eq!(&p.bits, want, "frame {}: decoded bits", p.frame);
        let bytes: Vec<Vec<u8>> = want.iter().map(|b| pack_bits(b)).collect();
        assert_eq!(p.user_bytes(), bytes);
    }
}

#[test]
fn pack_bits_is_msb_first_and_pads() {
    assert_eq!(pack_bits(&[1, 0, 0, 0, 0, 0, 0, 1, 1]), vec![0x81, 0x80]);
    assert_eq!(pack_bits(&[]), Vec::<u8>::new());
}

#[test]
fn air_frames_are_reproducible_and_noisy() {
    let cfg = config("8x2");
    let mut a = UplinkAir::new(&cfg).unwrap();
    let mut b = UplinkAir::new(&cfg).unwrap();
    let (x, ux) = a.frame(0).unwrap();
    let (y, uy) = b.frame(0).unwrap();
    assert_eq!(x.digest(), y.digest(), "same seed, same air");
    assert_eq!(ux.uplink_payload, uy.uplink_payload);
    let (z, _) = a.frame(1).unwrap();
    assert_ne!(x.digest(), z.digest());
    // Reading a frame already in the air's past fails instead of returning stale data.
    assert!(a.frame(0).is_err());
}

/// Any radio's RX stream is a source of blocks: an emulated radio whose RX
/// channels are the air's antenna ports, one num-samps-and-done command per frame.
#[test]
fn frames_read_through_an_emulated_radio_decode() {
    use radiohost_radio::emulated::{EmulatedPorts, EmulatedRadio};
    use radiohost_radio::{Radio, StreamArgs, StreamCmd, StreamMode, Time};
    use radiohost_station::ru::stream::read_frame;

    let cfg = config("8x2");
    let ctx = Arc::new(KernelContext::new(&cfg, 2).unwrap());
    let mut air = UplinkAir::new(&cfg).unwrap();
    let antennas: Vec<usize> = (0..cfg.antennas).collect();
    let mut radio = EmulatedRadio::new(
        air.air().clone(),
        EmulatedPorts {
            rx: antennas.clone(),
            tx: Vec::new(),
        },
    )
    .unwrap();
    let mut rx = radio.rx_stream(&StreamArgs::channels(antennas)).unwrap();
    let fl = cfg.frame_len();
    let mut frames = Vec::new();
    let mut truth = Vec::new();
    for f in 0..3 {
        truth.push(air.transmit_frame(f).unwrap().uplink_payload);
        let at = Time::from_ticks(air.frame_tick(f), cfg.sample_rate);
        rx.issue_stream_cmd(StreamCmd::at(StreamMode::NumSampsAndDone(fl as u64), at))
            .unwrap();
        let block = read_frame(&mut *rx, fl, cfg.sample_rate, Duration::from_secs(1)).unwrap();
        assert_eq!(block.start_tick, air.frame_tick(f));
        frames.push(BlockFrame {
            frame: f,
            block,
            truth: None,
        });
    }
    let mut rc = BlockRunConfig::new("8x2", DeviceSpec::split(1, 1, &[]));
    rc.deadline_ns = 2_000_000_000;
    let policy = make_policy("lroc", &ctx.shape, &PolicyParams::default()).unwrap();
    let r = run_blocks(ctx, &rc, policy, frames).unwrap();
    assert_eq!(r.report.completed, 3, "{:?}", r.report);
    for p in &r.payloads {
        assert_eq!(p.bits, truth[p.frame as usize], "frame {}", p.frame);
    }
}
