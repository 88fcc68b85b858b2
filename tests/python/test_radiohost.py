"""The radiohost Python package: numpy round trips, LDPC against the Rust CLI, SigMF
against the reference `sigmf` library, radios (emulated, SigMF, WARP), the UPOLS
convolver against numpy, and whole uplink frames against their truth.

Run by scripts/test (which builds and installs the wheel first)."""

import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG_8X2 = ROOT / "crates" / "phy" / "configs" / "8x2.json"


def cn(rng, *shape):
    return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np.complex64)


# ---------------------------------------------------------------- SigMF


@pytest.mark.parametrize("channels", [1, 3])
def test_sigmf_cf32_round_trip_and_reference_reads_it(rh, tmp_path, channels):
    sigmf = pytest.importorskip("sigmf", reason="SKIPPED: the reference sigmf library is not installed")
    x = cn(np.random.default_rng(channels), channels, 200) * 0.3
    meta = rh.write_sigmf(tmp_path / "rec", x, 2e6, frequency=915e6, description="round trip")
    assert meta["global"]["core:sha512"]
    y, meta2 = rh.read_sigmf(tmp_path / "rec.sigmf-meta")
    assert y.dtype == np.complex64 and y.shape == (channels, 200)
    assert np.array_equal(x, y)
    assert meta2["global"]["core:sample_rate"] == 2e6
    assert meta2["captures"][0]["core:frequency"] == 915e6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        handle = sigmf.fromfile(str(tmp_path / "rec.sigmf-meta"), skip_checksum=False)
        handle.validate()
    ref = np.asarray(handle.read_samples()).reshape(-1, channels).T
    assert np.array_equal(ref.astype(np.complex64), x)


def test_sigmf_ci16_pairs_round_trip_and_meta_dict_is_kept(rh, tmp_path):
    pairs = np.arange(2 * 50 * 2, dtype=np.int16).reshape(2, 50, 2) - 100
    meta_in = {"global": {"core:datatype": "cf32_le", "core:description": "kept", "core:author": "pytest"}}
    meta = rh.write_sigmf(tmp_path / "p", pairs, 1e6, meta=meta_in)
    assert meta["global"]["core:datatype"] == "ci16_le"
    assert meta["global"]["core:author"] == "pytest"
    y, m = rh.read_sigmf(tmp_path / "p")
    assert y.dtype == np.int16 and y.shape == (2, 50, 2)
    assert np.array_equal(y, pairs)


def test_sigmf_reads_what_the_reference_writes(rh, tmp_path):
    sigmf = pytest.importorskip("sigmf", reason="SKIPPED: the reference sigmf library is not installed")
    from sigmf import SigMFFile

    x = cn(np.random.default_rng(5), 100, 2)  # (samples, channels), as SigMF interleaves
    x.tofile(tmp_path / "ref.sigmf-data")
    f = SigMFFile(
        data_file=str(tmp_path / "ref.sigmf-data"),
        global_info={"core:datatype": "cf32_le", "core:sample_rate": 48000, "core:num_channels": 2},
    )
    f.add_capture(0, metadata={"core:frequency": 1e9})
    f.tofile(str(tmp_path / "ref.sigmf-meta"))
    y, meta = rh.read_sigmf(tmp_path / "ref")
    assert np.array_equal(y, x.T)
    assert meta["global"]["core:num_channels"] == 2


def test_sigmf_errors_carry_the_library_message(rh, tmp_path):
    rh.write_sigmf(tmp_path / "t", np.ones(10, np.complex64), 1e6)
    data = tmp_path / "t.sigmf-data"
    data.write_bytes(data.read_bytes()[:-3])
    with pytest.raises(rh.SigMFError, match="truncated|not a whole number"):
        rh.read_sigmf(tmp_path / "t")
    with pytest.raises(rh.RadiohostError, match="No such file|not found|cannot"):
        rh.read_sigmf(tmp_path / "missing")
    with pytest.raises(ValueError, match="complex64 or int16"):
        rh.write_sigmf(tmp_path / "f", np.ones(4, np.float64), 1e6)
    with pytest.raises(ValueError, match="sample_rate"):
        rh.write_sigmf(tmp_path / "f", np.ones(4, np.complex64))


