//! Streamer + emulated radio over loopback UDP, with a relay in the RX path that
//! drops or reorders chosen packets. Each impairment must produce the right
//! event and a TX recording with no lost or duplicated samples.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use radiohost_chdr::process::{Block, PacketProcessor, Passthrough};
use radiohost_chdr::radio::{run_radio_on, RadioConfig, RadioReport, RadioSockets};
use radiohost_chdr::rx::test_signal;
use radiohost_chdr::streamer::{
    run_streamer_on, PollMode, StreamEvent, StreamerConfig, StreamerReport,
};
use radiohost_chdr::tx::{TxEvent, TxPolicy};
use radiohost_chdr::wire::ChdrHeader;
use radiohost_iq::Ci16;

const SPP: usize = 512;
const RATE: f64 = 2e6; // 256 us per packet: gentle on a shared 2-core machine
const START_S: f64 = 0.05;
const PACKETS: u64 = 120;

#[derive(Clone, Default)]
struct Impairment {
    /// Sequence numbers to drop on the stream with DstEPID `drop_epid` (0 means 0x100).
    drop: Vec<u16>,
    drop_epid: u16,
    /// Hold packet `a` back and send it right after packet `b`.
    swap: Vec<(u16, u16)>,
}

/// Forward datagrams from `sock` to `to`, applying the impairment by sequence number.
fn relay(sock: UdpSocket, to: SocketAddr, imp: Impairment, stop: Arc<AtomicBool>) {
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    radiohost_chdr::net::set_buffer_sizes(&sock, 4 << 20);
    let mut buf = vec![0u8; 65536];
    let mut held: Vec<(u16, Vec<u8>)> = Vec::new();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let Ok(n) = sock.recv(&mut buf) else { continue };
        let pkt = &buf[..n];
        let (seq, epid) = ChdrHeader::parse(pkt)
            .map(|h| (h.seq_num, h.dst_epid))
            .unwrap_or((0, 0));
        let drop_epid = if imp.drop_epid == 0 {
            0x100
        } else {
            imp.drop_epid
        };
        if epid == drop_epid && imp.drop.contains(&seq) {
            continue;
        }
        if epid != 0x100 {
            sock.send_to(pkt, to).unwrap(); // only port 0 is reordered
            continue;
        }
        if imp.swap.iter().any(|&(a, _)| a == seq) {
            held.push((seq, pkt.to_vec()));
            continue;
        }
        sock.send_to(pkt, to).unwrap();
        for &(a, b) in &imp.swap {
            if b == seq {
                if let Some(i) = held.iter().position(|h| h.0 == a) {
                    let (_, p) = held.remove(i);
                    sock.send_to(&p, to).unwrap();
                }
            }
        }
    }
}

struct Setup {
    imp: Impairment,
    offset_ticks: u64,
    capacity: u32,
    pending: usize,
    policy: TxPolicy,
    rate: f64,
    ports: u16,
    subscribers: Vec<SocketAddr>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            imp: Impairment::default(),
            // 100 ms of slack, and a radio buffer that holds all of it (credit
            // bounds how far ahead the host may be): nothing should be late.
            offset_ticks: (0.1 * RATE) as u64,
            capacity: 2048,
            pending: 256,
            policy: TxPolicy::ZeroFill,
            rate: RATE,
            ports: 1,
            subscribers: Vec::new(),
        }
    }
}

