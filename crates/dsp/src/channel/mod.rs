//! Channel models that produce [`crate::MimoTaps`] for the convolver: tapped delay
//! lines from JSON tap files, i.i.d. Rayleigh taps with a power-delay profile, and
//! slowly time-varying fading (AR(1) or Jakes per tap, seeded).

pub mod fading;
pub mod rayleigh;
pub mod tapfile;

pub use fading::{ar1_rho_for_doppler, bessel_j0, FadingChannel, FadingError, FadingProcess};
pub use rayleigh::{draw_rayleigh, PdpError, PowerDelayProfile};
pub use tapfile::{parse_tap_file, write_tap_file, TapFile, TapFileError, TAP_FILE_VERSION};
