//! `radiohost pmt`: point-to-multipoint delivery with PMT over UDP, and `compare`,
//! which runs PMT and its baselines over the same emulated links.

mod compare;
mod plot;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, Subcommand};
use radiohost_pmt::app::{parse_destination, read_psk, recv_to_file, send_to};
use radiohost_pmt::sender::SenderEvent;
use radiohost_pmt::udp::{Destination, Progress};
use radiohost_pmt::{ReceiverConfig, SenderConfig};
use radiohost_testbed::units::{parse_duration, parse_positive_duration};

use crate::ui;

#[derive(Subcommand)]
pub enum PmtCmd {
    /// Send FILE to several receivers at once over UDP (one unicast flow each),
    /// each served at the pace of its RTT group.
    Send(SendArgs),
    /// Receive one object over UDP, write it to --out and check its SHA-256.
    Recv(RecvArgs),
    /// Run PMT, slowest-receiver multicast and kernel TCP Reno over the same emulated
    /// links; print times against each link's floor, plot, and optionally `--json`.
    Compare(compare::CompareArgs),
}

#[derive(Args)]
pub struct SendArgs {
    /// File to send.
    file: PathBuf,
    /// Receivers, comma-separated: ADDR or ADDR@LOCAL, where LOCAL is the local
    /// address to send from (for receivers behind different interfaces).
    #[arg(long, value_delimiter = ',', required = true, value_parser = parse_destination)]
    to: Vec<Destination>,
    /// Session number (receivers lock onto the first session they hear).
    #[arg(long, default_value_t = 1)]
    session: u32,
    /// File holding a pre-shared key: every packet then carries an HMAC-SHA256 tag.
    #[arg(long)]
    psk_file: Option<PathBuf>,
    /// W: segments per round, 1 to 1024.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    window: u16,
    /// K: number of RTT groups, 1 to 16 (2 = the paper's fast/slow split).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=16))]
    groups: u8,
    /// Payload bytes per segment, 1 to 9000 (a plain number of bytes).
    #[arg(long, default_value_t = 1400,
          value_parser = clap::value_parser!(u16).range(1..=radiohost_pmt::wire::MAX_SEGMENT as i64))]
    segment: u16,
    /// A receiver silent this long is declared failed (the others carry on); a
    /// duration with its unit (e.g. 15s).
    #[arg(long, default_value = "15s", value_parser = parse_positive_duration)]
    fail_timeout: Duration,
    /// Print the final report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct RecvArgs {
    /// Local address to listen on, e.g. 0.0.0.0:7001.
    #[arg(long)]
    listen: SocketAddr,
    /// Where to write the object; written as FILE.part and renamed once the
    /// SHA-256 matches.
    #[arg(long)]
    out: PathBuf,
    /// Accept only this sender (default: the first valid sender heard).
    #[arg(long)]
    from: Option<SocketAddr>,
    /// Accept only this session.
    #[arg(long)]
    session: Option<u32>,
    /// File holding the pre-shared key the sender uses.
    #[arg(long)]
    psk_file: Option<PathBuf>,
    /// Reassembly buffer in segments (the flow-control window), 1 to 65536.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    buffer: u32,
    /// Keep answering this long after completion so a lost final ACK is repaired
    /// (a duration with its unit, e.g. 2s).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    linger: Duration,
    /// Give up after this long without any packet (a duration with its unit, e.g. 30s).
    #[arg(long, default_value = "30s", value_parser = parse_positive_duration)]
    idle: Duration,
    /// Print the final report as JSON: "seconds" is the transfer time (first datagram
    /// to verified object), "listened_seconds" the whole run (waiting and linger too).
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: PmtCmd) -> Result<()> {
    match cmd {
        PmtCmd::Send(a) => send(a),
        PmtCmd::Recv(a) => recv(a),
        PmtCmd::Compare(a) => compare::run(a),
    }
}

fn psk(path: &Option<PathBuf>) -> Result<Option<Vec<u8>>> {
    Ok(path.as_deref().map(read_psk).transpose()?)
}

