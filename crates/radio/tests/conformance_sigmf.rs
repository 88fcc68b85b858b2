//! The conformance suite on the SigMF backend, plus its file edge cases.

use radiohost_iq::sigmf::{self, DataType, Meta};
use radiohost_radio::conformance::{self, Capabilities, Harness, Loopback, Support};
use radiohost_radio::sigmf::SigMfRadio;
use radiohost_radio::{
    Cf32, Radio, RadioError, RxErrorCode, RxMetadata, StreamArgs, StreamCmd, StreamMode, Time,
    TxMetadata,
};
use sha2::{Digest, Sha512};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const RATE: f64 = 1e6;

struct SigMfHarness {
    dir: tempfile::TempDir,
    input: PathBuf,
    next: AtomicUsize,
}

impl SigMfHarness {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("input");
        // Two channels, interleaved per sample, 5000 samples from tick 0.
        let samples: Vec<Cf32> = (0..10_000)
            .map(|i| Cf32::new((i % 97) as f32 / 200.0, -((i % 13) as f32) / 50.0))
            .collect();
        let meta = Meta::new(DataType::Cf32Le, RATE).num_channels(2);
        sigmf::write_cf32(&input, &meta, &samples).unwrap();
        SigMfHarness {
            dir,
            input,
            next: AtomicUsize::new(0),
        }
    }

    fn fresh_output(&self) -> PathBuf {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.dir.path().join(format!("out{n}"))
    }
}

impl Harness for SigMfHarness {
    fn name(&self) -> String {
        "sigmf".into()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            tolerance: 0.0,
            burst_len: 3000,
            lead: Time::from_ms(5),
            timeout: Duration::from_millis(200),
            loopback: Support::Yes,
            continuous: Support::Yes,
            timed: Support::No(
                "a recording has no running clock: nothing is ever in the past".into(),
            ),
            burst_ack: Support::Yes,
        }
    }

    fn open(&self) -> Result<Box<dyn Radio>, RadioError> {
        let out = self.fresh_output();
        Ok(Box::new(SigMfRadio::new(
            Some(&self.input),
            Some((&out, 2)),
            RATE,
        )?))
    }

    fn loopback(&self) -> Result<Loopback, RadioError> {
        let out = self.fresh_output();
        let tx = SigMfRadio::create(&out, 2, RATE)?;
        Ok(Loopback {
            tx: Box::new(tx),
            observe: Box::new(move |tx| {
                // Dropping the writer finalises the recording; then replay it.
                drop(tx);
                Ok(Box::new(SigMfRadio::open(&out)?) as Box<dyn Radio>)
            }),
        })
    }
}

#[test]
fn sigmf_passes_conformance() {
    let report = conformance::run_all(&SigMfHarness::new());
    println!("{report}");
    assert!(report.all_ok(), "{report}");
    assert!(report.passed() >= 9, "{report}");
}

fn recv_all(radio: &mut SigMfRadio, cmd: StreamCmd) -> (Vec<Cf32>, Vec<RxMetadata>) {
    let mut rx = radio.rx_stream(&StreamArgs::channels([0])).unwrap();
    rx.issue_stream_cmd(cmd).unwrap();
    let (mut out, mut mds) = (Vec::new(), Vec::new());
    let mut buf = vec![Cf32::default(); 700];
    loop {
        let mut md = RxMetadata::default();
        let n = rx
            .recv(&mut [&mut buf], &mut md, Duration::from_millis(10))
            .unwrap();
        out.extend_from_slice(&buf[..n]);
        mds.push(md);
        if n == 0 {
            return (out, mds);
        }
    }
}

