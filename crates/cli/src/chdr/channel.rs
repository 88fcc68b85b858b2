//! The live emulator's channel: static taps (tap file, rayleigh, identity) or a
//! seeded fading model (ar1, jakes) with the response schedule the output check
//! replays.

use anyhow::{bail, ensure, Context, Result};
use radiohost_dsp::channel::{
    ar1_rho_for_doppler, draw_rayleigh, parse_tap_file, FadingChannel, FadingProcess,
    PowerDelayProfile,
};
use radiohost_dsp::MimoTaps;
use radiohost_iq::Cf32;
use rand_chacha::rand_core::SeedableRng;

use super::session::ChannelProcessor;
use super::{run_streaming, ChanemuArgs, ModelArg};

pub(super) fn parse_ports(s: &str) -> Result<(usize, usize)> {
    let (m, n) = s
        .split_once(['x', 'X'])
        .with_context(|| format!("--ports {s:?}: expected INPUTSxOUTPUTS, e.g. 2x2"))?;
    let m: usize = m
        .trim()
        .parse()
        .with_context(|| format!("--ports {s:?}: bad input count"))?;
    let n: usize = n
        .trim()
        .parse()
        .with_context(|| format!("--ports {s:?}: bad output count"))?;
    ensure!(
        (1..=16).contains(&m) && (1..=16).contains(&n),
        "--ports {s:?}: 1..=16 per side"
    );
    Ok((m, n))
}

pub(super) fn identity_taps(ports: usize) -> Result<MimoTaps> {
    let one = Cf32::new(1.0, 0.0);
    let zero = Cf32::new(0.0, 0.0);
    let nested = (0..ports)
        .map(|n| {
            (0..ports)
                .map(|m| vec![if m == n { one } else { zero }])
                .collect()
        })
        .collect();
    Ok(MimoTaps::from_nested(nested)?)
}

/// Exponential power-delay profile of `length` taps decaying `decay_db` in total.
pub(super) fn model_pdp(length: usize, decay_db: f32) -> Result<PowerDelayProfile> {
    ensure!(length >= 1, "--length must be at least 1");
    let per_tap = if length > 1 {
        decay_db / (length - 1) as f32
    } else {
        0.0
    };
    Ok(PowerDelayProfile::exponential(length, 1, per_tap)?)
}

pub(super) fn rayleigh_taps(
    m: usize,
    n: usize,
    length: usize,
    decay_db: f32,
    seed: u64,
) -> Result<MimoTaps> {
    let pdp = model_pdp(length, decay_db)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    Ok(draw_rayleigh(&pdp, m, n, &mut rng)?)
}

/// The live channel: static responses, or a fading model updated every
/// `update_blocks` blocks.
pub(super) enum LiveChannel {
    Static(MimoTaps),
    Fading {
        channel: Box<FadingChannel>,
        update_blocks: usize,
    },
}

/// The fading model for --model ar1/jakes (same models and parameters as
/// `chanemu file`; the update interval is update_blocks * block / rate).
pub(super) fn fading_channel(
    a: &ChanemuArgs,
    m: usize,
    n: usize,
    ar1: bool,
) -> Result<(FadingChannel, String)> {
    ensure!(a.update_blocks >= 1, "--update-blocks must be at least 1");
    let interval_s = (a.update_blocks * a.block) as f64 / a.stream.rate;
    let process = if ar1 {
        FadingProcess::Ar1 {
            rho: ar1_rho_for_doppler(a.doppler_hz, interval_s),
        }
    } else {
        FadingProcess::Jakes {
            doppler_hz: a.doppler_hz,
            interval_s,
            sinusoids: a.sinusoids,
        }
    };
    let channel = FadingChannel::new(model_pdp(a.length, a.decay_db)?, m, n, process, a.seed)?;
    let what = format!(
        "{m}x{n} {} fading, {} taps, {} dB decay, fd {} Hz, update every {} blocks ({:.3} ms), seed {}",
        if ar1 { "AR(1)" } else { "Jakes" },
        a.length,
        a.decay_db,
        a.doppler_hz,
        a.update_blocks,
        interval_s * 1e3,
        a.seed
    );
    Ok((channel, what))
}

