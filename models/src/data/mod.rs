//! Data loaders. Every loader reads local files (nothing is downloaded at run time).

pub mod cifar;
pub mod folder;
pub mod fsdd;
pub mod idx;
pub mod mfcc;
pub mod mnist;
pub mod sequence;
pub mod ts;

use crate::error::{Error, Result};
use burn::prelude::*;
use std::path::PathBuf;

/// A split of a dataset: its items, in order.
#[derive(Clone, Debug)]
pub struct Split<I> {
    items: Vec<I>,
}

impl<I: Clone + Send + Sync> Split<I> {
    /// A split of `items`.
    pub fn new(items: Vec<I>) -> Self {
        Self { items }
    }
    /// The first `n` items.
    pub fn truncate(mut self, n: usize) -> Self {
        self.items.truncate(n);
        self
    }
    /// Number of items.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// Whether the split has no item.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// The items.
    pub fn items(&self) -> &[I] {
        &self.items
    }
    /// As a Burn dataset.
    pub fn dataset(self) -> burn::data::dataset::InMemDataset<I> {
        burn::data::dataset::InMemDataset::new(self.items)
    }
}

/// The entries of `dir`, sorted by path.
pub(crate) fn sorted_entries(dir: &std::path::Path) -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    v.sort();
    Ok(v)
}

/// Whether `path` has an image extension an ImageFolder reads (`.jpg`, `.jpeg`, `.png`, in any
/// case).
pub(crate) fn is_image_file(path: &std::path::Path) -> bool {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    matches!(ext.as_deref(), Some("jpg" | "jpeg" | "png"))
}

/// The items of every class interleaved by class (the first of every class, then the second,
/// …), so that the first N of a split are balanced over classes.
pub(crate) fn interleave<I>(by_class: Vec<Vec<I>>) -> Vec<I> {
    let total: usize = by_class.iter().map(Vec::len).sum();
    let mut classes: Vec<_> = by_class.into_iter().map(Vec::into_iter).collect();
    let mut items = Vec::with_capacity(total);
    while items.len() < total {
        items.extend(classes.iter_mut().filter_map(Iterator::next));
    }
    items
}

/// A batch's inputs: images, or right-padded feature sequences with their lengths.
#[derive(Clone, Debug)]
pub enum Inputs<B: Backend> {
    /// `[batch, channels, side, side]`, normalised per channel.
    Images(Tensor<B, 4>),
    /// `[batch, steps, features]`, right-padded with zeros, and each sequence's valid steps.
    Sequences {
        /// The padded frames.
        frames: Tensor<B, 3>,
        /// Each sequence's number of valid steps (1 ≤ length ≤ steps).
        lengths: Vec<usize>,
    },
}

impl<B: Backend> Inputs<B> {
    /// The images of an image batch.
    ///
    /// # Panics
    /// On a sequence batch: [`ModelKind::accepts`](crate::classifier::ModelKind::accepts)
    /// refuses an image model on a sequence dataset before anything is built.
    pub fn images(self) -> Tensor<B, 4> {
        match self {
            Self::Images(x) => x,
            Self::Sequences { .. } => {
                panic!("an image model was given sequences (ModelKind::accepts refuses this)")
            }
        }
    }

    /// The padded frames and lengths of a sequence batch.
    ///
    /// # Panics
    /// On an image batch (see [`Inputs::images`]).
    pub fn sequences(self) -> (Tensor<B, 3>, Vec<usize>) {
        match self {
            Self::Sequences { frames, lengths } => (frames, lengths),
            Self::Images(_) => {
                panic!("a sequence model was given images (ModelKind::accepts refuses this)")
            }
        }
    }

    /// The number of items in the batch.
    pub fn len(&self) -> usize {
        match self {
            Self::Images(x) => x.dims()[0],
            Self::Sequences { lengths, .. } => lengths.len(),
        }
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A batch of inputs and their labels, whatever the dataset.
#[derive(Clone, Debug)]
pub struct Batch<B: Backend> {
    /// Images or sequences.
    pub inputs: Inputs<B>,
    /// `[batch]` class indices.
    pub targets: Tensor<B, 1, Int>,
}

/// Shape of a dataset's images and number of classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageSpec {
    /// Colour channels.
    pub channels: usize,
    /// Image side in pixels (images are square).
    pub side: usize,
    /// Number of classes.
    pub classes: usize,
}

/// What a dataset's items are: images of a shape, or sequences of feature frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataSpec {
    /// Square images.
    Images(ImageSpec),
    /// Variable-length sequences of `features` values per frame.
    Sequences {
        /// Values per frame.
        features: usize,
        /// Number of classes.
        classes: usize,
    },
}

