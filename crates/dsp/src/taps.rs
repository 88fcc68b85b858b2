//! `MimoTaps`: the impulse responses of an M-input, N-output linear channel.

use radiohost_iq::Cf32;

use crate::DspError;

/// Most ports a convolver accepts per side (a bound on what bad input can allocate).
pub const MAX_PORTS: usize = 64;
/// Longest impulse response accepted, in samples.
pub const MAX_TAPS: usize = 1 << 20;

/// Impulse responses `h[n][m]`: from input port `m` to output port `n`.
///
/// Paths may have different lengths; shorter ones are zero-padded where needed.
#[derive(Debug, Clone, PartialEq)]
pub struct MimoTaps {
    inputs: usize,
    outputs: usize,
    /// Row-major `[n * inputs + m]`.
    paths: Vec<Vec<Cf32>>,
}

impl MimoTaps {
    /// Builds from `taps[n][m]` (outer index = output port).
    pub fn from_nested(taps: Vec<Vec<Vec<Cf32>>>) -> Result<Self, DspError> {
        let outputs = taps.len();
        let inputs = taps.first().map_or(0, Vec::len);
        if taps.iter().any(|row| row.len() != inputs) {
            return Err(DspError::RaggedTaps);
        }
        Self::from_paths(inputs, outputs, taps.into_iter().flatten().collect())
    }

    /// Builds from row-major paths `[n * inputs + m]`.
    pub fn from_paths(
        inputs: usize,
        outputs: usize,
        paths: Vec<Vec<Cf32>>,
    ) -> Result<Self, DspError> {
        check_ports(inputs, outputs)?;
        if paths.len() != inputs * outputs {
            return Err(DspError::PathCount {
                inputs,
                outputs,
                got: paths.len(),
            });
        }
        if let Some(p) = paths.iter().position(|p| p.len() > MAX_TAPS) {
            return Err(DspError::TooManyTaps {
                output: p / inputs,
                input: p % inputs,
                len: paths[p].len(),
                max: MAX_TAPS,
            });
        }
        if let Some(p) = paths
            .iter()
            .position(|p| p.iter().any(|t| !t.re.is_finite() || !t.im.is_finite()))
        {
            return Err(DspError::NonFiniteTap {
                output: p / inputs,
                input: p % inputs,
            });
        }
        Ok(Self {
            inputs,
            outputs,
            paths,
        })
    }

    /// One path: a single-input single-output channel.
    pub fn siso(taps: Vec<Cf32>) -> Result<Self, DspError> {
        Self::from_paths(1, 1, vec![taps])
    }

    /// An all-zero M x N response of `len` taps.
    pub fn zeros(inputs: usize, outputs: usize, len: usize) -> Result<Self, DspError> {
        Self::from_paths(
            inputs,
            outputs,
            vec![vec![Cf32::new(0.0, 0.0); len]; inputs * outputs],
        )
    }

    /// Number of input ports (M).
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Number of output ports (N).
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// The response from input `m` to output `n`.
    ///
    /// # Panics
    /// If `n` or `m` is out of range.
    pub fn path(&self, output: usize, input: usize) -> &[Cf32] {
        assert!(
            output < self.outputs && input < self.inputs,
            "port out of range"
        );
        &self.paths[output * self.inputs + input]
    }

    /// Mutable access to one path (its length may change).
    ///
    /// # Panics
    /// If `n` or `m` is out of range.
    pub fn path_mut(&mut self, output: usize, input: usize) -> &mut Vec<Cf32> {
        assert!(
            output < self.outputs && input < self.inputs,
            "port out of range"
        );
        &mut self.paths[output * self.inputs + input]
    }

    /// All paths, row-major `[n * inputs + m]`.
    pub fn paths(&self) -> &[Vec<Cf32>] {
        &self.paths
    }

    /// Length of the longest path (at least 1, so an all-empty response is one zero tap).
    pub fn max_len(&self) -> usize {
        self.paths.iter().map(Vec::len).max().unwrap_or(0).max(1)
    }
}

pub(crate) fn check_ports(inputs: usize, outputs: usize) -> Result<(), DspError> {
    if inputs == 0 || outputs == 0 || inputs > MAX_PORTS || outputs > MAX_PORTS {
        return Err(DspError::Ports { inputs, outputs });
    }
    Ok(())
}