# ---------------------------------------------------------------- LDPC


@pytest.mark.parametrize(
    "bg,zc,kwargs",
    [(1, 384, dict(rate=1 / 3)), (2, 52, dict(rate=0.2)), (1, 15, dict(payload_bits=300, tx_bits=900, rv=2)),
     (2, 7, dict(tx_bits=400, rv=3)), (1, 2, dict(tx_bits=150, rv=1))],
)
def test_ldpc_batches_decode_what_they_encode(rh, bg, zc, kwargs):
    code = rh.LdpcCode(bg, zc, **kwargs)
    rng = np.random.default_rng(zc)
    bits = rng.integers(0, 2, (20, code.payload_bits), dtype=np.uint8)
    coded = code.encode(bits)
    assert coded.shape == (20, code.tx_bits) and coded.dtype == np.uint8
    llr = np.where(coded == 0, 4.0, -4.0).astype(np.float32)
    llr[:, ::37] *= -0.25  # a few weak wrong bits
    out, iters, ok = code.decode(llr)
    assert ok.all() and (iters >= 1).all()
    assert np.array_equal(out, bits)


@pytest.mark.parametrize("bg,zc,kwargs", [(1, 72, dict(rate=1 / 3)), (2, 52, dict(tx_bits=1100, rv=3))])
def test_ldpc_batched_rows_decode_as_single_rows(rh, bg, zc, kwargs):
    # Zc 72 and 52 decode 8 and 16 rows per batch (the rest one by one): every row
    # must come out as it does alone, at noise that leaves rows at different
    # iteration counts.
    code = rh.LdpcCode(bg, zc, **kwargs)
    rng = np.random.default_rng(zc + 1)
    bits = rng.integers(0, 2, (19, code.payload_bits), dtype=np.uint8)
    coded = code.encode(bits)
    sigma = np.linspace(0.3, 1.0, 19)[:, None]  # light to heavy noise across the rows
    llr = ((np.where(coded == 0, 1.0, -1.0) + sigma * rng.normal(0, 1, coded.shape)) * 2.0).astype(np.float32)
    out, iters, ok = code.decode(llr, max_iterations=8)
    for i in range(19):
        one, one_iters, one_ok = code.decode(llr[i:i + 1], max_iterations=8)
        assert np.array_equal(one[0], out[i]) and one_iters[0] == iters[i] and one_ok[0] == ok[i], i
    assert len(set(iters.tolist())) >= 2, iters


def test_ldpc_matches_the_rust_cli_bit_for_bit(rh, tmp_path, radiohost):
    code = rh.LdpcCode(1, 26, payload_bits=500, tx_bits=1400, rv=2)
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2, (4, 500), dtype=np.uint8)
    (tmp_path / "in.txt").write_text("\n".join("".join(map(str, row)) for row in bits))
    args = ["--bg", "1", "--zc", "26", "--payload-bits", "500", "--tx-bits", "1400", "--rv", "2"]
    subprocess.run([str(radiohost), "phy", "ldpc", "encode", *args, "--input", str(tmp_path / "in.txt"),
                    "--output", str(tmp_path / "coded.txt")], check=True, capture_output=True)
    rust = np.array([int(c) for c in (tmp_path / "coded.txt").read_text() if c in "01"], np.uint8)
    coded = code.encode(bits)
    assert np.array_equal(coded.reshape(-1), rust)
    llr = (np.where(coded == 0, 1.0, -1.0) + rng.normal(0, 0.8, coded.shape)).astype(np.float32) * 2.5
    llr.astype("<f4").tofile(tmp_path / "llr.f32")
    subprocess.run([str(radiohost), "phy", "ldpc", "decode", *args, "--iterations", "6", "--input",
                    str(tmp_path / "llr.f32"), "--output", str(tmp_path / "dec.txt")], check=True, capture_output=True)
    rust_dec = np.array([int(c) for c in (tmp_path / "dec.txt").read_text() if c in "01"], np.uint8)
    out, _, _ = code.decode(llr, max_iterations=6)
    assert np.array_equal(out.reshape(-1), rust_dec)


