//! The conformance suite on the CHDR backend, against the in-process emulated
//! streaming radio (`radiohost_chdr::radio`) on 127.0.0.1 ephemeral ports,
//! plus checks of RX timestamps and timed TX against that radio.
//!
//! The suite's radios run on a TX loopback air (`RadioAir::tx_loopback`: TX
//! channel `c` is heard on RX channel `c`, no test signal), so the suite's
//! TX->RX loopback runs; the other checks here use the test-signal air.

use radiohost_chdr::radio::{
    run_radio_on, run_radio_on_air, RadioAir, RadioConfig, RadioReport, RadioSockets,
};
use radiohost_chdr::rx::test_signal;
use radiohost_chdr::tx::TxPolicy;
use radiohost_iq::Ci16;
use radiohost_radio::chdr::{ChdrConfig, ChdrRadio};
use radiohost_radio::conformance::{self, Capabilities, Guarded, Harness, Loopback, Support};
use radiohost_radio::{
    Cf32, Radio, RadioError, RxMetadata, StreamArgs, StreamCmd, StreamMode, Time, TxMetadata,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const RATE: f64 = 200e3;
const SPP: usize = 200;

/// The emulated radio's thread; stopped and joined on drop.
struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<RadioReport, radiohost_chdr::radio::RadioError>>>,
}

