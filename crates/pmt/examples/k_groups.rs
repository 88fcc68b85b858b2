//! Does splitting receivers into K > 2 RTT groups help? Runs PMT in virtual time over
//! receivers with spread-out capacities for K = 1, 2, 3, R and prints each receiver's
//! completion time over its floor, plus the greedy score (aggregate windows/s).
//! `cargo run --release -p radiohost-pmt --example k_groups -- 500000 5`
use std::time::Duration;

use radiohost_pmt::groups::assign;
use radiohost_pmt::sim::run_pmt;
use radiohost_pmt::SenderConfig;
use radiohost_testbed::link::LinkConfig;

fn main() {
    let mut args = std::env::args().skip(1);
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(500_000);
    let runs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let specs = [
        "2Mbit,1%",
        "1.5Mbit,2%",
        "1Mbit,5%",
        "600kbit,5%",
        "400kbit,10%",
        "250kbit,20%",
    ];
    let links: Vec<LinkConfig> = specs
        .iter()
        .map(|s| LinkConfig::parse(s).expect("valid"))
        .collect();
    println!("{size} bytes to {} receivers: {specs:?}", links.len());
    println!(
        "{:>3} {:>8} {:>10} {:>10}  per-receiver mean time/floor",
        "K", "groups", "mean_ratio", "score"
    );
    for k in [1usize, 2, 3, links.len()] {
        let mut ratios = vec![0.0; links.len()];
        let mut groups_used = 0;
        let mut score = 0.0;
        for seed in 0..runs {
            let cfg = SenderConfig {
                groups: k,
                ..Default::default()
            };
            let out = run_pmt(size, &links, seed, cfg, Duration::from_secs(3600)).expect("valid");
            for (i, r) in out.receivers.iter().enumerate() {
                assert!(r.intact, "K={k} seed {seed} receiver {i} not intact");
                ratios[i] += r.seconds.expect("finished") / r.floor_seconds / runs as f64;
            }
            // Greedy score on the smoothed RTTs seen 2 s in (all receivers active).
            if let Some(row) = out.trace.iter().find(|r| r.t >= 2.0) {
                let taus: Vec<Duration> = row
                    .srtt
                    .iter()
                    .map(|&s| Duration::from_secs_f64(s))
                    .collect();
                let a = assign(&taus, k, Duration::from_millis(2));
                groups_used = groups_used.max(a.periods.len());
                score += a.score() / runs as f64;
            }
        }
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        let per: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
        println!(
            "{k:>3} {groups_used:>8} {mean:>10.3} {score:>10.2}  {}",
            per.join(" ")
        );
    }
}
