//! Round trips, checks and error messages of the SigMF module.

use super::*;
use std::fs;

#[test]
fn cf32_roundtrip_keeps_meta_and_samples() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("capture");
    let samples: Vec<Cf32> = (0..64)
        .map(|i| Cf32::new(i as f32, -(i as f32) / 3.0))
        .collect();
    let meta = Meta::new(DataType::Cf32Le, 1e6)
        .num_channels(2)
        .description("test")
        .capture(0, Some(2.4e9))
        .annotation(Annotation {
            sample_start: 4,
            sample_count: Some(8),
            label: Some("burst".into()),
            ..Default::default()
        });
    write_cf32(&base, &meta, &samples).unwrap();
    let rec = read(&base.with_extension("sigmf-meta")).unwrap();
    let data = fs::read(data_path(&base)).unwrap();
    assert_eq!(rec.meta.global.sha512, Some(sha512_hex(&data)));
    let mut without_hash = rec.meta.clone();
    without_hash.global.sha512 = None;
    assert_eq!(without_hash, meta);
    assert_eq!(rec.samples, Samples::Cf32(samples.clone()));
    assert_eq!(rec.channel_cf32(1)[3], samples[7]);
    // The file is plain SigMF JSON other tools read.
    let text = fs::read_to_string(meta_path(&base)).unwrap();
    assert!(text.contains("\"core:datatype\": \"cf32_le\""));
    assert!(text.contains("\"core:sample_start\": 4"));
}

#[test]
fn ci16_roundtrip_and_foreign_fields_survive() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("warp");
    let samples: Vec<Ci16> = (0..10).map(|i| Ci16::new(i * 100, -i)).collect();
    write_ci16(&base, &Meta::new(DataType::Ci16Le, 40e6), &samples).unwrap();
    let mut json: Value = serde_json::from_slice(&fs::read(meta_path(&base)).unwrap()).unwrap();
    json["global"]["antenna:gain"] = Value::from(3.5);
    fs::write(meta_path(&base), serde_json::to_vec(&json).unwrap()).unwrap();
    let rec = read(&base).unwrap();
    assert_eq!(rec.samples, Samples::Ci16(samples));
    assert_eq!(rec.meta.global.extra["antenna:gain"], Value::from(3.5));
}

#[test]
fn truncated_data_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("t");
    write_ci16(
        &base,
        &Meta::new(DataType::Ci16Le, 1.0),
        &[Ci16::new(1, 2); 4],
    )
    .unwrap();
    let data = data_path(&base);
    let mut bytes = fs::read(&data).unwrap();
    bytes.pop();
    fs::write(&data, bytes).unwrap();
    let err = read(&base).unwrap_err().to_string();
    assert!(
        err.contains("15 bytes") && err.contains("truncated"),
        "{err}"
    );
}

#[test]
fn writers_compute_their_own_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("h");
    let mut meta = Meta::new(DataType::Cf32Le, 1.0);
    meta.global.sha512 = Some("00".repeat(64)); // e.g. copied from an input
    write_cf32(&base, &meta, &[Cf32::new(0.5, -0.5); 3]).unwrap();
    let rec = read(&base).unwrap();
    assert_eq!(
        rec.meta.global.sha512.as_deref(),
        Some(sha512_hex(&fs::read(data_path(&base)).unwrap()).as_str())
    );
    assert_ne!(rec.meta.global.sha512, meta.global.sha512);
}