#[test]
fn bursts_at_separate_times_become_captures_with_their_ticks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bursts");
    let mut tx_radio = SigMfRadio::create(&path, 1, RATE).unwrap();
    let mut tx = tx_radio.tx_stream(&StreamArgs::channels([0])).unwrap();
    let a = vec![Cf32::new(0.25, 0.0); 100];
    let b = vec![Cf32::new(-0.5, 0.125); 50];
    let burst = |t: u64| TxMetadata {
        time: Some(Time::from_ticks(t, RATE)),
        start_of_burst: true,
        end_of_burst: true,
    };
    assert_eq!(tx.send(&[&a], &burst(1000), Duration::ZERO).unwrap(), 100);
    assert_eq!(tx.send(&[&b], &burst(5000), Duration::ZERO).unwrap(), 50);
    // Before what was written: dropped and reported late.
    tx.send(&[&b], &burst(10), Duration::ZERO).unwrap();
    let codes: String = std::iter::from_fn(|| tx.recv_async_msg(Duration::ZERO))
        .map(|e| e.code())
        .collect();
    assert_eq!(codes, "AAL");
    drop(tx);
    tx_radio.finish().unwrap();
    // A finished output refuses more samples.
    let mut tx = tx_radio.tx_stream(&StreamArgs::channels([0])).unwrap();
    assert!(tx
        .send(&[&a], &TxMetadata::default(), Duration::ZERO)
        .is_err());

    // The checksum covers the data file.
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sigmf::meta_path(&path)).unwrap()).unwrap();
    let data = std::fs::read(sigmf::data_path(&path)).unwrap();
    let hex: String = Sha512::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(meta["global"]["core:sha512"], hex);
    assert_eq!(meta["captures"].as_array().unwrap().len(), 2);

    let mut rx_radio = SigMfRadio::open(&path).unwrap();
    assert_eq!(rx_radio.time_now().to_ticks(RATE), 1000);
    // A command at a time in the gap starts at the next recorded sample.
    let (got, mds) = recv_all(
        &mut rx_radio,
        StreamCmd::at(StreamMode::StartContinuous, Time::from_ticks(2000, RATE)),
    );
    assert_eq!(got, b);
    assert_eq!(mds[0].time.unwrap().to_ticks(RATE), 5000);
    assert!(mds[0].start_of_burst && mds[0].end_of_burst);
    assert_eq!(mds.last().unwrap().error, RxErrorCode::Timeout);
    // From the start: the first burst, then the second, each with its own time.
    let (got, mds) = recv_all(
        &mut rx_radio,
        StreamCmd::at(StreamMode::NumSampsAndDone(150), Time::ZERO),
    );
    assert_eq!(&got[..100], &a[..]);
    assert_eq!(&got[100..], &b[..]);
    let ticks: Vec<u64> = mds
        .iter()
        .filter_map(|m| m.time.map(|t| t.to_ticks(RATE)))
        .collect();
    assert_eq!(ticks, [1000, 5000]);
}

fn write_raw(base: &Path, meta_json: &str, data: &[u8]) {
    std::fs::write(sigmf::meta_path(base), meta_json).unwrap();
    std::fs::write(sigmf::data_path(base), data).unwrap();
}

#[test]
fn truncated_or_rateless_recordings_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("bad");
    let meta = r#"{"global":{"core:datatype":"cf32_le","core:version":"1.2.0","core:sample_rate":1000000},"captures":[{"core:sample_start":0}],"annotations":[]}"#;
    // 8 bytes per cf32 sample: 13 bytes is a truncated file.
    write_raw(&base, meta, &[0u8; 13]);
    let e = SigMfRadio::open(&base)
        .err()
        .expect("truncated data must fail");
    assert!(e.to_string().contains("truncated"), "{e}");

    let rateless = r#"{"global":{"core:datatype":"cf32_le","core:version":"1.2.0"},"captures":[],"annotations":[]}"#;
    write_raw(&base, rateless, &[0u8; 16]);
    let e = SigMfRadio::open(&base).err().expect("no rate must fail");
    assert!(matches!(e, RadioError::InvalidArgument(_)), "{e}");

    // An empty data file is refused, naming the file and the size expected...
    write_raw(&base, meta, &[]);
    let e = SigMfRadio::open(&base).err().expect("empty data must fail");
    assert!(
        e.to_string().contains("bad.sigmf-data") && e.to_string().contains("8 bytes"),
        "{e}"
    );
    // ... unless the metadata says there is none: then it opens and times out at once.
    let metadata_only = r#"{"global":{"core:datatype":"cf32_le","core:version":"1.2.0","core:sample_rate":1000000,"core:metadata_only":true},"captures":[],"annotations":[]}"#;
    write_raw(&base, metadata_only, &[]);
    let mut radio = SigMfRadio::open(&base).unwrap();
    let (got, mds) = recv_all(&mut radio, StreamCmd::now(StreamMode::StartContinuous));
    assert!(got.is_empty());
    assert_eq!(mds[0].error, RxErrorCode::Timeout);
}
