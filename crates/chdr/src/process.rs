//! What the host streamer does to each packet: a [`PacketProcessor`] maps one
//! block of samples per input port to one block per output port.

use radiohost_iq::Ci16;

/// Samples of several ports for one packet time, stored contiguously.
#[derive(Clone, Debug)]
pub struct Block {
    data: Vec<Ci16>,
    ports: usize,
    len: usize,
}

impl Block {
    pub fn new(ports: usize, len: usize) -> Self {
        Block {
            data: vec![Ci16::default(); ports * len],
            ports,
            len,
        }
    }

    pub fn ports(&self) -> usize {
        self.ports
    }

    /// Samples per port.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn port(&self, p: usize) -> &[Ci16] {
        &self.data[p * self.len..(p + 1) * self.len]
    }

    pub fn port_mut(&mut self, p: usize) -> &mut [Ci16] {
        &mut self.data[p * self.len..(p + 1) * self.len]
    }
}

/// Per-packet processing between RX and TX. Called on the streaming thread:
/// implementations must not block and should not allocate.
pub trait PacketProcessor: Send {
    fn inputs(&self) -> usize;
    fn outputs(&self) -> usize;
    /// Fill every output port of `output` from `input` (same samples per port).
    fn process(&mut self, input: &Block, output: &mut Block);
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

    fn process(&mut self, input: &Block, output: &mut Block) {
        for p in 0..self.ports {
            output.port_mut(p).copy_from_slice(input.port(p));
        }
    }
}
