"""PMT and station from Python: a real PMT transfer over loopback UDP to two
receivers (the delivered bytes checked), a station run of a few 8x2 frames (the
report's accounting checked), a scheduling simulation, and bad inputs raising the
right exception with the library's message.

Run by scripts/test (which builds and installs the wheel first)."""

import threading

import numpy as np
import pytest


def _receive_in_thread(receiver, **kw):
    """Start receiver.receive(**kw) in a thread (the GIL is released while it
    waits); returns the thread and the dict its result or exception lands in."""
    out = {}

    def run():
        try:
            out["result"] = receiver.receive(**kw)
        except BaseException as e:  # re-raised in the test thread
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def _joined(t, out):
    t.join(60)
    assert not t.is_alive(), "the receiver did not finish within 60 s"
    if "error" in out:
        raise out["error"]
    return out["result"]


# ---------------------------------------------------------------- PMT


def test_pmt_transfer_to_two_receivers_delivers_the_bytes(rh):
    data = np.random.default_rng(17).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
    receivers = [rh.PmtReceiver("127.0.0.1:0") for _ in range(2)]
    threads = [_receive_in_thread(r, linger="100ms", idle="20s") for r in receivers]
    to = [f"{host}:{port}" for host, port in (r.address for r in receivers)]
    report = rh.pmt_send(data, to, window=16, fail_timeout="10s")

    assert [r["receiver"] for r in report["receivers"]] == to
    for line in report["receivers"]:
        assert line["intact"] and not line["failed"]
        assert line["bytes"] == len(data) and line["seconds"] > 0
    assert report["stats"]["data_sent"] >= len(data) // 1400
    for t, out in threads:
        got, rreport = _joined(t, out)
        assert got == data
        assert rreport["intact"] and rreport["bytes"] == len(data)
        assert rreport["from"].startswith("127.0.0.1:")
        assert 0 < rreport["seconds"] <= rreport["listened_seconds"]
        assert rreport["stats"]["data"] >= len(data) // 1400


def test_pmt_with_a_pre_shared_key(rh):
    key = b"k" * 32
    data = b"radiohost " * 5000
    rx = rh.PmtReceiver("127.0.0.1:0")
    t, out = _receive_in_thread(rx, linger="50ms", idle="20s", psk=key, session=7)
    host, port = rx.address
    rh.pmt_send(data, [f"{host}:{port}"], session=7, psk=key, fail_timeout="10s")
    got, _ = _joined(t, out)
    assert got == data


def test_pmt_bad_inputs(rh):
    with pytest.raises(rh.PmtError, match="not an IP:PORT"):
        rh.pmt_send(b"x", ["not-an-address"])
    with pytest.raises(ValueError, match="at least one receiver"):
        rh.pmt_send(b"x", [])
    with pytest.raises(ValueError, match="window 0"):
        rh.pmt_send(b"x", ["127.0.0.1:9"], window=0)
    with pytest.raises(ValueError, match="fail_timeout"):
        rh.pmt_send(b"x", ["127.0.0.1:9"], fail_timeout="15")  # no unit
    with pytest.raises(ValueError, match="at least 16"):
        rh.pmt_send(b"x", ["127.0.0.1:9"], psk=b"short")
    with pytest.raises(TypeError):
        rh.pmt_send("text is not bytes", ["127.0.0.1:9"])
    with pytest.raises(ValueError, match="expected IP:PORT"):
        rh.PmtReceiver("localhost")
    taken = rh.PmtReceiver("127.0.0.1:0")
    host, port = taken.address
    with pytest.raises(rh.PmtError, match="cannot bind"):
        rh.PmtReceiver(f"{host}:{port}")
    with pytest.raises(rh.PmtError, match="no sender heard"):
        taken.receive(idle="150ms")
    with pytest.raises(rh.PmtError, match="already took"):
        taken.receive(idle="150ms")
    assert issubclass(rh.PmtError, rh.RadiohostError)


# ---------------------------------------------------------------- station


def test_station_run_8x2_accounting(rh):
    frames = 8
    reports = rh.station_run({
        "config": "8x2",
        "policy": "lroc,frame",
        "devices": "cpu:1",
        "pin": False,
        "frames": frames,
        "frame_period": "2ms",
        "deadline": "200ms",
    })
    assert [r["policy"] for r in reports] == ["lroc", "frame"]
    for r in reports:
        assert r["config"] == "8x2" and r["frames"] == frames and r["rus"] == 1
        # Every frame is accounted for exactly once.
        assert r["completed"] + r["missed"] + r["rejected"] + r["failed"] == frames
        # Every completed frame was checked against its truth.
        assert r["decoded_ok"] + r["decode_errors"] == r["completed"]
        assert r["decode_errors"] == 0
        assert r["completed"] >= 1
        assert r["miss_fraction"] == pytest.approx((frames - r["completed"]) / frames)
        if r["completed"]:
            assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"]
        assert sum(r["device_instrs"]) > 0


def test_station_run_takes_the_configuration_as_a_dict(rh):
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    cfg = json.loads((root / "crates" / "phy" / "configs" / "8x2.json").read_text())
    (r,) = rh.station_run({"config": cfg, "devices": "cpu:1", "pin": False, "frames": 2,
                           "frame_period": "2ms", "deadline": "200ms"})
    assert r["frames"] == 2
    assert r["completed"] + r["missed"] + r["rejected"] + r["failed"] == 2


