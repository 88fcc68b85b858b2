"""GNU Radio flowgraph -> radiohost channel emulation over ZeroMQ -> flowgraph.

Two processes, each with one role (they may run in different Pythons: the flowgraph
needs `gnuradio`, the emulator needs `radiohost`):

    python3 channel_emulation.py radiohost --taps taps.npy          # the channel
    python3 channel_emulation.py flowgraph --out flowgraph.npz      # GNU Radio
    python3 channel_emulation.py check --taps taps.npy --out flowgraph.npz

flowgraph: vector_source_c(x) -> zeromq.push_sink(tcp://127.0.0.1:IN)      (binds)
           zeromq.pull_source(tcp://127.0.0.1:OUT) -> head(N) -> vector_sink_c
radiohost: Radio.zeromq(rx=IN as PULL, tx=OUT as PUSH) -> Convolver(Rayleigh taps)
check:     the flowgraph's output equals numpy.convolve(x, taps)[:N].
"""

import argparse
import sys
import time

import numpy as np


def radiohost_role(a):
    import radiohost as rh

    taps = rh.rayleigh_taps(1, 1, [0, 5, 13, 40], [0.0, -3.0, -9.0, -15.0], seed=a.seed)
    np.save(a.taps, taps)
    radio = rh.Radio.zeromq(a.rate, rx=[f"tcp://127.0.0.1:{a.in_port}"], tx=[f"tcp://127.0.0.1:{a.out_port}"],
                            pattern="pushpull", item="gr_complex")
    rx, tx = radio.get_rx_stream([0]), radio.get_tx_stream([0])
    # Time 0 is the first sample the flowgraph sent: nothing is missed however late
    # this command comes (the radio keeps recent samples).
    rx.issue_stream_cmd(rh.StreamCMD(rh.StreamMode.start_cont, time_ns=0))
    conv = rh.Convolver(taps, block=a.block)
    buf = np.zeros(8192, np.complex64)
    md = rh.RXMetadata()
    pending = np.zeros(0, np.complex64)
    done, deadline = 0, time.monotonic() + a.timeout
    while done < a.samples:
        if time.monotonic() > deadline:
            sys.exit(f"radiohost: only {done} of {a.samples} samples came within {a.timeout} s")
        n = rx.recv(buf, md, 0.2)
        if md.error_code not in ("none", "timeout"):
            sys.exit(f"radiohost: recv reported {md.error_code}")
        pending = np.concatenate([pending, buf[:n]])
        whole = min(len(pending) // a.block * a.block, a.samples - done)
        if whole:
            y = conv.process(pending[:whole])
            sent = 0
            while sent < whole:
                sent += tx.send(y[0, sent:], rh.TXMetadata(), 5.0)
            pending, done = pending[whole:], done + whole
    print(f"radiohost: {done} samples through a {taps.shape[2]}-tap Rayleigh channel")


def flowgraph_role(a):
    from gnuradio import blocks, gr, zeromq

    rng = np.random.default_rng(a.seed)
    x = ((rng.integers(0, 2, a.samples) * 2 - 1) + 1j * (rng.integers(0, 2, a.samples) * 2 - 1)) * 0.5
    x = x.astype(np.complex64)
    tb = gr.top_block()
    src = blocks.vector_source_c(x.tolist(), False)
    push = zeromq.push_sink(gr.sizeof_gr_complex, 1, f"tcp://127.0.0.1:{a.in_port}", 100, False, -1)
    pull = zeromq.pull_source(gr.sizeof_gr_complex, 1, f"tcp://127.0.0.1:{a.out_port}", 100, False, -1)
    head = blocks.head(gr.sizeof_gr_complex, a.samples)
    sink = blocks.vector_sink_c()
    tb.connect(src, push)
    tb.connect(pull, head, sink)
    tb.start()
    deadline = time.monotonic() + a.timeout
    while len(sink.data()) < a.samples and time.monotonic() < deadline:
        time.sleep(0.05)
    tb.stop()
    tb.wait()
    y = np.array(sink.data(), np.complex64)
    np.savez(a.out, x=x, y=y)
    print(f"flowgraph: sent {len(x)}, received {len(y)} samples")
    if len(y) < a.samples:
        sys.exit(f"flowgraph: only {len(y)} of {a.samples} samples came back within {a.timeout} s")


def check_role(a):
    taps = np.load(a.taps)[0, 0]
    d = np.load(a.out)
    want = np.convolve(d["x"], taps)[: len(d["x"])]
    err = np.abs(d["y"] - want).max()
    print(f"check: {len(d['y'])} samples, largest error against numpy.convolve {err:.2e}")
    if len(d["y"]) != len(want) or not err < 1e-4:
        sys.exit("check: the flowgraph's output is not the numpy convolution")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", choices=["radiohost", "flowgraph", "check"])
    p.add_argument("--in-port", type=int, default=5701)
    p.add_argument("--out-port", type=int, default=5702)
    p.add_argument("--samples", type=int, default=1 << 16, help="a multiple of --block")
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--rate", type=float, default=1e6)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--taps", default="taps.npy")
    p.add_argument("--out", default="flowgraph.npz")
    a = p.parse_args()
    if a.samples % a.block:
        p.error("--samples must be a multiple of --block")
    {"radiohost": radiohost_role, "flowgraph": flowgraph_role, "check": check_role}[a.role](a)


if __name__ == "__main__":
    main()
