//! Runs the 64x16 uplink or downlink frame of `phy bench` back to back, and nothing
//! else, for `perf record` and callgrind: `phy bench` times every kernel in one
//! process, so its profile mixes them. Prints each stage's mean core-us per frame.
//!
//! `cargo run --release -p radiohost-phy --example frame_loop -- uplink|downlink [frames]`

use std::hint::black_box;
use std::time::{Duration, Instant};

use radiohost_iq::Ci16;
use radiohost_phy::downlink::DownlinkPipeline;
use radiohost_phy::generator::Generator;
use radiohost_phy::uplink::{UplinkOutput, UplinkPipeline};
use radiohost_phy::FrameConfig;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "uplink".into());
    let frames: u32 = match args.next() {
        Some(a) => a.parse().map_err(|e| format!("frames `{a}`: {e}"))?,
        None => 200,
    };
    if frames == 0 {
        return Err("frames: give at least 1".into());
    }
    let started = Instant::now();
    let mut sums: Vec<(&'static str, Duration)> = Vec::new();
    let mut add = |named: &[(&'static str, Duration)]| {
        if sums.is_empty() {
            sums = named.iter().map(|&(n, _)| (n, Duration::ZERO)).collect();
        }
        for (s, (_, d)) in sums.iter_mut().zip(named) {
            s.1 += *d;
        }
    };
    match which.as_str() {
        "uplink" => {
            let cfg = FrameConfig::from_json(include_str!("../configs/64x16.json"))?;
            let frame = Generator::new(&cfg).frame(0)?;
            let mut ul = UplinkPipeline::new(&cfg)?;
            let mut out = UplinkOutput::for_config(&cfg);
            for _ in 0..frames {
                ul.process_frame(black_box(&frame.samples), &mut out)?;
                add(&ul.stages().named());
            }
        }
        "downlink" => {
            let cfg = FrameConfig::from_json(include_str!("../configs/64x16_downlink.json"))?;
            let frame = Generator::new(&cfg).frame(0)?;
            let mut dl = DownlinkPipeline::new(&cfg);
            let mut tx = vec![Ci16::default(); cfg.antennas * cfg.frame_len()];
            for _ in 0..frames {
                dl.process_frame(black_box(&frame.samples), &frame.downlink_payload, &mut tx)?;
                add(&dl.stages().named());
            }
        }
        other => return Err(format!("`{other}`: give uplink or downlink").into()),
    }
    let total: f64 = sums.iter().map(|s| s.1.as_secs_f64()).sum::<f64>() * 1e6 / frames as f64;
    println!("{which} 64x16, {frames} frames: {total:.0} core-us per frame");
    for (name, d) in &sums {
        println!(
            "  {name:<10} {:>8.0}",
            d.as_secs_f64() * 1e6 / frames as f64
        );
    }
    println!("whole command {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
