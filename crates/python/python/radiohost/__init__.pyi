"""Type stubs for radiohost (the Rust extension radiohost._native)."""

import enum
import os
from typing import Any, Optional, Sequence, Tuple, TypedDict, Union

import numpy as np
import numpy.typing as npt

__version__: str

class RadiohostError(Exception): ...
class SigMFError(RadiohostError): ...
class LdpcError(RadiohostError): ...
class PhyError(RadiohostError): ...
class RadioError(RadiohostError): ...
class DspError(RadiohostError): ...
class PmtError(RadiohostError): ...
class StationError(RadiohostError): ...

_Path = Union[str, os.PathLike[str]]
_C64 = npt.NDArray[np.complex64]

# SigMF
def read_sigmf(path: _Path) -> Tuple[Union[_C64, npt.NDArray[np.int16]], dict[str, Any]]: ...
def write_sigmf(
    path: _Path,
    samples: Union[_C64, npt.NDArray[np.int16]],
    sample_rate: Optional[float] = None,
    *,
    frequency: Optional[float] = None,
    description: Optional[str] = None,
    meta: Optional[dict[str, Any]] = None,
) -> dict[str, Any]: ...

# LDPC
def lifting_sizes() -> list[int]: ...

class LdpcCode:
    def __init__(
        self,
        base_graph: int,
        zc: int,
        *,
        payload_bits: Optional[int] = None,
        tx_bits: Optional[int] = None,
        rate: Optional[float] = None,
        rv: int = 0,
    ) -> None: ...
    @property
    def base_graph(self) -> int: ...
    @property
    def zc(self) -> int: ...
    @property
    def payload_bits(self) -> int: ...
    @property
    def tx_bits(self) -> int: ...
    @property
    def rv(self) -> int: ...
    @property
    def rate(self) -> float: ...
    @property
    def k0(self) -> int: ...
    def encode(self, bits: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]: ...
    def decode(
        self,
        llr: npt.NDArray[np.float32],
        *,
        max_iterations: int = 10,
        early_termination: bool = True,
        normalization: float = 0.75,
        out: Optional[npt.NDArray[np.uint8]] = None,
    ) -> Tuple[npt.NDArray[np.uint8], npt.NDArray[np.int32], npt.NDArray[np.bool_]]: ...

# phy
def qam_modulate(bits: npt.NDArray[np.uint8], modulation: str) -> _C64: ...
def qam_demodulate(
    symbols: _C64, noise_var: Union[float, npt.NDArray[np.float32]], modulation: str
) -> npt.NDArray[np.float32]: ...
def ofdm_modulate(freq: _C64, cp_len: int) -> _C64: ...
def ofdm_demodulate(time: _C64, cp_len: int) -> _C64: ...
def zf_detector_batch(h: _C64) -> Tuple[_C64, npt.NDArray[np.float32]]: ...
def zf_equalize(w: _C64, y: _C64) -> _C64: ...

class FrameConfig:
    def __init__(self, config: dict[str, Any]) -> None: ...
    @staticmethod
    def load(path: _Path) -> "FrameConfig": ...
    def to_dict(self) -> dict[str, Any]: ...
    @property
    def antennas(self) -> int: ...
    @property
    def users(self) -> int: ...
    @property
    def fft_size(self) -> int: ...
    @property
    def cp_len(self) -> int: ...
    @property
    def frame_len(self) -> int: ...
    @property
    def sample_rate(self) -> float: ...
    @property
    def modulation(self) -> str: ...
    @property
    def block_payload_bits(self) -> int: ...
    @property
    def uplink_blocks(self) -> int: ...
    @property
    def downlink_blocks(self) -> int: ...

def generate_uplink_frame(config: FrameConfig, frame: int = 0) -> dict[str, Any]: ...

class UplinkDecoder:
    def __init__(self, config: FrameConfig) -> None: ...
    def decode(self, samples: Union[_C64, npt.NDArray[np.int16]]) -> dict[str, Any]: ...

def evaluate(config: FrameConfig, direction: str = "uplink", frames: int = 1) -> dict[str, Any]: ...
def phy_bench(seconds: float = 0.5) -> dict[str, Any]: ...

# radios
class StreamMode(enum.Enum):
    start_cont = 0
    stop_cont = 1
    num_done = 2

class StreamCMD:
    mode: StreamMode
    num_samps: int
    stream_now: bool
    time_ns: Optional[int]
    def __init__(self, mode: StreamMode, num_samps: int = 0, *, time_ns: Optional[int] = None) -> None: ...

class RXMetadata:
    @property
    def time_ns(self) -> Optional[int]: ...
    @property
    def start_of_burst(self) -> bool: ...
    @property
    def end_of_burst(self) -> bool: ...
    @property
    def error_code(self) -> str: ...
    def __init__(self) -> None: ...

class TXMetadata:
    time_ns: Optional[int]
    start_of_burst: bool
    end_of_burst: bool
    def __init__(
        self, *, time_ns: Optional[int] = None, start_of_burst: bool = False, end_of_burst: bool = False
    ) -> None: ...

