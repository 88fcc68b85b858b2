use super::*;
use proptest::prelude::*;

#[test]
fn rates_keep_their_existing_spellings() {
    assert_eq!(parse_rate("1G").unwrap(), 1e9);
    assert_eq!(parse_rate("250kbit").unwrap(), 250e3);
    assert_eq!(parse_rate("1Mbit/s").unwrap(), 1e6);
    assert_eq!(parse_rate("10Gbit/s").unwrap(), 10e9);
    assert_eq!(parse_rate("10Gbps").unwrap(), 10e9);
    assert_eq!(parse_rate("500bit/s").unwrap(), 500.0);
    assert_eq!(parse_rate("1.5e3 kbit/s").unwrap(), 1.5e6);
    assert_eq!(parse_rate("inf").unwrap(), f64::INFINITY);
    assert_eq!(parse_rate("Unlimited").unwrap(), f64::INFINITY);
}

#[test]
fn rates_refuse_bare_numbers_zero_and_unknown_units() {
    let bare = parse_rate("1000").unwrap_err();
    assert_eq!(bare.problem, UnitProblem::MissingUnit("1000".into()));
    assert!(bare.to_string().contains("1000bit/s"), "{bare}");
    assert_eq!(parse_rate("0bit/s").unwrap_err().problem, UnitProblem::Zero);
    assert!(matches!(
        parse_rate("3Tbit").unwrap_err().problem,
        UnitProblem::UnknownUnit(_)
    ));
    assert!(matches!(
        parse_rate("1ms").unwrap_err().problem,
        UnitProblem::UnknownUnit(_)
    ));
    assert_eq!(
        parse_rate("fast").unwrap_err().problem,
        UnitProblem::NotANumber
    );
    assert_eq!(
        parse_rate("-1G").unwrap_err().problem,
        UnitProblem::Negative
    );
    assert_eq!(
        parse_rate("1e999G").unwrap_err().problem,
        UnitProblem::TooLarge
    );
}

#[test]
fn durations_in_every_unit() {
    assert_eq!(parse_duration("10ms").unwrap(), Duration::from_millis(10));
    assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
    assert_eq!(parse_duration("250µs").unwrap(), Duration::from_micros(250));
    assert_eq!(parse_duration("7ns").unwrap(), Duration::from_nanos(7));
    assert_eq!(parse_duration("2 s").unwrap(), Duration::from_secs(2));
    assert_eq!(parse_duration("1.5min").unwrap(), Duration::from_secs(90));
    assert_eq!(
        parse_duration("2.5ms").unwrap(),
        Duration::from_micros(2500)
    );
    assert_eq!(parse_duration("1e-3s").unwrap(), Duration::from_millis(1));
    assert_eq!(
        parse_duration("0.0000015ms").unwrap(),
        Duration::from_nanos(2)
    );
    assert_eq!(parse_duration("0ms").unwrap(), Duration::ZERO);
    assert_eq!(parse_time("1.5ms").unwrap(), Time::from_us(1500));
}

#[test]
fn duration_errors_name_the_units_and_an_example() {
    let bare = parse_duration("2").unwrap_err();
    assert_eq!(
        bare.to_string(),
        "\"2\" is missing its unit: write 2s, 2ms or 2us (duration units: ns, us (or µs), ms, s, min)"
    );
    for bad in ["-1s", "1h", "x", "", "nan", "1.5m", "ms", "1e30s", "0.1ns"] {
        let e = parse_duration(bad).unwrap_err();
        assert!(e.to_string().contains("duration"), "{bad}: {e}");
    }
    assert_eq!(
        parse_duration("-1s").unwrap_err().problem,
        UnitProblem::Negative
    );
    assert_eq!(
        parse_duration("1e30s").unwrap_err().problem,
        UnitProblem::TooLarge
    );
    assert_eq!(
        parse_duration("0.1ns").unwrap_err().problem,
        UnitProblem::BelowResolution
    );
    assert_eq!(
        parse_positive_duration("0s").unwrap_err().problem,
        UnitProblem::Zero
    );
    assert_eq!(parse_duration("").unwrap_err().problem, UnitProblem::Empty);
}

#[test]
fn sizes_are_exact_bytes() {
    assert_eq!(parse_size("64KiB").unwrap(), 65536);
    assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
    assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
    assert_eq!(parse_size("1500B").unwrap(), 1500);
    assert_eq!(parse_size("0B").unwrap(), 0);
    assert_eq!(
        parse_size("1.1KiB").unwrap_err().problem,
        UnitProblem::NotWholeBytes
    );
    assert_eq!(
        parse_size("1500").unwrap_err().problem,
        UnitProblem::MissingUnit("1500".into())
    );
    assert!(matches!(
        parse_size("1 parsec").unwrap_err().problem,
        UnitProblem::UnknownUnit(_)
    ));
    assert_eq!(
        parse_size("1e40GiB").unwrap_err().problem,
        UnitProblem::TooLarge
    );
}

