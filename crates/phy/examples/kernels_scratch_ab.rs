//! Temporary A/B timing harness (helper "kernels"; removed before the session ends).
use radiohost_iq::Cf32;
use radiohost_phy::qam::{Modulation, Modulator};
use radiohost_phy::scramble::GoldSequence;
use radiohost_phy::simd::Isa;
use std::hint::black_box;
use std::time::Instant;

fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    let mut b = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        f();
        b = b.min(t.elapsed().as_secs_f64());
    }
    b * 1e6
}

fn main() {
    for m in [Modulation::Qam16, Modulation::Qam256] {
        let qm = m.bits_per_symbol();
        let n = 1200;
        let mut bits: Vec<u8> = (0..n * qm).map(|i| ((i * 7 + i / 5) % 3 == 1) as u8).collect();
        let md = Modulator::new(m);
        let mut out = vec![Cf32::default(); n];
        let mut re = vec![[0f32; 16]; 75 * 16];
        let mut im = vec![[0f32; 16]; 75 * 16];
        let mut g = GoldSequence::new(1234);
        let ts = best(200, || g.scramble_bits(black_box(&mut bits)));
        for isa in Isa::available() {
            let ti = best(200, || md.modulate_at(isa, black_box(&bits), &mut out));
            let tp = best(200, || md.modulate_planar_at(isa, black_box(&bits), &mut re, &mut im, 16));
            println!("{m:?} {isa:?}: scramble {ts:.2} us, modulate {ti:.2} us, planar {tp:.2} us per user-symbol (x192 per frame)");
        }
    }
}
