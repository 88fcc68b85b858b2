#![no_main]
//! The tagged burst packet the relays and the destination decode: parsing
//! never panics, and an accepted tag re-encodes to the words it came from.
use libfuzzer_sys::fuzz_target;
use radiohost_relay::tag::{RelayPacket, RelayTag};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = RelayPacket::parse(data) else { return };
    let words: Vec<u64> = p.data.metadata_words().take(4).collect();
    assert_eq!(&p.tag.words()[..], &words[..]);
    assert_eq!(RelayTag::from_words(words.into_iter()), Ok(p.tag));
    assert_eq!(Some(p.timestamp), p.data.timestamp);
});