/// Loopback tests share a 2-core machine with other builds: run them one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run<P: PacketProcessor + 'static>(setup: Setup, proc: P) -> (StreamerReport, RadioReport) {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let stop = Arc::new(AtomicBool::new(false));
    let host = UdpSocket::bind("127.0.0.1:0").unwrap();
    let relay_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let radio_cfg = RadioConfig {
        host: relay_sock.local_addr().unwrap(),
        rx_bind: "127.0.0.1:0".parse().unwrap(),
        tx_bind: "127.0.0.1:0".parse().unwrap(),
        rx_dst_epids: (0..setup.ports).map(|p| 0x100 + p).collect(),
        tx_epids: (0..setup.ports).map(|p| 0x200 + p).collect(),
        rate_sps: setup.rate,
        samples_per_packet: SPP,
        packets: PACKETS,
        start_delay: Duration::from_secs_f64(START_S),
        tx_capacity_pkts: setup.capacity,
        policy: setup.policy,
        linger: Duration::from_secs_f64(setup.offset_ticks as f64 / setup.rate)
            + Duration::from_millis(150),
        record: true,
        spin: false,
    };
    let sockets = RadioSockets::bind(&radio_cfg).unwrap();
    let mut cfg = StreamerConfig::new(
        host.local_addr().unwrap(),
        sockets.tx.local_addr().unwrap(),
        SPP,
    );
    cfg.subscribers = setup.subscribers.clone();
    cfg.rx_epids = (0..setup.ports).map(|p| 0x100 + p).collect();
    cfg.tx_epids = (0..setup.ports).map(|p| 0x200 + p).collect();
    cfg.tx_offset_ticks = setup.offset_ticks;
    cfg.poll = PollMode::Blocking;
    cfg.pending_capacity = setup.pending;
    cfg.reorder_window = 4;
    cfg.status_period = 1;
    cfg.idle_timeout = Duration::from_millis(100);
    cfg.drain_timeout = Duration::from_millis(100);
    let to = host.local_addr().unwrap();
    let (s1, s2) = (stop.clone(), stop.clone());
    let relay_t = thread::spawn(move || relay(relay_sock, to, setup.imp, s1));
    let streamer_t =
        thread::spawn(move || run_streamer_on(host, cfg, proc, &AtomicBool::new(false)));
    let radio = run_radio_on(sockets, radio_cfg, &AtomicBool::new(false)).unwrap();
    s2.store(true, std::sync::atomic::Ordering::Relaxed);
    let streamer = streamer_t.join().unwrap().unwrap();
    relay_t.join().unwrap();
    (streamer, radio)
}

/// Check the recording: origin at the first TX time, exactly PACKETS*SPP samples,
/// each equal to the input shifted by the offset, except the packets in `zeroed`.
fn check_output(radio: &RadioReport, rate: f64, offset: u64, zeroed: &[u64]) {
    check_port(radio, 0, rate, offset, zeroed);
}

fn check_port(radio: &RadioReport, port: usize, rate: f64, offset: u64, zeroed: &[u64]) {
    let rec = &radio.recordings[port];
    let start = (START_S * rate) as u64;
    assert_eq!(rec.origin, Some(start + offset));
    assert_eq!(
        rec.samples.len() as u64,
        PACKETS * SPP as u64,
        "port {port}: no lost or duplicated samples"
    );
    assert!(rec.discontinuities.is_empty());
    for (i, &s) in rec.samples.iter().enumerate() {
        let pkt = (i / SPP) as u64;
        let want = if zeroed.contains(&pkt) {
            Ci16::default()
        } else {
            test_signal(port as u16, start + i as u64)
        };
        assert_eq!(s, want, "port {port} sample {i} (packet {pkt})");
    }
}

#[test]
fn mimo_ports_stay_aligned_when_one_port_loses_a_packet() {
    let setup = Setup {
        ports: 2,
        imp: Impairment {
            drop: vec![50],
            drop_epid: 0x101,
            ..Default::default()
        },
        ..Default::default()
    };
    let offset = setup.offset_ticks;
    let (s, r) = run(setup, Passthrough { ports: 2 });
    assert!(
        s.events
            .contains(&StreamEvent::SequenceGap { port: 1, seq: 50 }),
        "{:?}",
        s.events
    );
    assert_eq!(s.counters.frames, PACKETS);
    assert_eq!(
        s.counters.misaligned_frames, 0,
        "the hole was filled by the reorder stage"
    );
    check_port(&r, 0, RATE, offset, &[]);
    check_port(&r, 1, RATE, offset, &[50]);
}

#[test]
fn clean_passthrough_is_sample_exact() {
    let setup = Setup::default();
    let offset = setup.offset_ticks;
    let (s, r) = run(setup, Passthrough { ports: 1 });
    assert_eq!(s.counters.frames, PACKETS);
    assert!(r.event_letters.is_empty(), "events: {}", r.event_letters);
    check_output(&r, RATE, offset, &[]);
    assert_eq!(s.rx_to_tx.samples, PACKETS);
    assert_eq!(r.end_to_end.samples, PACKETS);
}

