//! Times the uplink front end of the 64x16 frame (`configs/64x16.json`) alone:
//! the pilot symbol through `FrontEnd::frame_rows` and the uplink symbols through
//! `FrontEnd::frame_planar`, as `UplinkPipeline::process_frame` calls them (its
//! `fft` stage). For profiling (`perf record`) and A/B runs of the front end.
//!
//! `cargo run --release -p radiohost-phy --example front_end_frame [frames]`

use std::hint::black_box;
use std::time::Instant;

use radiohost_iq::Cf32;
use radiohost_phy::config::SymbolKind;
use radiohost_phy::frontend::{FrontEnd, PlanarBuf, SLICE};
use radiohost_phy::generator::Generator;
use radiohost_phy::FrameConfig;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let frames: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|e| format!("frames `{a}`: {e}"))?,
        None => 300,
    };
    let cfg = FrameConfig::from_json(include_str!("../configs/64x16.json"))?;
    let frame = Generator::new(&cfg).frame(0)?;
    let (m, d) = (cfg.antennas, cfg.data_num);
    let pilots = cfg.symbols_of(SymbolKind::Pilot);
    let uplink = cfg.symbols_of(SymbolKind::Uplink);
    let mut front = FrontEnd::new(&cfg);
    let mut rows = vec![Cf32::default(); pilots.len() * m * d];
    let planar = uplink.len() * d.div_ceil(SLICE) * m;
    let (mut re, mut im) = (PlanarBuf::zeroed(planar), PlanarBuf::zeroed(planar));
    // On-CPU time of this thread (ns, /proc/thread-self/schedstat): the machine is
    // shared, and time spent descheduled is not the front end's.
    let cpu_ns = || -> Option<f64> {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        s.split_whitespace().next()?.parse().ok()
    };
    let mut run = |frames: usize| {
        for _ in 0..frames {
            black_box(front.frame_rows(black_box(&frame.samples), m, &pilots, &mut rows));
            black_box(front.frame_planar(black_box(&frame.samples), m, &uplink, &mut re, &mut im));
        }
    };
    const BATCH: usize = 10;
    let mut wall = Vec::new();
    let mut cpu = Vec::new();
    for _ in 0..frames.div_ceil(BATCH) {
        let (t, c) = (Instant::now(), cpu_ns());
        run(BATCH);
        wall.push(t.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
        if let (Some(c0), Some(c1)) = (c, cpu_ns()) {
            cpu.push((c1 - c0) / 1e3 / BATCH as f64);
        }
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).map_or("-".into(), |med| format!("min {:.0} median {:.0}", v[0], med))
    };
    println!(
        "front end 64x16 ({} symbols), {} frames: us/frame wall {}, on-CPU {}",
        pilots.len() + uplink.len(),
        wall.len() * BATCH,
        stats(&mut wall),
        stats(&mut cpu)
    );
    Ok(())
}
