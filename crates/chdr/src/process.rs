//! What the host streamer does to each packet: a [`PacketProcessor`] maps one
//! block of wire samples (`iq::Block<Ci16>`, one port per input stream) to one
//! block per output port.

pub use radiohost_iq::Block;
use radiohost_iq::Ci16;

/// Per-packet processing between RX and TX. Called on the streaming thread:
/// implementations must not block and should not allocate.
pub trait PacketProcessor: Send {
    fn inputs(&self) -> usize;
    fn outputs(&self) -> usize;
    /// Fill every output port of `output` from `input` (same samples per port).
    fn process(&mut self, input: &Block<Ci16>, output: &mut Block<Ci16>);
    /// Called once before the stream starts, off the sample clock: touch buffers
    /// and code so the first packets take no longer than the rest. Must leave the
    /// processor as it was (same output for the same input afterwards).
    fn warm_up(&mut self) {}
}

/// Copy input port `p` to output port `p`.
pub struct Passthrough {
    pub ports: usize,
}

impl PacketProcessor for Passthrough {
    fn inputs(&self) -> usize {
        self.ports
    }

    fn outputs(&self) -> usize {
        self.ports
    }

    fn process(&mut self, input: &Block<Ci16>, output: &mut Block<Ci16>) {
        for p in 0..self.ports {
            output.port_mut(p).copy_from_slice(input.port(p));
        }
    }
}
