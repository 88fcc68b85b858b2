//! The CPU list parser (sysfs files, kernel parameters, `--cpu`) never
//! panics, and whatever it accepts formats and parses back to itself.
#![no_main]
use libfuzzer_sys::fuzz_target;
use radiohost_rt::cpulist;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cpus) = cpulist::parse(text) {
        assert!(
            cpus.windows(2).all(|w| w[0] < w[1]),
            "not ascending: {cpus:?}"
        );
        assert_eq!(cpulist::parse(&cpulist::format(&cpus)).as_ref(), Ok(&cpus));
    }
});