#[test]
fn sequence_gap_is_reported_and_zero_filled() {
    let setup = Setup {
        imp: Impairment {
            drop: vec![30],
            ..Default::default()
        },
        ..Default::default()
    };
    let offset = setup.offset_ticks;
    let (s, r) = run(setup, Passthrough { ports: 1 });
    assert!(
        s.events
            .contains(&StreamEvent::SequenceGap { port: 0, seq: 30 }),
        "{:?}",
        s.events
    );
    assert_eq!(s.counters.zero_filled_packets, 1);
    assert_eq!(s.counters.frames, PACKETS, "the hole is a frame of zeros");
    assert!(
        r.event_letters.is_empty(),
        "the radio saw a full stream: {}",
        r.event_letters
    );
    check_output(&r, RATE, offset, &[30]);
}

#[test]
fn reordered_packets_are_restored() {
    let setup = Setup {
        imp: Impairment {
            swap: vec![40, 41].into_iter().zip([42, 43]).collect(),
            ..Default::default()
        },
        ..Default::default()
    };
    let offset = setup.offset_ticks;
    let (s, r) = run(setup, Passthrough { ports: 1 });
    let reordered = s
        .events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Reordered { .. }))
        .count();
    assert!(reordered >= 1, "{:?}", s.events);
    assert_eq!(s.reorder[0].missing, 0);
    check_output(&r, RATE, offset, &[]);
}

/// Sleeps once, making the packets behind it late at the radio.
struct SlowOnce {
    frame: u64,
    at: u64,
    sleep: Duration,
}

impl PacketProcessor for SlowOnce {
    fn inputs(&self) -> usize {
        1
    }
    fn outputs(&self) -> usize {
        1
    }
    fn process(&mut self, input: &Block<Ci16>, output: &mut Block<Ci16>) {
        if self.frame == self.at {
            thread::sleep(self.sleep);
        }
        self.frame += 1;
        output.port_mut(0).copy_from_slice(input.port(0));
    }
}

#[test]
fn late_tx_is_reported_and_output_stays_synchronous() {
    // A 60 ms stall with 30 ms of slack: the packets behind it reach the radio late.
    let setup = Setup {
        offset_ticks: (0.03 * RATE) as u64,
        ..Default::default()
    };
    let offset = setup.offset_ticks;
    let proc = SlowOnce {
        frame: 0,
        at: 20,
        sleep: Duration::from_millis(60),
    };
    let (_s, r) = run(setup, proc);
    let tx = r.tx[0];
    assert!(tx.late_packets > 0, "{tx:?}");
    assert!(r.event_letters.contains('L'), "{}", r.event_letters);
    let rec = &r.recordings[0];
    let start = (START_S * RATE) as u64;
    let input_len = PACKETS * SPP as u64;
    assert_eq!(rec.origin, Some(start + offset));
    assert_eq!(rec.truncated, 0);
    assert!(
        rec.discontinuities.is_empty(),
        "zero-fill keeps the output on the clock"
    );
    // If the EOB packet itself was late the radio played zeros past the end.
    assert!(rec.samples.len() as u64 >= input_len);
    assert_eq!(
        tx.samples_played + tx.zeros_played,
        rec.samples.len() as u64
    );
    let mut zeros = 0u64;
    for (i, &s) in rec.samples.iter().enumerate() {
        if s == Ci16::default() {
            zeros += 1;
        } else {
            assert!(
                (i as u64) < input_len,
                "sample {i} after the end of the input"
            );
            assert_eq!(
                s,
                test_signal(0, start + i as u64),
                "sample {i} out of place"
            );
        }
    }
    assert_eq!(zeros, tx.zeros_played, "every zero is an accounted gap");
    assert!(zeros >= tx.late_samples_dropped);
}

