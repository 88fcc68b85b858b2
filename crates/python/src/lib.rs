//! radiohost from Python (`import radiohost`): numpy bindings over the library
//! crates, built into an abi3 wheel by maturin (crates/python/pyproject.toml).
//!
//! * [`sigmf`]: SigMF recordings to and from numpy, metadata as dicts;
//! * [`ldpc`]: 5G NR LDPC batches (both base graphs, all lifting sizes, RV 0-3);
//! * [`phy`]: QAM, OFDM, zero forcing, uplink frames with their truth;
//! * [`radio`]: every radio backend (emulated, SigMF, WARP, CHDR, ZeroMQ) in
//!   UHD's Python vocabulary;
//! * [`dsp`]: the UPOLS MIMO convolver and channel models;
//! * [`pmt`]: PMT transfers (send to several receivers, receive one object);
//! * [`station`]: station runs and simulations from a dict of options.
//!
//! Long calls release the GIL; errors are Python exceptions carrying the
//! library's message (`radiohost.RadiohostError` and subclasses).

use pyo3::prelude::*;

mod convert;
mod dsp;
mod errors;
mod interrupt;
mod ldpc;
mod phy;
mod pmt;
mod radio;
mod sigmf;
mod station;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(sigmf::read_sigmf, m)?)?;
    m.add_function(wrap_pyfunction!(sigmf::write_sigmf, m)?)?;
    m.add_class::<ldpc::LdpcCode>()?;
    m.add_function(wrap_pyfunction!(ldpc::lifting_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(phy::qam_modulate, m)?)?;
    m.add_function(wrap_pyfunction!(phy::qam_demodulate, m)?)?;
    m.add_function(wrap_pyfunction!(phy::ofdm_modulate, m)?)?;
    m.add_function(wrap_pyfunction!(phy::ofdm_demodulate, m)?)?;
    m.add_function(wrap_pyfunction!(phy::zf_detector_batch, m)?)?;
    m.add_function(wrap_pyfunction!(phy::zf_equalize, m)?)?;
    m.add_class::<phy::FrameConfig>()?;
    m.add_function(wrap_pyfunction!(phy::generate_uplink_frame, m)?)?;
    m.add_class::<phy::UplinkDecoder>()?;
    m.add_function(wrap_pyfunction!(phy::evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(phy::phy_bench, m)?)?;
    m.add_class::<radio::Radio>()?;
    m.add_class::<radio::RxStreamer>()?;
    m.add_class::<radio::TxStreamer>()?;
    m.add_class::<radio::StreamMode>()?;
    m.add_class::<radio::StreamCMD>()?;
    m.add_class::<radio::RXMetadata>()?;
    m.add_class::<radio::TXMetadata>()?;
    m.add_class::<dsp::Convolver>()?;
    m.add_class::<dsp::FadingModel>()?;
    m.add_function(wrap_pyfunction!(dsp::rayleigh_taps, m)?)?;
    m.add_function(wrap_pyfunction!(pmt::pmt_send, m)?)?;
    m.add_class::<pmt::PmtReceiver>()?;
    m.add_function(wrap_pyfunction!(station::station_run, m)?)?;
    m.add_function(wrap_pyfunction!(station::station_simulate, m)?)?;
    Ok(())
}
