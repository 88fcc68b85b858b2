//! Runs the documented BLER curves (BPSK + AWGN, default decoder) and writes them as an
//! SVG plot with a logarithmic BLER axis.
//!
//! `cargo run --release -p radiohost-ldpc --example ldpc_bler_plot -- docs/benchmarks/ldpc_bler.svg [BLOCKS]`

use plotters::prelude::*;
use radiohost_ldpc::{BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

/// BLER at each Eb/N0 point; stops a curve once it reaches zero errors.
fn curve(bg: BaseGraph, zc: usize, rate: f64, points: &[f64], blocks: usize) -> Vec<(f64, f64)> {
    let p = CodeParams::for_rate(bg, zc, rate).expect("documented parameters are valid");
    let mut enc = Encoder::new(p);
    let mut dec = Decoder::new(p, DecoderConfig::default());
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut tx = vec![0u8; p.tx_bits];
    let mut out = vec![0u8; p.payload_bits];
    let mut res = Vec::new();
    for &ebn0 in points {
        let sigma2 = 1.0 / (2.0 * p.rate() * 10f64.powf(ebn0 / 10.0));
        let noise = Normal::new(0.0, sigma2.sqrt()).expect("positive variance");
        let mut errors = 0;
        for _ in 0..blocks {
            let payload: Vec<u8> = (0..p.payload_bits).map(|_| rng.gen_range(0..2)).collect();
            enc.encode(&payload, &mut tx).expect("bits");
            let llr: Vec<f32> = tx
                .iter()
                .map(|&b| {
                    (2.0 * (if b == 0 { 1.0 } else { -1.0 } + noise.sample(&mut rng)) / sigma2)
                        as f32
                })
                .collect();
            dec.decode(&llr, &mut out).expect("valid LLRs");
            errors += (out != payload) as usize;
        }
        let bler = errors as f64 / blocks as f64;
        println!("{bg} Zc={zc} R={rate:.3} Eb/N0={ebn0:.2} dB BLER={bler:.4}");
        if errors == 0 {
            break;
        }
        res.push((ebn0, bler));
    }
    res
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "ldpc_bler.svg".into());
    let blocks: usize = args.next().and_then(|b| b.parse().ok()).unwrap_or(500);
    let grid: Vec<f64> = (0..=16).map(|i| i as f64 * 0.25).collect();
    let curves = [
        (
            "BG1 Zc=384 K=8448 R=1/3",
            curve(BaseGraph::Bg1, 384, 1.0 / 3.0, &grid, blocks),
            RED,
        ),
        (
            "BG2 Zc=52 K=520 R=1/3",
            curve(BaseGraph::Bg2, 52, 1.0 / 3.0, &grid, blocks),
            BLUE,
        ),
        (
            "BG1 Zc=384 K=8448 R=2/3",
            curve(BaseGraph::Bg1, 384, 2.0 / 3.0, &grid[4..], blocks),
            GREEN,
        ),
    ];
    let root = SVGBackend::new(&path, (800, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let floor = 1.0 / blocks as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "5G NR LDPC, BPSK/AWGN, layered min-sum (i8, alpha 0.75, <= 10 it)",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0f64..4.0f64, (floor * 0.5..1.0f64).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("Eb/N0 [dB]")
        .y_desc("BLER")
        .draw()?;
    for (name, pts, color) in curves {
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    println!("wrote {path}");
    Ok(())
}
