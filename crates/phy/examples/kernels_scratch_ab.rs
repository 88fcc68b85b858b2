//! Temporary A/B timing harness (helper "kernels"; removed before the session ends).
use radiohost_iq::Cf32;
use radiohost_phy::group_product::{Coefficients, GaussCoefficients, GroupProduct, LANES};
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
    let (m, k) = (64usize, 16usize);
    let slices = 75;
    let w: Vec<Cf32> = (0..m * k)
        .map(|i| Cf32::new((i % 7) as f32 * 0.1, (i % 5) as f32 * -0.1))
        .collect();
    let re = vec![[0.3f32; LANES]; slices * m];
    let im = vec![[0.2f32; LANES]; slices * m];
    for (name, a, cols, rows) in [
        ("equalize", Coefficients::detector(&w, k, m), m, k),
        (
            "precode",
            Coefficients::precoder_transposed(&w, k, m, 0.5),
            k,
            m,
        ),
    ] {
        let mut g = GaussCoefficients::default();
        g.fill(&a);
        let d = slices * LANES;
        let mut out = vec![Cf32::default(); rows * d];
        for isa in Isa::available() {
            let t4 = best(30, || {
                for s in 0..slices {
                    GroupProduct::apply_planar(
                        isa,
                        a,
                        black_box(&re[s * cols..(s + 1) * cols]),
                        &im[s * cols..(s + 1) * cols],
                        0..16,
                        &mut out,
                        d,
                        s * LANES,
                    );
                }
            });
            let t3 = best(30, || {
                for s in 0..slices {
                    GroupProduct::apply_gauss(
                        isa,
                        &g,
                        black_box(&re[s * cols..(s + 1) * cols]),
                        &im[s * cols..(s + 1) * cols],
                        0..16,
                        &mut out,
                        d,
                        s * LANES,
                    );
                }
            });
            println!(
                "{name} {isa:?}: 4-mult {t4:.1} us, 3-mult {t3:.1} us per symbol (x13 per frame)"
            );
        }
    }
}