impl DataSpec {
    /// What its items are called in messages: `images` or `sequences`.
    pub fn noun(&self) -> &'static str {
        match self {
            Self::Images(_) => "images",
            Self::Sequences { .. } => "sequences",
        }
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        match *self {
            Self::Images(s) => s.classes,
            Self::Sequences { classes, .. } => classes,
        }
    }
}

impl std::fmt::Display for DataSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::Images(s) => write!(f, "{}×{}×{} images", s.side, s.side, s.channels),
            Self::Sequences { features, .. } => {
                write!(f, "sequences of {features}-value frames")
            }
        }
    }
}

/// The datasets `ember train` and `ember eval` read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DatasetKind {
    /// MNIST-like idx files (MNIST, Fashion-MNIST); the embedded MNIST subset by default.
    Mnist,
    /// CIFAR-10: an ImageFolder of JPEG/PNG (`train/`, `test/`) or the official binary batches.
    Cifar10,
    /// The Free Spoken Digit Dataset (`fsdd-recordings.tar.gz`): MFCC frames, 10 digits.
    Fsdd,
    /// UCI's Japanese Vowels (`.ts` files): 12 LPC cepstra per frame, 9 speakers.
    JapaneseVowels,
    /// An ImageNet-style ImageFolder (one directory per class, images of any size) seen as
    /// torchvision's ImageNet evaluation transform sees it: 224 × 224 centre crops. Evaluation
    /// only ([`folder`]).
    ImagenetFolder,
}

crate::choices!(DatasetKind {
    Mnist => "mnist",
    Cifar10 => "cifar10",
    Fsdd => "fsdd",
    JapaneseVowels => "japanese-vowels",
    ImagenetFolder => "imagenet-folder",
});

impl DatasetKind {
    /// What its items are. An ImageFolder's classes are its directories: this is ImageNet's
    /// 1000, and [`DataSource::spec`] the folder's own.
    pub fn spec(self) -> DataSpec {
        match self {
            Self::ImagenetFolder => DataSpec::Images(ImageSpec {
                channels: folder::CHANNELS,
                side: folder::SIDE,
                classes: 1000,
            }),
            Self::Mnist => DataSpec::Images(ImageSpec {
                channels: 1,
                side: mnist::SIDE,
                classes: mnist::CLASSES,
            }),
            Self::Cifar10 => DataSpec::Images(ImageSpec {
                channels: cifar::CHANNELS,
                side: cifar::SIDE,
                classes: cifar::CLASSES,
            }),
            Self::Fsdd => DataSpec::Sequences {
                features: sequence::FSDD_FEATURES,
                classes: 10,
            },
            Self::JapaneseVowels => DataSpec::Sequences {
                features: sequence::JV_FEATURES,
                classes: sequence::JV_CLASSES,
            },
        }
    }
}

/// Where a dataset is read from.
#[derive(Clone, Debug, PartialEq)]
pub enum DataSource {
    /// MNIST-like idx files, or the embedded subset.
    Mnist(mnist::MnistSource),
    /// CIFAR-10 files.
    Cifar10(cifar::CifarSource),
    /// FSDD's archive (`fsdd-recordings.tar.gz`).
    Fsdd(PathBuf),
    /// The directory of `JapaneseVowels_TRAIN.ts` and `JapaneseVowels_TEST.ts`.
    JapaneseVowels(PathBuf),
    /// An ImageFolder and its classes.
    ImagenetFolder(folder::FolderSource),
}