def test_ldpc_errors(rh):
    with pytest.raises(rh.LdpcError, match="lifting size"):
        rh.LdpcCode(1, 17)
    with pytest.raises(rh.LdpcError, match="base graph|1 or 2"):
        rh.LdpcCode(3, 16)
    code = rh.LdpcCode(2, 16)
    with pytest.raises(ValueError, match="payload bits"):
        code.encode(np.zeros((1, 3), np.uint8))
    with pytest.raises(ValueError, match="0 or 1"):
        code.encode(np.full((1, code.payload_bits), 2, np.uint8))
    with pytest.raises(ValueError, match="columns"):
        code.decode(np.zeros((1, 5), np.float32))
    assert 384 in rh.lifting_sizes() and len(rh.lifting_sizes()) == 51


# ---------------------------------------------------------------- phy kernels


@pytest.mark.parametrize("mod,q", [("QPSK", 2), ("16QAM", 4), ("64QAM", 6), ("256QAM", 8)])
def test_qam_round_trip(rh, mod, q):
    bits = np.random.default_rng(q).integers(0, 2, 64 * q, dtype=np.uint8)
    sym = rh.qam_modulate(bits, mod)
    assert sym.shape == (64,) and abs(np.mean(np.abs(sym) ** 2) - 1) < 0.35
    llr = rh.qam_demodulate(sym, 0.01, mod)
    assert np.array_equal((llr < 0).astype(np.uint8), bits)
    with pytest.raises(ValueError, match="modulation"):
        rh.qam_modulate(bits, "8PSK")


def test_ofdm_is_numpy_ifft_with_cyclic_prefix(rh):
    freq = cn(np.random.default_rng(1), 3, 64)
    t = rh.ofdm_modulate(freq, 16)
    ref = np.fft.ifft(freq, axis=1) * np.sqrt(64)
    np.testing.assert_allclose(t[:, 16:], ref, atol=1e-5)
    np.testing.assert_allclose(t[:, :16], ref[:, -16:], atol=1e-5)
    np.testing.assert_allclose(rh.ofdm_demodulate(t, 16), freq, atol=1e-5)


def test_zero_forcing_matches_numpy_pinv(rh):
    h = cn(np.random.default_rng(2), 10, 8, 3)
    w, gain = rh.zf_detector_batch(h)
    for i in range(10):
        np.testing.assert_allclose(w[i], np.linalg.pinv(h[i]), atol=1e-4)
        np.testing.assert_allclose(gain[i], np.real(np.diag(np.linalg.inv(h[i].conj().T @ h[i]))), rtol=1e-3)
    x = cn(np.random.default_rng(3), 10, 3)
    y = np.einsum("dmk,dk->dm", h, x).astype(np.complex64)
    np.testing.assert_allclose(rh.zf_equalize(w, y), x, atol=1e-4)
    with pytest.raises(rh.PhyError, match="linearly dependent|not positive definite"):
        rh.zf_detector_batch(np.zeros((1, 4, 2), np.complex64))


def test_uplink_frame_decodes_to_its_truth(rh):
    cfg = rh.FrameConfig.load(CONFIG_8X2)
    frame = rh.generate_uplink_frame(cfg, 0)
    assert frame["samples"].shape == (cfg.antennas, cfg.frame_len, 2)
    out = rh.UplinkDecoder(cfg).decode(frame["samples"])
    assert out["crc_ok"].all()
    assert np.array_equal(out["payload"], frame["uplink_payload"])
    report = rh.evaluate(cfg, "downlink", 1)
    assert report["direction"] == "downlink" and report["bits"] > 0
    with pytest.raises(rh.PhyError):
        rh.FrameConfig({"bs_ant_num": 1})
    with pytest.raises(ValueError, match="needs"):
        rh.UplinkDecoder(cfg).decode(np.zeros((1, 10, 2), np.int16))


