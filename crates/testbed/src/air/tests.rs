use proptest::prelude::*;
use radiohost_dsp::channel::{FadingProcess, PowerDelayProfile};
use radiohost_dsp::direct::convolve_truncated;

use super::*;

fn c(re: f32, im: f32) -> Cf32 {
    Cf32::new(re, im)
}

fn ramp(n: usize, k: f32) -> Vec<Cf32> {
    (0..n)
        .map(|i| c((i as f32 * 0.37 + k).sin(), (i as f32 * 0.11 - k).cos()))
        .collect()
}

fn small(cfg: AirConfig) -> AirConfig {
    AirConfig {
        block: 16,
        history: 256,
        max_pending: 1024,
        ..cfg
    }
}

#[test]
fn identity_returns_what_was_sent_at_the_same_tick() {
    let air = Air::new(small(AirConfig::identity(1e6, 2))).unwrap();
    let a = ramp(40, 0.0);
    let b = ramp(25, 1.0);
    air.transmit(0, 7, &a).unwrap();
    air.transmit(1, 30, &b).unwrap();
    let mut rx = vec![c(0.0, 0.0); 100];
    air.receive(0, 0, &mut rx).unwrap();
    assert!(rx[..7].iter().all(|s| *s == c(0.0, 0.0)));
    assert_eq!(&rx[7..47], &a[..]);
    assert!(rx[47..].iter().all(|s| *s == c(0.0, 0.0)));
    let block = air.receive_block(&[1, 0], 30, 25).unwrap();
    assert_eq!(block.port(0), &b[..]);
    assert_eq!(block.start_tick, 30);
    assert_eq!(
        block.port(1),
        &a[23..40]
            .iter()
            .copied()
            .chain(std::iter::repeat_n(c(0.0, 0.0), 8))
            .collect::<Vec<_>>()[..]
    );
}

#[test]
fn overlapping_emissions_add() {
    let air = Air::new(small(AirConfig::identity(1e6, 1))).unwrap();
    air.transmit(0, 10, &[c(1.0, 0.0); 10]).unwrap();
    air.transmit(0, 15, &[c(0.0, 2.0); 10]).unwrap();
    let mut rx = vec![c(0.0, 0.0); 30];
    air.receive(0, 0, &mut rx).unwrap();
    assert_eq!(rx[12], c(1.0, 0.0));
    assert_eq!(rx[17], c(1.0, 2.0));
    assert_eq!(rx[22], c(0.0, 2.0));
    assert_eq!(rx[26], c(0.0, 0.0));
}

#[test]
fn static_2x2_equals_direct_convolution() {
    let h = |k: f32, n: usize| ramp(n, k).iter().map(|s| *s * 0.3).collect::<Vec<_>>();
    let taps = MimoTaps::from_nested(vec![
        vec![h(0.1, 5), h(0.2, 40)],
        vec![h(0.3, 1), h(0.4, 17)],
    ])
    .unwrap();
    let cfg = AirConfig {
        channel: AirChannel::Static(taps.clone()),
        ..small(AirConfig::identity(1e6, 2))
    };
    let air = Air::new(cfg).unwrap();
    let x = [ramp(150, 2.0), ramp(150, 3.0)];
    air.transmit(0, 0, &x[0]).unwrap();
    air.transmit(1, 0, &x[1]).unwrap();
    for rx in 0..2 {
        let mut want = vec![c(0.0, 0.0); 150];
        for (tx, xs) in x.iter().enumerate() {
            for (w, y) in want
                .iter_mut()
                .zip(convolve_truncated(xs, taps.path(rx, tx)))
            {
                *w += y;
            }
        }
        let mut got = vec![c(0.0, 0.0); 150];
        air.receive(rx, 0, &mut got).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).norm() < 1e-4, "rx {rx}: {g} vs {w}");
        }
    }
}

