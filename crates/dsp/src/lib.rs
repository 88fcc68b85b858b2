//! radiohost DSP: FFT planning, uniformly partitioned overlap-save (UPOLS) convolution
//! for SISO and MIMO channels with glitch-free response replacement, and channel models
//! (tap files, Rayleigh taps, slowly time-varying fading).
//!
//! ```
//! use radiohost_dsp::{MimoConvolver, MimoTaps};
//! use radiohost_iq::Cf32;
//! let taps = MimoTaps::siso(vec![Cf32::new(1.0, 0.0), Cf32::new(0.5, 0.0)]).unwrap();
//! let mut conv = MimoConvolver::new(4, &taps).unwrap();
//! let x = [Cf32::new(1.0, 0.0), Cf32::new(0.0, 0.0), Cf32::new(0.0, 0.0), Cf32::new(0.0, 0.0)];
//! let mut y = [Cf32::new(0.0, 0.0); 4];
//! conv.process(&x, &mut y).unwrap();
//! assert!((y[1].re - 0.5).abs() < 1e-6);
//! ```

pub mod bench;
pub mod channel;
pub mod direct;
pub mod fft;
pub mod gnuradio;
pub mod offline;
pub mod spec;
pub mod split;
pub mod taps;
pub mod upols;

pub use fft::FftPair;
pub use split::MacKernel;
pub use taps::MimoTaps;
pub use upols::{MimoConvolver, ResponsePlanner, ResponseSpectra, SwapMode};

/// Errors of the convolver and of response handling.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DspError {
    #[error("{inputs}x{outputs} ports: each side needs 1 to {max} ports", max = taps::MAX_PORTS)]
    Ports { inputs: usize, outputs: usize },
    #[error("block length {block} is out of range (1 to {max} samples)")]
    Block { block: usize, max: usize },
    #[error("taps are ragged: every output row needs the same number of input paths")]
    RaggedTaps,
    #[error("{inputs}x{outputs} ports need {} paths, got {got}", inputs * outputs)]
    PathCount {
        inputs: usize,
        outputs: usize,
        got: usize,
    },
    #[error("path input {input} -> output {output} has {len} taps, more than the limit of {max}")]
    TooManyTaps {
        output: usize,
        input: usize,
        len: usize,
        max: usize,
    },
    #[error("path input {input} -> output {output} has a NaN or infinite tap")]
    NonFiniteTap { output: usize, input: usize },
    #[error("expected {}x{} ports (inputs x outputs), got {}x{}", expected.0, expected.1, got.0, got.1)]
    ShapeMismatch {
        expected: (usize, usize),
        got: (usize, usize),
    },
    #[error("every input and output block must be {expected} samples, got one of {got}")]
    BlockLength { expected: usize, got: usize },
    #[error("response of {len} taps is longer than this convolver holds ({capacity}); build it with a larger capacity")]
    ResponseTooLong { len: usize, capacity: usize },
    #[error("prepared spectra were made for a different convolver shape")]
    SpectraShape,
    #[error(
        "a response swap is still taking over; try again after the next block (see is_swapping)"
    )]
    SwapInProgress,
    #[error("a crossfade needs at least one block")]
    CrossfadeLength,
}