class RxStreamer:
    def get_num_channels(self) -> int: ...
    def issue_stream_cmd(self, cmd: StreamCMD) -> None: ...
    def recv(self, buffer: _C64, metadata: RXMetadata, timeout: float = 0.1) -> int: ...

class TxStreamer:
    def get_num_channels(self) -> int: ...
    def send(self, buffer: _C64, metadata: TXMetadata, timeout: float = 0.1) -> int: ...
    def recv_async_msg(self, timeout: float = 0.1) -> Optional[dict[str, Any]]: ...

class Radio:
    @staticmethod
    def emulated(rate: float, channels: int = 1) -> "Radio": ...
    @staticmethod
    def sigmf(
        input: Optional[_Path] = None,
        output: Optional[_Path] = None,
        *,
        tx_channels: int = 1,
        rate: Optional[float] = None,
    ) -> "Radio": ...
    @staticmethod
    def warp_emulated(nodes: int = 1, paths_per_node: int = 1) -> "Radio": ...
    @staticmethod
    def chdr(
        radio_tx: str,
        rx_epids: Sequence[int],
        tx_epids: Sequence[int],
        rate: float,
        *,
        bind: str = "0.0.0.0:0",
        host_epid: int = 1,
        samples_per_packet: int = 200,
        history_packets: int = 256,
    ) -> "Radio": ...
    @staticmethod
    def zeromq(
        rate: float,
        *,
        rx: Sequence[str] = ...,
        tx: Sequence[str] = ...,
        pattern: str = "pubsub",
        item: str = "gr_complex",
        layout: str = "per_channel",
        channels: int = 1,
        rx_bind: bool = False,
        tx_bind: bool = True,
        wait: float = 0.0,
    ) -> "Radio": ...
    def info(self) -> dict[str, Any]: ...
    def get_rate(self) -> float: ...
    def set_rate(self, rate: float) -> float: ...
    def get_center_freq(self) -> float: ...
    def set_center_freq(self, freq: float) -> float: ...
    def get_time_now(self) -> int: ...
    def set_time_now(self, time_ns: int) -> None: ...
    def get_rx_stream(self, channels: Sequence[int] = ...) -> RxStreamer: ...
    def get_tx_stream(self, channels: Sequence[int] = ...) -> TxStreamer: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Radio": ...
    def __exit__(self, *args: Any) -> None: ...

# channel emulation
class Convolver:
    def __init__(self, taps: _C64, block: int = 256) -> None: ...
    @property
    def inputs(self) -> int: ...
    @property
    def outputs(self) -> int: ...
    @property
    def block(self) -> int: ...
    @property
    def swapping(self) -> bool: ...
    def process(self, x: _C64) -> _C64: ...
    def swap(self, taps: _C64, mode: str = "staggered", blocks: int = 4) -> None: ...
    def reset(self) -> None: ...

def rayleigh_taps(
    inputs: int, outputs: int, delays: Sequence[int], powers_db: Sequence[float], seed: int = 0
) -> _C64: ...

class FadingModel:
    def __init__(
        self,
        inputs: int,
        outputs: int,
        delays: Sequence[int],
        powers_db: Sequence[float],
        doppler_hz: float,
        interval_s: float,
        *,
        sinusoids: int = 16,
        seed: int = 0,
    ) -> None: ...
    def response(self) -> _C64: ...
    def advance(self) -> None: ...

# PMT (point-to-multipoint delivery over UDP)
def pmt_send(
    data: bytes,
    to: Sequence[str],
    *,
    session: int = 1,
    window: int = 8,
    groups: int = 2,
    segment: int = 1400,
    fail_timeout: str = "15s",
    psk: Optional[bytes] = None,
) -> dict[str, Any]: ...

class PmtReceiver:
    def __init__(self, listen: str = "0.0.0.0:0") -> None: ...
    @property
    def address(self) -> Tuple[str, int]: ...
    def receive(
        self,
        *,
        sender: Optional[str] = None,
        session: Optional[int] = None,
        buffer: int = 1024,
        linger: str = "2s",
        idle: str = "30s",
        psk: Optional[bytes] = None,
    ) -> Tuple[bytes, dict[str, Any]]: ...

# station (durations carry their unit: "1ms", "4ms")
class _StationRunOptions(TypedDict, total=False):
    config: Union[str, dict[str, Any]]
    policy: str
    devices: str
    pin: bool
    rus: int
    frames: int
    transport: str
    frame_period: str
    deadline: str
    parts: Optional[int]
    device_events: Optional[str]
    calibration: Optional[str]
    bank_frames: int
    verify_downlink: bool

class _StationSimulateOptions(TypedDict, total=False):
    policies: str
    devices: Union[int, list[int]]
    device_kind: str
    units: int
    rus: Union[int, list[int]]
    antennas: int
    users: int
    data_num: int
    fft_size: int
    parts: int
    schedule: str
    frames: int
    frame_period: str
    deadline: str
    churn: Optional[str]
    calibration: Optional[str]
    policy_params: Optional[dict[str, Any]]
    jitter: float
    seed: int

def station_run(options: _StationRunOptions) -> list[dict[str, Any]]: ...
def station_simulate(options: _StationSimulateOptions) -> list[dict[str, Any]]: ...
