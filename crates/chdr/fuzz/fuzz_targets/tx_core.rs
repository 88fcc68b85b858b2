#![no_main]
//! The emulated radio's TX core fed arbitrary datagrams at arbitrary times:
//! it never panics, and under zero-fill its output is one contiguous run of
//! ticks (sample-synchronous) ending at its clock.
use libfuzzer_sys::fuzz_target;
use radiohost_chdr::tx::{TxConfig, TxCore, TxPolicy};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let policy = if data[0] & 1 == 0 { TxPolicy::ZeroFill } else { TxPolicy::DropResync };
    let mut tx = TxCore::new(TxConfig { epid: 0, capacity_pkts: 4, max_samples: 64, policy });
    let mut now = 0u64;
    let mut first: Option<u64> = None;
    let mut next: Option<u64> = None;
    // Datagrams are length-prefixed (one byte) chunks; each advances time a little.
    let mut rest = &data[1..];
    while let Some((&len, tail)) = rest.split_first() {
        let take = (len as usize).min(tail.len());
        let (dgram, tail) = tail.split_at(take);
        rest = tail;
        now += len as u64 % 97;
        let _ = tx.on_datagram(dgram, now, &mut |_| {});
        tx.advance(
            now,
            &mut |t, s| {
                first.get_or_insert(t);
                if policy == TxPolicy::ZeroFill {
                    if let Some(n) = next {
                        assert_eq!(t, n, "zero-fill output must be contiguous");
                    }
                }
                assert!(t + s.len() as u64 <= now, "played a sample before its time");
                next = Some(t + s.len() as u64);
            },
            &mut |_| {},
        );
    }
    if policy == TxPolicy::ZeroFill {
        if let (Some(n), Some(c)) = (next, tx.clock()) {
            assert_eq!(n, c);
        }
    }
});
