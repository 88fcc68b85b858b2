"""radiohost from Python, notebook style (run it, or paste the cells into Jupyter).

    python3 -m pip install ./crates/python    # once (plus matplotlib for the plot)
    python3 examples/python/quickstart.py [--plot burst.png]

1. open an emulated radio, transmit a burst and receive it into numpy;
2. send a whole uplink frame (8 antennas, 2 users) through the emulated radio and
   decode it, checked against the generator's truth;
3. encode and decode a batch of LDPC codewords (BG1, Zc=384, rate 1/3) over a noisy
   BPSK channel (examples/python/ldpc_throughput.py times such a batch against the
   Rust benchmark);
4. send an object to two PMT receivers over loopback UDP;
5. run the station on a few 8x2 frames and print its report.
Exits non-zero when a decode or a delivery disagrees with the truth.
"""

import argparse
import sys
import threading
import time
from pathlib import Path

import numpy as np

import radiohost as rh

ROOT = Path(__file__).resolve().parents[2]

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--plot", help="save a plot of the received burst to this PNG (needs matplotlib)")
p.add_argument("--codewords", type=int, default=100)
args = p.parse_args()

# %% 1. An emulated radio: what TX channel 0 sends, RX channel 0 receives.
radio = rh.Radio.emulated(rate=1e6, channels=1)
print("radio:", radio.info())
tx, rx = radio.get_tx_stream([0]), radio.get_rx_stream([0])
n = 2000
t = np.arange(n) / 1e6
burst = (0.5 * np.exp(2j * np.pi * 50e3 * t) * np.hanning(n)).astype(np.complex64)
t0 = radio.get_time_now() + 1_000_000  # 1 ms from now, on the radio's sample clock
tx.send(burst, rh.TXMetadata(time_ns=t0, start_of_burst=True, end_of_burst=True))
print("async:", tx.recv_async_msg(0.1))
rx.issue_stream_cmd(rh.StreamCMD(rh.StreamMode.num_done, n, time_ns=t0))
samples = np.zeros(n, np.complex64)  # recv fills this array in place
md = rh.RXMetadata()
got = rx.recv(samples, md, timeout=1.0)
print(f"received {got} samples at {md.time_ns} ns: {md}")
assert got == n and np.array_equal(samples, burst)
if args.plot:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.plot(t * 1e3, samples.real, label="I")
    plt.plot(t * 1e3, samples.imag, label="Q")
    plt.xlabel("ms")
    plt.legend()
    plt.savefig(args.plot)
    print("plot:", args.plot)

# %% 2. An uplink frame through the emulated radio, decoded against its truth.
cfg = rh.FrameConfig.load(ROOT / "crates/phy/configs/8x2.json")
frame = rh.generate_uplink_frame(cfg, frame=0)
x = (frame["samples"][..., 0] + 1j * frame["samples"][..., 1]).astype(np.complex64) / 32767
bs = rh.Radio.emulated(cfg.sample_rate, cfg.antennas)
chans = list(range(cfg.antennas))
bs_tx, bs_rx = bs.get_tx_stream(chans), bs.get_rx_stream(chans)
t0 = bs.get_time_now() + 1_000_000
bs_tx.send(x, rh.TXMetadata(time_ns=t0, start_of_burst=True, end_of_burst=True))
bs_rx.issue_stream_cmd(rh.StreamCMD(rh.StreamMode.num_done, cfg.frame_len, time_ns=t0))
y = np.zeros_like(x)
assert bs_rx.recv(y, md, 1.0) == cfg.frame_len, md
out = rh.UplinkDecoder(cfg).decode(y)
errors = int((out["payload"] != frame["uplink_payload"]).sum())
print(f"uplink: {cfg.antennas}x{cfg.users}, {out['payload'].size} bits, {errors} bit errors, "
      f"CRC ok {int(out['crc_ok'].sum())}/{out['crc_ok'].size}")
if errors:
    sys.exit("uplink decode disagrees with the truth")

# %% 3. LDPC: a batch of codewords, numpy in and out, GIL released.
code = rh.LdpcCode(1, 384, rate=1 / 3)
rng = np.random.default_rng(7)
bits = rng.integers(0, 2, (args.codewords, code.payload_bits), dtype=np.uint8)
coded = code.encode(bits)
sigma2 = 10 ** -0.1  # BPSK over AWGN at 1 dB Es/N0
llr = (2 * ((1.0 - 2.0 * coded) + rng.normal(0, np.sqrt(sigma2), coded.shape)) / sigma2).astype(np.float32)
start = time.perf_counter()
dec, iters, ok = code.decode(llr, max_iterations=5, early_termination=False)
mbps = bits.size / (time.perf_counter() - start) / 1e6
wrong = int((dec != bits).sum())
print(f"LDPC decode: {args.codewords} codewords, {mbps:.1f} Mbit/s, "
      f"{int(ok.sum())} parity ok, {wrong} bit errors")
if wrong:
    sys.exit("LDPC decode disagrees with the payload")

# %% 4. PMT: one object to two receivers at once (each in its own thread; the GIL
# is released while they wait).
obj = rng.integers(0, 256, 100_000, dtype=np.uint8).tobytes()
receivers = [rh.PmtReceiver("127.0.0.1:0") for _ in range(2)]
results = [None, None]


def receive(i):
    results[i] = receivers[i].receive(linger="100ms", idle="10s")


threads = [threading.Thread(target=receive, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
sent = rh.pmt_send(obj, [f"{h}:{p}" for h, p in (r.address for r in receivers)], fail_timeout="5s")
for t in threads:
    t.join()
for line in sent["receivers"]:
    print(f"PMT: {line['receiver']} {line['bytes']} bytes in {line['seconds']:.3f} s, intact {line['intact']}")
if any(r is None or r[0] != obj for r in results):
    sys.exit("a PMT receiver did not get the object")

# %% 5. The station: 8x2 frames from an emulated radio unit, decoded on one CPU device.
(report,) = rh.station_run({"config": "8x2", "devices": "cpu:1", "pin": False, "frames": 20,
                            "frame_period": "2ms", "deadline": "100ms"})
print(f"station: {report['completed']}/{report['frames']} frames decoded in time, "
      f"{report['decode_errors']} decode errors, p99 {report['p99_ms']:.2f} ms")
if report["decode_errors"]:
    sys.exit("the station decoded frames that differ from the truth")
