//! Datasets of variable-length feature sequences (FSDD's MFCC frames, Japanese Vowels' LPC
//! cepstra) and their batches for the GRU classifier: right-padded with zeros to the longest
//! sequence of the batch, with each sequence's length (the classifier reads each at its last
//! valid step).
//!
//! Both loaders return their items **interleaved by class** (the first item of every class,
//! then the second of every class, ...; within a class in a fixed order: FSDD by speaker and
//! take, Japanese Vowels in file order), so that `--train-limit N` keeps every class. The files
//! themselves list one class after another.

use super::fsdd::Fsdd;
use super::mfcc::MfccConfig;
use super::ts::TsFile;
use super::{Batch, Inputs};
use crate::error::{Error, Result};
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::InMemDataset;
use burn::prelude::*;
use std::path::Path;

/// FSDD's archive name in `../shared/datasets/`.
pub const FSDD_ARCHIVE: &str = "fsdd-recordings.tar.gz";
/// Features per FSDD frame: 13 MFCCs, Δ and ΔΔ.
pub const FSDD_FEATURES: usize = 39;
/// Japanese Vowels' LPC cepstra per frame.
pub const JV_FEATURES: usize = 12;
/// Japanese Vowels' speakers.
pub const JV_CLASSES: usize = 9;
/// Japanese Vowels' file names in its directory.
pub const JV_FILES: [&str; 2] = ["JapaneseVowels_TRAIN.ts", "JapaneseVowels_TEST.ts"];

/// One labelled sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct SequenceItem {
    /// Frames, `features` values each.
    pub frames: Vec<Vec<f32>>,
    /// Class index.
    pub label: usize,
}

/// A split of a sequence dataset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SequenceSplit {
    /// The items, interleaved by class.
    pub items: Vec<SequenceItem>,
}

impl SequenceSplit {
    /// The split of `items`, interleaved by class (see the module docs).
    pub fn interleaved(items: Vec<SequenceItem>) -> Self {
        let mut rank = std::collections::HashMap::new();
        let mut keyed: Vec<((usize, usize), SequenceItem)> = items
            .into_iter()
            .map(|it| {
                let r = rank.entry(it.label).or_insert(0usize);
                *r += 1;
                ((*r, it.label), it)
            })
            .collect();
        keyed.sort_by_key(|(k, _)| *k);
        Self {
            items: keyed.into_iter().map(|(_, it)| it).collect(),
        }
    }
    /// Number of items.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// Whether it has no item.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// The first `n` items.
    pub fn truncate(mut self, n: usize) -> Self {
        self.items.truncate(n);
        self
    }
    /// The items as a Burn dataset.
    pub fn dataset(self) -> InMemDataset<SequenceItem> {
        InMemDataset::new(self.items)
    }
}

/// The most frames a sequence may have unless told otherwise (`--max-frames`): 10 s of FSDD's
/// 10 ms frames; FSDD's longest recording has about 230, Japanese Vowels' 29. One step's time
/// and memory grow with the longest sequence of its batch.
pub const DEFAULT_MAX_FRAMES: usize = 1000;

/// The error for a sequence of `frames` frames, past `max`: `what` names it.
fn too_long(what: String, frames: usize, max: usize) -> String {
    format!(
        "{what} has {frames} frames, more than the {max} a sequence may have (--max-frames; \
         one step's time and memory grow with the longest sequence of its batch)"
    )
}

/// FSDD's training and test splits (official: takes 0–4 test) from its archive; a recording of
/// more than `max_frames` MFCC frames is an error naming it.
pub fn load_fsdd(archive: &Path, max_frames: usize) -> Result<(SequenceSplit, SequenceSplit)> {
    let data = Fsdd::read(archive, &MfccConfig::default())?;
    if let Some(u) = data
        .train
        .iter()
        .chain(&data.test)
        .find(|u| u.frames.len() > max_frames)
    {
        let name = format!("recording {}_{}_{}.wav", u.digit, u.speaker, u.take);
        return Err(Error::malformed(
            archive,
            too_long(name, u.frames.len(), max_frames),
        ));
    }
    let split = |mut set: Vec<super::fsdd::Utterance>| {
        set.sort_by(|a, b| (&a.speaker, a.take, a.digit).cmp(&(&b.speaker, b.take, b.digit)));
        SequenceSplit::interleaved(
            set.into_iter()
                .map(|u| SequenceItem {
                    frames: u.frames,
                    label: u.digit,
                })
                .collect(),
        )
    };
    Ok((split(data.train), split(data.test)))
}

/// Japanese Vowels' training and test splits from the directory of its two `.ts` files, each
/// checked to hold 12-value frames and the 9 speakers' labels. Each of the 12 channels is
/// standardised with the mean and standard deviation of the training split's frames (the LPC
/// cepstra have scales from about 2 down to 0.1; the test split is scaled with the training
/// split's figures, never its own).
pub fn load_japanese_vowels(
    dir: &Path,
    max_frames: usize,
) -> Result<(SequenceSplit, SequenceSplit)> {
    let (mut train, mut test) = read_japanese_vowels(dir, max_frames)?;
    let (mean, std) = channel_stats(&train);
    for split in [&mut train, &mut test] {
        for item in &mut split.items {
            for frame in &mut item.frames {
                for ((v, m), s) in frame.iter_mut().zip(&mean).zip(&std) {
                    *v = (*v - m) / s;
                }
            }
        }
    }
    Ok((train, test))
}

