//! The sktime/aeon `.ts` text format of multivariate time series with class labels, as UCI's
//! Japanese Vowels ships in `../shared/datasets/japanese-vowels/` (`JapaneseVowels_TRAIN.ts`,
//! 270 utterances; `JapaneseVowels_TEST.ts`, 370): 12 LPC cepstrum channels per frame, 7 to 29
//! frames, the speaker (9 classes) as the label. The task is **speaker identification**.
//!
//! A file is `#` comments, `@key value` header lines ending with `@data`, then one series per
//! line: the channels separated by `:`, each a comma-separated run of values over time, and the
//! class label last. Every channel of a series has the same length (`@equalLength false` only
//! says that series differ from each other).

use crate::error::{Error, Result};
use std::path::Path;

/// One labelled multivariate series.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Frames, each `channels` values: `frames[t][c]`.
    pub frames: Vec<Vec<f32>>,
    /// Class index, `0..classes` (the file's label's position in `@classLabel`).
    pub label: usize,
}

/// A `.ts` file's series and header.
#[derive(Clone, Debug, PartialEq)]
pub struct TsFile {
    /// Channels per frame (`@dimensions`).
    pub channels: usize,
    /// The class labels in the header's order.
    pub classes: Vec<String>,
    /// The series, in file order.
    pub series: Vec<Series>,
}

impl TsFile {
    /// Reads and checks a `.ts` file.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::parse(&text).map_err(|reason| Error::malformed(path, reason))
    }

    /// Parses a `.ts` file's text; the error says which line is wrong and how.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let mut channels = None;
        let mut classes: Option<Vec<String>> = None;
        let mut data = false;
        let mut series = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let n = n + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if !data {
                let lower = line.to_ascii_lowercase();
                let mut words = lower.split_whitespace();
                match words.next() {
                    Some("@dimensions") => {
                        let d: usize = words
                            .next()
                            .and_then(|w| w.parse().ok())
                            .filter(|&d| d > 0)
                            .ok_or(format!("line {n}: @dimensions needs a positive number"))?;
                        channels = Some(d);
                    }
                    Some("@classlabel") => {
                        if words.next() != Some("true") {
                            return Err(format!(
                                "line {n}: the series carry no class label (@classLabel false)"
                            ));
                        }
                        // the labels as written (case kept)
                        let labels: Vec<String> =
                            line.split_whitespace().skip(2).map(String::from).collect();
                        if labels.is_empty() {
                            return Err(format!("line {n}: @classLabel true lists no label"));
                        }
                        classes = Some(labels);
                    }
                    Some("@data") => data = true,
                    Some(w) if w.starts_with('@') => {}
                    _ => return Err(format!("line {n}: expected a header line before @data")),
                }
                continue;
            }
            let (channels, classes) = match (channels, &classes) {
                (Some(c), Some(l)) => (c, l),
                _ => {
                    return Err("the header lacks @dimensions or @classLabel before @data".into());
                }
            };
            let fields: Vec<&str> = line.split(':').collect();
            if fields.len() != channels + 1 {
                return Err(format!(
                    "line {n}: {} channels and a label, expected {channels} channels",
                    fields.len() - 1
                ));
            }
            let label = fields[channels].trim();
            let label = classes.iter().position(|c| c == label).ok_or(format!(
                "line {n}: label {label:?} is not one of @classLabel's"
            ))?;
            let mut runs = Vec::with_capacity(channels);
            for (c, field) in fields[..channels].iter().enumerate() {
                let run: Vec<f32> = field
                    .split(',')
                    .map(|v| {
                        v.trim()
                            .parse::<f32>()
                            .ok()
                            .filter(|x| x.is_finite())
                            .ok_or(format!(
                                "line {n}, channel {}: {:?} is not a finite number",
                                c + 1,
                                v.trim()
                            ))
                    })
                    .collect::<std::result::Result<_, _>>()?;
                runs.push(run);
            }
            let len = runs[0].len();
            if let Some(c) = runs.iter().position(|r| r.len() != len) {
                return Err(format!(
                    "line {n}: channel {} has {} frames, channel 1 has {len}",
                    c + 1,
                    runs[c].len()
                ));
            }
            let frames = (0..len)
                .map(|t| runs.iter().map(|r| r[t]).collect())
                .collect();
            series.push(Series { frames, label });
        }
        let (Some(channels), Some(classes)) = (channels, classes) else {
            return Err("no @dimensions or @classLabel header".into());
        };
        if series.is_empty() {
            return Err("no series after @data".into());
        }
        Ok(Self {
            channels,
            classes,
            series,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "# a comment\n@problemName Tiny\n@dimensions 2\n@equalLength false\n\
        @classLabel true 1 2 3\n@data\n1,2,3:4,5,6:2\n0.5,1.5:-1,-2:3\n";

    #[test]
    fn series_parse_frame_by_frame() {
        let f = TsFile::parse(SMALL).unwrap();
        assert_eq!(f.channels, 2);
        assert_eq!(f.classes, ["1", "2", "3"]);
        assert_eq!(f.series.len(), 2);
        assert_eq!(f.series[0].frames, [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]);
        assert_eq!(f.series[0].label, 1);
        assert_eq!(f.series[1].frames, [[0.5, -1.0], [1.5, -2.0]]);
        assert_eq!(f.series[1].label, 2);
    }

    #[test]
    fn malformed_files_name_the_line_and_the_fault() {
        let head = "@dimensions 2\n@classLabel true a b\n@data\n";
        for (body, says) in [
            ("1,2:3,4\n", "1 channels and a label"),
            ("1,2:3,4:c\n", "label \"c\""),
            ("1,x:3,4:a\n", "\"x\" is not a finite number"),
            ("1,NaN:3,4:a\n", "\"NaN\" is not a finite number"),
            ("1,2,3:3,4:a\n", "channel 2 has 2 frames"),
            ("", "no series"),
        ] {
            let e = TsFile::parse(&format!("{head}{body}")).unwrap_err();
            assert!(e.contains(says), "{body:?}: {e}");
        }
        for (text, says) in [
            ("@data\n1:2\n", "lacks @dimensions"),
            ("@dimensions 0\n", "positive number"),
            ("@classLabel false\n", "no class label"),
            ("@classLabel true\n", "lists no label"),
            ("garbage\n", "expected a header line"),
            ("", "no @dimensions"),
        ] {
            let e = TsFile::parse(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let e = TsFile::read(Path::new("/nonexistent/x.ts")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.ts"), "{e}");
    }

    /// The real file's header and its first utterance of each of the 9 speakers
    /// (`../shared/datasets/japanese-vowels/JapaneseVowels_TRAIN.ts`, UCI, CC BY 4.0).
    const REAL: &str = include_str!("fixtures/japanese_vowels_9.ts");

    #[test]
    fn the_real_japanese_vowels_format_reads_as_documented() {
        let f = TsFile::parse(REAL).unwrap();
        assert_eq!((f.channels, f.classes.len(), f.series.len()), (12, 9, 9));
        let labels: Vec<usize> = f.series.iter().map(|s| s.label).collect();
        assert_eq!(labels, (0..9).collect::<Vec<_>>());
        for s in &f.series {
            assert!(
                (7..=29).contains(&s.frames.len()),
                "{} frames",
                s.frames.len()
            );
            assert!(s.frames.iter().all(|f| f.len() == 12));
        }
        // the first value of the file: channel 1, frame 1 of the first utterance
        assert_eq!(f.series[0].frames[0][0], 1.860936);
    }
}
