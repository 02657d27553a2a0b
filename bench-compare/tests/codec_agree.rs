//! The `codec` bin's comparison code on a few operations: our codec and
//! serde_amqp must decode every measured frame (and each other's encoder
//! output) to the fixture's values, every case must run, and the check
//! must notice a frame that reads differently. Then the bin itself, with
//! tiny trials: its JSON must say both agreed and carry every case.

use std::process::Command;

use bytes::BytesMut;
use ramqp_bench_compare::codec_compare::agree::{self, expected_transfer};
use ramqp_bench_compare::codec_compare::cases::{CaseId, Inputs};
use ramqp_bench_compare::codec_compare::{ours, theirs};

#[test]
fn both_codecs_read_every_frame_the_same() {
    let encodings = agree::check_all(3).expect("both codecs agree on every frame");
    assert_eq!(encodings.len(), 3, "two transfer sizes and the disposition");
    for e in &encodings {
        assert!(e.ours_bytes > 0 && e.serde_amqp_bytes > 0, "{e:?}");
    }
}

#[test]
fn a_frame_that_reads_differently_is_caught() {
    let inputs = Inputs::new(256).expect("inputs");
    // "acme" -> "acmf": still a valid frame, but not the fixture's values.
    let mut frame = inputs.transfer_frame.to_vec();
    let at = frame
        .windows(4)
        .position(|w| w == b"acme")
        .expect("the tenant value is in the frame");
    frame[at + 3] = b'f';
    let err = agree::check_transfer_frame(&frame, &expected_transfer(256))
        .expect_err("a changed application property must not pass");
    assert!(err.to_string().contains("not the fixture"), "{err:#}");
    // And the two sides' readings of two different frames differ, which is
    // what the agreement check compares.
    let ours = ours::full(&ours::decode_full(&mut BytesMut::from(&frame[..])).expect("decodes"));
    let theirs = theirs::full(
        &theirs::decode_full(&mut BytesMut::from(&inputs.transfer_frame[..])).expect("decodes"),
    );
    assert_ne!(ours.expect("ours"), theirs.expect("theirs"));
}

#[test]
fn every_case_has_a_name_that_parses_back() {
    let all = CaseId::all();
    assert_eq!(all.len(), 20);
    for id in all {
        assert_eq!(CaseId::parse(&id.name()), Some(id));
    }
}

#[test]
fn the_bin_reports_every_case_after_the_check() {
    let output = Command::new(env!("CARGO_BIN_EXE_codec"))
        .args(["--iterations", "32", "--trials", "2", "--warmup", "8"])
        .output()
        .expect("run the codec bin");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "codec bin failed: {stderr}");
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON object on stdout");
    assert_eq!(json["agree"], true);
    let results = json["results"].as_array().expect("results");
    assert_eq!(results.len(), 20, "{stderr}");
    for r in results {
        assert!(
            r["ns_per_op"]["median"].as_f64().unwrap_or(0.0) > 0.0,
            "{r}"
        );
    }
    assert_eq!(json["comparison"].as_array().map(Vec::len), Some(10));
}
