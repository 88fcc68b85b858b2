//! Quick look at the benchmark scenario in virtual time:
//! `cargo run --release -p radiohost-pmt --example pmt_bars -- 1000000 5`
use std::time::Duration;

use radiohost_pmt::sim::{run_multicast, run_pmt};
use radiohost_pmt::SenderConfig;
use radiohost_testbed::link::LinkConfig;

fn main() {
    let mut args = std::env::args().skip(1);
    let size: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let runs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    if let Ok(s) = std::env::var("DEBUG_SEED") {
        debug_seed(s.parse().expect("seed"));
        return;
    }
    let links = [
        LinkConfig::parse("1Mbit,1%").expect("valid spec"),
        LinkConfig::parse("250kbit,20%").expect("valid spec"),
    ];
    for seed in 0..runs {
        let pmt = run_pmt(
            size,
            &links,
            seed,
            SenderConfig::default(),
            Duration::from_secs(600),
        )
        .expect("valid config");
        let mc = run_multicast(size, &links, seed, Duration::from_secs(600));
        for (name, out) in [("pmt", &pmt), ("multicast", &mc)] {
            for (i, r) in out.receivers.iter().enumerate() {
                println!(
                    "seed {seed} {name:9} rx{i}: {:?} s floor {:.2} ratio {:.3} intact {}",
                    r.seconds,
                    r.floor_seconds,
                    r.seconds.unwrap_or(f64::NAN) / r.floor_seconds,
                    r.intact
                );
            }
        }
        if let Some(s) = &pmt.sender_stats {
            println!("  {s:?}");
        }
    }
}

#[allow(dead_code)]
fn debug_seed(seed: u64) {
    let spec = std::env::var("LINKS").unwrap_or_else(|_| "1Mbit,1%;250kbit,20%".into());
    let links: Vec<LinkConfig> = spec
        .split(';')
        .map(|s| LinkConfig::parse(s).expect("valid spec"))
        .collect();
    let size = std::env::var("SIZE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let out = run_pmt(
        size,
        &links,
        seed,
        SenderConfig::default(),
        Duration::from_secs(600),
    )
    .expect("valid config");
    for r in &out.receivers {
        println!("{:?} floor {:.2}", r.seconds, r.floor_seconds);
    }
    for row in out.trace.iter().step_by(4).take(400) {
        println!(
            "{:.2} T {:?} srtt {:?} g {:?}",
            row.t, row.periods, row.srtt, row.group
        );
    }
    for (t, e) in &out.sender_events {
        println!("{t:?} {e:?}");
    }
    let tl = &out.receivers[0].timeline;
    let mut prev = (0.0, 0);
    for &(t, b) in tl {
        if t - prev.0 > 0.3 {
            println!("gap {:.3}->{:.3} at {}", prev.0, t, prev.1);
        }
        prev = (t, b);
    }
}
