//! Stage 4: the station decodes every captured frame — LROC scheduling
//! instructions over CPU executors whose worker threads the rt layer sets up —
//! and the decoded bits are checked against what the users sent.

use std::sync::Arc;
use std::time::Instant;

use radiohost_phy::config::FrameConfig;
use radiohost_station::kernels::KernelContext;
use radiohost_station::policy::{make_policy, PolicyParams};
use radiohost_station::report::FrameFate;
use radiohost_station::ru::blocks::{run_blocks, BlockFrame, BlockRunConfig};
use radiohost_station::runtime::DeviceSpec;

use crate::air::Captured;
use crate::report::{blocks_digest, pack_bits, sha256_parts, Span, StageReport};
use crate::users::UsersOutput;
use crate::{DemoConfig, DemoError};

/// Subcarrier parts zero-forcing and equalisation are split into (instructions
/// the scheduler can spread over executors).
const PARTS: usize = 2;

/// Decodes every frame; returns each user's decoded payload over all frames,
/// packed MSB first (an undecoded frame contributes nothing, so its user's bytes
/// cannot match).
#[allow(clippy::too_many_arguments)]
pub fn run(
    cfg: &DemoConfig,
    fc: &FrameConfig,
    captured: &Captured,
    users: &UsersOutput,
    report: &mut StageReport,
    timeline: &mut Vec<Span>,
    t0: Instant,
) -> Result<Vec<Vec<u8>>, DemoError> {
    report.input = format!(
        "{} frames x {} antennas from the host's WARP reads",
        captured.frames.len(),
        cfg.antennas()
    );
    report.input_digest = blocks_digest(&captured.frames);
    let ctx = Arc::new(KernelContext::new(fc, PARTS)?);
    let policy = make_policy("lroc", &ctx.shape, &PolicyParams::default())?;
    let cores: Vec<usize> =
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    let devices = DeviceSpec::split(cfg.workers, 1, &cores);
    let mut run_cfg = BlockRunConfig::new(&format!("{}x{}", fc.antennas, fc.users), devices);
    run_cfg.deadline_ns = (cfg.deadline_ms * 1e6) as u64;
    // When each frame is handed in: the station pulls the next block as soon as
    // a frame slot is free, so this is the frame's arrival at the station.
    let mut handed_in_ms = vec![0.0f64; captured.frames.len()];
    let frames = captured.frames.iter().enumerate().map(|(f, b)| {
        handed_in_ms[f] = t0.elapsed().as_secs_f64() * 1e3;
        BlockFrame {
            frame: f as u64,
            block: b.clone(),
            truth: None,
        }
    });
    let out = run_blocks(ctx, &run_cfg, policy, frames)?;
    for r in &out.report.records {
        let start_ms = handed_in_ms.get(r.frame as usize).copied().unwrap_or(0.0);
        timeline.push(Span {
            stage: "baseband",
            frame: Some(r.frame),
            start_ms,
            end_ms: start_ms + r.latency_ns as f64 / 1e6,
        });
    }

    let n = captured.frames.len();
    // Decoded bits per frame, checked against the users' payload frame by frame.
    let mut by_frame: Vec<Option<&Vec<Vec<u8>>>> = vec![None; n];
    for p in &out.payloads {
        if let Some(slot) = by_frame.get_mut(p.frame as usize) {
            *slot = Some(&p.bits);
        }
    }
    let (mut bit_errors, mut wrong_frames, mut missing) = (0u64, 0u64, 0u64);
    for (f, decoded) in by_frame.iter().enumerate() {
        match decoded {
            None => missing += 1,
            Some(bits) => {
                let errs: u64 = bits
                    .iter()
                    .zip(&users.payload[f])
                    .map(|(d, t)| {
                        d.iter().zip(t).filter(|(a, b)| a != b).count() as u64
                            + d.len().abs_diff(t.len()) as u64
                    })
                    .sum();
                bit_errors += errs;
                wrong_frames += u64::from(errs > 0);
            }
        }
    }
    let decoded: Vec<Vec<u8>> = (0..cfg.users)
        .map(|u| {
            let bits: Vec<u8> = by_frame
                .iter()
                .flatten()
                .flat_map(|b| b[u].iter().copied())
                .collect();
            pack_bits(&bits)
        })
        .collect();
    let rep = &out.report;
    report.output = format!(
        "{} of {} frames decoded, {} users' payloads ({} bytes each); p50 {:.2} ms, p99 {:.2} ms",
        n as u64 - missing,
        n,
        cfg.users,
        decoded.first().map_or(0, Vec::len),
        rep.p50_ms,
        rep.p99_ms
    );
    report.output_digest = sha256_parts(decoded.iter().map(Vec::as_slice));
    report.count("frames", n as f64, "");
    report.count("completed", rep.completed as f64, "");
    report.count("deadline_missed", rep.missed as f64, "");
    report.count("rejected", rep.rejected as f64, "");
    report.count("failed", rep.failed as f64, "");
    report.count("bit_errors", bit_errors as f64, "bit");
    report.count("p99_latency_ms", rep.p99_ms, "ms");
    report.count("executors", rep.devices as f64, "");
    report.count(
        "clipped_samples",
        out.ingest.clipped_samples as f64,
        "sample",
    );
    let miss_pct = 100.0 * rep.missed as f64 / n.max(1) as f64;
    report.check(miss_pct <= cfg.max_deadline_miss_pct, || {
        format!(
            "{} of {} frames missed the {} ms deadline ({miss_pct:.1}% > {}% allowed)",
            rep.missed, n, cfg.deadline_ms, cfg.max_deadline_miss_pct
        )
    });
    report.check(missing == 0, || {
        format!("{missing} of {n} frames were not decoded")
    });
    report.check(bit_errors == 0, || {
        format!("{bit_errors} bit errors in {wrong_frames} frames against the users' payload")
    });
    let failed_fates = out
        .report
        .records
        .iter()
        .filter(|r| matches!(r.fate, FrameFate::Failed | FrameFate::Rejected))
        .count();
    report.check(failed_fates == 0, || {
        format!("{failed_fates} frames failed or were rejected")
    });
    // What the station and the rt layer said about the run (thread setup refused,
    // clipping, ...), reported as is.
    report.notes.extend(out.report.notes.iter().cloned());
    Ok(decoded)
}