impl Running {
    fn finish(mut self) -> RadioReport {
        self.stop.store(true, Ordering::Relaxed);
        let t = self.thread.take().unwrap();
        t.join().unwrap().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the emulated radio's RX hears.
#[derive(Clone, Copy)]
enum Heard {
    /// Its own test signal on each RX port (`run_radio_on`); TX reaches no one.
    TestSignal,
    /// TX channel `c` on RX channel `c`, nothing else.
    TxLoopback,
}

fn start(packets: u64, record: bool, heard: Heard) -> Result<(ChdrRadio, Running), RadioError> {
    let any = "127.0.0.1:0".parse().unwrap();
    let mut cfg = RadioConfig {
        host: any,
        rx_bind: any,
        tx_bind: any,
        rx_dst_epids: vec![0x10, 0x11],
        tx_epids: vec![0x20, 0x21],
        rate_sps: RATE,
        samples_per_packet: SPP,
        packets,
        start_delay: Duration::ZERO,
        tx_capacity_pkts: 32,
        policy: TxPolicy::ZeroFill,
        linger: Duration::ZERO,
        record,
        spin: false,
    };
    let backend = |e: radiohost_chdr::radio::RadioError| RadioError::Backend {
        backend: "chdr",
        message: e.to_string(),
    };
    let sockets = RadioSockets::bind(&cfg).map_err(backend)?;
    let air = match heard {
        Heard::TestSignal => None,
        Heard::TxLoopback => Some(RadioAir::tx_loopback(&cfg).map_err(backend)?),
    };
    let radio = ChdrRadio::connect(ChdrConfig {
        bind: any,
        radio_tx: sockets.tx.local_addr()?,
        rx_epids: cfg.rx_dst_epids.clone(),
        tx_epids: cfg.tx_epids.clone(),
        host_epid: 1,
        rate_hz: RATE,
        samples_per_packet: SPP,
        history_packets: 256,
    })?;
    cfg.host = radio.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::spawn(move || match air {
        None => run_radio_on(sockets, cfg, &flag),
        Some(air) => run_radio_on_air(sockets, cfg, air, &flag),
    });
    Ok((
        radio,
        Running {
            stop,
            thread: Some(thread),
        },
    ))
}

struct ChdrHarness;

impl Harness for ChdrHarness {
    fn name(&self) -> String {
        "chdr (emulated streaming radio, 2 channels)".into()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            tolerance: 1.0 / 32767.0,
            burst_len: 1000,
            lead: Time::from_ms(300),
            timeout: Duration::from_secs(3),
            loopback: Support::Yes,
            continuous: Support::Yes,
            timed: Support::Yes,
            burst_ack: Support::Yes,
        }
    }

    fn open(&self) -> Result<Box<dyn Radio>, RadioError> {
        let (radio, running) = start(1_000_000, false, Heard::TxLoopback)?;
        Ok(Box::new(Guarded {
            radio: Box::new(radio),
            guard: running,
        }))
    }

    fn loopback(&self) -> Result<Loopback, RadioError> {
        Ok(Loopback {
            tx: self.open()?,
            observe: Box::new(Ok),
        })
    }
}

#[test]
fn chdr_passes_conformance() {
    let report = conformance::run_all(&ChdrHarness);
    println!("{report}");
    assert!(report.all_ok(), "{report}");
    let skipped: Vec<_> = report.skipped().collect();
    assert!(skipped.is_empty(), "{report}");
}

#[test]
fn chdr_rx_time_matches_the_samples() {
    let (mut radio, _running) = start(1_000_000, false, Heard::TestSignal).unwrap();
    let mut rx = radio.rx_stream(&StreamArgs::channels([1, 0])).unwrap();
    rx.issue_stream_cmd(StreamCmd::now(StreamMode::NumSampsAndDone(450)))
        .unwrap();
    let (mut a, mut b) = (vec![Cf32::default(); 450], vec![Cf32::default(); 450]);
    let mut got = 0;
    while got < 450 {
        let mut md = RxMetadata::default();
        let n = rx
            .recv(
                &mut [&mut a[got..], &mut b[got..]],
                &mut md,
                Duration::from_secs(3),
            )
            .unwrap();
        assert!(n > 0, "{:?}", md.error);
        // Each delivered sample is the radio's test signal at its own tick.
        let tick = md.time.unwrap().to_ticks(RATE);
        for i in 0..n {
            assert_eq!(a[got + i], test_signal(1, tick + i as u64).to_cf32());
            assert_eq!(b[got + i], test_signal(0, tick + i as u64).to_cf32());
        }
        got += n;
        assert_eq!(md.end_of_burst, got == 450);
    }
}

#[test]
fn chdr_timed_tx_lands_at_its_tick() {
    let (mut radio, running) = start(400, true, Heard::TestSignal).unwrap();
    let mut tx = radio.tx_stream(&StreamArgs::channels([0])).unwrap();
    let t = radio.time_now() + Time::from_ms(200);
    let t = Time::from_ticks(t.to_ticks(RATE), RATE);
    let burst = conformance::test_burst(0, 700);
    let md = TxMetadata {
        time: Some(t),
        start_of_burst: true,
        end_of_burst: true,
    };
    assert_eq!(
        tx.send(&[&burst], &md, Duration::from_secs(3)).unwrap(),
        700
    );
    let ack =
        std::iter::from_fn(|| tx.recv_async_msg(Duration::from_secs(3))).find(|e| e.code() == 'A');
    assert!(ack.is_some(), "no burst ack");
    drop(tx);
    let report = running.finish();
    let rec = &report.recordings[0];
    assert_eq!(rec.origin, Some(t.to_ticks(RATE)));
    let want: Vec<Ci16> = burst.iter().map(|&x| Ci16::from_cf32(x)).collect();
    assert_eq!(&rec.samples[..700], &want[..]);
}

#[test]
fn chdr_without_a_radio_times_out() {
    let radio = ChdrRadio::connect(ChdrConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        radio_tx: "127.0.0.1:9".parse().unwrap(),
        rx_epids: vec![1],
        tx_epids: vec![2],
        host_epid: 1,
        rate_hz: RATE,
        samples_per_packet: SPP,
        history_packets: 8,
    });
    let mut radio = radio.unwrap();
    let mut rx = radio.rx_stream(&StreamArgs::channels([0])).unwrap();
    rx.issue_stream_cmd(StreamCmd::now(StreamMode::NumSampsAndDone(10)))
        .unwrap();
    let mut buf = vec![Cf32::default(); 10];
    let mut md = RxMetadata::default();
    let n = rx
        .recv(&mut [&mut buf], &mut md, Duration::from_millis(50))
        .unwrap();
    assert_eq!((n, md.error), (0, radiohost_radio::RxErrorCode::Timeout));
    let mut tx = radio.tx_stream(&StreamArgs::channels([0])).unwrap();
    let s = vec![Cf32::default(); 10];
    // No stream status ever comes: nothing is accepted, and send returns.
    let sent = tx
        .send(
            &[&s],
            &TxMetadata {
                time: None,
                start_of_burst: true,
                end_of_burst: true,
            },
            Duration::from_millis(50),
        )
        .unwrap();
    assert_eq!(sent, 0);
}
