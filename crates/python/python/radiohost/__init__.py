"""radiohost from Python: numpy bindings over radiohost's Rust libraries.

* SigMF: ``read_sigmf``, ``write_sigmf`` (complex64 / int16 pairs, metadata dicts)
* LDPC: ``LdpcCode`` (5G NR, both base graphs, all lifting sizes, RV 0-3, batches)
* phy: ``qam_modulate``, ``qam_demodulate``, ``ofdm_modulate``, ``ofdm_demodulate``,
  ``zf_detector_batch``, ``zf_equalize``, ``FrameConfig``, ``generate_uplink_frame``,
  ``UplinkDecoder``, ``evaluate``, ``phy_bench`` (`radiohost phy bench`)
* radios, in UHD's Python vocabulary: ``Radio`` (``emulated``, ``sigmf``,
  ``warp_emulated``, ``chdr``, ``zeromq``), ``StreamCMD``, ``StreamMode``,
  ``RXMetadata``, ``TXMetadata``
* channel emulation: ``Convolver`` (UPOLS MIMO), ``rayleigh_taps``, ``FadingModel``
* PMT: ``pmt_send`` (one object to several receivers), ``PmtReceiver``
* station: ``station_run``, ``station_simulate`` (options dicts in, report dicts out)

Errors are ``RadiohostError`` subclasses carrying the library's message.
"""

from ._native import *  # noqa: F401,F403
from ._native import __version__  # noqa: F401
