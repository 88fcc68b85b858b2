//! Runs the README's examples as written: every `sh` block under "## Using it",
//! line by line in one bash per block (so `&` jobs and files made by earlier
//! lines are there for later ones), from a scratch copy of the repository's
//! inputs, with this build's `radiohost` first on PATH. Each line must exit 0
//! within 30 s. Lines that cannot finish in 30 s here, or need what this
//! machine may lack, are in `EXCLUDED` with the reason; the test fails if an
//! exclusion no longer matches a README line, so the list stays honest.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_radiohost");
const PER_LINE: Duration = Duration::from_secs(30);

/// README lines left out (matched by prefix), and why.
const EXCLUDED: &[(&str, &str)] = &[
    ("radiohost warp bench", "takes about 64 s"),
    (
        "radiohost chdr passthrough",
        "serves a CHDR radio until Ctrl-C; `chdr emulate` is the radio",
    ),
    (
        "radiohost chanemu run",
        "live real-time emulation: passes or fails by whether this machine keeps up (issue 16 item 5)",
    ),
    (
        "cargo run --release -q -p radiohost-iq --example sigmf_tool",
        "builds an example; the test writes the same recording with the debug build",
    ),
    ("radiohost chanemu bench", "about a minute, and GNU Radio for its baseline"),
    ("radiohost rt bench", "needs cyclictest; about 45 s"),
    ("radiohost relay run --compare", "about 90 s (16 runs)"),
    ("radiohost phy bench", "benchmark: over 30 s"),
    (
        "radiohost station run --config 16x4",
        "misses its deadlines on 2 cores and exits 1 by design (--max-miss; RunReport::check_misses has its tests)",
    ),
    (
        "radiohost station run --config 8x2",
        "UDP radio units at 2 x 1000 frames/s miss their deadlines on 2 cores and exit 1 by design",
    ),
    ("radiohost station bench", "about 94 s"),
    ("radiohost station simulate", "about 38 s"),
    ("radiohost gpu compile", "needs NVRTC (CUDA)"),
    (
        "radiohost pmt compare --size 1MB --links \"1Mbit,1%;250kbit,20%\" --runs 5\n",
        "kernel TCP in real time: over 10 minutes, and root",
    ),
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `sh` blocks after "## Using it" up to the next "## " heading.
fn example_blocks(readme: &str) -> Vec<Vec<String>> {
    let start = readme
        .find("## Using it")
        .expect("README has a Using it section");
    let rest = &readme[start + 3..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in section.lines() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```sh") => current = Some(Vec::new()),
            (Some(_), l) if l.starts_with("```") => blocks.push(current.take().unwrap()),
            (Some(b), l) if !l.is_empty() && !l.starts_with('#') => b.push(line.to_string()),
            _ => {}
        }
    }
    blocks
}

fn excluded(line: &str) -> Option<&'static str> {
    let with_end = format!("{line}\n");
    EXCLUDED
        .iter()
        .find(|(prefix, _)| with_end.starts_with(prefix))
        .map(|(_, why)| *why)
}

#[test]
fn every_readme_example_runs_as_written() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let blocks = example_blocks(&readme);
    assert!(blocks.len() >= 5, "found {} example blocks", blocks.len());
    let all: Vec<&String> = blocks.iter().flatten().collect();
    for (prefix, _) in EXCLUDED {
        assert!(
            all.iter().any(|l| format!("{l}\n").starts_with(prefix)),
            "exclusion {prefix:?} matches no README line: remove it"
        );
    }
    if std::env::var_os("RADIOHOST_SKIP_README_EXAMPLES").is_some() {
        println!("SKIPPED: RADIOHOST_SKIP_README_EXAMPLES is set");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The examples' inputs, at the paths the README names.
    let configs = dir.path().join("crates/phy/configs");
    std::fs::create_dir_all(&configs).unwrap();
    for f in std::fs::read_dir(repo_root().join("crates/phy/configs")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, configs.join(f.file_name().unwrap())).unwrap();
    }
    write_sigmf_recording(dir.path());
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut failures = Vec::new();
    let mut ran = 0;
    for block in &blocks {
        let mut script = String::from("set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n");
        for line in block {
            match excluded(line) {
                Some(why) => eprintln!("SKIPPED: {line}  ({why})"),
                None => {
                    ran += 1;
                    script.push_str(&format!("echo \"+ {}\" >&2\n", line.replace('"', "\\\"")));
                    script.push_str(line);
                    script.push('\n');
                }
            }
        }
        let runnable = block.iter().filter(|l| excluded(l).is_none()).count();
        let started = Instant::now();
        let out = Command::new("timeout")
            .arg(format!("{}", PER_LINE.as_secs() * runnable.max(1) as u64))
            .args(["bash", "-c", &script])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env_remove("RUST_BACKTRACE")
            .output()
            .expect("bash runs");
        let took = started.elapsed();
        if !out.status.success() {
            failures.push(format!(
                "block starting {:?} failed ({:?}, {took:.1?}):\n{}",
                block.first(),
                out.status.code(),
                tail(&String::from_utf8_lossy(&out.stderr), 2000)
            ));
        }
    }
    assert!(ran > 10, "ran only {ran} README lines");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `rec.sigmf-meta`/`-data` as `sigmf_tool write rec cf32 1 100000` makes them
/// (the README's command; here through the library so no example is built).
fn write_sigmf_recording(dir: &Path) {
    use radiohost_iq::sigmf::{self, DataType, Meta};
    use radiohost_iq::Cf32;
    let pattern = |i: i32, k: i32| (((k * i) % 200) - 100) as f32 / 128.0;
    let samples: Vec<Cf32> = (0..100_000)
        .map(|i| Cf32::new(pattern(i, 7), pattern(i, 3)))
        .collect();
    let meta = Meta::new(DataType::Cf32Le, 1e6).num_channels(1);
    sigmf::write_cf32(&dir.join("rec"), &meta, &samples).expect("writing rec.sigmf-*");
}

fn tail(s: &str, n: usize) -> &str {
    let cut = s.len().saturating_sub(n);
    let cut = (cut..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    &s[cut..]
}
