"""SigMF interoperability: radiohost against the reference Python `sigmf` library.

radiohost writes recordings (crates/iq/examples/sigmf_tool.rs, and the `radiohost`
binary's `chanemu file`) that the reference library reads with checksum checks and
schema validation on; the reference library writes recordings that radiohost reads.
cf32_le and ci16_le, one and several channels. Run with

    python3 -m pip install -r tests/python/requirements.txt
    python3 -m pytest -q -rs tests/python

Without the `sigmf` package every test is skipped with "SKIPPED: <why>".
"""

import hashlib
import json
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

try:
    import numpy as np
    import sigmf
    from sigmf import SigMFFile
except ImportError as e:  # pragma: no cover - depends on the machine
    reason = f"SKIPPED: the reference SigMF library is not importable ({e}); pip install -r tests/python/requirements.txt"
    print(reason, file=sys.__stderr__)
    pytest.skip(reason, allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
CASES = [("cf32", 1), ("cf32", 3), ("ci16", 1), ("ci16", 2)]
SAMPLES = 64


def pattern(channels, samples=SAMPLES):
    """The test pattern of sigmf_tool.rs as integer (a, b) pairs, shape (samples, channels)."""
    i = np.arange(samples)[:, None]
    c = np.arange(channels)[None, :]
    return (7 * i + 13 * c) % 200 - 100, (3 * i + 29 * c) % 200 - 100


def load_strict(meta_path):
    """Reads with the reference library: checksum verified, schema validated, and
    every warning (short data, odd sizes, undeclared namespaces) an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        handle = sigmf.fromfile(str(meta_path), skip_checksum=False)
        handle.validate()
    return handle


def samples_of(handle, channels):
    """All samples as complex floats, shape (n, channels), ci16 scaled to full scale 1."""
    x = np.asarray(handle.read_samples())
    return x.reshape(-1, channels)


@pytest.mark.parametrize("dtype,channels", CASES)
def test_radiohost_writes_reference_reads(tmp_path, tool, dtype, channels):
    base = tmp_path / f"rh_{dtype}_{channels}"
    subprocess.run([str(tool), "write", str(base), dtype, str(channels), str(SAMPLES)], check=True)
    handle = load_strict(f"{base}.sigmf-meta")
    g = handle.get_global_info()
    assert g["core:datatype"] == f"{dtype}_le"
    assert handle.num_channels == channels
    assert g["core:sample_rate"] == 1e6
    assert handle.sample_count == SAMPLES
    caps = handle.get_captures()
    assert [c["core:sample_start"] for c in caps] == [0, SAMPLES // 2]
    assert [c["core:global_index"] for c in caps] == [1000, 50000]
    assert all(c["core:sample_start"] < handle.sample_count for c in caps)
    (ann,) = handle.get_annotations()
    assert (ann["core:sample_start"], ann["core:sample_count"], ann["core:label"]) == (5, 10, "burst")

    a, b = pattern(channels)
    scale = 128.0 if dtype == "cf32" else 32768.0 / 300.0
    expected = (a + 1j * b) / scale
    got = samples_of(handle, channels)
    assert got.shape == (SAMPLES, channels)
    np.testing.assert_allclose(got, expected, atol=1e-6)


def write_reference(tmp_path, dtype, channels, annotations=True):
    """A recording written by the reference library: data by numpy, meta by SigMFFile.
    Captures at 0 and 40, an annotation over samples 8..24."""""
    a, b = pattern(channels)
    base = tmp_path / f"ref_{dtype}_{channels}"
    data_file = Path(f"{base}.sigmf-data")
    if dtype == "cf32":
        ((a + 1j * b) / 128.0).astype(np.complex64).tofile(data_file)
    else:
        np.stack([a * 300, b * 300], axis=-1).astype("<i2").tofile(data_file)
    handle = SigMFFile(
        data_file=str(data_file),
        global_info={
            "core:datatype": f"{dtype}_le",
            "core:sample_rate": 2e6,
            "core:num_channels": channels,
            "core:description": "written by the reference sigmf library",
        },
    )
    handle.add_capture(0, metadata={"core:frequency": 915e6, "core:global_index": 7})
    handle.add_capture(40, metadata={"core:global_index": 9000})
    if annotations:
        handle.add_annotation(8, 16, metadata={"core:label": "ref"})
    handle.tofile(f"{base}.sigmf-meta")
    assert "core:sha512" in handle.get_global_info()
    return base


def run_tool(tool, *args):
    return subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True)


@pytest.mark.parametrize("dtype,channels", CASES)
def test_reference_writes_radiohost_reads(tmp_path, tool, dtype, channels):
    base = write_reference(tmp_path, dtype, channels)
    out = run_tool(tool, "read", f"{base}.sigmf-meta")
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert rec["datatype"] == f"{dtype}_le"
    assert rec["channels"] == channels
    assert rec["sample_rate"] == 2e6
    assert rec["captures"] == [[0, 7, 915e6], [40, 9000, None]]
    assert rec["annotations"] == [[8, 16, "ref"]]
    a, b = pattern(channels)
    got = np.array(rec["samples"], dtype=float).reshape(SAMPLES, channels, 2)
    if dtype == "cf32":
        np.testing.assert_allclose(got[..., 0], a / 128.0, atol=1e-7)
        np.testing.assert_allclose(got[..., 1], b / 128.0, atol=1e-7)
    else:
        np.testing.assert_array_equal(got[..., 0], a * 300)
        np.testing.assert_array_equal(got[..., 1], b * 300)


@pytest.mark.parametrize("dtype,channels", [("cf32", 1), ("ci16", 2)])
def test_radiohost_rejects_damaged_reference_files(tmp_path, tool, dtype, channels):
    base = write_reference(tmp_path, dtype, channels)
    data_file = Path(f"{base}.sigmf-data")
    good = data_file.read_bytes()
    frame = (8 if dtype == "cf32" else 4) * channels

    # One flipped bit: the reference library's own checksum no longer matches.
    data_file.write_bytes(bytes([good[0] ^ 1]) + good[1:])
    out = run_tool(tool, "read", base)
    assert out.returncode != 0
    assert "sha512" in out.stderr.lower() or "sha-512" in out.stderr.lower()
    assert data_file.name in out.stderr

    # Cut mid-sample: names the file and the expected size.
    data_file.write_bytes(good[:-1])
    out = run_tool(tool, "read", base)
    assert out.returncode != 0
    assert data_file.name in out.stderr and str(len(good)) in out.stderr, out.stderr

    # Empty.
    data_file.write_bytes(b"")
    out = run_tool(tool, "read", base)
    assert out.returncode != 0
    assert "empty" in out.stderr and str(frame) in out.stderr, out.stderr

    # Cut on a sample boundary before the second capture (at sample 40), checksum
    # removed so only the size check can catch it.
    meta_file = Path(f"{base}.sigmf-meta")
    meta = json.loads(meta_file.read_text())
    del meta["global"]["core:sha512"]
    meta_file.write_text(json.dumps(meta))
    data_file.write_bytes(good[: 20 * frame])
    out = run_tool(tool, "read", base)
    assert out.returncode != 0
    assert data_file.name in out.stderr and str(41 * frame) in out.stderr, out.stderr


@pytest.mark.parametrize("output_type,channels", [("cf32", 1), ("ci16", 1), ("cf32", 2), ("ci16", 3)])
def test_chanemu_file_output_validates_and_keeps_annotations(tmp_path, radiohost, output_type, channels):
    base = write_reference(tmp_path, "cf32", channels)
    out_base = tmp_path / "out"
    run = subprocess.run(
        [str(radiohost), "chanemu", "file", "--model", "identity", "--ports", f"{channels}x{channels}",
         "--input", f"{base}.sigmf-meta", "--output", str(out_base), "--output-type", output_type,
         "--block", "16"],
        capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stderr
    handle = load_strict(f"{out_base}.sigmf-meta")
    source = load_strict(f"{base}.sigmf-meta")
    # The output's checksum is of its own data (load_strict verified it too).
    digest = hashlib.sha512(Path(f"{out_base}.sigmf-data").read_bytes()).hexdigest()
    assert handle.get_global_info()["core:sha512"] == digest
    assert handle.get_annotations() == source.get_annotations()
    assert [c["core:sample_start"] for c in handle.get_captures()] == [0, 40]
    a, b = pattern(channels)
    got = samples_of(handle, channels)
    tol = 1e-6 if output_type == "cf32" else 1.0 / 16384
    np.testing.assert_allclose(got, (a + 1j * b) / 128.0, atol=tol)


def test_warp_write_refuses_an_empty_recording(tmp_path, radiohost):
    base = write_reference(tmp_path, "cf32", 1, annotations=False)
    Path(f"{base}.sigmf-data").write_bytes(b"")
    meta_file = Path(f"{base}.sigmf-meta")
    meta = json.loads(meta_file.read_text())
    meta["captures"] = [{"core:sample_start": 0}]
    meta_file.write_text(json.dumps(meta))
    run = subprocess.run(
        [str(radiohost), "warp", "write", "--nodes", "0", "--input", str(base), "--timeout", "200ms"],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode != 0, run.stdout
    assert "wrote 0 samples" not in run.stdout
    assert "empty" in run.stderr and "ref_cf32_1.sigmf-data" in run.stderr, run.stderr


def _free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_chdr_emulate_output_validates_with_file_indices(tmp_path, radiohost):
    """`chdr emulate --output` against a pass-through streamer on loopback: every
    TX recording validates, its capture starts inside the file and the
    sample-clock time is in core:global_index."""
    host, radio_tx = _free_udp_port(), _free_udp_port()
    common = ["--ports", "2", "--rate", "1MS/s", "--spp", "256"]
    streamer = subprocess.Popen(
        [str(radiohost), "chdr", "passthrough", "--bind", f"127.0.0.1:{host}",
         "--radio-tx", f"127.0.0.1:{radio_tx}", "--offset", "20ms", *common],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        run = subprocess.run(
            [str(radiohost), "chdr", "emulate", "--host", f"127.0.0.1:{host}",
             "--tx-bind", f"127.0.0.1:{radio_tx}", "--packets", "40", "--start-delay", "200ms",
             "--linger", "300ms", "--output", str(tmp_path / "chdr"), *common],
            capture_output=True, text=True, timeout=60,
        )
    finally:
        streamer.terminate()
        streamer.communicate(timeout=30)
    assert run.returncode == 0, run.stderr
    for port in range(2):
        handle = load_strict(tmp_path / f"chdr-tx{port}.sigmf-meta")
        assert handle.sample_count > 0
        caps = handle.get_captures()
        assert all(c["core:sample_start"] < handle.sample_count for c in caps), caps
        assert caps[0]["core:sample_start"] == 0
        assert caps[0]["core:global_index"] > 0
