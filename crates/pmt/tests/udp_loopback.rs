//! The UDP driver over loopback: two receivers on different local addresses (127.0.0.1
//! and 127.0.0.2, standing in for two interfaces), one of them reached from an explicit
//! local address; both get the object byte-exact and the sender reports it.

use std::net::UdpSocket;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use radiohost_pmt::udp::{recv_object_on, send_object, Destination};
use radiohost_pmt::{ReceiverConfig, SenderConfig};

#[test]
fn two_receivers_over_loopback_get_the_object_byte_exact() {
    let object: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let psk = b"0123456789abcdef-loopback".to_vec();
    let socks = [
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.2:0").unwrap(),
    ];
    let addrs: Vec<_> = socks.iter().map(|s| s.local_addr().unwrap()).collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let handles: Vec<_> = socks
            .into_iter()
            .map(|sock| {
                let psk = psk.clone();
                let stop = &stop;
                scope.spawn(move || {
                    let mut sink = Vec::new();
                    let cfg = ReceiverConfig {
                        psk: Some(psk),
                        ..Default::default()
                    };
                    let r = recv_object_on(
                        cfg,
                        sock,
                        &mut sink,
                        Duration::from_millis(300),
                        Duration::from_secs(20),
                        stop,
                        |_| {},
                    )
                    .expect("receiver runs");
                    (r, sink)
                })
            })
            .collect();
        let dests = [
            Destination {
                to: addrs[0],
                local: None,
            },
            Destination {
                to: addrs[1],
                local: Some("127.0.0.1:0".parse().unwrap()),
            },
        ];
        let cfg = SenderConfig {
            psk: Some(psk.clone()),
            initial_rtt: Duration::from_millis(20),
            ..Default::default()
        };
        let mut events = 0;
        let report = send_object(cfg, object.clone().into(), &dests, &stop, |_| events += 1)
            .expect("sender runs");
        assert_eq!(report.outcome, vec![Some(true), Some(true)]);
        assert!(report.done_after.iter().all(Option::is_some));
        assert!(events > 0, "no progress events");
        for h in handles {
            let (r, sink) = h.join().unwrap();
            assert!(r.intact);
            assert_eq!(sink, object);
            assert_eq!(r.stats.auth_failures, 0);
            // `seconds` is the transfer (first datagram to verified object): it never
            // includes the 300 ms linger that follows completion.
            assert!(r.transfer > Duration::ZERO);
            assert!(
                r.transfer + Duration::from_millis(300) <= r.listened,
                "transfer {:?} listened {:?}",
                r.transfer,
                r.listened
            );
            let json = serde_json::to_value(&r).unwrap();
            assert_eq!(json["seconds"].as_f64(), Some(r.transfer.as_secs_f64()));
            assert_eq!(
                json["listened_seconds"].as_f64(),
                Some(r.listened.as_secs_f64())
            );
        }
    });
}
