//! The datasets a run trains and evaluates on: their splits, loaded once, and the seeded
//! order of the training items in each epoch.

use crate::error::{EmberError, Result};
use ember_models::data::cifar::{self, CifarBatcher};
use ember_models::data::folder::{self, FolderBatcher};
use ember_models::data::mnist::{self, MnistBatcher};
use ember_models::data::sequence::{self, SequenceBatcher, SequenceSplit};
use ember_models::data::{DataSource, DataSpec};

/// The loaded splits of a dataset: training (when asked for) and test.
pub(crate) enum Splits {
    Mnist(Option<mnist::MnistSplit>, mnist::MnistSplit),
    Cifar10(Option<cifar::CifarSplit>, cifar::CifarSplit),
    /// FSDD or Japanese Vowels, with the values per frame.
    Sequences(Option<SequenceSplit>, SequenceSplit, usize),
    /// An ImageFolder's images, listed (decoded batch by batch).
    Folder(Option<folder::FolderSplit>, folder::FolderSplit),
}

/// A batcher whose items may fail to load when batched (an ImageFolder's files are decoded
/// then): checked after every training batch and after every evaluation.
pub(crate) trait Fallible {
    /// The first item that failed since the last call, as an error naming it.
    fn failure(&self) -> Option<EmberError> {
        None
    }
}

impl Fallible for MnistBatcher {}
impl Fallible for CifarBatcher {}
impl Fallible for SequenceBatcher {}

impl Fallible for FolderBatcher {
    fn failure(&self) -> Option<EmberError> {
        FolderBatcher::failure(self).map(Into::into)
    }
}

impl Splits {
    pub(crate) fn load(
        source: &DataSource,
        with_train: bool,
        train_limit: Option<usize>,
        test_limit: Option<usize>,
        max_frames: usize,
    ) -> Result<Self> {
        let empty = |train: usize, test: usize| {
            if (with_train && train == 0) || test == 0 {
                Err(EmberError::Invalid(format!(
                    "{source} has no training or no test {}",
                    source.spec().noun()
                )))
            } else {
                Ok(())
            }
        };
        Ok(match source {
            DataSource::Mnist(src) => {
                let train = with_train
                    .then(|| mnist::load(src, true))
                    .transpose()?
                    .map(|s| s.truncate(train_limit.unwrap_or(usize::MAX)));
                let test = mnist::load(src, false)?;
                let test = test.truncate(test_limit.unwrap_or(usize::MAX));
                empty(train.as_ref().map_or(0, |s| s.len()), test.len())?;
                Self::Mnist(train, test)
            }
            DataSource::Cifar10(src) => {
                let train = with_train
                    .then(|| cifar::load(src, true))
                    .transpose()?
                    .map(|s| s.truncate(train_limit.unwrap_or(usize::MAX)));
                let test = cifar::load(src, false)?;
                let test = test.truncate(test_limit.unwrap_or(usize::MAX));
                empty(train.as_ref().map_or(0, |s| s.len()), test.len())?;
                Self::Cifar10(train, test)
            }
            DataSource::ImagenetFolder(src) => {
                let train = with_train
                    .then(|| folder::load_train(src))
                    .transpose()?
                    .map(|s| s.truncate(train_limit.unwrap_or(usize::MAX)));
                let test = folder::load(src)?.truncate(test_limit.unwrap_or(usize::MAX));
                Self::Folder(train, test)
            }
            DataSource::Fsdd(_) | DataSource::JapaneseVowels(_) => {
                let (train, test) = match source {
                    DataSource::Fsdd(archive) => sequence::load_fsdd(archive, max_frames)?,
                    DataSource::JapaneseVowels(dir) => {
                        sequence::load_japanese_vowels(dir, max_frames)?
                    }
                    _ => unreachable!("matched above"),
                };
                let train = with_train.then(|| train.truncate(train_limit.unwrap_or(usize::MAX)));
                let test = test.truncate(test_limit.unwrap_or(usize::MAX));
                empty(train.as_ref().map_or(0, |s| s.len()), test.len())?;
                let DataSpec::Sequences { features, .. } = source.spec() else {
                    unreachable!("a sequence dataset")
                };
                Self::Sequences(train, test, features)
            }
        })
    }
}

/// The order of the training items in `epoch`: a permutation seeded by the run's seed and the
/// epoch alone, so a resumed run sees the batches an uninterrupted one would.
pub(crate) fn epoch_order(n: usize, seed: u64, epoch: usize) -> Vec<usize> {
    use rand::SeedableRng;
    use rand::seq::SliceRandom;
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(
        seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    order.shuffle(&mut rng);
    order
}