pub(super) fn live_channel(a: &ChanemuArgs) -> Result<(LiveChannel, String)> {
    match a.model {
        Some(model @ (ModelArg::Ar1 | ModelArg::Jakes)) => {
            let (m, n) = a
                .ports
                .as_deref()
                .map(parse_ports)
                .transpose()?
                .unwrap_or((2, 2));
            let (channel, what) = fading_channel(a, m, n, matches!(model, ModelArg::Ar1))?;
            Ok((
                LiveChannel::Fading {
                    channel: Box::new(channel),
                    update_blocks: a.update_blocks,
                },
                what,
            ))
        }
        _ => {
            let (taps, what) = channel_taps(a)?;
            Ok((LiveChannel::Static(taps), what))
        }
    }
}

pub(super) fn channel_taps(a: &ChanemuArgs) -> Result<(MimoTaps, String)> {
    let ports = a.ports.as_deref().map(parse_ports).transpose()?;
    if let Some(path) = &a.taps {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading tap file {}", path.display()))?;
        let file = parse_tap_file(&text)
            .with_context(|| format!("parsing tap file {}", path.display()))?;
        let shape = (file.taps.inputs(), file.taps.outputs());
        if let Some((m, n)) = ports {
            ensure!(
                shape == (m, n),
                "tap file {} is {}x{} but --ports says {m}x{n}",
                path.display(),
                shape.0,
                shape.1
            );
        }
        let what = format!(
            "{}x{} taps from {} ({} taps)",
            shape.0,
            shape.1,
            path.display(),
            file.taps.max_len()
        );
        return Ok((file.taps, what));
    }
    let (m, n) = ports.unwrap_or((2, 2));
    match a.model.unwrap_or(ModelArg::Rayleigh) {
        ModelArg::Identity => {
            ensure!(m == n, "--model identity needs as many inputs as outputs");
            Ok((identity_taps(m)?, format!("{m}x{n} identity")))
        }
        ModelArg::Rayleigh => Ok((
            rayleigh_taps(m, n, a.length, a.decay_db, a.seed)?,
            format!(
                "{m}x{n} Rayleigh, {} taps, {} dB decay, seed {}",
                a.length, a.decay_db, a.seed
            ),
        )),
        ModelArg::Ar1 | ModelArg::Jakes => {
            bail!("--model ar1/jakes is time-varying: no static taps")
        }
    }
}

pub(super) fn chanemu(a: ChanemuArgs) -> Result<()> {
    a.stream.check()?;
    let (channel, what) = live_channel(&a)?;
    if !a.stream.json {
        println!("live channel emulator: {what}, UPOLS block {}", a.block);
    }
    match channel {
        LiveChannel::Static(taps) => {
            let proc = ChannelProcessor::new(&taps, a.block, a.stream.spp)?;
            run_streaming(
                "channel emulation",
                &a.stream,
                &Expected::Static(&taps),
                proc,
            )
        }
        LiveChannel::Fading {
            channel,
            update_blocks,
        } => {
            let replay = channel.clone();
            let proc = ChannelProcessor::fading(*channel, update_blocks, a.block, a.stream.spp)?;
            // The expected output replays the same (seeded) model: response r
            // filters the input blocks r*U .. (r+1)*U. Only built when checked
            // (the in-process radio with verification on).
            let checked = !a.stream.no_verify && a.stream.bind.is_none();
            let blocks = (a.stream.packets as usize * a.stream.spp).div_ceil(a.block);
            let updates = if checked {
                blocks.div_ceil(update_blocks).max(1)
            } else {
                1
            };
            let schedule = response_schedule(*replay, updates)?;
            run_streaming(
                "channel emulation",
                &a.stream,
                &Expected::Varying {
                    schedule: &schedule,
                    samples_per_response: update_blocks * a.block,
                },
                proc,
            )
        }
    }
}

/// The first `count` responses of `channel`, one per update interval.
pub(super) fn response_schedule(mut channel: FadingChannel, count: usize) -> Result<Vec<MimoTaps>> {
    let mut schedule = Vec::with_capacity(count);
    for r in 0..count {
        if r > 0 {
            channel.advance();
        }
        let mut t = channel.make_response();
        channel.write_response(&mut t)?;
        schedule.push(t);
    }
    Ok(schedule)
}

/// What the transmitted samples should be, for the output check.
pub(super) enum Expected<'a> {
    /// A static channel: direct convolution with these taps.
    Static(&'a MimoTaps),
    /// A time-varying channel: input sample t filtered wholly by
    /// `schedule[t / samples_per_response]`.
    Varying {
        schedule: &'a [MimoTaps],
        samples_per_response: usize,
    },
}