def test_station_simulate_sweep(rh):
    rows = rh.station_simulate({
        "policies": "lroc,frame",
        "devices": 2,
        "rus": [1, 2],
        "antennas": 16,
        "users": 4,
        "data_num": 300,
        "fft_size": 512,
        "parts": 4,
        "frames": 50,
        "seed": 3,
    })
    assert [(r["devices"], r["rus"], r["policy"]) for r in rows] == [
        (2, 1, "lroc"), (2, 1, "frame"), (2, 2, "lroc"), (2, 2, "frame")]
    for r in rows:
        assert r["frames"] == 50 * r["rus"]
        assert r["completed"] <= r["frames"]
    again = rh.station_simulate({"policies": "lroc", "devices": 2, "rus": 1, "antennas": 16,
                                 "users": 4, "data_num": 300, "fft_size": 512, "parts": 4,
                                 "frames": 50, "seed": 3})
    assert again[0] == rows[0]  # same seed, same result


def test_station_bad_inputs(rh):
    with pytest.raises(rh.StationError, match="`7x7` not found"):
        rh.station_run({"config": "7x7"})
    with pytest.raises(ValueError, match="config: give a built-in name"):
        rh.station_run({"frames": 1})
    with pytest.raises(ValueError, match="unknown field `fram`") as e:
        rh.station_run({"config": "8x2", "fram": 1})
    assert "column" not in str(e.value)  # no position in our own json.dumps text
    with pytest.raises(ValueError, match="frame_period"):
        rh.station_run({"config": "8x2", "frame_period": "1"})  # no unit
    with pytest.raises(ValueError, match="rus 0"):
        rh.station_run({"config": "8x2", "rus": 0})
    with pytest.raises(ValueError, match="GPU devices"):
        rh.station_run({"config": "8x2", "devices": "gpu:0"})
    with pytest.raises(rh.StationError, match="unknown policy `fifo`"):
        rh.station_run({"config": "8x2", "policy": "fifo"})
    with pytest.raises(rh.StationError, match="transport"):
        rh.station_run({"config": "8x2", "transport": "tcp"})
    with pytest.raises(rh.StationError, match="unknown policy `fifo`"):
        rh.station_simulate({"policies": "fifo"})
    with pytest.raises(rh.StationError, match="users <= antennas"):
        rh.station_simulate({"antennas": 4, "users": 8, "rus": 1})
    with pytest.raises(ValueError, match="jitter"):
        rh.station_simulate({"jitter": 2.0})
    with pytest.raises(ValueError, match="rus: give at least one"):
        rh.station_simulate({"rus": []})
    with pytest.raises(TypeError):
        rh.station_run("8x2")
    assert issubclass(rh.StationError, rh.RadiohostError)


# ---------------------------------------------------------------- examples


@pytest.mark.parametrize("script, args", [
    ("quickstart.py", ["--codewords", "20"]),
    # Small and without --min-ratio: a timing is not asserted here (the machine may
    # be loaded); the decode is checked against the payload either way.
    ("ldpc_throughput.py", ["--codewords", "20", "--rounds", "1", "--bench-seconds", "0.02"]),
])
def test_python_examples_run(rh, script, args):
    import subprocess
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "python" / script
    out = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    if script == "ldpc_throughput.py":
        assert "Python / Rust = " in out.stdout
    else:
        assert "PMT:" in out.stdout and "station:" in out.stdout


def test_ldpc_decode_into_out(rh):
    code = rh.LdpcCode(2, 52)
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2, (6, code.payload_bits), dtype=np.uint8)
    llr = (4.0 * (1.0 - 2.0 * code.encode(bits))).astype(np.float32)
    out = np.zeros_like(bits)
    dec, iters, ok = code.decode(llr, out=out)
    assert dec is out and np.array_equal(out, bits) and ok.all()
    with pytest.raises(ValueError, match="out has shape"):
        code.decode(llr, out=np.zeros((5, code.payload_bits), np.uint8))
    with pytest.raises(ValueError, match="C-contiguous"):
        code.decode(llr, out=np.zeros((code.payload_bits, 6), np.uint8).T)
    frozen = np.zeros_like(bits)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out"):
        code.decode(llr, out=frozen)
    with pytest.raises(TypeError):
        code.decode(llr, out=np.zeros(bits.shape, np.int32))


def test_fortran_ordered_arrays_are_refused_not_misread(rh, tmp_path):
    # numpy's F order keeps a 2-D array contiguous but not row by row: reading its
    # memory as rows would scramble codewords, channels or samples.
    code = rh.LdpcCode(2, 52)
    llr = np.asfortranarray(np.ones((4, code.tx_bits), np.float32))
    with pytest.raises(ValueError, match="llr must be C-contiguous"):
        code.decode(llr)
    x = np.asfortranarray(np.ones((2, 100), np.complex64))
    with pytest.raises(ValueError, match="samples must be C-contiguous"):
        rh.write_sigmf(tmp_path / "f", x, 1e6)
    radio = rh.Radio.emulated(rate=1e6, channels=2)
    with pytest.raises(ValueError, match="buffer must be C-contiguous"):
        radio.get_tx_stream([0, 1]).send(x, rh.TXMetadata())