def test_uplink_frame_through_an_emulated_radio(rh):
    cfg = rh.FrameConfig.load(CONFIG_8X2)
    frame = rh.generate_uplink_frame(cfg, 1)
    x = (frame["samples"][..., 0] + 1j * frame["samples"][..., 1]).astype(np.complex64) / 32767
    radio = rh.Radio.emulated(cfg.sample_rate, cfg.antennas)
    chans = list(range(cfg.antennas))
    tx, rx = radio.get_tx_stream(chans), radio.get_rx_stream(chans)
    t0 = radio.get_time_now() + 1_000_000
    assert tx.send(x, rh.TXMetadata(time_ns=t0, start_of_burst=True, end_of_burst=True)) == cfg.frame_len
    rx.issue_stream_cmd(rh.StreamCMD(rh.StreamMode.num_done, cfg.frame_len, time_ns=t0))
    buf = np.zeros_like(x)
    md = rh.RXMetadata()
    got = 0
    while got < cfg.frame_len:
        part = np.zeros((cfg.antennas, cfg.frame_len - got), np.complex64)
        n = rx.recv(part, md, 1.0)
        assert md.error_code == "none", md
        buf[:, got:got + n] = part[:, :n]
        got += n
    out = rh.UplinkDecoder(cfg).decode(buf)
    assert np.array_equal(out["payload"], frame["uplink_payload"])


# ---------------------------------------------------------------- radios


def test_emulated_radio_uhd_vocabulary(rh):
    radio = rh.Radio.emulated(1e6, 2)
    info = radio.info()
    assert info["backend"] == "emulated" and info["rx_channels"] == 2
    tx, rx = radio.get_tx_stream([0, 1]), radio.get_rx_stream([0, 1])
    burst = cn(np.random.default_rng(0), 2, 500) * 0.1
    t0 = radio.get_time_now() + 2_000_000
    tx.send(burst, rh.TXMetadata(time_ns=t0, start_of_burst=True, end_of_burst=True))
    acks = [tx.recv_async_msg(0.5) for _ in range(2)]
    assert {a["code"] for a in acks} == {"A"} and {a["channel"] for a in acks} == {0, 1}
    rx.issue_stream_cmd(rh.StreamCMD(rh.StreamMode.num_done, 500, time_ns=t0))
    buf = np.zeros((2, 500), np.complex64)
    md = rh.RXMetadata()
    assert rx.recv(buf, md, 1.0) == 500
    assert md.time_ns == t0 and md.start_of_burst and md.end_of_burst
    assert np.array_equal(buf, burst)  # received in place, into the caller's array
    # A command in the past is late; bad channels and buffers are errors.
    radio.set_time_now(10_000_000_000)
    rx.issue_stream_cmd(rh.StreamCMD(rh.StreamMode.num_done, 10, time_ns=1_000))
    assert rx.recv(buf, md, 0.5) == 0 and md.error_code == "late_command"
    with pytest.raises(rh.RadioError, match="does not exist"):
        radio.get_rx_stream([5])
    with pytest.raises(rh.RadioError, match="buffers given"):
        rx.recv(np.zeros((3, 4), np.complex64), md)


