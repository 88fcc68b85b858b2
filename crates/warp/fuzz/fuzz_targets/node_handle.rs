#![no_main]
//! An emulated node fed arbitrary datagrams never panics, and whatever it decides
//! to send back is itself a well-formed datagram.
use libfuzzer_sys::fuzz_target;
use radiohost_warp::node::{NodeAction, NodeCore};
use radiohost_warp::wire::{decode, MAX_DATAGRAM};

fuzz_target!(|data: &[u8]| {
    let mut node = NodeCore::new(0);
    let mut out = vec![0u8; MAX_DATAGRAM];
    match node.handle(data, &mut out) {
        NodeAction::None => {}
        NodeAction::Reply(n) => assert!(decode(&out[..n]).is_ok()),
        NodeAction::Read(job) => {
            for i in 0..job.packet_count().min(64) {
                let n = node.encode_read_packet(&job, i, &mut out);
                assert!(decode(&out[..n]).is_ok());
            }
        }
    }
});
