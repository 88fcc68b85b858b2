//! The station's fronthaul receiver: reassembles each frame's received symbols into
//! a leased frame slot and tells the driver about arrivals and ready symbols.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::emulator::FrameBank;
use super::transport::{PacketRx, Recv, RxPacket, SharedSamples};
use super::wire::HEADER_LEN;
use crate::kernels::slot::write;
use crate::kernels::{FrameSlot, KernelContext, SymbolRole};
use crate::pool::{BufferPool, Lease};
use crate::runtime::{now_ns, DriverMsg, DriverSender};

/// Counters of one ingest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestStats {
    pub packets: u64,
    /// Packets that did not parse, named another RU, a symbol the station does not
    /// receive, an antenna out of range or a wrong sample count, or came for a frame
    /// already closed or evicted.
    pub bad: u64,
    pub duplicates: u64,
    pub frames: u64,
    pub refused: u64,
    /// Frames evicted from the reassembly window before all symbols arrived.
    pub evicted: u64,
    /// Frames of which no packet arrived (a gap in the RU's frame numbers, or frames
    /// missing at the end): reported to the driver so they are counted.
    pub lost: u64,
    /// The transport error that ended the ingest early, if any.
    pub error: Option<String>,
}

/// Frames reassembled at once; an older incomplete frame is evicted (its missing
/// symbols never become ready and the policy's deadline discards it).
const WINDOW: usize = 8;
/// Closed frames remembered to recognise late packets.
const CLOSED_MEMORY: usize = 64;

struct Assembly {
    ru_frame: u64,
    slot: Option<Lease<FrameSlot>>,
    seen: Vec<bool>,
    per_symbol: Vec<u16>,
    complete: usize,
}

/// Global frame id of RU `ru`'s frame `ru_frame` among `rus` RUs.
pub fn frame_id(ru: u16, ru_frame: u64, rus: u16) -> u64 {
    ru_frame * u64::from(rus.max(1)) + u64::from(ru)
}

