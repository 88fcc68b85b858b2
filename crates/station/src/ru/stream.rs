//! Frames from a radio's RX stream: one frame of samples per channel, read from
//! any [`RxStreamer`] (emulated, WARP, CHDR, SigMF file, ...), as the
//! [`Block`] the station's block ingest takes.

use std::time::Duration;

use radiohost_iq::{Block, BlockError, Cf32};
use radiohost_radio::{RadioError, RxErrorCode, RxMetadata, RxStreamer};

/// Why a frame could not be read from the stream.
#[derive(Debug, thiserror::Error)]
pub enum StreamFrameError {
    #[error("the radio failed while a frame was read: {0}")]
    Radio(#[from] RadioError),
    #[error("the stream stopped after {got} of {want} samples of a frame ({code:?}); issue a stream command covering whole frames")]
    Short {
        got: usize,
        want: usize,
        code: RxErrorCode,
    },
    #[error("the radio gave no time for the frame's first sample; use a backend with timestamps")]
    NoTime,
    #[error(transparent)]
    Block(#[from] BlockError),
}

/// Read exactly `frame_len` samples on every channel of `rx` into a block whose
/// `start_tick` is the radio's time of the first sample at `rate_hz`. Each
/// `recv` waits at most `timeout`.
///
/// # Errors
/// A radio error, a stream that ended or paused mid-frame (timeout, overflow:
/// the frame would not be contiguous), or no timestamp.
pub fn read_frame(
    rx: &mut dyn RxStreamer,
    frame_len: usize,
    rate_hz: f64,
    timeout: Duration,
) -> Result<Block, StreamFrameError> {
    let channels = rx.num_channels();
    let mut ports = vec![vec![Cf32::default(); frame_len]; channels];
    let mut got = 0usize;
    let mut start = None;
    let mut md = RxMetadata::default();
    while got < frame_len {
        let mut bufs: Vec<&mut [Cf32]> = ports.iter_mut().map(|p| &mut p[got..]).collect();
        let n = rx.recv(&mut bufs, &mut md, timeout)?;
        let broken = md.error != RxErrorCode::None && (got > 0 || n == 0);
        if n == 0 || broken {
            return Err(StreamFrameError::Short {
                got,
                want: frame_len,
                code: md.error,
            });
        }
        if start.is_none() {
            start = Some(md.time.ok_or(StreamFrameError::NoTime)?.to_ticks(rate_hz));
        }
        got += n.min(frame_len - got);
    }
    let start = start.ok_or(StreamFrameError::NoTime)?;
    Ok(Block::from_ports(ports, rate_hz, start)?)
}
