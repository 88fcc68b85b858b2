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
#[test]
fn probe() {
    use radiohost_phy::uplink::Detector;
    use radiohost_phy::coding::{RxChain, user_c_init};
    use radiohost_phy::frontend::FrontEnd;
    use radiohost_phy::config::SymbolKind;
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/8x2.json");
    let cfg = FrameConfig::load(&p).unwrap();
    let frame = Generator::new(&cfg).frame(0).unwrap();
    let mut det = Detector::new(&cfg);
    det.process(&frame.samples).unwrap();
    println!("detector {}", allocations(|| { det.process(&frame.samples).unwrap(); }));
    let mut fe = FrontEnd::new(&cfg);
    let ul = cfg.symbols_of(SymbolKind::Uplink);
    let slices = cfg.data_num.div_ceil(16);
    let mut re = vec![[0f32; 16]; ul.len() * slices * cfg.antennas];
    let mut im = re.clone();
    fe.frame_planar(&frame.samples, cfg.antennas, &ul, &mut re, &mut im);
    println!("frame_planar {}", allocations(|| { fe.frame_planar(&frame.samples, cfg.antennas, &ul, &mut re, &mut im); }));
    let mut rx = RxChain::new(&cfg).unwrap();
    let eq = vec![Cf32::new(0.3, 0.1); cfg.data_num];
    let nv = vec![0.1; cfg.data_num];
    for u in 0..ul.len() { rx.soft_bits(&eq, &nv, user_c_init(&cfg, 0), u); }
    println!("soft_bits {}", allocations(|| for u in 0..ul.len() { rx.soft_bits(&eq, &nv, user_c_init(&cfg, 0), u); }));
    let mut ulp = UplinkPipeline::new(&cfg).unwrap();
    let mut out = UplinkOutput::for_config(&cfg);
    ulp.process_frame(&frame.samples, &mut out).unwrap();
    println!("frame {}", allocations(|| ulp.process_frame(&frame.samples, &mut out).unwrap()));
    println!("frame {}", allocations(|| ulp.process_frame(&frame.samples, &mut out).unwrap()));
}