impl DataSource {
    /// The source of `kind` in `dir` (`None`: the embedded data, which only MNIST has). FSDD's
    /// `dir` may name the archive itself or a directory holding `fsdd-recordings.tar.gz`.
    pub fn new(kind: DatasetKind, dir: Option<PathBuf>) -> Result<Self> {
        let needs = |what: &str| {
            Error::Invalid(format!(
                "--dataset {kind} needs --data-dir: {what} (nothing is downloaded)"
            ))
        };
        let existing_dir = |dir: PathBuf| {
            if dir.is_dir() {
                Ok(dir)
            } else {
                Err(Error::Invalid(format!(
                    "--data-dir {}: no such directory",
                    dir.display()
                )))
            }
        };
        match (kind, dir) {
            (DatasetKind::Mnist, dir) => Ok(Self::Mnist(
                dir.map_or(mnist::MnistSource::Embedded, mnist::MnistSource::Dir),
            )),
            (DatasetKind::Cifar10, Some(dir)) => Ok(Self::Cifar10(cifar::CifarSource::detect(
                &existing_dir(dir)?,
            ))),
            (DatasetKind::Cifar10, None) => Err(needs(
                "a directory with train/ and test/ image folders (e.g. \
                 ../shared/datasets/cifar10-jpg.tar.gz extracted) or the official binary batches \
                 (data_batch_1.bin … test_batch.bin)",
            )),
            (DatasetKind::Fsdd, Some(path)) => {
                let archive = if path.is_dir() {
                    path.join(sequence::FSDD_ARCHIVE)
                } else {
                    path
                };
                if !archive.is_file() {
                    return Err(Error::Invalid(format!(
                        "--data-dir {}: no such file (FSDD is read from {})",
                        archive.display(),
                        sequence::FSDD_ARCHIVE
                    )));
                }
                Ok(Self::Fsdd(archive))
            }
            (DatasetKind::Fsdd, None) => Err(needs(
                "the archive fsdd-recordings.tar.gz or its directory (e.g. ../shared/datasets)",
            )),
            (DatasetKind::JapaneseVowels, Some(dir)) => {
                Ok(Self::JapaneseVowels(existing_dir(dir)?))
            }
            (DatasetKind::ImagenetFolder, Some(dir)) => Ok(Self::ImagenetFolder(
                folder::FolderSource::detect(&existing_dir(dir)?)?,
            )),
            (DatasetKind::ImagenetFolder, None) => Err(needs(
                "the directory of the class directories (or the directory whose val/ is)",
            )),
            (DatasetKind::JapaneseVowels, None) => Err(needs(
                "the directory of JapaneseVowels_TRAIN.ts and JapaneseVowels_TEST.ts (e.g. \
                 ../shared/datasets/japanese-vowels)",
            )),
        }
    }

    /// Which dataset this is.
    pub fn kind(&self) -> DatasetKind {
        match self {
            Self::Mnist(_) => DatasetKind::Mnist,
            Self::Cifar10(_) => DatasetKind::Cifar10,
            Self::Fsdd(_) => DatasetKind::Fsdd,
            Self::JapaneseVowels(_) => DatasetKind::JapaneseVowels,
            Self::ImagenetFolder(_) => DatasetKind::ImagenetFolder,
        }
    }

    /// What its items are (an ImageFolder's classes are its directories).
    pub fn spec(&self) -> DataSpec {
        match self {
            Self::ImagenetFolder(f) => DataSpec::Images(ImageSpec {
                channels: folder::CHANNELS,
                side: folder::SIDE,
                classes: f.classes.len(),
            }),
            _ => self.kind().spec(),
        }
    }
}

impl std::fmt::Display for DataSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Mnist(s) => s.fmt(f),
            Self::Cifar10(s) => s.fmt(f),
            Self::ImagenetFolder(s) => s.fmt(f),
            Self::Fsdd(p) | Self::JapaneseVowels(p) => p.display().fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cifar_needs_an_existing_directory() {
        let err = DataSource::new(DatasetKind::Cifar10, None).unwrap_err();
        assert!(err.to_string().contains("needs --data-dir"), "{err}");
        let err =
            DataSource::new(DatasetKind::Cifar10, Some("/nonexistent/cifar".into())).unwrap_err();
        assert!(err.to_string().contains("no such directory"), "{err}");
        let mnist = DataSource::new(DatasetKind::Mnist, None).unwrap();
        assert_eq!(mnist.kind(), DatasetKind::Mnist);
        assert!(matches!(
            mnist.spec(),
            DataSpec::Images(ImageSpec { side: 28, .. })
        ));
    }

    #[test]
    fn sequence_datasets_need_their_files() {
        for kind in [DatasetKind::Fsdd, DatasetKind::JapaneseVowels] {
            let err = DataSource::new(kind, None).unwrap_err().to_string();
            assert!(err.contains("needs --data-dir"), "{err}");
        }
        let err = DataSource::new(DatasetKind::Fsdd, Some("/nonexistent/fsdd.tar.gz".into()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nonexistent/fsdd.tar.gz: no such file"),
            "{err}"
        );
        let err = DataSource::new(DatasetKind::JapaneseVowels, Some("/nonexistent/jv".into()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no such directory"), "{err}");
        assert_eq!(DatasetKind::JapaneseVowels.spec().classes(), 9);
        assert_eq!("japanese-vowels".parse(), Ok(DatasetKind::JapaneseVowels));
    }
}