fn send(a: SendArgs) -> Result<()> {
    let data = std::fs::read(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let dests = a.to;
    let cfg = SenderConfig {
        session: a.session,
        segment_size: a.segment,
        window: a.window,
        groups: usize::from(a.groups),
        fail_timeout: a.fail_timeout,
        psk: psk(&a.psk_file)?,
        ..Default::default()
    };
    let total = data.len() as u64;
    let group = ui::ProgressGroup::new(!a.json);
    let bars: Vec<ui::Progress> = dests
        .iter()
        .map(|d| group.add_bytes(d.to.to_string(), total))
        .collect();
    let stop = ui::stop_flag();
    let report = send_to(cfg, data.into(), &dests, &stop, |p| match p {
        Progress::Acked {
            receiver,
            acked,
            group,
            srtt,
            ..
        } => {
            bars[receiver].set(acked);
            bars[receiver].label(format!(
                "{}: group {group} rtt {:.0} ms",
                dests[receiver].to,
                srtt.as_secs_f64() * 1e3
            ));
        }
        Progress::Sender(SenderEvent::ReceiverDone {
            receiver, intact, ..
        }) => {
            bars[receiver].set(total);
            bars[receiver].finish_with(if intact {
                "done, SHA-256 verified"
            } else {
                "done, SHA-256 MISMATCH"
            });
        }
        Progress::Sender(SenderEvent::ReceiverFailed { receiver, .. }) => {
            bars[receiver].finish_with("FAILED: receiver went silent");
        }
        _ => {}
    })?;
    drop(bars);
    if a.json {
        println!("{}", serde_json::to_value(&report)?);
    } else {
        println!("{:>22} {:>10} {:>8}", "receiver", "seconds", "result");
        for r in &report.receivers {
            let secs = r.seconds.map_or("-".to_string(), |t| format!("{t:.3}"));
            println!("{:>22} {:>10} {:>8}", r.receiver, secs, r.result());
        }
        let s = &report.stats;
        println!(
            "rounds {} segments {} retransmitted {} acks {} | ignored: malformed {} auth {} session {} non-member {} invalid {} duplicate {}",
            s.rounds, s.data_sent, s.retransmits, s.acks, s.malformed, s.auth_failures, s.wrong_session, s.non_member, s.invalid_acks, s.duplicate_acks
        );
    }
    let bad = report.not_intact();
    ensure!(
        bad == 0,
        "{bad} of {} receivers did not get the object intact",
        dests.len()
    );
    Ok(())
}

fn recv(a: RecvArgs) -> Result<()> {
    ui::check_output_file("--out", &a.out)?;
    let cfg = ReceiverConfig {
        sender: a.from,
        session: a.session,
        buffer_segments: a.buffer,
        psk: psk(&a.psk_file)?,
        ..Default::default()
    };
    let bar = ui::Progress::bytes(format!("{}: waiting for a sender", a.listen), 0, !a.json);
    let stop = ui::stop_flag();
    let report = recv_to_file(
        cfg,
        a.listen,
        &a.out,
        a.linger,
        a.idle,
        &stop,
        |p| match p {
            Progress::Received { got, total } => {
                bar.set_total(total);
                bar.set(got);
                bar.label(format!("{}: receiving", a.listen));
            }
            Progress::Complete { intact } => {
                bar.finish_with(if intact {
                    "SHA-256 verified"
                } else {
                    "SHA-256 MISMATCH"
                });
            }
            _ => {}
        },
    );
    let report = report?;
    if a.json {
        println!("{}", serde_json::to_value(&report)?);
    } else {
        let s = &report.stats;
        println!(
            "{} bytes from {} in {:.3} s (first datagram to verified object) -> {} | ignored: duplicates {} out-of-window {} malformed {} auth {} session {} non-member {} inconsistent {}",
            report.bytes,
            report.from.map_or("-".into(), |f| f.to_string()),
            report.transfer.as_secs_f64(),
            if report.intact { a.out.display().to_string() } else { "discarded".into() },
            s.duplicates, s.out_of_window, s.malformed, s.auth_failures, s.wrong_session, s.non_member, s.inconsistent
        );
    }
    if !report.intact {
        bail!("the object failed its SHA-256 check; nothing was kept");
    }
    Ok(())
}

#[cfg(test)]
mod tests {}
