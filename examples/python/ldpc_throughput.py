"""LDPC batch decoding from Python against the Rust benchmark, in the same run.

    python3 examples/python/ldpc_throughput.py [--codewords 1000] [--rounds 5]
        [--bench-seconds 0.5] [--min-ratio 0.9]

Decodes a batch of --codewords distinct codewords (BG1, Zc=384, rate 1/3, exactly 5
iterations, no early termination, normalized min-sum 0.75, BPSK over AWGN at 1 dB
Es/N0: the configuration of the Rust row `ldpc_decode_bg1_z384_r1/3_5it`) with one
`LdpcCode.decode` call per round: numpy in and out without copies (the bits into one
`out=` array reused by every round), the GIL released.
Each round also runs the Rust benchmark itself (`radiohost.phy_bench`, the library
function `radiohost phy bench` runs: one block decoded repeatedly on this thread), so
both figures see the same machine load. Prints both per round and at best, the ratio
of the bests and the median of the rounds' ratios, the decoder's floor and the whole
command's time.

Exit status 1 when a decoded codeword differs from its payload, or with --min-ratio R
when the ratio of the bests is below R (leave it off on a loaded machine: it is a
timing).
"""

import argparse
import statistics
import sys
import time

import numpy as np

import radiohost as rh

ROW = "ldpc_decode_bg1_z384_r1/3_5it"

started = time.perf_counter()
p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--codewords", type=int, default=1000)
p.add_argument("--rounds", type=int, default=5)
p.add_argument("--bench-seconds", type=float, default=0.5,
               help="seconds per kernel for the Rust benchmark (phy_bench)")
p.add_argument("--min-ratio", type=float, help="fail when Python / Rust is below this")
args = p.parse_args()
if args.codewords < 1 or args.rounds < 1:
    p.error("--codewords and --rounds must be at least 1")

code = rh.LdpcCode(1, 384, rate=1 / 3)
rng = np.random.default_rng(7)
bits = rng.integers(0, 2, (args.codewords, code.payload_bits), dtype=np.uint8)
coded = code.encode(bits)
sigma2 = 10 ** -0.1  # 1 dB Es/N0, as the Rust benchmark
llr = (2 * ((1.0 - 2.0 * coded) + rng.normal(0, np.sqrt(sigma2), coded.shape)) / sigma2).astype(np.float32)
print(f"{code}: {args.codewords} codewords, {llr.nbytes / 1e6:.0f} MB of float32 LLRs in one batch")

# The decoded bits land in one array reused by every round (`out=`), as a numpy
# loop over batches would: a fresh 8 MB array costs first-touch page faults.
dec = np.empty_like(bits)
python_mbps, rust_mbps, floor = [], [], None
for r in range(args.rounds):
    start, cpu_start = time.perf_counter(), time.thread_time()
    dec, iters, ok = code.decode(llr, max_iterations=5, early_termination=False, normalization=0.75,
                                 out=dec)
    seconds, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
    wrong = int((dec != bits).any(axis=1).sum())
    if wrong or (iters != 5).any():
        sys.exit(f"round {r}: {wrong} codewords decoded wrong (iterations {sorted(set(iters.tolist()))})")
    python_mbps.append(bits.size / seconds / 1e6)
    row = next(x for x in rh.phy_bench(args.bench_seconds)["rows"] if x["name"] == ROW)
    rust_mbps.append(row["value"])
    floor = row["floor"]
    print(f"round {r}: Python batch {python_mbps[-1]:7.1f} Mbit/s ({seconds * 1e6 / args.codewords:.1f} us/codeword, "
          f"{cpu * 1e6 / args.codewords:.1f} us CPU)   Rust benchmark {rust_mbps[-1]:7.1f} Mbit/s   "
          f"ratio {python_mbps[-1] / rust_mbps[-1]:.3f}")
print(f"(every round: {int((~ok).sum())} of {args.codewords} codewords end with a parity check unmet "
      f"after 5 iterations, payload right)")

py_best, rust_best = max(python_mbps), max(rust_mbps)
ratio = py_best / rust_best
print(f"Python batch of {args.codewords}: {py_best:.1f} Mbit/s best, {statistics.median(python_mbps):.1f} median")
print(f"Rust benchmark ({ROW}): {rust_best:.1f} Mbit/s best, {statistics.median(rust_mbps):.1f} median")
paired = statistics.median(p / r for p, r in zip(python_mbps, rust_mbps))
print(f"Python / Rust = {ratio:.3f} (best of {args.rounds}), {paired:.3f} (median of the rounds' ratios); floor {floor:.0f} Mbit/s "
      f"(Python at {py_best / floor:.2f} of it)")
print(f"whole command: {time.perf_counter() - started:.1f} s")
if args.min_ratio is not None and ratio < args.min_ratio:
    sys.exit(f"Python / Rust = {ratio:.3f} is below --min-ratio {args.min_ratio}")
