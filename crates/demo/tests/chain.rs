//! The whole demo at a reduced size: every stage passes and the digests chain
//! from the users' payload to every receiver.

use radiohost_demo::{default_link, run, DemoConfig};

fn small() -> DemoConfig {
    DemoConfig {
        nodes: 2,
        paths_per_node: 2,
        users: 2,
        frames: 4,
        links: (0..2).map(default_link).collect(),
        ..DemoConfig::default()
    }
}

#[test]
fn reduced_demo_chains_digests_end_to_end() {
    let cfg = small();
    let mut seen = Vec::new();
    let report = run(&cfg, &mut |s| seen.push(s.name)).expect("the demo runs");
    assert_eq!(
        seen,
        ["users", "air", "transport", "baseband", "delivery"],
        "stages reported in data-path order"
    );
    for s in &report.stages {
        assert!(s.passed, "stage {} failed: {:?}", s.name, s.failures);
        assert_eq!(s.input_digest.len(), 64, "{} input digest", s.name);
        assert_eq!(s.output_digest.len(), 64, "{} output digest", s.name);
    }
    assert!(
        report.chain_breaks().is_empty(),
        "{:?}",
        report.chain_breaks()
    );
    // Every receiver holds every user's original payload.
    assert_eq!(report.deliveries.len(), cfg.users * cfg.links.len());
    for d in &report.deliveries {
        assert!(d.verified, "{d:?}");
        assert_eq!(d.sha256, report.user_payload_sha256[d.user]);
    }
    // The end of the chain is the users' payload itself.
    let baseband = &report.stages[3];
    let delivery = &report.stages[4];
    assert_eq!(baseband.output_digest, delivery.output_digest);
    assert!(report.passed);
}

#[test]
fn a_wrong_payload_breaks_the_chain_and_fails() {
    // So low an SNR that frames cannot decode: the run completes but must not pass.
    let cfg = DemoConfig {
        snr_db: -10.0,
        frames: 2,
        ..small()
    };
    let report = run(&cfg, &mut |_| {}).expect("the demo runs");
    assert!(!report.passed);
    assert!(report
        .stages
        .iter()
        .any(|s| s.name == "baseband" && !s.passed));
    assert!(report.deliveries.iter().all(|d| !d.verified));
}

#[test]
fn bad_configurations_are_errors() {
    for cfg in [
        DemoConfig {
            nodes: 0,
            ..small()
        },
        DemoConfig {
            paths_per_node: 5,
            ..small()
        },
        DemoConfig {
            users: 9,
            ..small()
        },
        DemoConfig {
            frames: 0,
            ..small()
        },
        DemoConfig {
            links: vec![],
            ..small()
        },
        DemoConfig {
            links: vec!["fast".into()],
            ..small()
        },
    ] {
        assert!(run(&cfg, &mut |_| {}).is_err(), "{cfg:?} was accepted");
    }
}
