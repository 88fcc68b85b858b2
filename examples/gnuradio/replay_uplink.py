"""A recording replayed by a GNU Radio flowgraph into radiohost's uplink decoder.

    python3 replay_uplink.py record --base uplink        # radiohost: frame + truth
    python3 replay_uplink.py flowgraph --base uplink      # GNU Radio: file -> ZeroMQ
    python3 replay_uplink.py decode --base uplink         # radiohost: ZeroMQ -> decoder

record:    one uplink frame of crates/phy/configs/8x2.json (8 antennas, 2 users) as a
           cf32 SigMF recording (antennas interleaved, as SigMF stores channels), with
           the users' payload bits in uplink.truth.npy.
flowgraph: blocks.file_source(uplink.sigmf-data) -> zeromq.push_sink (binds), the
           antennas still interleaved in one stream.
decode:    Radio.zeromq(rx=..., layout="interleaved", channels=8) receives one frame per
           antenna, UplinkDecoder decodes it; exits non-zero unless it equals the truth.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

CONFIG = Path(__file__).resolve().parents[2] / "crates" / "phy" / "configs" / "8x2.json"


def record(a):
    import radiohost as rh

    cfg = rh.FrameConfig.load(a.config)
    frame = rh.generate_uplink_frame(cfg, a.frame)
    x = (frame["samples"][..., 0] + 1j * frame["samples"][..., 1]).astype(np.complex64) / 32767
    rh.write_sigmf(a.base, x, cfg.sample_rate, description=f"uplink frame {a.frame} of {Path(a.config).name}")
    np.save(f"{a.base}.truth.npy", frame["uplink_payload"])
    print(f"record: {x.shape[0]} antennas x {x.shape[1]} samples -> {a.base}.sigmf-data")


def flowgraph(a):
    from gnuradio import blocks, gr, zeromq

    tb = gr.top_block()
    src = blocks.file_source(gr.sizeof_gr_complex, f"{a.base}.sigmf-data", False)
    push = zeromq.push_sink(gr.sizeof_gr_complex, 1, f"tcp://127.0.0.1:{a.port}", 100, False, -1)
    tb.connect(src, push)
    tb.run()
    # The push socket lingers until the decoder has pulled everything.
    time.sleep(a.linger)
    print("flowgraph: recording sent")


def decode(a):
    import radiohost as rh

    cfg = rh.FrameConfig.load(a.config)
    m, n = cfg.antennas, cfg.frame_len
    radio = rh.Radio.zeromq(cfg.sample_rate, rx=[f"tcp://127.0.0.1:{a.port}"], pattern="pushpull",
                            layout="interleaved", channels=m)
    rx = radio.get_rx_stream(list(range(m)))
    rx.issue_stream_cmd(rh.StreamCMD(rh.StreamMode.num_done, n, time_ns=0))
    y = np.zeros((m, n), np.complex64)
    md = rh.RXMetadata()
    got, deadline = 0, time.monotonic() + a.timeout
    while got < n and time.monotonic() < deadline:
        part = np.zeros((m, n - got), np.complex64)
        k = rx.recv(part, md, 0.5)
        y[:, got:got + k] = part[:, :k]
        got += k
    if got < n:
        sys.exit(f"decode: {got} of {n} samples per antenna came within {a.timeout} s")
    out = rh.UplinkDecoder(cfg).decode(y)
    truth = np.load(f"{a.base}.truth.npy")
    errors = int((out["payload"] != truth).sum())
    print(f"decode: {out['payload'].size} bits, {errors} bit errors, CRC ok {int(out['crc_ok'].sum())}/{out['crc_ok'].size}")
    if errors:
        sys.exit("decode: the payload differs from the truth")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", choices=["record", "flowgraph", "decode"])
    p.add_argument("--base", default="uplink")
    p.add_argument("--config", default=str(CONFIG))
    p.add_argument("--frame", type=int, default=0)
    p.add_argument("--port", type=int, default=5711)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--linger", type=float, default=2.0)
    a = p.parse_args()
    {"record": record, "flowgraph": flowgraph, "decode": decode}[a.role](a)


if __name__ == "__main__":
    main()