#[test]
fn noise_power_matches_snr_and_is_reproducible() {
    let cfg = AirConfig {
        snr_db: Some(10.0),
        seed: 42,
        block: 64,
        history: 1 << 16,
        ..AirConfig::identity(1e6, 2)
    };
    let air = Air::new(cfg.clone()).unwrap();
    let n = 1 << 15;
    let got = air.receive_block(&[0, 1], 0, n).unwrap();
    for p in 0..2 {
        let power: f64 = got
            .port(p)
            .iter()
            .map(|s| f64::from(s.norm_sqr()))
            .sum::<f64>()
            / n as f64;
        // Expected 0.1; the estimate's relative std is 1/sqrt(n) ~ 0.6%.
        assert!((power - 0.1).abs() < 0.005, "port {p}: noise power {power}");
    }
    let again = Air::new(cfg).unwrap().receive_block(&[0, 1], 0, n).unwrap();
    assert_eq!(got.digest(), again.digest());
    assert_ne!(got.port(0), got.port(1));
}

#[test]
fn late_emission_is_counted_and_its_tail_applied() {
    let air = Air::new(small(AirConfig::identity(1e6, 1))).unwrap();
    air.advance_to(32).unwrap();
    assert_eq!(air.horizon(), 32);
    let err = air.transmit(0, 28, &[c(1.0, 0.0); 8]).unwrap_err();
    assert_eq!(
        err,
        AirError::Late {
            start: 28,
            horizon: 32,
            dropped: 4
        }
    );
    let mut rx = vec![c(0.0, 0.0); 8];
    air.receive(0, 28, &mut rx).unwrap();
    assert_eq!(rx[..4], [c(0.0, 0.0); 4]);
    assert_eq!(rx[4..], [c(1.0, 0.0); 4]);
    let s = air.stats();
    assert_eq!((s.late_emissions, s.late_samples), (1, 4));
}

#[test]
fn bounded_history_refuses_old_requests() {
    let air = Air::new(small(AirConfig::identity(1e6, 1))).unwrap();
    let mut rx = vec![c(0.0, 0.0); 16];
    air.receive(0, 10_000, &mut rx).unwrap();
    let err = air.receive(0, 0, &mut rx).unwrap_err();
    assert!(matches!(err, AirError::TooOld { start: 0, .. }), "{err}");
    assert_eq!(air.stats().too_old_requests, 1);
    // Recent samples are still there.
    air.receive(0, 10_000 - 200, &mut rx).unwrap();
}

#[test]
fn bad_ports_and_lengths_are_errors() {
    let air = Air::new(small(AirConfig::identity(1e6, 1))).unwrap();
    let mut rx = vec![c(0.0, 0.0); 4];
    assert!(matches!(
        air.receive(3, 0, &mut rx),
        Err(AirError::NoSuchPort { .. })
    ));
    assert!(matches!(
        air.transmit(1, 0, &rx),
        Err(AirError::NoSuchPort { .. })
    ));
    assert!(matches!(
        air.receive_block(&[0], 0, usize::MAX),
        Err(AirError::TooLong { .. })
    ));
    assert!(matches!(
        air.transmit(0, u64::MAX - 1, &rx),
        Err(AirError::Range { .. })
    ));
    assert!(matches!(
        air.receive(0, u64::MAX - 2, &mut rx),
        Err(AirError::Range { .. })
    ));
    // A far-future receive jumps over silence instead of computing it.
    air.receive(0, 1 << 50, &mut rx).unwrap();
    assert!(air.stats().samples_processed < 10_000);
    let cfg = AirConfig {
        block: 0,
        ..AirConfig::identity(1e6, 1)
    };
    assert_eq!(Air::new(cfg).unwrap_err(), AirError::Block(0));
    let cfg = AirConfig {
        channel: AirChannel::Static(MimoTaps::siso(vec![c(1.0, 0.0)]).unwrap()),
        ..AirConfig::identity(1e6, 2)
    };
    assert!(matches!(Air::new(cfg), Err(AirError::ChannelShape { .. })));
}

