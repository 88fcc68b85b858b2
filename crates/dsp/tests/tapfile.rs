//! Tap-file parsing: the documented format, round trips and every error.

use proptest::prelude::*;
use radiohost_dsp::channel::{parse_tap_file, write_tap_file, TapFileError};
use radiohost_dsp::MimoTaps;
use radiohost_iq::Cf32;

const EXAMPLE: &str = r#"{
  "radiohost_taps": 1,
  "inputs": 2, "outputs": 2,
  "sample_rate": 100e6,
  "description": "two-ray 2x2",
  "paths": [
    { "input": 0, "output": 0, "taps": [[1.0, 0.0], [0.0, 0.0], [0.25, -0.1]] },
    { "input": 1, "output": 0, "sparse": [
        { "delay": 3, "re": 0.5, "im": 0.0 },
        { "delay": 5, "gain_db": -6.0206, "phase_deg": 90.0 } ] }
  ]
}"#;

#[test]
fn documented_example_parses() {
    let f = parse_tap_file(EXAMPLE).unwrap();
    assert_eq!(f.sample_rate, Some(100e6));
    assert_eq!(f.description.as_deref(), Some("two-ray 2x2"));
    let t = &f.taps;
    assert_eq!((t.inputs(), t.outputs()), (2, 2));
    assert_eq!(t.max_len(), 6);
    assert_eq!(t.path(0, 0)[2], Cf32::new(0.25, -0.1));
    assert_eq!(t.path(0, 1)[3], Cf32::new(0.5, 0.0));
    let g = t.path(0, 1)[5];
    assert!((g - Cf32::new(0.0, 0.5)).norm() < 1e-4, "{g}");
    assert!(t
        .path(1, 0)
        .iter()
        .chain(t.path(1, 1))
        .all(|v| *v == Cf32::new(0.0, 0.0)));
}

#[test]
fn siso_defaults() {
    let f = parse_tap_file(
        r#"{"radiohost_taps": 1, "paths": [{"input": 0, "output": 0, "taps": [[0.5, 0.5]]}]}"#,
    )
    .unwrap();
    assert_eq!(f.taps, MimoTaps::siso(vec![Cf32::new(0.5, 0.5)]).unwrap());
}

fn err(text: &str) -> TapFileError {
    parse_tap_file(text).unwrap_err()
}

#[test]
fn errors_are_specific() {
    assert!(matches!(err("{"), TapFileError::Json(_)));
    assert!(matches!(err("[]"), TapFileError::Json(_)));
    assert!(
        matches!(err(r#"{"radiohost_taps": 1}"#), TapFileError::Json(m) if m.contains("paths"))
    );
    assert!(matches!(
        err(r#"{"radiohost_taps": 1, "paths": [], "tapz": 1}"#),
        TapFileError::Json(m) if m.contains("tapz")
    ));
    assert_eq!(
        err(r#"{"radiohost_taps": 2, "paths": []}"#),
        TapFileError::Version(2)
    );
    assert_eq!(
        err(r#"{"radiohost_taps": 1, "inputs": 0, "paths": []}"#),
        TapFileError::Ports {
            inputs: 0,
            outputs: 1
        }
    );
    assert_eq!(
        err(r#"{"radiohost_taps": 1, "outputs": 65, "paths": []}"#),
        TapFileError::Ports {
            inputs: 1,
            outputs: 65
        }
    );
    assert!(matches!(
        err(r#"{"radiohost_taps": 1, "paths": [{"input": 1, "output": 0, "taps": []}]}"#),
        TapFileError::PortOutOfRange {
            index: 0,
            input: 1,
            ..
        }
    ));
    assert!(matches!(
        err(
            r#"{"radiohost_taps": 1, "paths": [{"input": 0, "output": 0, "taps": []},
            {"input": 0, "output": 0, "taps": []}]}"#
        ),
        TapFileError::DuplicatePath { index: 1, .. }
    ));
    assert_eq!(
        err(r#"{"radiohost_taps": 1, "paths": [{"input": 0, "output": 0}]}"#),
        TapFileError::TapForm {
            index: 0,
            what: "neither"
        }
    );
    assert_eq!(
        err(
            r#"{"radiohost_taps": 1, "paths": [{"input": 0, "output": 0, "taps": [], "sparse": []}]}"#
        ),
        TapFileError::TapForm {
            index: 0,
            what: "both"
        }
    );
    assert!(matches!(
        err(r#"{"radiohost_taps": 1, "paths": [{"input": 0, "output": 0, "taps": [[1e39, 0]]}]}"#),
        TapFileError::BadTap {
            index: 0,
            tap: 0,
            ..
        }
    ));
    assert!(matches!(
        err(
            r#"{"radiohost_taps": 1, "paths": [{"input": 0, "output": 0, "sparse": [{"delay": 1}]}]}"#
        ),
        TapFileError::BadTap {
            index: 0,
            tap: 0,
            ..
        }
    ));
    assert!(matches!(
        err(
            r#"{"radiohost_taps": 1, "paths": [{"input": 0, "output": 0, "sparse": [{"delay": 1, "re": 1, "gain_db": 0}]}]}"#
        ),
        TapFileError::BadTap { .. }
    ));
    assert_eq!(
        err(
            r#"{"radiohost_taps": 1, "paths": [{"input": 0, "output": 0, "sparse": [{"delay": 2, "re": 1}, {"delay": 2, "im": 1}]}]}"#
        ),
        TapFileError::DuplicateDelay { index: 0, delay: 2 }
    );
    assert!(matches!(
        err(
            r#"{"radiohost_taps": 1, "paths": [{"input": 0, "output": 0, "sparse": [{"delay": 18446744073709551615, "re": 1}]}]}"#
        ),
        TapFileError::TooLong { index: 0, .. }
    ));
    assert!(matches!(
        err(
            r#"{"radiohost_taps": 1, "paths": [{"input": 0, "output": 0, "sparse": [{"delay": -1, "re": 1}]}]}"#
        ),
        TapFileError::Json(_)
    ));
}

proptest! {
    #[test]
    fn write_then_parse_is_identity(
        inputs in 1usize..4,
        outputs in 1usize..4,
        len in 1usize..20,
        seed in any::<u32>(),
    ) {
        let paths: Vec<Vec<Cf32>> = (0..inputs * outputs)
            .map(|p| (0..len).map(|i| {
                let v = (seed as f32 + (p * 31 + i) as f32).sin();
                Cf32::new(v, -v * 0.5)
            }).collect())
            .collect();
        let taps = MimoTaps::from_paths(inputs, outputs, paths).unwrap();
        let text = write_tap_file(&taps, Some(1e6), Some("round trip"));
        let back = parse_tap_file(&text).unwrap();
        prop_assert_eq!(back.taps, taps);
        prop_assert_eq!(back.sample_rate, Some(1e6));
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        let _ = parse_tap_file(&text);
    }
}