#[test]
fn checksum_mismatch_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("c");
    write_ci16(
        &base,
        &Meta::new(DataType::Ci16Le, 1.0),
        &[Ci16::new(1, 2); 4],
    )
    .unwrap();
    let data = data_path(&base);
    let mut bytes = fs::read(&data).unwrap();
    bytes[0] ^= 1;
    fs::write(&data, bytes).unwrap();
    let err = read(&base).unwrap_err();
    assert!(matches!(err, SigMfError::ChecksumMismatch { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("c.sigmf-data") && text.contains("core:sha512"),
        "{text}"
    );
}

#[test]
fn empty_and_short_data_are_errors_with_the_expected_size() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("e");
    let meta = Meta::new(DataType::Cf32Le, 1.0).num_channels(2);
    // Writing an empty recording is allowed (it is valid SigMF); reading it is not.
    write_cf32(&base, &meta, &[]).unwrap();
    let err = read(&base).unwrap_err();
    assert!(matches!(err, SigMfError::Empty { .. }), "{err}");
    assert!(
        err.to_string().contains("e.sigmf-data") && err.to_string().contains("16 bytes"),
        "{err}"
    );

    // Annotations claim 10 samples; the data holds 4 (checksum removed so the
    // size check is what fails).
    let meta = Meta::new(DataType::Ci16Le, 1.0).annotation(Annotation {
        sample_start: 2,
        sample_count: Some(8),
        ..Default::default()
    });
    let long: Vec<Ci16> = (0..10).map(|i| Ci16::new(i, i)).collect();
    write_ci16(&base, &meta, &long).unwrap();
    let mut m: Value = serde_json::from_slice(&fs::read(meta_path(&base)).unwrap()).unwrap();
    m["global"].as_object_mut().unwrap().remove("core:sha512");
    fs::write(meta_path(&base), serde_json::to_vec(&m).unwrap()).unwrap();
    let data = data_path(&base);
    let bytes = fs::read(&data).unwrap();
    fs::write(&data, &bytes[..16]).unwrap();
    let err = read(&base).unwrap_err();
    assert!(
        matches!(
            err,
            SigMfError::TooShort {
                samples: 4,
                expected_samples: 10,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("40 bytes"), "{err}");

    // A capture beyond the data is refused by the writer.
    let meta = Meta::new(DataType::Ci16Le, 1.0).capture(202_000, None);
    let err = write_ci16(&base, &meta, &long).unwrap_err();
    assert!(err.to_string().contains("core:global_index"), "{err}");
}

#[test]
fn own_namespace_is_declared() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("x");
    let mut meta = Meta::new(DataType::Cf32Le, 1.0);
    write_cf32(&base, &meta, &[Cf32::new(0.0, 0.0)]).unwrap();
    assert!(!read(&base)
        .unwrap()
        .meta
        .global
        .extra
        .contains_key("core:extensions"));
    meta.global
        .extra
        .insert("radiohost:inputs".into(), 2.into());
    write_cf32(&base, &meta, &[Cf32::new(0.0, 0.0)]).unwrap();
    write_cf32(&base, &read(&base).unwrap().meta, &[Cf32::new(0.0, 0.0)]).unwrap();
    let ext = &read(&base).unwrap().meta.global.extra["core:extensions"];
    assert_eq!(
        ext.as_array().map(Vec::len),
        Some(1),
        "declared once: {ext}"
    );
    assert_eq!(ext[0]["name"], "radiohost");
    assert_eq!(ext[0]["optional"], true);
}

#[test]
fn global_index_round_trips_and_captures_are_sorted() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("g");
    let mut meta = Meta::new(DataType::Ci16Le, 1.0);
    meta.captures = vec![
        Capture {
            sample_start: 3,
            global_index: Some(1_000),
            ..Default::default()
        },
        Capture {
            sample_start: 0,
            global_index: Some(202_000),
            ..Default::default()
        },
    ];
    write_ci16(&base, &meta, &[Ci16::new(0, 0); 5]).unwrap();
    let rec = read(&base).unwrap();
    let starts: Vec<(u64, Option<u64>)> = rec
        .meta
        .captures
        .iter()
        .map(|c| (c.sample_start, c.global_index))
        .collect();
    assert_eq!(starts, vec![(0, Some(202_000)), (3, Some(1_000))]);
    let text = fs::read_to_string(meta_path(&base)).unwrap();
    assert!(text.contains("\"core:global_index\": 202000"), "{text}");
}

#[test]
fn bad_metadata_names_the_problem() {
    let p = Path::new("x.sigmf-meta");
    let e = parse_meta(
        br#"{"global":{"core:datatype":"cf32_le","core:version":"1.2.0","core:num_channels":0}}"#,
        p,
    )
    .unwrap_err();
    assert!(e.to_string().contains("num_channels"), "{e}");
    let e = parse_meta(
        br#"{"global":{"core:datatype":"cf32_le","core:version":"1.2.0"},"captures":[{"core:sample_start":0,"core:header_bytes":32}]}"#,
        p,
    )
    .unwrap_err();
    assert!(e.to_string().contains("non-conforming"), "{e}");
    let e = parse_meta(b"{not json", p).unwrap_err();
    assert!(e.to_string().contains("not valid SigMF"), "{e}");
    let e = write_cf32(
        Path::new("/nonexistent/x"),
        &Meta::new(DataType::Ci16Le, 1.0),
        &[],
    )
    .unwrap_err();
    assert!(matches!(e, SigMfError::WrongWriter { .. }));
}

#[test]
fn big_endian_and_ci8_decode() {
    let be = [0x3f, 0x80, 0, 0, 0xbf, 0x80, 0, 0];
    assert_eq!(
        decode_data(DataType::Cf32Be, &be),
        Samples::Cf32(vec![Cf32::new(1.0, -1.0)])
    );
    assert_eq!(
        decode_data(DataType::Ci8, &[1, 0xff]),
        Samples::Ci16(vec![Ci16::new(256, -256)])
    );
}