#[test]
fn frequencies_and_sample_rates() {
    assert_eq!(parse_frequency("2.4GHz").unwrap(), 2.4e9);
    assert_eq!(parse_frequency("100 kHz").unwrap(), 100e3);
    assert_eq!(parse_sample_rate("30.72MS/s").unwrap(), 30.72e6);
    assert_eq!(parse_sample_rate("1Msps").unwrap(), 1e6);
    assert_eq!(parse_sample_rate("10M").unwrap(), 10e6);
    assert_eq!(parse_sample_rate("500S/s").unwrap(), 500.0);
    assert!(parse_frequency("2.4G").is_err());
    assert!(parse_frequency("0Hz").is_err());
    assert!(parse_sample_rate("1000").is_err());
    assert!(parse_sample_rate("1MHz").is_err());
}

#[test]
fn probabilities_as_percentages_or_plain() {
    assert_eq!(parse_probability("1%").unwrap(), 0.01);
    assert_eq!(parse_probability(" 20 % ").unwrap(), 0.2);
    assert_eq!(parse_probability("0.2").unwrap(), 0.2);
    assert_eq!(parse_probability("0%").unwrap(), 0.0);
    assert_eq!(parse_probability("100%").unwrap(), 1.0);
    assert_eq!(parse_probability("1").unwrap(), 1.0);
    let above = parse_probability("101%").unwrap_err();
    assert_eq!(above.problem, UnitProblem::AboveOne);
    assert!(above.to_string().contains("0% to 100%"), "{above}");
    assert_eq!(
        parse_probability("1.5").unwrap_err().problem,
        UnitProblem::AboveOne
    );
    assert_eq!(
        parse_probability("-1%").unwrap_err().problem,
        UnitProblem::Negative
    );
    assert_eq!(
        parse_probability("nan").unwrap_err().problem,
        UnitProblem::NotANumber
    );
    assert_eq!(
        parse_probability("1e999%").unwrap_err().problem,
        UnitProblem::AboveOne
    );
    assert!(matches!(
        parse_probability("5ms").unwrap_err().problem,
        UnitProblem::UnknownUnit(_)
    ));
    assert_eq!(
        parse_probability("").unwrap_err().problem,
        UnitProblem::Empty
    );
}

#[test]
fn formatters_write_what_the_parsers_read() {
    assert_eq!(format_duration(Duration::from_micros(2500)), "2.5ms");
    assert_eq!(format_duration(Duration::ZERO), "0s");
    assert_eq!(
        format_duration(Duration::from_nanos(1_000_000_001)),
        "1.000000001s"
    );
    assert_eq!(format_size(65536), "64KiB");
    assert_eq!(format_size(1500), "1500B");
    assert_eq!(format_rate(10e6), "10Mbit/s");
    assert_eq!(format_sample_rate(30.72e6), "30.72MS/s");
    assert_eq!(format_frequency(2.4e9), "2.4GHz");
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

proptest! {
    #[test]
    fn duration_round_trips(ns in any::<u64>()) {
        let d = Duration::from_nanos(ns);
        prop_assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
    }

    #[test]
    fn size_round_trips(bytes in any::<u64>()) {
        let bytes = bytes as usize;
        prop_assert_eq!(parse_size(&format_size(bytes)).unwrap(), bytes);
    }

    #[test]
    fn rates_round_trip(x in 1e-3f64..1e15) {
        prop_assert!(close(parse_rate(&format_rate(x)).unwrap(), x));
        prop_assert!(close(parse_sample_rate(&format_sample_rate(x)).unwrap(), x));
        prop_assert!(close(parse_frequency(&format_frequency(x)).unwrap(), x));
    }

    #[test]
    fn integer_with_unit_is_exact(n in 0u64..1_000_000, unit in 0usize..4) {
        let (suffix, scale) = [("ns", 1), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)][unit];
        prop_assert_eq!(
            parse_duration(&format!("{n}{suffix}")).unwrap(),
            Duration::from_nanos(n * scale)
        );
    }

    #[test]
    fn no_input_panics(s in "\\PC{0,24}") {
        let _ = parse_duration(&s);
        let _ = parse_positive_duration(&s);
        let _ = parse_time(&s);
        let _ = parse_rate(&s);
        let _ = parse_sample_rate(&s);
        let _ = parse_size(&s);
        let _ = parse_frequency(&s);
    }

    #[test]
    fn numeric_looking_input_never_panics(
        s in "[-+]?[0-9]{0,45}\\.?[0-9]{0,45}([eE][-+]?[0-9]{0,12})? ?(ns|us|ms|s|min|B|KiB|GB|Hz|GHz|G|kbit/s|MS/s|x)?"
    ) {
        let _ = parse_duration(&s);
        let _ = parse_rate(&s);
        let _ = parse_sample_rate(&s);
        let _ = parse_size(&s);
        let _ = parse_frequency(&s);
    }
}
