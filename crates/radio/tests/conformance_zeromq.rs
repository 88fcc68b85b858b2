//! The conformance suite on the ZeroMQ backend over 127.0.0.1: PUB/SUB with
//! gr_complex items one endpoint per channel, and PUSH/PULL with short pairs
//! interleaved. A loopback is one radio whose RX connects to its own TX; a plain
//! radio receives from a feeder (another ZeroMQ radio sending a tone).
//! Interop with libzmq itself (pyzmq, GNU Radio) is in tests/python.

use radiohost_radio::conformance::{
    self, test_burst, Capabilities, Guarded, Harness, Loopback, Support,
};
use radiohost_radio::zeromq::{ZmqConfig, ZmqItem, ZmqLayout, ZmqPattern, ZmqRadio};
use radiohost_radio::{Radio, RadioError, StreamArgs, Time, TxMetadata};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const RATE: f64 = 1e6;
const CHANNELS: usize = 2;

struct ZmqHarness {
    pattern: ZmqPattern,
    item: ZmqItem,
    layout: ZmqLayout,
}

fn free_endpoint() -> Result<String, RadioError> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok(format!("tcp://127.0.0.1:{}", l.local_addr()?.port()))
}

/// A thread sending a tone on every channel of its own TX radio until dropped.
struct Feeder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl ZmqHarness {
    fn endpoints(&self) -> Result<Vec<String>, RadioError> {
        let n = match self.layout {
            ZmqLayout::PerChannel => CHANNELS,
            ZmqLayout::Interleaved { .. } => 1,
        };
        (0..n).map(|_| free_endpoint()).collect()
    }

    fn config(&self, rx: Vec<String>, tx: Vec<String>) -> ZmqConfig {
        ZmqConfig {
            rx,
            tx,
            pattern: self.pattern,
            item: self.item,
            layout: self.layout,
            rate_hz: RATE,
            rx_bind: false,
            tx_bind: true,
        }
    }
}

impl Harness for ZmqHarness {
    fn name(&self) -> String {
        format!(
            "zeromq ({:?}, {:?}, {:?})",
            self.pattern, self.item, self.layout
        )
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            tolerance: match self.item {
                ZmqItem::GrComplex => 0.0,
                ZmqItem::ShortPair => 1.0 / 32767.0,
            },
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
        let eps = self.endpoints()?;
        let mut feeder = ZmqRadio::open(self.config(Vec::new(), eps.clone()))?;
        let radio = ZmqRadio::open(self.config(eps, Vec::new()))?;
        radio.wait_connected(Duration::from_secs(5))?;
        feeder.wait_connected(Duration::from_secs(5))?;
        let mut tx = feeder.tx_stream(&StreamArgs::channels((0..CHANNELS).collect::<Vec<_>>()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let tone: Vec<_> = (0..CHANNELS).map(|c| test_burst(c, 500)).collect();
            let refs: Vec<&[_]> = tone.iter().map(|t| t.as_slice()).collect();
            while !flag.load(Ordering::Relaxed) {
                let _ = tx.send(&refs, &TxMetadata::default(), Duration::from_millis(50));
                std::thread::sleep(Duration::from_micros(500));
            }
            drop(feeder);
        });
        Ok(Box::new(Guarded {
            radio: Box::new(radio),
            guard: Feeder {
                stop,
                thread: Some(thread),
            },
        }))
    }

    fn loopback(&self) -> Result<Loopback, RadioError> {
        let eps = self.endpoints()?;
        let radio = ZmqRadio::open(self.config(eps.clone(), eps))?;
        radio.wait_connected(Duration::from_secs(5))?;
        Ok(Loopback {
            tx: Box::new(radio),
            observe: Box::new(Ok),
        })
    }
}

fn run(h: ZmqHarness) {
    let report = conformance::run_all(&h);
    println!("{report}");
    assert!(report.all_ok(), "{report}");
    assert_eq!(report.skipped().count(), 0, "{report}");
}

#[test]
fn pub_sub_gr_complex_per_channel_passes_conformance() {
    run(ZmqHarness {
        pattern: ZmqPattern::PubSub,
        item: ZmqItem::GrComplex,
        layout: ZmqLayout::PerChannel,
    });
}

#[test]
fn push_pull_short_interleaved_passes_conformance() {
    run(ZmqHarness {
        pattern: ZmqPattern::PushPull,
        item: ZmqItem::ShortPair,
        layout: ZmqLayout::Interleaved { channels: CHANNELS },
    });
}

#[test]
fn bad_configurations_are_refused_with_reasons() {
    let h = ZmqHarness {
        pattern: ZmqPattern::PubSub,
        item: ZmqItem::GrComplex,
        layout: ZmqLayout::Interleaved { channels: 2 },
    };
    let two = vec![
        "tcp://127.0.0.1:1".to_string(),
        "tcp://127.0.0.1:2".to_string(),
    ];
    let e = ZmqRadio::open(h.config(two, Vec::new())).err().unwrap();
    assert!(e.to_string().contains("one endpoint"), "{e}");
    let e = ZmqRadio::open(h.config(vec!["udp://x:1".into()], Vec::new()))
        .err()
        .unwrap();
    assert!(e.to_string().contains("only tcp://"), "{e}");
    let e = ZmqRadio::open(h.config(Vec::new(), Vec::new()))
        .err()
        .unwrap();
    assert!(e.to_string().contains("at least one"), "{e}");
}

#[test]
fn a_radio_alone_reports_who_is_missing() {
    let ep = free_endpoint().unwrap();
    let h = ZmqHarness {
        pattern: ZmqPattern::PushPull,
        item: ZmqItem::GrComplex,
        layout: ZmqLayout::PerChannel,
    };
    let radio = ZmqRadio::open(h.config(vec![ep.clone()], Vec::new())).unwrap();
    let e = radio
        .wait_connected(Duration::from_millis(200))
        .unwrap_err();
    assert!(e.to_string().contains(&ep), "{e}");
}
