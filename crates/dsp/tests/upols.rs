//! UPOLS against direct convolution: SISO, MIMO, response swaps.

use proptest::prelude::*;
use radiohost_dsp::direct::convolve_truncated;
use radiohost_dsp::{DspError, MacKernel, MimoConvolver, MimoTaps, SwapMode};
use radiohost_iq::Cf32;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn random_signal(rng: &mut ChaCha8Rng, len: usize) -> Vec<Cf32> {
    (0..len)
        .map(|_| Cf32::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
        .collect()
}

/// Runs a SISO convolver over `x` block by block (x.len() a multiple of the block).
fn run_siso(conv: &mut MimoConvolver, x: &[Cf32]) -> Vec<Cf32> {
    let b = conv.block();
    let mut y = vec![Cf32::new(0.0, 0.0); x.len()];
    for (xi, yi) in x.chunks(b).zip(y.chunks_mut(b)) {
        conv.process(xi, yi).unwrap();
    }
    y
}

/// Largest error relative to the reference's RMS (so near-zero samples don't dominate).
fn relative_error(got: &[Cf32], want: &[Cf32]) -> f64 {
    let rms = (want.iter().map(|v| f64::from(v.norm_sqr())).sum::<f64>()
        / want.len().max(1) as f64)
        .sqrt();
    let err = got
        .iter()
        .zip(want)
        .map(|(a, b)| f64::from((a - b).norm()))
        .fold(0.0, f64::max);
    if rms == 0.0 {
        err
    } else {
        err / rms
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn siso_equals_direct_convolution(
        seed in any::<u64>(),
        block_pow in 0u32..9,
        taps in 1usize..700,
        blocks in 1usize..6,
        scalar in any::<bool>(),
    ) {
        let block = 1usize << block_pow;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let h = random_signal(&mut rng, taps);
        let x = random_signal(&mut rng, block * (blocks + taps.div_ceil(block)));
        let mut conv = MimoConvolver::new(block, &MimoTaps::siso(h.clone()).unwrap()).unwrap();
        if scalar {
            conv.set_kernel(MacKernel::Scalar);
        }
        prop_assert_eq!(conv.partitions(), taps.div_ceil(block));
        let got = run_siso(&mut conv, &x);
        let want = convolve_truncated(&x, &h);
        let err = relative_error(&got, &want);
        prop_assert!(err < 1e-5, "relative error {} (B={}, L={})", err, block, taps);
    }

    #[test]
    fn non_power_of_two_blocks_work(seed in any::<u64>(), block in 1usize..300, taps in 1usize..400) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let h = random_signal(&mut rng, taps);
        let x = random_signal(&mut rng, block * 3 + taps);
        let x = &x[..x.len() / block * block];
        let mut conv = MimoConvolver::new(block, &MimoTaps::siso(h.clone()).unwrap()).unwrap();
        let err = relative_error(&run_siso(&mut conv, x), &convolve_truncated(x, &h));
        prop_assert!(err < 1e-5, "relative error {} (B={}, L={})", err, block, taps);
    }

    #[test]
    fn mimo_equals_sum_of_siso(
        seed in any::<u64>(),
        inputs in 1usize..4,
        outputs in 1usize..4,
        taps in 1usize..300,
    ) {
        let block = 64;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let paths: Vec<Vec<Cf32>> = (0..inputs * outputs).map(|i| random_signal(&mut rng, 1 + (taps + 31 * i) % 300)).collect();
        let mimo_taps = MimoTaps::from_paths(inputs, outputs, paths).unwrap();
        let len = block * 6;
        let xs: Vec<Vec<Cf32>> = (0..inputs).map(|_| random_signal(&mut rng, len)).collect();
        let mut conv = MimoConvolver::new(block, &mimo_taps).unwrap();
        let mut ys = vec![vec![Cf32::new(0.0, 0.0); len]; outputs];
        for b in 0..len / block {
            let ins: Vec<&[Cf32]> = xs.iter().map(|x| &x[b * block..(b + 1) * block]).collect();
            let mut outs: Vec<&mut [Cf32]> = ys.iter_mut().map(|y| &mut y[b * block..(b + 1) * block]).collect();
            conv.process_block(&ins, &mut outs).unwrap();
        }
        for (n, y) in ys.iter().enumerate() {
            let mut want = vec![Cf32::new(0.0, 0.0); len];
            for (m, x) in xs.iter().enumerate() {
                let mut siso = MimoConvolver::new(block, &MimoTaps::siso(mimo_taps.path(n, m).to_vec()).unwrap()).unwrap();
                for (w, v) in want.iter_mut().zip(run_siso(&mut siso, x)) {
                    *w += v;
                }
            }
            let err = relative_error(y, &want);
            prop_assert!(err < 1e-5, "output {} relative error {}", n, err);
        }
    }

    #[test]
    fn staggered_swap_filters_each_block_wholly_by_one_response(
        seed in any::<u64>(),
        block_pow in 2u32..7,
        old_len in 1usize..300,
        new_len in 1usize..300,
        swap_block in 0usize..6,
    ) {
        let block = 1usize << block_pow;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let old = random_signal(&mut rng, old_len);
        let new = random_signal(&mut rng, new_len);
        let capacity = old_len.max(new_len);
        let total_blocks = swap_block + capacity.div_ceil(block) + 3;
        let x = random_signal(&mut rng, block * total_blocks);
        let mut conv = MimoConvolver::with_capacity(block, capacity, &MimoTaps::siso(old.clone()).unwrap()).unwrap();
        let new_taps = MimoTaps::siso(new.clone()).unwrap();
        let mut y = vec![Cf32::new(0.0, 0.0); x.len()];
        for b in 0..total_blocks {
            if b == swap_block {
                conv.swap_responses(&new_taps, SwapMode::Staggered).unwrap();
            }
            conv.process(&x[b * block..(b + 1) * block], &mut y[b * block..(b + 1) * block]).unwrap();
        }
        prop_assert!(!conv.is_swapping());
        // old * x(before) + new * x(after)
        let t0 = swap_block * block;
        let mut before = x.clone();
        before[t0..].fill(Cf32::new(0.0, 0.0));
        let mut after = x.clone();
        after[..t0].fill(Cf32::new(0.0, 0.0));
        let want: Vec<Cf32> = convolve_truncated(&before, &old)
            .into_iter()
            .zip(convolve_truncated(&after, &new))
            .map(|(a, b)| a + b)
            .collect();
        let err = relative_error(&y, &want);
        prop_assert!(err < 1e-5, "relative error {}", err);
    }
}

#[test]
fn crossfade_ramps_between_old_and_new_outputs() {
    let block = 32;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let old = random_signal(&mut rng, 40);
    let new = random_signal(&mut rng, 70);
    let x = random_signal(&mut rng, block * 10);
    let mut conv =
        MimoConvolver::with_capacity(block, 70, &MimoTaps::siso(old.clone()).unwrap()).unwrap();
    let mut y = vec![Cf32::new(0.0, 0.0); x.len()];
    let (t0_block, fade_blocks) = (4, 3);
    for b in 0..10 {
        if b == t0_block {
            conv.swap_responses(
                &MimoTaps::siso(new.clone()).unwrap(),
                SwapMode::Crossfade {
                    blocks: fade_blocks,
                },
            )
            .unwrap();
            assert_eq!(
                conv.swap_responses(&MimoTaps::siso(new.clone()).unwrap(), SwapMode::Staggered),
                Err(DspError::SwapInProgress)
            );
        }
        conv.process(
            &x[b * block..(b + 1) * block],
            &mut y[b * block..(b + 1) * block],
        )
        .unwrap();
    }
    let y_old = convolve_truncated(&x, &old);
    let y_new = convolve_truncated(&x, &new);
    let (t0, len) = (t0_block * block, fade_blocks * block);
    for i in 0..x.len() {
        let w = if i < t0 {
            0.0
        } else if i >= t0 + len {
            1.0
        } else {
            (i - t0 + 1) as f32 / len as f32
        };
        let want = y_old[i] * (1.0 - w) + y_new[i] * w;
        assert!(
            (y[i] - want).norm() < 1e-4 * (1.0 + want.norm()),
            "sample {i}"
        );
    }
}

#[test]
fn prepared_swap_recycles_buffers_and_checks_shape() {
    let block = 16;
    let taps = MimoTaps::siso(vec![Cf32::new(1.0, 0.0); 20]).unwrap();
    let mut conv = MimoConvolver::new(block, &taps).unwrap();
    let mut planner = conv.response_planner();
    let spectra = planner
        .prepare(&MimoTaps::siso(vec![Cf32::new(0.5, 0.0); 10]).unwrap())
        .unwrap();
    let recycled = conv.swap_prepared(spectra, SwapMode::Staggered).unwrap();
    assert_eq!(recycled.shape(), (1, 1, block, 2));
    let too_long = MimoTaps::siso(vec![Cf32::new(1.0, 0.0); 33]).unwrap();
    assert_eq!(
        planner.prepare(&too_long).unwrap_err(),
        DspError::ResponseTooLong {
            len: 33,
            capacity: 32
        }
    );
    let other = MimoConvolver::new(8, &taps)
        .unwrap()
        .response_planner()
        .prepare(&taps)
        .unwrap();
    while conv.is_swapping() {
        conv.process(&[Cf32::new(0.0, 0.0); 16], &mut [Cf32::new(0.0, 0.0); 16])
            .unwrap();
    }
    assert_eq!(
        conv.swap_prepared(other, SwapMode::Staggered).unwrap_err(),
        DspError::SpectraShape
    );
}

#[test]
fn bad_shapes_are_errors_not_panics() {
    let taps = MimoTaps::zeros(2, 2, 8).unwrap();
    assert!(matches!(
        MimoConvolver::new(0, &taps),
        Err(DspError::Block { .. })
    ));
    let mut conv = MimoConvolver::new(8, &taps).unwrap();
    let x = [Cf32::new(0.0, 0.0); 8];
    let mut y0 = [Cf32::new(0.0, 0.0); 8];
    let mut y1 = [Cf32::new(0.0, 0.0); 7];
    assert!(matches!(
        conv.process_block(&[&x], &mut [&mut y0]),
        Err(DspError::ShapeMismatch { .. })
    ));
    assert_eq!(
        conv.process_block(&[&x, &x], &mut [&mut y0, &mut y1]),
        Err(DspError::BlockLength {
            expected: 8,
            got: 7
        })
    );
    assert!(matches!(
        MimoTaps::zeros(0, 1, 1),
        Err(DspError::Ports { .. })
    ));
    assert_eq!(
        MimoTaps::from_paths(1, 1, vec![vec![Cf32::new(f32::NAN, 0.0)]]),
        Err(DspError::NonFiniteTap {
            output: 0,
            input: 0
        })
    );
    assert!(matches!(
        conv.swap_responses(&MimoTaps::zeros(1, 2, 8).unwrap(), SwapMode::Staggered),
        Err(DspError::ShapeMismatch { .. })
    ));
    assert_eq!(
        conv.swap_responses(&taps, SwapMode::Crossfade { blocks: 0 }),
        Err(DspError::CrossfadeLength)
    );
}