/// Start the receiver of radio unit `ru` (of `rus`), which sends frames
/// `0..frames`; it ends when the transport closes, or `finished` is set and no
/// packet came for 50 ms.
#[allow(clippy::too_many_arguments)]
pub fn spawn_ingest(
    ru: u16,
    rus: u16,
    frames: u64,
    ctx: Arc<KernelContext>,
    bank: Arc<FrameBank>,
    pool: BufferPool<FrameSlot>,
    mut rx: Box<dyn PacketRx>,
    finished: Arc<AtomicBool>,
    events: DriverSender,
) -> std::thread::JoinHandle<IngestStats> {
    super::emulator::spawn_named(format!("station-ingest{ru}"), move || {
        let c = &ctx.cfg;
        let (m_n, sl, fl) = (c.antennas, c.symbol_len(), c.frame_len());
        let n_rx = ctx.shape.pilot_symbols.len() + ctx.shape.uplink_symbols.len();
        let mut pkt = RxPacket::with_capacity(HEADER_LEN + sl * 4 + 64);
        let mut window: VecDeque<Assembly> = VecDeque::with_capacity(WINDOW);
        let mut spare: Vec<Assembly> = Vec::new();
        let mut closed: VecDeque<u64> = VecDeque::with_capacity(CLOSED_MEMORY);
        let mut st = IngestStats::default();
        let mut idle_since = None;
        // Frames below this were seen (or declared lost); RUs number frames in order.
        let mut next_new = 0u64;
        loop {
            match rx.recv(&mut pkt, Duration::from_millis(10)) {
                Ok(Recv::Packet(_)) => {}
                Ok(Recv::Closed) => break,
                Err(e) => {
                    st.error = Some(e.to_string());
                    break;
                }
                Ok(Recv::Timeout) => {
                    if finished.load(Ordering::Acquire) {
                        let since = *idle_since.get_or_insert_with(now_ns);
                        if now_ns() - since > 50_000_000 {
                            break;
                        }
                    }
                    continue;
                }
            }
            idle_since = None;
            st.packets += 1;
            let Ok((h, payload)) = pkt.parse() else {
                st.bad += 1;
                continue;
            };
            let rx_pos = match ctx.role(h.symbol as usize) {
                Some(SymbolRole::Pilot { rx, .. } | SymbolRole::Uplink { rx, .. }) => rx,
                _ => {
                    st.bad += 1;
                    continue;
                }
            };
            if h.ru != ru
                || h.antenna as usize >= m_n
                || h.samples as usize != sl
                || closed.contains(&h.frame)
            {
                st.bad += 1;
                continue;
            }
            let id = frame_id(ru, h.frame, rus);
            let pos = match window.iter().position(|a| a.ru_frame == h.frame) {
                Some(p) => p,
                None => {
                    if h.frame < next_new || h.frame >= frames {
                        st.bad += 1; // late for a frame already declared lost, or beyond the run
                        continue;
                    }
                    for f in next_new..h.frame {
                        st.lost += 1;
                        let _ = events.send(DriverMsg::FrameLost {
                            frame: frame_id(ru, f, rus),
                            ru,
                        });
                    }
                    next_new = h.frame + 1;
                    if window.len() == WINDOW {
                        if let Some(old) = window.pop_front() {
                            st.evicted += 1;
                            remember(&mut closed, old.ru_frame);
                            spare.push(old);
                        }
                    }
                    let mut a = spare.pop().unwrap_or_else(|| Assembly {
                        ru_frame: 0,
                        slot: None,
                        seen: vec![false; n_rx * m_n],
                        per_symbol: vec![0; n_rx],
                        complete: 0,
                    });
                    a.ru_frame = h.frame;
                    a.seen.fill(false);
                    a.per_symbol.fill(0);
                    a.complete = 0;
                    a.slot = None;
                    st.frames += 1;
                    let truth = bank.truth(ru, h.frame);
                    match pool.acquire() {
                        Ok(slot) => {
                            write(&slot.downlink_payload)
                                .clone_from_slice(&truth.frame.downlink_payload);
                            a.slot = Some(slot.clone());
                            let msg = DriverMsg::FrameArrived {
                                frame: id,
                                ru,
                                at: now_ns(),
                                slot,
                                truth: Some(truth),
                            };
                            if events.send(msg).is_err() {
                                break;
                            }
                        }
                        Err(e) => {
                            st.refused += 1;
                            let _ = events.send(DriverMsg::FrameRefused {
                                frame: id,
                                ru,
                                reason: Arc::new(e),
                            });
                        }
                    }
                    window.push_back(a);
                    window.len() - 1
                }
            };
            let a = &mut window[pos];
            let Some(slot) = a.slot.as_ref() else {
                continue; // refused frame: its packets are dropped
            };
            let mark = rx_pos * m_n + h.antenna as usize;
            if a.seen[mark] {
                st.duplicates += 1;
                continue;
            }
            a.seen[mark] = true;
            {
                let mut staged = write(&slot.staging[rx_pos]);
                let (m, sym) = (h.antenna as usize, h.symbol as usize);
                // Samples the ring shares where the front end can read them: at
                // their place in a whole generated frame of this configuration.
                let in_place = pkt
                    .shared
                    .as_ref()
                    .filter(|s| {
                        s.frame().samples.len() == m_n * fl && s.start() == m * fl + sym * sl
                    })
                    .map(SharedSamples::frame);
                let first = a.per_symbol[rx_pos] == 0;
                match in_place {
                    Some(f) if first => staged.set_in_place(f.clone(), sym),
                    Some(f) if staged.in_place_frame().is_some_and(|g| Arc::ptr_eq(f, g)) => {}
                    _ => {
                        let seen = &a.seen[rx_pos * m_n..(rx_pos + 1) * m_n];
                        staged.leave_in_place(m_n, |other| other != m && seen[other]);
                        payload.read_into(&mut staged.copied_mut()[m * sl..(m + 1) * sl]);
                    }
                }
            }
            a.per_symbol[rx_pos] += 1;
            if a.per_symbol[rx_pos] as usize == m_n {
                a.complete += 1;
                let _ = events.send(DriverMsg::InputReady {
                    frame: id,
                    symbol: h.symbol as usize,
                });
                if a.complete == n_rx {
                    if let Some(done) = window.remove(pos) {
                        remember(&mut closed, done.ru_frame);
                        spare.push(Assembly { slot: None, ..done });
                    }
                }
            }
        }
        // Frames never seen at all still get a record.
        for f in next_new..frames {
            st.lost += 1;
            let _ = events.send(DriverMsg::FrameLost {
                frame: frame_id(ru, f, rus),
                ru,
            });
        }
        let _ = events.send(DriverMsg::IngestDone {
            ru,
            bad_packets: st.bad,
        });
        st
    })
}

