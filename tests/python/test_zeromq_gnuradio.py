"""The ZeroMQ radio backend against real libzmq peers: pyzmq sockets written here
(PUB/SUB and PUSH/PULL, gr_complex and short pairs, per channel and interleaved), and
the GNU Radio flowgraphs of examples/gnuradio where GNU Radio is installed (in this
Python or the system's; otherwise they print SKIPPED: <why>)."""

import functools
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "gnuradio"


@pytest.fixture(scope="module")
def zmq():
    try:
        import zmq
    except ImportError as e:
        reason = f"SKIPPED: pyzmq is not importable ({e}); pip install -r tests/python/requirements.txt"
        print(reason, file=sys.__stderr__)
        pytest.skip(reason)
    return zmq


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tone(channels, n):
    k = np.arange(n)
    return np.stack([0.4 * np.exp(2j * np.pi * (c + 1) * k / 97) for c in range(channels)]).astype(np.complex64)


def to_wire(x, item):
    """Channel-major samples as gr-zeromq bytes: interleaved across channels."""
    inter = x.T.reshape(-1)
    if item == "gr_complex":
        return inter.astype("<c8").tobytes()
    pairs = np.round(np.stack([inter.real, inter.imag], axis=1) * 32767).astype("<i2")
    return pairs.tobytes()


def from_wire(data, item, channels):
    if item == "gr_complex":
        inter = np.frombuffer(data, "<c8")
    else:
        p = np.frombuffer(data, "<i2").reshape(-1, 2).astype(np.float32) / 32767
        inter = (p[:, 0] + 1j * p[:, 1]).astype(np.complex64)
    return inter.reshape(-1, channels).T


def recv_all(rh, rx, channels, n, timeout=10.0):
    out = np.zeros((channels, n), np.complex64)
    md = rh.RXMetadata()
    got, deadline = 0, time.monotonic() + timeout
    while got < n and time.monotonic() < deadline:
        part = np.zeros((channels, n - got), np.complex64)
        k = rx.recv(part, md, 0.2)
        assert md.error_code in ("none", "timeout"), md
        out[:, got:got + k] = part[:, :k]
        got += k
    assert got == n, f"{got} of {n} samples"
    return out, md


@pytest.mark.parametrize(
    "pattern,item,layout",
    [("pubsub", "gr_complex", "per_channel"), ("pushpull", "short", "interleaved"),
     ("pubsub", "short", "interleaved"), ("pushpull", "gr_complex", "per_channel")],
)
def test_radiohost_receives_from_a_pyzmq_sink(rh, zmq, pattern, item, layout):
    channels, n = 2, 3000
    ctx = zmq.Context.instance()
    kind = zmq.PUB if pattern == "pubsub" else zmq.PUSH
    ports = [free_port() for _ in range(channels if layout == "per_channel" else 1)]
    socks = []
    for p in ports:
        s = ctx.socket(kind)
        s.setsockopt(zmq.LINGER, 0)
        s.bind(f"tcp://127.0.0.1:{p}")
        socks.append(s)
    try:
        radio = rh.Radio.zeromq(1e6, rx=[f"tcp://127.0.0.1:{p}" for p in ports], pattern=pattern, item=item,
                                layout=layout, channels=channels, wait=5.0)
        time.sleep(0.2)  # a PUB learns of its subscriber a moment after the handshake
        rx = radio.get_rx_stream(list(range(channels)))
        rx.issue_stream_cmd(rh.StreamCMD(rh.StreamMode.num_done, n, time_ns=0))
        x = tone(channels, n)
        for start in range(0, n, 700):  # messages of arbitrary size, as gr-zeromq sends
            chunk = x[:, start:start + 700]
            if layout == "per_channel":
                for c, s in enumerate(socks):
                    s.send(to_wire(chunk[c:c + 1], item))
            else:
                socks[0].send(to_wire(chunk, item))
        y, md = recv_all(rh, rx, channels, n)
        assert md.end_of_burst
        np.testing.assert_allclose(y, x, atol=0 if item == "gr_complex" else 1 / 32767)
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("pattern,item", [("pubsub", "gr_complex"), ("pushpull", "short")])
def test_a_pyzmq_source_receives_from_radiohost(rh, zmq, pattern, item):
    port, n = free_port(), 2500
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.SUB if pattern == "pubsub" else zmq.PULL)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVTIMEO, 5000)
    if pattern == "pubsub":
        s.setsockopt(zmq.SUBSCRIBE, b"")
    s.connect(f"tcp://127.0.0.1:{port}")  # libzmq retries until radiohost binds
    try:
        # wait: until the peer is there (a PUB: subscribed), so nothing is dropped.
        radio = rh.Radio.zeromq(1e6, tx=[f"tcp://127.0.0.1:{port}"], pattern=pattern, item=item, wait=5.0)
        tx = radio.get_tx_stream([0])
        x = tone(1, n)
        t = 1000 * 1000  # 1 ms at 1 MS/s: 1000 zeros go first
        assert tx.send(x, rh.TXMetadata(time_ns=t, start_of_burst=True, end_of_burst=True), 5.0) == n
        ack = tx.recv_async_msg(0.5)
        assert ack["event"] == "burst_ack" and ack["time_ns"] == (1000 + n) * 1000
        data = b""
        while len(data) < (1000 + n) * (8 if item == "gr_complex" else 4):
            data += s.recv()
        y = from_wire(data, item, 1)
        assert np.all(y[0, :1000] == 0)
        np.testing.assert_allclose(y[:, 1000:], x, atol=0 if item == "gr_complex" else 1 / 32767)
    finally:
        s.close()


