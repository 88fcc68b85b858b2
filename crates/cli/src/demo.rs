//! `radiohost demo`: the data path end to end on the virtual testbed, one stage
//! per capability (see DESIGN.md). Each stage prints its own section and fails
//! loudly if what it verifies does not hold.

use crate::warp::{connect, host_config, loopback_interfaces, test_waveform};
use anyhow::{ensure, Context, Result};
use clap::Args;
use radiohost_iq::WarpWord;
use radiohost_warp::emulator::{Emulator, EmulatorConfig};
use radiohost_warp::{Addressing, RfBuffer};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct DemoArgs {
    /// Emulated WARP nodes in the transport stage.
    #[arg(long, default_value_t = 16)]
    nodes: u16,
    /// Samples per RF buffer written and read back (at most 32768).
    #[arg(long, default_value_t = 32768)]
    samples: u32,
}

pub fn run(a: DemoArgs) -> Result<()> {
    println!("radiohost demo: the data path on the virtual testbed\n");
    let started = Instant::now();
    transport_stage(&a).context("stage 1 (multi-radio sample transport) failed")?;
    println!();
    crate::chdr::demo_stage().context("stage 2 (streaming and channel emulation) failed")?;
    println!();
    crate::rt::demo_stage().context("stage 3 (real-time execution) failed")?;
    println!();
    crate::relay::demo_stage().context("stage 3b (cooperative relay) failed")?;
    println!();
    crate::station::demo_stage().context("stage 4 (massive-MIMO baseband) failed")?;
    println!();
    crate::pmt::demo_stage().context("stage 5 (point-to-multipoint delivery) failed")?;
    println!(
        "\ndemo complete in {:.1} s: every stage verified its output.",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Stage 1: write a distinct waveform to every node, trigger, read every RX buffer
/// back in parallel and check each sample.
fn transport_stage(a: &DemoArgs) -> Result<()> {
    ensure!(
        a.nodes > 0 && a.samples > 0 && a.samples <= 32768,
        "need 1+ nodes and 1..=32768 samples"
    );
    println!("== stage 1: parallel multi-radio IQ transport (WARPLab 7.4 wire format) ==");
    let cfg = EmulatorConfig {
        nodes: a.nodes,
        // Ephemeral ports, so the demo runs beside a `radiohost warp emulate`.
        addressing: Addressing::LOOPBACK.with_ports(0, 0),
        ..Default::default()
    };
    let emu = Emulator::start(cfg.clone())?;
    let ids: Vec<u16> = (0..a.nodes).collect();
    let trigger = emu.trigger_addr().context("no trigger socket")?;
    let host_cfg = host_config(&loopback_interfaces(1), cfg.payload, trigger);
    let mut host = connect(&ids, emu.node_addrs(), |_| 0, host_cfg)?;
    println!(
        "{} emulated WARP v3 nodes, 1 Gbit/s node links, one 10 Gbit/s host link, jumbo frames, {} samples per buffer",
        a.nodes, a.samples
    );
    let idx: Vec<usize> = (0..ids.len()).collect();
    let data: Vec<Vec<WarpWord>> = ids
        .iter()
        .map(|&id| test_waveform(id, a.samples as usize))
        .collect();
    let refs: Vec<&[WarpWord]> = data.iter().map(|d| d.as_slice()).collect();

    let t = Instant::now();
    host.write_iq(&idx, RfBuffer::A, 0, &refs)?;
    let write_total = t.elapsed();
    let write_lat = host.last_node_latency().to_vec();

    host.trigger(1)?;
    let deadline = Instant::now() + Duration::from_secs(2);
    while emu.stats().nodes.iter().any(|c| c.triggers == 0) {
        ensure!(
            Instant::now() < deadline,
            "not every node saw the trigger within 2 s"
        );
        std::thread::sleep(Duration::from_micros(200));
    }

    let t = Instant::now();
    let rx = host.read_iq(&idx, RfBuffer::A, 0, a.samples)?;
    let read_total = t.elapsed();
    let read_lat = host.last_node_latency().to_vec();

    println!(
        "{:>5} {:>12} {:>12} {:>10} {:>9}",
        "node", "tone (f/fs)", "write_ms", "read_ms", "verified"
    );
    let mut bad = 0;
    for (i, id) in ids.iter().enumerate() {
        let ok = rx[i].iter().zip(&data[i]).all(|(r, w)| *r == w.tx_to_rx());
        bad += usize::from(!ok);
        println!(
            "{:>5} {:>12} {:>12.3} {:>10.3} {:>9}",
            id,
            format!("{}/64", id + 1),
            write_lat[i].as_secs_f64() * 1e3,
            read_lat[i].as_secs_f64() * 1e3,
            if ok { "yes" } else { "NO" }
        );
    }
    println!(
        "total: write {:.3} ms, read {:.3} ms for {} nodes ({} samples each); host re-requests {}, write retries {}",
        write_total.as_secs_f64() * 1e3,
        read_total.as_secs_f64() * 1e3,
        a.nodes,
        a.samples,
        host.stats().rerequests,
        host.stats().write_retries
    );
    ensure!(
        bad == 0,
        "{bad} node(s) returned samples that differ from what was written"
    );
    Ok(())
}