#[test]
fn flow_control_stalls_the_host_without_losing_samples() {
    // The host may run 256 packets ahead of the radio's clock but the radio
    // buffers only 64: after 64 packets it must stall and queue, then resume as
    // the radio plays out. A slow clock (512 us per packet) leaves 33 ms of
    // buffered slack, so even a loaded machine delivers on time.
    let rate = 1e6;
    let setup = Setup {
        offset_ticks: 256 * SPP as u64,
        capacity: 64,
        pending: 128,
        rate,
        ..Default::default()
    };
    let offset = setup.offset_ticks;
    let (s, r) = run(setup, Passthrough { ports: 1 });
    assert!(
        s.events.contains(&StreamEvent::FlowStall { port: 0 }),
        "{:?}",
        &s.events[..s.events.len().min(5)]
    );
    assert!(s.events.contains(&StreamEvent::FlowResume { port: 0 }));
    assert!(s.credit[0].stalls > 0);
    assert_eq!(s.counters.host_queue_drops, 0);
    assert_eq!(
        r.tx[0].overflows, 0,
        "credit kept the radio's buffer from overflowing"
    );
    assert!(r.event_letters.is_empty(), "{}", r.event_letters);
    check_output(&r, rate, offset, &[]);
}

#[test]
fn drop_resync_policy_drops_late_packets_whole() {
    let setup = Setup {
        offset_ticks: (0.03 * RATE) as u64,
        policy: TxPolicy::DropResync,
        ..Default::default()
    };
    let proc = SlowOnce {
        frame: 0,
        at: 20,
        sleep: Duration::from_millis(60),
    };
    let (_s, r) = run(setup, proc);
    let tx = r.tx[0];
    assert!(tx.late_packets > 0);
    assert_eq!(
        tx.zeros_played, 0,
        "nothing is zero-filled under drop/resync"
    );
    assert_eq!(
        tx.late_samples_dropped,
        tx.late_packets * SPP as u64,
        "late packets go whole"
    );
    let rec = &r.recordings[0];
    assert_eq!(
        rec.samples.len() as u64 + tx.late_samples_dropped,
        PACKETS * SPP as u64
    );
    // Packets 0..20 play contiguously; anything played after the stall follows a
    // stop (nothing was zero-filled), so the recording must skip time there.
    // (On a heavily loaded machine earlier packets may be late too.)
    let first_late = 20 * SPP;
    if rec.samples.len() > first_late && tx.late_packets < PACKETS {
        assert!(!rec.discontinuities.is_empty());
        for &(at, skipped) in &rec.discontinuities {
            assert_eq!(
                at % SPP,
                0,
                "resumes on a packet boundary: {:?}",
                rec.discontinuities
            );
            assert_eq!(skipped % SPP as u64, 0, "skips whole packets");
        }
    }
    assert!(r
        .events
        .iter()
        .any(|(_, e)| matches!(e, TxEvent::Late { .. })));
}

#[test]
fn fan_out_delivers_every_rx_packet_unchanged_to_each_subscriber() {
    let subs: Vec<UdpSocket> = (0..2)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    for sub in &subs {
        // Hold the whole run: nobody reads until the end.
        radiohost_chdr::net::set_buffer_sizes(sub, 4 << 20);
    }
    let setup = Setup {
        subscribers: subs.iter().map(|s| s.local_addr().unwrap()).collect(),
        ..Default::default()
    };
    let offset = setup.offset_ticks;
    let (s, r) = run(setup, Passthrough { ports: 1 });
    assert_eq!(s.counters.fanout_packets, 2 * PACKETS);
    check_output(&r, RATE, offset, &[]);
    for sub in &subs {
        sub.set_nonblocking(true).unwrap();
        let mut buf = vec![0u8; 65536];
        let mut seqs = Vec::new();
        while let Ok(n) = sub.recv(&mut buf) {
            let p = radiohost_chdr::wire::DataPacket::parse(&buf[..n]).unwrap();
            let mut samples = vec![Ci16::default(); p.num_samples()];
            p.read_samples(&mut samples).unwrap();
            let ts = p.timestamp.unwrap();
            assert_eq!(samples[0], test_signal(0, ts), "forwarded unchanged");
            seqs.push(p.header.seq_num);
        }
        assert_eq!(seqs, (0..PACKETS as u16).collect::<Vec<_>>());
    }
}