def test_zeromq_bad_arguments(rh):
    with pytest.raises(ValueError, match="pattern"):
        rh.Radio.zeromq(1e6, rx=["tcp://127.0.0.1:1"], pattern="reqrep")
    with pytest.raises(rh.RadioError, match="only tcp://"):
        rh.Radio.zeromq(1e6, rx=["ipc:///tmp/x"])
    with pytest.raises(rh.RadioError, match="no ZeroMQ peer"):
        rh.Radio.zeromq(1e6, rx=[f"tcp://127.0.0.1:{free_port()}"], wait=0.2)


# ---------------------------------------------------------------- GNU Radio


@functools.lru_cache(maxsize=None)
def gnuradio_python():
    """A Python that imports gnuradio.zeromq: this one, or the system's."""
    for exe in dict.fromkeys([sys.executable, "/usr/bin/python3", shutil.which("python3")]):
        if exe and Path(exe).exists():
            ok = subprocess.run([exe, "-c", "import gnuradio.zeromq, numpy"], capture_output=True)
            if ok.returncode == 0:
                return exe
    return None


@pytest.fixture
def grpython():
    exe = gnuradio_python()
    if exe is None:
        reason = "SKIPPED: GNU Radio (gnuradio.zeromq) is not importable from any Python here; apt-get install gnuradio"
        print(reason, file=sys.__stderr__)
        pytest.skip(reason)
    return exe


def run_pair(radiohost_cmd, flowgraph_cmd, timeout=120):
    """Runs the radiohost role here and the flowgraph role under GNU Radio's Python."""
    rh_proc = subprocess.Popen(radiohost_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        fg = subprocess.run(flowgraph_cmd, capture_output=True, text=True, timeout=timeout)
        rh_out, _ = rh_proc.communicate(timeout=timeout)
    finally:
        if rh_proc.poll() is None:
            rh_proc.kill()
    assert fg.returncode == 0, fg.stdout + fg.stderr
    assert rh_proc.returncode == 0, rh_out
    return rh_out, fg.stdout


def test_gnuradio_flowgraph_through_radiohost_channel_emulation(rh, grpython, tmp_path):
    script = str(EXAMPLES / "channel_emulation.py")
    ports = ["--in-port", str(free_port()), "--out-port", str(free_port())]
    files = ["--taps", str(tmp_path / "taps.npy"), "--out", str(tmp_path / "fg.npz")]
    args = [*ports, *files, "--samples", str(1 << 15), "--timeout", "90"]
    run_pair([sys.executable, script, "radiohost", *args], [grpython, script, "flowgraph", *args])
    check = subprocess.run([sys.executable, script, "check", *files], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "largest error" in check.stdout


def test_gnuradio_replays_a_recording_into_the_uplink_decoder(rh, grpython, tmp_path):
    script = str(EXAMPLES / "replay_uplink.py")
    base = ["--base", str(tmp_path / "uplink"), "--port", str(free_port())]
    subprocess.run([sys.executable, script, "record", *base], check=True, capture_output=True)
    out, _ = run_pair([sys.executable, script, "decode", *base, "--timeout", "90"],
                      [grpython, script, "flowgraph", *base])
    assert "0 bit errors" in out
