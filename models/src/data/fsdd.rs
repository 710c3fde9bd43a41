//! The Free Spoken Digit Dataset (`../shared/datasets/fsdd-recordings.tar.gz`, CC BY-SA 4.0):
//! 3000 WAVs, 8 kHz mono 16-bit, 6 speakers × 10 digits × 50 takes, named
//! `<digit>_<speaker>_<take>.wav`. The official split: takes 0–4 are the test set (300), the rest
//! the training set (2700). Each recording becomes a sequence of MFCC frames
//! ([`super::mfcc`]); the label is the digit.
//!
//! The archive is read as it is (gzip, then tar), nothing extracted to disk. A recording that is
//! not 8 kHz mono 16-bit PCM, or a WAV whose name is not `<digit>_<speaker>_<take>.wav`, is an
//! error naming the entry: a silently resampled or skipped file would change the experiment.

use super::mfcc::{MfccConfig, mfcc};
use crate::error::{Error, Result};
use std::io::Read;
use std::path::{Path, PathBuf};

/// One recording's features and label.
#[derive(Clone, Debug, PartialEq)]
pub struct Utterance {
    /// The spoken digit, 0–9 (the class).
    pub digit: usize,
    /// The speaker's name.
    pub speaker: String,
    /// The take, 0–49.
    pub take: u32,
    /// MFCC frames, 39 features each.
    pub frames: Vec<Vec<f32>>,
}

/// The dataset, split.
#[derive(Clone, Debug, Default)]
pub struct Fsdd {
    /// Takes 5 and above.
    pub train: Vec<Utterance>,
    /// Takes 0–4.
    pub test: Vec<Utterance>,
}

/// Takes below this are the test set.
pub const TEST_TAKES: u32 = 5;

/// `(digit, speaker, take)` from a file name `<digit>_<speaker>_<take>.wav`.
pub fn parse_name(name: &str) -> Option<(usize, String, u32)> {
    let stem = name.strip_suffix(".wav")?;
    let mut parts = stem.split('_');
    let digit = parts.next()?.parse::<usize>().ok().filter(|&d| d < 10)?;
    let speaker = parts.next().filter(|s| !s.is_empty())?.to_string();
    let take = parts.next()?.parse::<u32>().ok()?;
    parts.next().is_none().then_some((digit, speaker, take))
}

/// The samples of a WAV file in `[-1, 1)`, checked to be 8 kHz mono 16-bit PCM.
pub fn read_wav(bytes: &[u8]) -> std::result::Result<Vec<f32>, String> {
    let reader = hound::WavReader::new(bytes).map_err(|e| format!("not a WAV file: {e}"))?;
    let spec = reader.spec();
    if spec.sample_rate != 8000
        || spec.channels != 1
        || spec.bits_per_sample != 16
        || spec.sample_format != hound::SampleFormat::Int
    {
        return Err(format!(
            "{} Hz, {} channel(s), {}-bit {:?}: FSDD recordings are 8000 Hz mono 16-bit PCM",
            spec.sample_rate, spec.channels, spec.bits_per_sample, spec.sample_format
        ));
    }
    reader
        .into_samples::<i16>()
        .map(|s| {
            s.map(|v| f32::from(v) / 32768.0)
                .map_err(|e| format!("truncated samples: {e}"))
        })
        .collect()
}

impl Fsdd {
    /// Reads the recordings of a `.tar.gz` archive (any folder inside it), split by take.
    pub fn read(archive: &Path, cfg: &MfccConfig) -> Result<Self> {
        let file = std::fs::File::open(archive).map_err(|e| Error::io(archive, e))?;
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
        let mut data = Self::default();
        let entries = tar.entries().map_err(|e| Error::io(archive, e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| Error::io(archive, e))?;
            let path = entry
                .path()
                .map_err(|e| Error::io(archive, e))?
                .into_owned();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if !name.ends_with(".wav") || name.starts_with('.') {
                continue;
            }
            let inside = || PathBuf::from(format!("{}:{}", archive.display(), path.display()));
            let (digit, speaker, take) = parse_name(name).ok_or_else(|| {
                Error::malformed(
                    inside(),
                    "the name is not <digit>_<speaker>_<take>.wav".to_string(),
                )
            })?;
            let mut bytes = Vec::new();
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io(inside(), e))?;
            let samples = read_wav(&bytes).map_err(|reason| Error::malformed(inside(), reason))?;
            let u = Utterance {
                digit,
                speaker,
                take,
                frames: mfcc(&samples, cfg),
            };
            if take < TEST_TAKES {
                data.test.push(u);
            } else {
                data.train.push(u);
            }
        }
        if data.train.is_empty() && data.test.is_empty() {
            return Err(Error::malformed(
                archive,
                "no <digit>_<speaker>_<take>.wav recording in the archive".to_string(),
            ));
        }
        // the archive's order is not a promise: sort by name's parts
        for set in [&mut data.train, &mut data.test] {
            set.sort_by(|a, b| (a.digit, &a.speaker, a.take).cmp(&(b.digit, &b.speaker, b.take)));
        }
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(rate: u32, channels: u16, bits: u16, samples: usize) -> Vec<u8> {
        let spec = hound::WavSpec {
            channels,
            sample_rate: rate,
            bits_per_sample: bits,
            sample_format: hound::SampleFormat::Int,
        };
        let mut out = std::io::Cursor::new(Vec::new());
        let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
        for n in 0..samples * usize::from(channels) {
            let v = ((n as f64 * 0.3).sin() * 8000.0) as i32;
            if bits == 8 {
                w.write_sample(v as i8 / 64).unwrap();
            } else {
                w.write_sample(v as i16).unwrap();
            }
        }
        w.finalize().unwrap();
        out.into_inner()
    }