/// Per channel, the mean and standard deviation (1 where it is 0) of every frame of `split`.
pub fn channel_stats(split: &SequenceSplit) -> (Vec<f32>, Vec<f32>) {
    let channels = split
        .items
        .first()
        .and_then(|it| it.frames.first())
        .map_or(0, Vec::len);
    let (mut sum, mut sq, mut n) = (vec![0f64; channels], vec![0f64; channels], 0usize);
    for frame in split.items.iter().flat_map(|it| &it.frames) {
        for (c, &v) in frame.iter().enumerate() {
            sum[c] += f64::from(v);
            sq[c] += f64::from(v) * f64::from(v);
        }
        n += 1;
    }
    let n = n.max(1) as f64;
    let mean: Vec<f64> = sum.iter().map(|s| s / n).collect();
    let std = sq
        .iter()
        .zip(&mean)
        .map(|(q, m)| {
            let s = (q / n - m * m).max(0.0).sqrt();
            if s > 0.0 { s as f32 } else { 1.0 }
        })
        .collect();
    (mean.into_iter().map(|m| m as f32).collect(), std)
}

fn read_japanese_vowels(dir: &Path, max_frames: usize) -> Result<(SequenceSplit, SequenceSplit)> {
    let read = |name: &str| -> Result<SequenceSplit> {
        let path = dir.join(name);
        if !path.is_file() {
            return Err(Error::Invalid(format!(
                "--data-dir {}: no {name} in it (Japanese Vowels is read from {} and {})",
                dir.display(),
                JV_FILES[0],
                JV_FILES[1]
            )));
        }
        let file = TsFile::read(&path)?;
        if file.channels != JV_FEATURES || file.classes.len() != JV_CLASSES {
            return Err(Error::malformed(
                &path,
                format!(
                    "{} channels and {} classes; Japanese Vowels has {JV_FEATURES} and \
                     {JV_CLASSES}",
                    file.channels,
                    file.classes.len()
                ),
            ));
        }
        if let Some((i, s)) = file
            .series
            .iter()
            .enumerate()
            .find(|(_, s)| s.frames.len() > max_frames)
        {
            return Err(Error::malformed(
                &path,
                too_long(format!("series {}", i + 1), s.frames.len(), max_frames),
            ));
        }
        Ok(SequenceSplit::interleaved(
            file.series
                .into_iter()
                .map(|s| SequenceItem {
                    frames: s.frames,
                    label: s.label,
                })
                .collect(),
        ))
    };
    Ok((read(JV_FILES[0])?, read(JV_FILES[1])?))
}

/// The batch of `items` (frames of `features` values each, and a label) on `device`.
///
/// # Panics
/// If `items` is empty, a sequence has no frame, or a frame does not have `features` values.
pub fn batch<B: Backend>(
    items: &[(&[Vec<f32>], usize)],
    features: usize,
    device: &B::Device,
) -> Batch<B> {
    assert!(!items.is_empty(), "a batch needs at least one sequence");
    let steps = items.iter().map(|(f, _)| f.len()).max().unwrap_or(0);
    assert!(
        items.iter().all(|(f, _)| !f.is_empty()),
        "a sequence needs at least one frame"
    );
    let mut values = vec![0f32; items.len() * steps * features];
    for (b, (frames, _)) in items.iter().enumerate() {
        for (t, frame) in frames.iter().enumerate() {
            assert_eq!(frame.len(), features, "every frame has {features} features");
            let at = (b * steps + t) * features;
            values[at..at + features].copy_from_slice(frame);
        }
    }
    let labels: Vec<i64> = items.iter().map(|&(_, l)| l as i64).collect();
    Batch {
        inputs: Inputs::Sequences {
            frames: Tensor::from_data(
                TensorData::new(values, [items.len(), steps, features]),
                device,
            ),
            lengths: items.iter().map(|(f, _)| f.len()).collect(),
        },
        targets: Tensor::from_ints(labels.as_slice(), device),
    }
}

/// Batches [`SequenceItem`]s of `features` values per frame ([`batch`]).
#[derive(Clone, Copy, Debug)]
pub struct SequenceBatcher {
    /// Values per frame.
    pub features: usize,
}