fn remember(closed: &mut VecDeque<u64>, f: u64) {
    if closed.len() == CLOSED_MEMORY {
        closed.pop_front();
    }
    closed.push_back(f);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::slot::read;
    use crate::pool::Exhaustion;
    use crate::ru::transport::ring;
    use crate::ru::wire::{self, FronthaulHeader};
    use crate::runtime::{driver_channel, frame_pool};

    /// Ring packets that refer to their frame stage the symbol in place; a packet that
    /// carries its bytes moves its symbol to the copy buffer, the antennas staged in
    /// place before it copied in. Either way every antenna reads the frame's samples.
    #[test]
    fn shared_symbols_are_read_in_place_and_a_carried_packet_copies_its_symbol() {
        let cfg = crate::kernels::tests::phy_config("8x2");
        let ctx = Arc::new(KernelContext::new(&cfg, 1).unwrap());
        let bank = Arc::new(FrameBank::generate(&cfg, 1).unwrap());
        let pool = frame_pool(&ctx, 1, Exhaustion::Grow { max: 1 });
        let (m_n, sl, fl) = (cfg.antennas, cfg.symbol_len(), cfg.frame_len());
        let (mut tx, rx) = ring(1024, HEADER_LEN + sl * 4);
        let (events, inbox) = driver_channel();
        let finished = Arc::new(AtomicBool::new(false));
        let ingest = spawn_ingest(
            0,
            1,
            1,
            ctx.clone(),
            bank.clone(),
            pool,
            rx,
            finished,
            events,
        );
        let frame = bank.truth(0, 0).frame;
        let received = ctx.shape.received_symbols();
        let carried = (0, 2); // (received symbol, antenna) sent as bytes
        let mut pkt = vec![0u8; HEADER_LEN + sl * 4];
        for (i, &sym) in received.iter().enumerate() {
            for m in 0..m_n {
                let h = FronthaulHeader {
                    ru: 0,
                    frame: 0,
                    symbol: sym as u16,
                    antenna: m as u16,
                    samples: sl as u16,
                };
                let start = m * fl + sym * sl;
                let sent = if (i, m) == carried {
                    let n = wire::encode(&h, &frame.samples[start..start + sl], &mut pkt).unwrap();
                    tx.send(&mut pkt, n).unwrap()
                } else {
                    let shared = SharedSamples::new(frame.clone(), start..start + sl).unwrap();
                    tx.send_samples(&mut pkt, &h, shared).unwrap()
                };
                assert!(sent, "the ring has room for the frame");
            }
        }
        drop(tx);
        let stats = ingest.join().unwrap();
        assert_eq!((stats.frames, stats.bad, stats.duplicates), (1, 0, 0));
        let slot = inbox
            .try_iter()
            .find_map(|msg| match msg {
                DriverMsg::FrameArrived { slot, .. } => Some(slot),
                _ => None,
            })
            .expect("the frame arrived");
        for (i, &sym) in received.iter().enumerate() {
            let staged = read(&slot.staging[i]);
            let in_place = staged
                .in_place_frame()
                .is_some_and(|f| Arc::ptr_eq(f, &frame));
            assert_eq!(in_place, i != carried.0, "received symbol {i}");
            let (samples, at) = staged.view();
            let per_antenna = samples.len() / m_n;
            for m in 0..m_n {
                assert_eq!(
                    &samples[m * per_antenna + at * sl..][..sl],
                    &frame.samples[m * fl + sym * sl..][..sl],
                    "received symbol {i}, antenna {m}"
                );
            }
        }
    }
}
