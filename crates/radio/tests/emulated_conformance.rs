//! The conformance suite against the emulated backend, on a simulated and on a real
//! clock, plus what the suite cannot see: radios sharing one air through a channel.

use std::time::Duration;

use radiohost_radio::conformance::{run_all, Capabilities, Harness, Loopback, Support};
use radiohost_radio::emulated::{EmulatedPorts, EmulatedRadio};
use radiohost_radio::{
    Cf32, Radio, RadioError, RxMetadata, StreamArgs, StreamCmd, StreamMode, Time, TxMetadata,
};
use radiohost_testbed::air::{Air, AirChannel, AirClock, AirConfig};

struct Emulated {
    real_clock: bool,
}

impl Emulated {
    fn radio(&self) -> Result<EmulatedRadio, RadioError> {
        let mut cfg = AirConfig::identity(1e6, 2);
        if self.real_clock {
            cfg.clock = AirClock::Real;
        }
        let air = Air::new(cfg).map_err(|e| RadioError::InvalidArgument(e.to_string()))?;
        EmulatedRadio::new(
            air,
            EmulatedPorts {
                rx: vec![0, 1],
                tx: vec![0, 1],
            },
        )
    }
}

impl Harness for Emulated {
    fn name(&self) -> String {
        format!(
            "emulated ({} clock)",
            if self.real_clock { "real" } else { "simulated" }
        )
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            tolerance: 0.0,
            burst_len: 3000,
            lead: Time::from_ms(20),
            timeout: Duration::from_secs(2),
            loopback: Support::Yes,
            continuous: Support::Yes,
            timed: Support::Yes,
            burst_ack: Support::Yes,
        }
    }

    fn open(&self) -> Result<Box<dyn Radio>, RadioError> {
        Ok(Box::new(self.radio()?))
    }

    fn loopback(&self) -> Result<Loopback, RadioError> {
        Ok(Loopback {
            tx: Box::new(self.radio()?),
            observe: Box::new(Ok),
        })
    }
}

#[test]
fn conformance_on_a_simulated_clock() {
    let report = run_all(&Emulated { real_clock: false });
    println!("{report}");
    assert!(report.all_ok(), "{report}");
    assert_eq!(report.skipped().count(), 0, "{report}");
}

#[test]
fn conformance_on_the_real_clock() {
    let report = run_all(&Emulated { real_clock: true });
    println!("{report}");
    assert!(report.all_ok(), "{report}");
}

/// Two radios on one 1x1 air with a two-tap channel: what one sends, the other
/// receives convolved, at the same time.
#[test]
fn two_radios_share_one_air_through_its_channel() {
    let taps =
        radiohost_dsp::MimoTaps::siso(vec![Cf32::new(1.0, 0.0), Cf32::new(0.0, 0.5)]).unwrap();
    let cfg = AirConfig {
        channel: AirChannel::Static(taps),
        ..AirConfig::identity(1e6, 1)
    };
    let air = Air::new(cfg).unwrap();
    let mut sender = EmulatedRadio::new(
        air.clone(),
        EmulatedPorts {
            rx: vec![0],
            tx: vec![0],
        },
    )
    .unwrap();
    let mut receiver = EmulatedRadio::new(
        air,
        EmulatedPorts {
            rx: vec![0],
            tx: vec![],
        },
    )
    .unwrap();
    assert_eq!(receiver.info().tx_channels, 0);
    let mut tx = sender.tx_stream(&StreamArgs::channels([0])).unwrap();
    let t = Time::from_ms(1);
    let burst = vec![Cf32::new(1.0, 0.0); 10];
    let md = TxMetadata {
        time: Some(t),
        start_of_burst: true,
        end_of_burst: true,
    };
    assert_eq!(tx.send(&[&burst], &md, Duration::ZERO).unwrap(), 10);
    let mut rx = receiver.rx_stream(&StreamArgs::channels([0])).unwrap();
    rx.issue_stream_cmd(StreamCmd::at(StreamMode::NumSampsAndDone(12), t))
        .unwrap();
    let mut buf = vec![Cf32::default(); 12];
    let mut md = RxMetadata::default();
    assert_eq!(
        rx.recv(&mut [&mut buf], &mut md, Duration::ZERO).unwrap(),
        12
    );
    assert_eq!(md.time, Some(t));
    assert!(md.end_of_burst);
    assert!((buf[0] - Cf32::new(1.0, 0.0)).norm() < 1e-5);
    assert!((buf[5] - Cf32::new(1.0, 0.5)).norm() < 1e-5);
    assert!((buf[10] - Cf32::new(0.0, 0.5)).norm() < 1e-5);
    assert!(buf[11].norm() < 1e-5);
    // The receiver's clock can be set without moving the air.
    receiver.set_time_now(Time::from_secs(5)).unwrap();
    assert!(receiver.time_now() >= Time::from_secs(5));
    assert!(sender.time_now() < Time::from_secs(1));
}