impl<B: Backend> Batcher<B, SequenceItem, Batch<B>> for SequenceBatcher {
    fn batch(&self, items: Vec<SequenceItem>, device: &B::Device) -> Batch<B> {
        let refs: Vec<(&[Vec<f32>], usize)> = items
            .iter()
            .map(|it| (it.frames.as_slice(), it.label))
            .collect();
        batch(&refs, self.features, device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    #[test]
    fn sequences_are_right_padded_with_their_lengths() {
        let a = vec![vec![1.0, 2.0], vec![3.0, 4.0], vec![5.0, 6.0]];
        let b = vec![vec![7.0, 8.0]];
        let batch = batch::<NdArray>(&[(&a, 4), (&b, 1)], 2, &Default::default());
        let (frames, lengths) = batch.inputs.sequences();
        assert_eq!(frames.dims(), [2, 3, 2]);
        assert_eq!(lengths, [3, 1]);
        let v = frames.into_data().to_vec::<f32>().unwrap();
        assert_eq!(
            v,
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 0.0, 0.0, 0.0, 0.0]
        );
        let t = batch.targets.into_data().to_vec::<i64>().unwrap();
        assert_eq!(t, [4, 1]);
    }

    #[test]
    fn splits_interleave_their_classes() {
        let item = |label: usize, v: f32| SequenceItem {
            frames: vec![vec![v]],
            label,
        };
        let split = SequenceSplit::interleaved(vec![
            item(0, 1.0),
            item(0, 2.0),
            item(0, 3.0),
            item(1, 4.0),
            item(2, 5.0),
            item(2, 6.0),
        ]);
        let order: Vec<(usize, f32)> = split
            .items
            .iter()
            .map(|it| (it.label, it.frames[0][0]))
            .collect();
        assert_eq!(
            order,
            [(0, 1.0), (1, 4.0), (2, 5.0), (0, 2.0), (2, 6.0), (0, 3.0)]
        );
        assert_eq!(split.truncate(3).len(), 3);
    }

    #[test]
    fn japanese_vowels_needs_both_files_of_the_right_shape() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_japanese_vowels(dir.path(), DEFAULT_MAX_FRAMES)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no JapaneseVowels_TRAIN.ts"), "{err}");
        let real = include_str!("fixtures/japanese_vowels_9.ts");
        std::fs::write(dir.path().join(JV_FILES[0]), real).unwrap();
        let err = load_japanese_vowels(dir.path(), DEFAULT_MAX_FRAMES)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no JapaneseVowels_TEST.ts"), "{err}");
        std::fs::write(dir.path().join(JV_FILES[1]), real).unwrap();
        let (train, test) = load_japanese_vowels(dir.path(), DEFAULT_MAX_FRAMES).unwrap();
        assert_eq!((train.len(), test.len()), (9, 9));
        // a file of other series: 2 channels
        let other = "@dimensions 2\n@classLabel true a b\n@data\n1,2:3,4:a\n";
        std::fs::write(dir.path().join(JV_FILES[1]), other).unwrap();
        let err = load_japanese_vowels(dir.path(), DEFAULT_MAX_FRAMES)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("JapaneseVowels_TEST.ts") && err.contains("2 channels and 2 classes"),
            "{err}"
        );
        // a series past the cap is named by its place in the file
        std::fs::write(dir.path().join(JV_FILES[1]), real).unwrap();
        let err = load_japanese_vowels(dir.path(), 6).unwrap_err().to_string();
        assert!(
            err.contains("JapaneseVowels_TRAIN.ts: series 1 has")
                && err.contains("more than the 6 a sequence may have (--max-frames"),
            "{err}"
        );
    }

    #[test]
    fn channels_are_standardised_with_the_training_figures() {
        let item = |frames: Vec<Vec<f32>>| SequenceItem { frames, label: 0 };
        let split = SequenceSplit {
            items: vec![item(vec![vec![1.0, 5.0], vec![3.0, 5.0]])],
        };
        let (mean, std) = channel_stats(&split);
        assert_eq!(mean, [2.0, 5.0]);
        // a constant channel keeps its scale
        assert_eq!(std, [1.0, 1.0]);
        let dir = tempfile::tempdir().unwrap();
        let real = include_str!("fixtures/japanese_vowels_9.ts");
        for f in JV_FILES {
            std::fs::write(dir.path().join(f), real).unwrap();
        }
        let (train, _) = load_japanese_vowels(dir.path(), DEFAULT_MAX_FRAMES).unwrap();
        let (mean, std) = channel_stats(&train);
        for (m, s) in mean.iter().zip(&std) {
            assert!(m.abs() < 1e-4 && (s - 1.0).abs() < 1e-3, "{m} {s}");
        }
    }

    #[test]
    #[should_panic(expected = "every frame has 2 features")]
    fn a_frame_of_the_wrong_width_is_refused() {
        let a = vec![vec![1.0, 2.0], vec![3.0]];
        batch::<NdArray>(&[(&a, 0)], 2, &Default::default());
    }

    #[test]
    #[should_panic(expected = "at least one sequence")]
    fn an_empty_batch_is_refused() {
        batch::<NdArray>(&[], 2, &Default::default());
    }

    #[test]
    #[should_panic(expected = "at least one frame")]
    fn an_empty_sequence_is_refused() {
        let a: Vec<Vec<f32>> = vec![];
        batch::<NdArray>(&[(&a, 0)], 2, &Default::default());
    }
}
