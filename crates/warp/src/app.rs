//! What `radiohost warp` commands and the demo run around the host core: node
//! lists, host setup, test waveforms, emulated-network settings, and RX buffers
//! saved as SigMF / TX buffers loaded from SigMF.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use radiohost_iq::sigmf::{self, DataType, Meta, SigMfError};
use radiohost_iq::{Cf32, Ci16, WarpWord};
use radiohost_testbed::link::{LinkConfig, LinkConfigError};
use thiserror::Error;

use crate::emulator::EmulatorConfig;
use crate::host::{HostConfig, Mode, NodeTarget, TransportError, WarpHost};
use crate::sockbuf::SocketBuffers;
use crate::udp::OffloadPolicy;
use crate::{Addressing, FramePayload, RfBuffer};

/// Why a WARP command could not run.
#[derive(Debug, Error)]
pub enum AppError {
    #[error("node list {0:?}: write IDs and ranges like \"0-3,7\"")]
    NodeList(String),
    #[error("node range {0} goes backwards")]
    Backwards(String),
    #[error("node link spec: {0}")]
    Link(#[from] LinkConfigError),
    #[error("{path} has {channels} channels but {nodes} nodes were given; give a one-channel recording or one channel per node")]
    Channels {
        path: PathBuf,
        channels: usize,
        nodes: usize,
    },
    #[error("cannot create {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    SigMf(#[from] SigMfError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error(transparent)]
    Addressing(#[from] crate::addressing::AddressingError),
}

/// Parse "0-3,7" into node IDs.
pub fn parse_node_list(text: &str) -> Result<Vec<u16>, AppError> {
    let bad = || AppError::NodeList(text.to_string());
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: u16 = a.trim().parse().map_err(|_| bad())?;
                let b: u16 = b.trim().parse().map_err(|_| bad())?;
                if a > b {
                    return Err(AppError::Backwards(part.to_string()));
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

/// A host for nodes `ids` at `addrs`, node i talking through local interface
/// `interface_of(i)` of `cfg.interfaces`.
pub fn connect(
    ids: &[u16],
    addrs: &[SocketAddr],
    interface_of: impl Fn(usize) -> usize,
    cfg: HostConfig,
) -> Result<WarpHost, AppError> {
    let targets = ids
        .iter()
        .zip(addrs)
        .enumerate()
        .map(|(i, (&id, &addr))| NodeTarget {
            id,
            addr,
            interface: interface_of(i),
        })
        .collect();
    Ok(WarpHost::new(cfg, targets)?)
}

/// Which nodes a host command talks to, and how: the nodes are split evenly across
/// `interfaces` in order (e.g. two 10G NICs), `timeout` is the quiet period before
/// missing replies are re-requested, `retries` the re-request rounds per node.
#[derive(Clone, Debug)]
pub struct NodeSetup {
    pub ids: Vec<u16>,
    pub addressing: Addressing,
    pub payload: FramePayload,
    pub interfaces: Vec<SocketAddr>,
    pub mode: Mode,
    pub timeout: Duration,
    pub retries: u32,
    /// UDP GSO/GRO where the kernel offers them, or never.
    pub offload: OffloadPolicy,
}

/// A socket whose receive buffer the kernel made smaller than asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferShortfall(pub SocketBuffers);

impl fmt::Display for BufferShortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{} got a {} KiB receive buffer of the {} KiB asked (raise net.core.rmem_max)",
            b.local,
            b.recv_granted / 1024,
            b.requested / 1024
        )
    }
}

/// A host for `setup`'s nodes, and the sockets whose receive buffers fell short.
pub fn connect_nodes(setup: &NodeSetup) -> Result<(WarpHost, Vec<BufferShortfall>), AppError> {
    let addrs = setup
        .ids
        .iter()
        .map(|&id| setup.addressing.node_addr(id))
        .collect::<Result<Vec<SocketAddr>, _>>()?;
    let per_iface = setup.ids.len().div_ceil(setup.interfaces.len().max(1));
    let cfg = HostConfig {
        timeout: setup.timeout,
        retries: setup.retries,
        mode: setup.mode,
        offload: setup.offload,
        ..host_config(
            &setup.interfaces,
            setup.payload,
            setup.addressing.trigger_addr(),
        )
    };
    let host = connect(&setup.ids, &addrs, |i| i / per_iface.max(1), cfg)?;
    let short = host
        .socket_buffers()
        .iter()
        .filter(|b| b.recv_granted < b.requested)
        .map(|&b| BufferShortfall(b))
        .collect();
    Ok((host, short))
}

/// Host settings for `interfaces`, frame size and trigger address; the rest default.
pub fn host_config(
    interfaces: &[SocketAddr],
    payload: FramePayload,
    trigger_addr: SocketAddr,
) -> HostConfig {
    HostConfig {
        interfaces: interfaces.to_vec(),
        payload,
        trigger_addr,
        ..Default::default()
    }
}

/// A distinct, recognisable test waveform per node: a complex tone at a
/// node-specific frequency with a node-specific amplitude, as Fix_16_15 words.
pub fn test_waveform(node: u16, samples: usize) -> Vec<WarpWord> {
    let freq = (node as f32 + 1.0) / 64.0;
    let amp = 0.5 + 0.02 * (node % 16) as f32;
    (0..samples)
        .map(|n| {
            let phase = std::f32::consts::TAU * freq * n as f32;
            WarpWord::from_cf32_fix16(Cf32::from_polar(amp, phase))
        })
        .collect()
}

/// The local addresses a host uses for `links` host links on loopback.
pub fn loopback_interfaces(links: usize) -> Vec<SocketAddr> {
    (0..links.max(1))
        .map(|i| SocketAddr::from(([127, 0, 0, 1 + i as u8], 0)))
        .collect()
}

/// The emulated network of `nodes` nodes: each node's link (`node_link` spec, e.g.
/// "1%,delay=20us", at `node_rate` bit/s) and `host_links` shared host links of
/// `host_rate` bit/s each.
#[derive(Clone, Debug)]
pub struct NetworkSpec {
    pub nodes: u16,
    pub addressing: Addressing,
    pub payload: FramePayload,
    pub node_rate: f64,
    pub node_link: String,
    pub host_rate: f64,
    pub host_links: usize,
    /// Only answer these hosts (empty: any).
    pub allowed_hosts: Vec<IpAddr>,
    /// UDP GSO/GRO (emulator and host) where the kernel offers them, or never.
    pub offload: OffloadPolicy,
}

impl NetworkSpec {
    /// The emulator configuration; a node link without a delay gets the default one,
    /// and its queue is at most the default's.
    pub fn emulator_config(&self) -> Result<EmulatorConfig, AppError> {
        let defaults = EmulatorConfig::default();
        let mut node_link = LinkConfig::parse(&self.node_link)?;
        node_link.rate_bps = self.node_rate;
        if node_link.delay.is_zero() {
            node_link.delay = defaults.node_link.delay;
        }
        node_link.queue_limit_bytes = node_link
            .queue_limit_bytes
            .min(defaults.node_link.queue_limit_bytes);
        let mut host_link = defaults.host_link.clone();
        host_link.rate_bps = self.host_rate;
        Ok(EmulatorConfig {
            nodes: self.nodes,
            addressing: self.addressing,
            payload: self.payload,
            node_link,
            host_link,
            host_links: self.host_links,
            allowed_hosts: self.allowed_hosts.clone(),
            offload: self.offload,
            ..defaults
        })
    }
}

/// Save each node's RX words as a SigMF ci16 recording `dir/node<ID>_rf<B>`
/// (Fix_14_13 scaled to 16 bits).
pub fn save_rx_sigmf(
    dir: &Path,
    ids: &[u16],
    data: &[Vec<WarpWord>],
    buffer: RfBuffer,
    sample_rate: f64,
) -> Result<(), AppError> {
    std::fs::create_dir_all(dir).map_err(|source| AppError::Io {
        path: dir.into(),
        source,
    })?;
    for (id, words) in ids.iter().zip(data) {
        let samples: Vec<Ci16> = words
            .iter()
            .map(|w| {
                let (i, q) = w.fix14_values();
                Ci16::new(i << 2, q << 2)
            })
            .collect();
        let meta = Meta::new(DataType::Ci16Le, sample_rate)
            .hw(format!("WARP v3 node {id} RF{buffer:?}"))
            .description("RX buffer read by radiohost warp read (Fix_14_13 scaled to 16 bits)");
        sigmf::write_ci16(&dir.join(format!("node{id}_rf{buffer:?}")), &meta, &samples)?;
    }
    Ok(())
}

/// TX words for `nodes` nodes from a SigMF recording: channel k to the k-th node,
/// a one-channel recording to every node.
pub fn tx_from_sigmf(path: &Path, nodes: usize) -> Result<Vec<Vec<WarpWord>>, AppError> {
    let rec = sigmf::read(path)?;
    let channels = rec.meta.channels();
    if channels != 1 && channels != nodes {
        return Err(AppError::Channels {
            path: path.into(),
            channels,
            nodes,
        });
    }
    Ok((0..nodes)
        .map(|k| {
            rec.channel_cf32(if channels == 1 { 0 } else { k })
                .into_iter()
                .map(WarpWord::from_cf32_fix16)
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lists_and_network_specs() {
        assert_eq!(parse_node_list("0-3,7").unwrap(), vec![0, 1, 2, 3, 7]);
        assert!(matches!(
            parse_node_list("3-1"),
            Err(AppError::Backwards(_))
        ));
        assert!(parse_node_list("").is_err() && parse_node_list("x").is_err());
        let spec = NetworkSpec {
            nodes: 4,
            addressing: Addressing::LOOPBACK,
            payload: FramePayload::Jumbo,
            node_rate: 1e9,
            node_link: "1%".into(),
            host_rate: 10e9,
            host_links: 2,
            allowed_hosts: Vec::new(),
            offload: OffloadPolicy::Auto,
        };
        let c = spec.emulator_config().unwrap();
        assert_eq!((c.nodes, c.host_links, c.node_link.rate_bps), (4, 2, 1e9));
        assert!(!c.node_link.delay.is_zero());
        assert!(NetworkSpec {
            node_link: "nonsense".into(),
            ..spec
        }
        .emulator_config()
        .is_err());
    }

    #[test]
    fn sigmf_roundtrip_of_words() {
        let dir = std::env::temp_dir().join(format!("warp-app-{}", std::process::id()));
        let words = vec![test_waveform(3, 64)];
        save_rx_sigmf(&dir, &[3], &words, RfBuffer::A, 1e6).unwrap();
        let back = tx_from_sigmf(&dir.join("node3_rfA"), 2).unwrap();
        assert_eq!((back.len(), back[0].len()), (2, 64));
        assert!(matches!(tx_from_sigmf(&dir.join("node3_rfA"), 1), Ok(v) if v.len() == 1));
        // An empty data file is an error naming it, never "0 samples written".
        std::fs::write(dir.join("node3_rfA.sigmf-data"), b"").unwrap();
        let err = tx_from_sigmf(&dir.join("node3_rfA"), 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("node3_rfA.sigmf-data") && err.contains("empty"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