#[test]
fn full_queue_drops_are_counted() {
    let air = Air::new(small(AirConfig::identity(1e6, 1))).unwrap();
    air.transmit(0, 0, &[c(1.0, 0.0); 1000]).unwrap();
    let err = air.transmit(0, 2000, &[c(1.0, 0.0); 100]).unwrap_err();
    assert_eq!(
        err,
        AirError::Overflow {
            port: 0,
            dropped: 76
        }
    );
    assert_eq!(air.stats().dropped_samples, 76);
}

#[test]
fn simulated_clock_is_the_air_time() {
    let clock = ManualClock::new(0);
    let cfg = AirConfig {
        clock: AirClock::Simulated(clock.clone()),
        ..AirConfig::identity(1e6, 1)
    };
    let air = Air::new(cfg).unwrap();
    assert_eq!(air.now_tick(), 0);
    clock.advance_ns(1_000_000);
    assert_eq!(air.now_tick(), 1000);
    assert_eq!(air.now(), Time::from_ms(1));
    assert!(!air.is_real_time());
}

#[test]
fn fading_air_varies_over_time_and_is_reproducible() {
    let pdp = PowerDelayProfile::exponential(3, 2, 3.0).unwrap();
    let make = || {
        let channel =
            FadingChannel::new(pdp.clone(), 1, 1, FadingProcess::Ar1 { rho: 0.5 }, 7).unwrap();
        let cfg = AirConfig {
            channel: AirChannel::Fading {
                channel,
                update_ticks: 64,
            },
            ..small(AirConfig::identity(1e6, 1))
        };
        Air::new(cfg).unwrap()
    };
    let (a, b) = (make(), make());
    let tone = vec![c(1.0, 0.0); 256];
    a.transmit(0, 0, &tone).unwrap();
    b.transmit(0, 0, &tone).unwrap();
    let ya = a.receive_block(&[0], 0, 256).unwrap();
    let yb = b.receive_block(&[0], 0, 256).unwrap();
    assert_eq!(ya.digest(), yb.digest());
    // A constant input through a changing channel: the output level changes.
    let (early, late) = (ya.port(0)[40], ya.port(0)[200]);
    assert!((early - late).norm() > 1e-3, "{early} vs {late}");
    assert!(a.stats().channel_updates >= 3);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any order of transmits and receives on an identity air: a receive sees exactly the
    /// sum of the accepted emissions (those not late), or an error.
    #[test]
    fn random_orders_match_a_model(
        ops in prop::collection::vec(
            (any::<bool>(), 0usize..2, 0u64..600, 1usize..80), 1..40)
    ) {
        let cfg = AirConfig { max_pending: 1 << 16, ..small(AirConfig::identity(1e6, 2)) };
        let air = Air::new(cfg).unwrap();
        let mut model = vec![vec![c(0.0, 0.0); 800]; 2];
        for (i, &(is_tx, port, start, len)) in ops.iter().enumerate() {
            if is_tx {
                let samples = ramp(len, i as f32);
                let horizon = air.horizon();
                let res = air.transmit(port, start, &samples);
                prop_assert_eq!(res.is_err(), start < horizon);
                for (k, s) in samples.iter().enumerate() {
                    let t = start + k as u64;
                    if t >= horizon {
                        model[port][t as usize] += *s;
                    }
                }
            } else {
                let mut out = vec![c(0.0, 0.0); len];
                match air.receive(port, start, &mut out) {
                    Ok(()) => {
                        let want = &model[port][start as usize..start as usize + len];
                        for (g, w) in out.iter().zip(want) {
                            prop_assert!((g - w).norm() < 1e-5);
                        }
                    }
                    Err(AirError::TooOld { .. }) => {
                        prop_assert!(start + 256 < air.horizon());
                    }
                    Err(e) => prop_assert!(false, "unexpected {}", e),
                }
            }
        }
    }
}