    /// A WAV whose data stops 101 bytes before its header says it does.
    fn truncated(mut bytes: Vec<u8>) -> Vec<u8> {
        bytes.truncate(bytes.len() - 101);
        bytes
    }

    /// A `.tar.gz` of `files` (name, bytes) under `recordings/`, in a fresh temporary folder.
    fn archive(files: &[(&str, Vec<u8>)]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fsdd.tar.gz");
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        let mut tar = tar::Builder::new(gz);
        for (name, bytes) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append_data(&mut header, format!("recordings/{name}"), bytes.as_slice())
                .unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap();
        (dir, path)
    }

    #[test]
    fn recordings_split_by_take_into_mfcc_sequences() {
        let good = wav(8000, 1, 16, 4000);
        let (_dir, path) = archive(&[
            ("3_jackson_7.wav", good.clone()),
            ("3_jackson_0.wav", good.clone()),
            ("9_theo_49.wav", wav(8000, 1, 16, 1000)),
            ("README.md", b"not a recording".to_vec()),
        ]);
        let d = Fsdd::read(&path, &MfccConfig::default()).unwrap();
        assert_eq!((d.train.len(), d.test.len()), (2, 1));
        assert_eq!(
            (
                d.train[0].digit,
                d.train[0].speaker.as_str(),
                d.train[0].take
            ),
            (3, "jackson", 7)
        );
        assert_eq!((d.test[0].digit, d.test[0].take), (3, 0));
        // 0.5 s at 8 kHz: 1 + (4000 − 200) / 80 frames of 39 features
        assert_eq!(d.train[0].frames.len(), 48);
        assert!(d.train[0].frames.iter().all(|f| f.len() == 39));
        assert_eq!(d.train[1].frames.len(), 1 + (1000 - 200) / 80);
    }

    #[test]
    fn wrong_recordings_are_refused_naming_the_entry() {
        for (name, bytes, says) in [
            ("1_a_5.wav", wav(16000, 1, 16, 800), "16000 Hz"),
            ("1_a_5.wav", wav(8000, 2, 16, 800), "2 channel(s)"),
            ("1_a_5.wav", wav(8000, 1, 8, 800), "8-bit"),
            ("1_a_5.wav", b"RIFF....garbage".to_vec(), "not a WAV file"),
            (
                "1_a_5.wav",
                truncated(wav(8000, 1, 16, 800)),
                "truncated samples",
            ),
            (
                "one_a_5.wav",
                wav(8000, 1, 16, 800),
                "<digit>_<speaker>_<take>.wav",
            ),
            (
                "1_a.wav",
                wav(8000, 1, 16, 800),
                "<digit>_<speaker>_<take>.wav",
            ),
        ] {
            let (_dir, path) = archive(&[(name, bytes)]);
            let e = Fsdd::read(&path, &MfccConfig::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{name}: {e}");
            assert!(e.contains(&format!("recordings/{name}")), "{name}: {e}");
        }
        let (_dir, path) = archive(&[("notes.txt", b"x".to_vec())]);
        let e = Fsdd::read(&path, &MfccConfig::default()).unwrap_err();
        assert!(
            e.to_string().contains("no <digit>_<speaker>_<take>.wav"),
            "{e}"
        );
        let e = Fsdd::read(
            Path::new("/nonexistent/fsdd.tar.gz"),
            &MfccConfig::default(),
        );
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("/nonexistent/fsdd.tar.gz")
        );
    }

    #[test]
    fn names_parse_strictly() {
        assert_eq!(
            parse_name("0_george_12.wav"),
            Some((0, "george".into(), 12))
        );
        for bad in [
            "10_a_1.wav",
            "1__2.wav",
            "1_a_2.mp3",
            "1_a_2_3.wav",
            "x_a_1.wav",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }

    /// A real FSDD recording (`0_jackson_0.wav`, CC BY-SA 4.0): 8 kHz mono 16-bit, read and
    /// turned into frames.
    #[test]
    fn a_real_recording_reads() {
        let bytes = include_bytes!("fixtures/0_jackson_0.wav");
        let samples = read_wav(bytes).unwrap();
        assert!(samples.len() > 2000, "{} samples", samples.len());
        assert!(
            samples.iter().any(|s| s.abs() > 0.05),
            "speech, not silence"
        );
        let f = mfcc(&samples, &MfccConfig::default());
        assert_eq!(f.len(), 1 + (samples.len() - 200) / 80);
    }
}
