//! The conformance suite on the WARP backend, against the in-process node
//! emulator on 127.0.0.1 ephemeral ports, plus WARP edge cases.

use radiohost_radio::conformance::{self, Capabilities, Guarded, Harness, Loopback, Support};
use radiohost_radio::warp::{WarpConfig, WarpRadio};
use radiohost_radio::{Radio, RadioError, RxMetadata, StreamArgs, StreamCmd, StreamMode, Time};
use radiohost_warp::emulator::{Emulator, EmulatorConfig};
use radiohost_warp::host::{HostConfig, NodeTarget};
use radiohost_warp::Addressing;
use std::net::SocketAddr;
use std::time::Duration;

/// Each setup gets its own emulator (fresh buffers, its own trigger port).
struct WarpHarness;

fn start(nodes: u16, paths: usize) -> Result<Guarded<Emulator>, RadioError> {
    let cfg = EmulatorConfig {
        nodes,
        addressing: Addressing::LOOPBACK.with_ports(0, 0),
        ..Default::default()
    };
    let emu = Emulator::start(cfg)?;
    let radio = WarpRadio::connect(WarpConfig::for_emulator(&emu, paths)?)?;
    // The radio keeps the emulator running as long as it lives.
    Ok(Guarded {
        radio: Box::new(radio),
        guard: emu,
    })
}

impl Harness for WarpHarness {
    fn name(&self) -> String {
        "warp (2 emulated nodes x 2 RF paths)".into()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // Fix_16_15 written, Fix_14_13 read: one Fix_14_13 step plus rounding.
            tolerance: 2.0 / 8192.0,
            burst_len: 4000,
            lead: Time::from_ms(20),
            timeout: Duration::from_secs(5),
            loopback: Support::Yes,
            continuous: Support::No(
                "WARP nodes capture one fixed buffer per trigger: no continuous streaming".into(),
            ),
            timed: Support::Yes,
            burst_ack: Support::Yes,
        }
    }

    fn open(&self) -> Result<Box<dyn Radio>, RadioError> {
        Ok(Box::new(start(2, 2)?))
    }

    fn loopback(&self) -> Result<Loopback, RadioError> {
        Ok(Loopback {
            tx: Box::new(start(2, 2)?),
            // One radio: the trigger that sent the burst captured it.
            observe: Box::new(Ok),
        })
    }
}

#[test]
fn warp_passes_conformance() {
    let report = conformance::run_all(&WarpHarness);
    println!("{report}");
    assert!(report.all_ok(), "{report}");
    let skipped: Vec<_> = report.skipped().map(|(n, _)| n).collect();
    assert_eq!(skipped, ["continuous_start_stop"], "{report}");
}

#[test]
fn channels_map_to_nodes_and_paths() {
    let mut radio = start(2, 3).unwrap();
    assert_eq!(radio.info().rx_channels, 6);
    assert_eq!(radio.info().max_rx_burst, Some(32768));
    assert!(matches!(
        radio.rx_stream(&StreamArgs::channels([6])),
        Err(RadioError::NoSuchChannel { channel: 6, .. })
    ));
    let mut rx = radio.rx_stream(&StreamArgs::channels([0])).unwrap();
    assert!(matches!(
        rx.issue_stream_cmd(StreamCmd::now(StreamMode::NumSampsAndDone(40_000))),
        Err(RadioError::InvalidArgument(_))
    ));
    assert_eq!(radio.set_center_freq(2.45e9).unwrap(), 2.452e9);
    assert_eq!(radio.set_center_freq(5.3e9).unwrap(), 5.3e9);
}

#[test]
fn silent_node_is_an_error_not_a_hang() {
    // A bound UDP socket that never answers stands in for a dead node.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut radio = WarpRadio::connect(WarpConfig {
        host: HostConfig {
            interfaces: vec![SocketAddr::from(([127, 0, 0, 1], 0))],
            timeout: Duration::from_millis(5),
            retries: 2,
            trigger_addr: silent.local_addr().unwrap(),
            ..Default::default()
        },
        nodes: vec![NodeTarget {
            id: 0,
            addr: silent.local_addr().unwrap(),
            interface: 0,
        }],
        paths_per_node: 1,
        trigger_ids: 1,
    })
    .unwrap();
    let mut rx = radio.rx_stream(&StreamArgs::channels([0])).unwrap();
    rx.issue_stream_cmd(StreamCmd::now(StreamMode::NumSampsAndDone(100)))
        .unwrap();
    let mut buf = vec![Default::default(); 100];
    let r = rx.recv(
        &mut [&mut buf],
        &mut RxMetadata::default(),
        Duration::from_secs(1),
    );
    match r {
        Err(RadioError::Backend {
            backend: "warp",
            message,
        }) => {
            assert!(message.contains("did not complete"), "{message}")
        }
        other => panic!("expected a backend error, got {other:?}"),
    }
    assert!(matches!(
        WarpRadio::connect(WarpConfig {
            host: HostConfig::default(),
            nodes: Vec::new(),
            paths_per_node: 1,
            trigger_ids: 1,
        }),
        Err(RadioError::InvalidArgument(_))
    ));
}