def test_sigmf_radio_records_and_replays(rh, tmp_path):
    x = cn(np.random.default_rng(9), 1, 300) * 0.2
    with rh.Radio.sigmf(output=tmp_path / "out", rate=1e6) as radio:
        tx = radio.get_tx_stream([0])
        assert tx.send(x, rh.TXMetadata(start_of_burst=True, end_of_burst=True)) == 300
        del tx
    y, meta = rh.read_sigmf(tmp_path / "out")
    assert np.array_equal(y, x)
    radio = rh.Radio.sigmf(input=tmp_path / "out")
    rx = radio.get_rx_stream([0])
    rx.issue_stream_cmd(rh.StreamCMD(rh.StreamMode.num_done, 300))
    buf = np.zeros(300, np.complex64)
    md = rh.RXMetadata()
    assert rx.recv(buf, md, 1.0) == 300
    assert np.array_equal(buf, x[0])
    radio.close()
    with pytest.raises(rh.RadioError, match="closed"):
        radio.get_rate()


def test_warp_emulated_nodes_loop_back(rh):
    radio = rh.Radio.warp_emulated(nodes=2, paths_per_node=1)
    assert radio.info()["backend"] == "warp" and radio.info()["rx_channels"] == 2
    tx, rx = radio.get_tx_stream([0, 1]), radio.get_rx_stream([0, 1])
    burst = (np.exp(1j * np.arange(2000) * np.array([[0.01], [0.02]])) * 0.4).astype(np.complex64)
    t0 = radio.get_time_now() + 20_000_000
    assert tx.send(burst, rh.TXMetadata(time_ns=t0, start_of_burst=True, end_of_burst=True), 5.0) == 2000
    rx.issue_stream_cmd(rh.StreamCMD(rh.StreamMode.num_done, 2000, time_ns=t0))
    buf = np.zeros((2, 2000), np.complex64)
    md = rh.RXMetadata()
    got = 0
    while got < 2000 and md.error_code == "none":
        part = np.zeros((2, 2000 - got), np.complex64)
        n = rx.recv(part, md, 5.0)
        buf[:, got:got + n] = part[:, :n]
        got += n
    assert got == 2000, md
    assert np.abs(buf - burst).max() < 2 / 8192


# ---------------------------------------------------------------- channel emulation


def test_convolver_matches_numpy_mimo_convolution_across_calls(rh):
    rng = np.random.default_rng(4)
    taps = rh.rayleigh_taps(2, 3, [0, 3, 40], [0.0, -3.0, -10.0], seed=7)
    assert taps.shape == (3, 2, 41)
    conv = rh.Convolver(taps, block=64)
    x = cn(rng, 2, 64 * 20)
    y = np.concatenate([conv.process(x[:, :640]), conv.process(x[:, 640:])], axis=1)
    ref = np.array([sum(np.convolve(x[m], taps[n, m])[: x.shape[1]] for m in range(2)) for n in range(3)])
    np.testing.assert_allclose(y, ref, atol=2e-4)


def test_convolver_staggered_swap_is_exact(rh):
    rng = np.random.default_rng(6)
    old, new = cn(rng, 1, 1, 50), cn(rng, 1, 1, 50)
    conv = rh.Convolver(old, block=32)
    x = cn(rng, 32 * 16)
    y1 = conv.process(x[: 32 * 8])
    conv.swap(new, "staggered")
    y2 = conv.process(x[32 * 8:])
    first, second = x.copy(), x.copy()
    first[32 * 8:] = 0
    second[: 32 * 8] = 0
    ref = np.convolve(first, old[0, 0])[: x.size] + np.convolve(second, new[0, 0])[: x.size]
    np.testing.assert_allclose(np.concatenate([y1, y2], axis=1)[0], ref, atol=2e-4)
    with pytest.raises(ValueError, match="whole number"):
        conv.process(x[:10])
    with pytest.raises(ValueError, match="mode"):
        conv.swap(new, "instant")


def test_fading_model_evolves(rh):
    f = rh.FadingModel(1, 2, [0, 2], [0.0, -6.0], doppler_hz=100.0, interval_s=1e-3, seed=1)
    a = f.response()
    f.advance()
    b = f.response()
    assert a.shape == (2, 1, 3) and not np.array_equal(a, b)
