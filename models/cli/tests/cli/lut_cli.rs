//! `ember lut` and `--multiplier` against faults: table and figure writes that fail leave
//! nothing behind, damaged `.lut` tables are refused, `inspect` names the built-in a table
//! equals, and the help lists the names the parser accepts.

use crate::common::{ember, ember_file_limited, fails_with, ok, s, scratch};
use std::path::Path;

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `text` with every run of whitespace (clap's line wrapping) as one space.
fn one_line(text: &[u8]) -> String {
    String::from_utf8_lossy(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn writes_past_a_file_size_limit_leave_nothing_and_can_be_retried() {
    let dir = scratch("lut-fsize");
    std::fs::create_dir_all(&dir).unwrap();
    // MBM_7.bin is 16 KiB, its error heat map some KiB: both larger than one block (≤ 1 KiB).
    let table = dir.join("MBM_7.bin");
    let png = dir.join("err.png");
    let limited = [
        ["lut", "generate", "mbm7", "--out", s(&table)],
        ["lut", "inspect", "mbm3", "--plot", s(&png)],
    ];
    for args in limited {
        let out = ember_file_limited(1, &args);
        fails_with(&out, "cannot write");
        fails_with(&out, args[4]);
        assert_eq!(listing(&dir), Vec::<String>::new(), "{args:?} left files");
    }

    // Nothing blocks the retry without the limit.
    ok(&ember(&["lut", "generate", "mbm7", "--out", s(&table)]));
    assert_eq!(std::fs::metadata(&table).unwrap().len(), 1 << 14);
    ok(&ember(&["lut", "inspect", "mbm3", "--plot", s(&png)]));
    assert_eq!(&std::fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(listing(&dir), ["MBM_7.bin", "err.png"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn damaged_lut_files_are_refused_as_corrupt() {
    let dir = scratch("lut-crc");
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.lut");
    ok(&ember(&["lut", "generate", "mbm5", "--out", s(&good)]));
    let bytes = std::fs::read(&good).unwrap();
    let text = ok(&ember(&["lut", "inspect", s(&good)]));
    assert!(
        text.contains("table MBM: m = 5"),
        "a good table reads back: {text}"
    );

    // One entry's low bit flipped is still a well-formed table: only the checksum catches it.
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 1;
    let flipped_path = dir.join("flipped.lut");
    std::fs::write(&flipped_path, &flipped).unwrap();
    let truncated_path = dir.join("truncated.lut");
    std::fs::write(&truncated_path, &bytes[..bytes.len() - 100]).unwrap();
    for bad in [&flipped_path, &truncated_path] {
        let out = ember(&["lut", "inspect", s(bad)]);
        fails_with(&out, "corrupt table");
        fails_with(&out, s(bad));
        fails_with(
            &ember(&["train", "--epochs", "1", "--multiplier", s(bad)]),
            "corrupt table",
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn inspect_names_the_built_in_multiplier_a_table_equals() {
    let dir = scratch("lut-match");
    std::fs::create_dir_all(&dir).unwrap();
    let mbm = dir.join("MBM_7.bin");
    ok(&ember(&["lut", "generate", "mbm7", "--out", s(&mbm)]));
    let lut = dir.join("mbm7.lut");
    ok(&ember(&["lut", "convert", s(&mbm), s(&lut)]));
    for table in [&mbm, &lut] {
        let text = ok(&ember(&["lut", "inspect", s(table)]));
        assert!(text.contains("equals built-in mbm7\n"), "{text}");
    }

    // 2^14 random bytes are a valid m = 7 table (carry bit 7, mantissa bits 0..7).
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let random: Vec<u8> = (0..1 << 14)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect();
    let mine = dir.join("MINE_7.bin");
    std::fs::write(&mine, random).unwrap();
    let text = ok(&ember(&["lut", "inspect", s(&mine)]));
    assert!(text.contains("equals no built-in multiplier\n"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_and_unknown_multiplier_error_list_the_same_names() {
    let list = one_line(burn_approx_mul::BUILT_IN_HELP.as_bytes());
    for command in ["train", "eval"] {
        let help = one_line(ok(&ember(&[command, "--help"])).as_bytes());
        assert!(
            help.contains(&list),
            "`ember {command} --help` lacks {list:?}: {help}"
        );
    }
    let out = ember(&["train", "--multiplier", "bogus"]);
    fails_with(&out, "unknown multiplier `bogus`");
    let error = one_line(&out.stderr);
    assert!(error.contains(&list), "the error lacks {list:?}: {error}");
}
