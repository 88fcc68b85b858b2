//! Stage 5: PMT delivers each user's decoded payload to N receivers over
//! unequal lossy links (pmt's simulated network, virtual time), and every
//! receiver checks SHA-256 against the user's ORIGINAL payload.

use std::sync::Arc;
use std::time::Duration;

use radiohost_pmt::sim::PmtSim;
use radiohost_pmt::{ReceiverConfig, SenderConfig};
use radiohost_testbed::link::LinkConfig;

use crate::report::{sha256_hex, sha256_parts, Delivery, StageReport};
use crate::DemoError;

/// Link of receiver `i` when none is given: fast/clean to slow/lossy, repeating
/// with longer delays for more than three receivers.
pub fn default_link(i: usize) -> String {
    const RATES: [&str; 3] = ["1Mbit", "500kbit", "250kbit"];
    const LOSS: [&str; 3] = ["1%", "5%", "20%"];
    const DELAY_MS: [u64; 3] = [5, 20, 40];
    let round = (i / 3) as u64;
    format!(
        "{},{},delay={}ms",
        RATES[i % 3],
        LOSS[i % 3],
        DELAY_MS[i % 3] + 10 * round
    )
}

/// Virtual-time limit per delivery: far beyond any floor the defaults produce.
const LIMIT: Duration = Duration::from_secs(3600);

pub struct DeliveryOutput {
    pub deliveries: Vec<Delivery>,
}

/// `decoded[user]`: the bytes the station decoded for that user;
/// `original[user]`: what the user sent.
pub fn run(
    decoded: &[Vec<u8>],
    original: &[Vec<u8>],
    links: &[String],
    seed: u64,
    report: &mut StageReport,
) -> Result<DeliveryOutput, DemoError> {
    report.input = format!(
        "{} users' decoded payloads ({} bytes)",
        decoded.len(),
        decoded.iter().map(Vec::len).sum::<usize>()
    );
    report.input_digest = sha256_parts(decoded.iter().map(Vec::as_slice));
    let parsed = links
        .iter()
        .map(|s| {
            LinkConfig::parse(s).map_err(|e| DemoError::Config(format!("receiver link {s:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut deliveries = Vec::new();
    let mut held: Vec<Vec<Vec<u8>>> = vec![Vec::new(); links.len()];
    let (mut data_sent, mut retransmitted) = (0u64, 0u64);
    for (user, bytes) in decoded.iter().enumerate() {
        let object: Arc<[u8]> = bytes.clone().into();
        let mut sim = PmtSim::with_object(
            object,
            &parsed,
            seed.wrapping_add(user as u64),
            SenderConfig::default(),
            ReceiverConfig::default(),
        )?;
        sim.run(LIMIT);
        let out = sim.outcome();
        if let Some(s) = &out.sender_stats {
            data_sent += s.data_sent;
            retransmitted += s.retransmits;
        }
        let want = sha256_hex(&original[user]);
        for (r, outcome) in out.receivers.iter().enumerate() {
            let got = &sim.got[r];
            let sha = sha256_hex(got);
            deliveries.push(Delivery {
                user,
                receiver: r,
                link: links[r].clone(),
                bytes: got.len() as u64,
                seconds: outcome.seconds,
                floor_seconds: outcome.floor_seconds,
                verified: sha == want,
                sha256: sha,
            });
            held[r].push(got.clone());
        }
    }
    let verified = deliveries.iter().filter(|d| d.verified).count();
    report.output = format!(
        "{} receivers hold {} payloads; {}/{} match the users' SHA-256",
        links.len(),
        deliveries.len(),
        verified,
        deliveries.len()
    );
    // Every receiver holds the same bytes when delivery is exact; the stage's
    // output digest is receiver 0's, and each receiver's is checked against it.
    let per_receiver: Vec<String> = held
        .iter()
        .map(|h| sha256_parts(h.iter().map(Vec::as_slice)))
        .collect();
    report.output_digest = per_receiver.first().cloned().unwrap_or_default();
    for (r, d) in per_receiver.iter().enumerate() {
        report.check(*d == report.output_digest, || {
            format!("receiver {r} holds different bytes from receiver 0")
        });
    }
    for d in deliveries.iter().filter(|d| !d.verified) {
        report.check(false, || {
            format!(
                "receiver {} ({}) got {} bytes of user {} whose SHA-256 differs from the user's payload",
                d.receiver, d.link, d.bytes, d.user
            )
        });
    }
    let slowest = deliveries
        .iter()
        .filter_map(|d| d.seconds)
        .fold(0.0f64, f64::max);
    report.count("receivers", links.len() as f64, "");
    report.count("verified", verified as f64, "delivery");
    report.count("data_segments_sent", data_sent as f64, "segment");
    report.count("retransmissions", retransmitted as f64, "segment");
    report.count("slowest_virtual_s", slowest, "s");
    Ok(DeliveryOutput { deliveries })
}
