//! The kernel's CPU list format (`0-3,5,8-11`), as found in
//! `/sys/devices/system/cpu/{online,isolated,nohz_full}`, kernel parameters
//! (`isolcpus=`, `nohz_full=`, `rcu_nocbs=`) and the CLI's `--cpu` flag.

use thiserror::Error;

use crate::sys::MAX_CPUS;

/// Why a CPU list did not parse.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CpuListError {
    /// A piece was not `N` or `N-M`.
    #[error("`{0}` is not a CPU number or range (expected e.g. `1`, `2-3` or `0-3,6`)")]
    BadItem(String),
    /// A range ran backwards.
    #[error("CPU range `{0}` runs backwards (write low-high)")]
    Backwards(String),
    /// A CPU index beyond what Linux can address.
    #[error("CPU {0} is beyond the largest CPU index Linux supports ({max})", max = MAX_CPUS - 1)]
    TooLarge(u64),
}

/// Parses a CPU list into ascending, de-duplicated CPU indices.
/// An empty string is an empty list (sysfs writes that when nothing is isolated).
pub fn parse(text: &str) -> Result<Vec<usize>, CpuListError> {
    let mut present = vec![false; MAX_CPUS];
    for item in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        // The `N-M:group/stride` form of isolcpus: honour the stride.
        let (range, stride) = match item.split_once(':') {
            Some((range, spec)) => {
                let stride = spec
                    .split_once('/')
                    .map(|(_, s)| s)
                    .and_then(|s| s.parse::<usize>().ok())
                    .filter(|&s| s > 0)
                    .ok_or_else(|| CpuListError::BadItem(item.to_string()))?;
                (range, stride)
            }
            None => (item, 1),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (number(a, item)?, number(b, item)?),
            None => {
                let n = number(range, item)?;
                (n, n)
            }
        };
        if hi < lo {
            return Err(CpuListError::Backwards(item.to_string()));
        }
        for cpu in (lo..=hi).step_by(stride) {
            present[cpu] = true;
        }
    }
    Ok((0..MAX_CPUS).filter(|&c| present[c]).collect())
}

fn number(text: &str, item: &str) -> Result<usize, CpuListError> {
    let n: u64 = text
        .trim()
        .parse()
        .map_err(|_| CpuListError::BadItem(item.to_string()))?;
    if n >= MAX_CPUS as u64 {
        return Err(CpuListError::TooLarge(n));
    }
    Ok(n as usize)
}

/// Formats CPU indices back into the compact list form (`0-3,5`).
pub fn format(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_kernel_forms() {
        assert_eq!(parse("").unwrap(), Vec::<usize>::new());
        assert_eq!(parse("0-3,5\n").unwrap(), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse("5,1,1").unwrap(), vec![1, 5]);
        assert_eq!(parse("0-7:2/4").unwrap(), vec![0, 4]);
        assert_eq!(parse("3-1"), Err(CpuListError::Backwards("3-1".into())));
        assert!(matches!(parse("a"), Err(CpuListError::BadItem(_))));
        assert!(matches!(parse("1-"), Err(CpuListError::BadItem(_))));
        assert!(matches!(
            parse("0-99999999999"),
            Err(CpuListError::TooLarge(_))
        ));
        assert!(matches!(parse("0-7:2/0"), Err(CpuListError::BadItem(_))));
    }

    proptest! {
        #[test]
        fn format_then_parse_is_identity(cpus in proptest::collection::btree_set(0usize..MAX_CPUS, 0..40)) {
            let cpus: Vec<usize> = cpus.into_iter().collect();
            prop_assert_eq!(parse(&format(&cpus)).unwrap(), cpus);
        }

        #[test]
        fn never_panics(text in "[0-9,:/ -]{0,30}") {
            let _ = parse(&text);
        }
    }
}
