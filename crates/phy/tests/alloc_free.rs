//! Steady state allocates nothing: after construction and one warm-up frame, the
//! uplink and downlink pipelines and the kernels run with zero heap allocations.
//! (One test in this binary, so no other test thread allocates meanwhile.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use radiohost_iq::{Cf32, Ci16};
use radiohost_phy::crc::{self, CrcKind};
use radiohost_phy::downlink::DownlinkPipeline;
use radiohost_phy::generator::Generator;
use radiohost_phy::ofdm::OfdmFft;
use radiohost_phy::qam::{Demodulator, Modulation, Modulator};
use radiohost_phy::scramble::GoldSequence;
use radiohost_phy::uplink::{UplinkOutput, UplinkPipeline};
use radiohost_phy::zf::{equalize, precode, zf_detector, ZfScratch};
use radiohost_phy::FrameConfig;

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCS.load(Ordering::SeqCst);
    f();
    ALLOCS.load(Ordering::SeqCst) - before
}

#[test]
fn pipelines_and_kernels_do_not_allocate_in_steady_state() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/8x2.json");
    let cfg = FrameConfig::load(&p).unwrap();
    let frame = Generator::new(&cfg).frame(0).unwrap();

    let mut ul = UplinkPipeline::new(&cfg).unwrap();
    let mut out = UplinkOutput::for_config(&cfg);
    ul.process_frame(&frame.samples, &mut out).unwrap();
    assert_eq!(
        allocations(|| ul.process_frame(&frame.samples, &mut out).unwrap()),
        0,
        "uplink"
    );
    assert!(out.blocks.iter().flatten().all(|b| b.crc_ok));

    let mut dl = DownlinkPipeline::new(&cfg);
    let mut tx = vec![Ci16::default(); cfg.antennas * cfg.frame_len()];
    dl.process_frame(&frame.samples, &frame.downlink_payload, &mut tx)
        .unwrap();
    let n = allocations(|| {
        dl.process_frame(&frame.samples, &frame.downlink_payload, &mut tx)
            .unwrap();
    });
    assert_eq!(n, 0, "downlink");

    let mut fft = OfdmFft::new(2048);
    let mut buf = vec![Cf32::new(1.0, 0.0); 2048 * 4];
    let (m, k) = (16, 4);
    let h: Vec<Cf32> = (0..m * k)
        .map(|i| Cf32::new((i % 7) as f32, (i % 3) as f32 - 1.0))
        .collect();
    let mut w = vec![Cf32::default(); m * k];
    let mut ng = vec![0.0; k];
    let mut zs = ZfScratch::with_antennas(m, k);
    let (mut x, y) = (vec![Cf32::default(); k], vec![Cf32::new(0.5, 0.0); m]);
    let mut y2 = vec![Cf32::default(); m];
    let md = Modulator::new(Modulation::Qam256);
    let dm = Demodulator::new(Modulation::Qam256);
    let bits = vec![1u8; 8 * 64];
    let mut syms = vec![Cf32::default(); 64];
    let mut llrs = vec![0.0; 8 * 64];
    let nv = vec![0.1; 64];
    let mut crc_bits = vec![0u8; 100];
    let n = allocations(|| {
        fft.forward_batch(&mut buf);
        fft.inverse_batch(&mut buf);
        zf_detector(&h, m, k, &mut zs, &mut w, &mut ng).unwrap();
        equalize(&w, &y, &mut x);
        precode(&w, &x, 1.0, &mut y2);
        md.modulate(&bits, &mut syms);
        dm.demodulate(&syms, &nv, &mut llrs);
        GoldSequence::new_at(77, 1000).descramble_llrs(&mut llrs);
        crc::attach(CrcKind::Crc24A, &mut crc_bits);
    });
    assert_eq!(n, 0, "kernels");
}
