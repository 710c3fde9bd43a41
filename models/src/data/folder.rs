//! An ImageNet-style ImageFolder for evaluating and fine-tuning pretrained models: one directory
//! per class (classes numbered by sorted directory name, as torchvision's `ImageFolder` does),
//! JPEG or PNG images of any size, each resized so that its shorter side is 256 pixels (a linear
//! filter widened when shrinking, as PIL's antialiased bilinear), centre-cropped to 224 × 224 and
//! normalised with ImageNet's per-channel mean and standard deviation: torchvision's
//! `Resize(256)`, `CenterCrop(224)`, `ToTensor()`, `Normalize(...)`. Training images are also
//! mirrored left-right at random ([`FolderBatcher::augmented`]).
//!
//! `--data-dir` is the class directories' parent, or a directory whose `val/` is (the test
//! split) and whose `train/` (with the same classes) is the training split. Images are decoded
//! batch by batch (an ImageNet split does not fit in memory decoded); every file's header is
//! read when the split is listed, so a file that is not an image is refused before anything
//! runs, and one whose pixels do not decode is reported by [`FolderBatcher::failure`].

use crate::error::{Error, Result};
use burn::data::dataloader::batcher::Batcher;
use burn::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The side of the centre crop.
pub const SIDE: usize = 224;
/// The shorter side images are resized to before the crop.
pub const RESIZE: u32 = 256;
/// Colour channels.
pub const CHANNELS: usize = 3;
/// ImageNet's per-channel mean and standard deviation (pixels in [0, 1]).
pub const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// See [`MEAN`].
pub const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// Where an ImageFolder is read from: its test split, its training split when it has one, and
/// its class names.
#[derive(Clone, Debug, PartialEq)]
pub struct FolderSource {
    /// The directory of the test split's class directories.
    pub dir: PathBuf,
    /// The directory of the training split's class directories (`train/` beside `val/`).
    pub train: Option<PathBuf>,
    /// The class names (directory names), sorted: a class's label is its index.
    pub classes: Vec<String>,
}

impl FolderSource {
    /// The ImageFolder in `dir` (or in `dir/val`, with `dir/train` for training, when there is
    /// one), with its classes: a training split of other classes than the test split's is an
    /// error naming one of them.
    pub fn detect(dir: &Path) -> Result<Self> {
        let (test, train) = if dir.join("val").is_dir() {
            let train = dir.join("train");
            (dir.join("val"), train.is_dir().then_some(train))
        } else {
            (dir.to_path_buf(), None)
        };
        let classes = class_names(&test)?;
        if let Some(train) = &train {
            let theirs = class_names(train)?;
            let odd = |a: &[String], b: &[String]| a.iter().find(|c| !b.contains(c)).cloned();
            if let Some(class) = odd(&theirs, &classes).or_else(|| odd(&classes, &theirs)) {
                return Err(Error::malformed(
                    train,
                    format!(
                        "its classes are not val/'s: {class} is in one of them only (classes \
                         are numbered by sorted name, so both splits need the same)"
                    ),
                ));
            }
        }
        Ok(Self {
            dir: test,
            train,
            classes,
        })
    }
}

/// The class directories' names in `dir`, sorted; an error when there is none.
fn class_names(dir: &Path) -> Result<Vec<String>> {
    let classes: Vec<String> = super::sorted_entries(dir)?
        .into_iter()
        .filter(|p| p.is_dir())
        .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(String::from))
        .collect();
    if classes.is_empty() {
        return Err(Error::malformed(
            dir,
            "no class directories in it (an ImageFolder has one directory of images per class)",
        ));
    }
    Ok(classes)
}

impl std::fmt::Display for FolderSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "an ImageFolder of {} classes in {}",
            self.classes.len(),
            self.dir.display()
        )
    }
}

/// One image file and its class.
#[derive(Clone, Debug, PartialEq)]
pub struct FolderItem {
    /// The image file.
    pub path: PathBuf,
    /// Its class (the index of its directory among the sorted class names).
    pub label: usize,
}

/// The images of an ImageFolder, listed (not decoded).
pub type FolderSplit = super::Split<FolderItem>;

/// Lists the test split's JPEG and PNG files of every class, interleaved by class (the first of
/// every class, then the second, …) so that the first N are balanced, and reads each one's
/// header: a file that is not a readable image is an error naming it.
pub fn load(source: &FolderSource) -> Result<FolderSplit> {
    list(&source.dir, &source.classes)
}

/// [`load`] of the training split (`train/` beside `val/`); an error when there is none.
pub fn load_train(source: &FolderSource) -> Result<FolderSplit> {
    let Some(train) = &source.train else {
        return Err(Error::malformed(
            &source.dir,
            "training on an ImageFolder needs train/ and val/ directories side by side \
             (--data-dir is their parent); this folder has no train/ beside it",
        ));
    };
    list(train, &source.classes)
}

fn list(dir: &Path, classes: &[String]) -> Result<FolderSplit> {
    let mut by_class = Vec::with_capacity(classes.len());
    for (label, class) in classes.iter().enumerate() {
        let mut files = Vec::new();
        for path in super::sorted_entries(&dir.join(class))? {
            if !super::is_image_file(&path) {
                continue;
            }
            image::ImageReader::open(&path)
                .map_err(|e| Error::io(&path, e))?
                .with_guessed_format()
                .map_err(|e| Error::io(&path, e))?
                .into_dimensions()
                .map_err(|e| Error::malformed(&path, format!("not a readable image: {e}")))?;
            files.push(FolderItem { path, label });
        }
        by_class.push(files);
    }
    let items = super::interleave(by_class);
    if items.is_empty() {
        return Err(Error::malformed(dir, "no JPEG or PNG image in its classes"));
    }
    Ok(FolderSplit::new(items))
}

/// An image file as the network sees it: shorter side resized to [`RESIZE`], centre-cropped to
/// [`SIDE`] × [`SIDE`], channel-major, normalised ([`MEAN`], [`STD`]).
pub fn preprocess(file: &Path) -> Result<Vec<f32>> {
    let img = image::open(file)
        .map_err(|e| Error::malformed(file, format!("cannot decode the image: {e}")))?
        .to_rgb8();
    let (w, h) = img.dimensions();
    let scale = RESIZE as f64 / w.min(h) as f64;
    // torchvision's Resize(256): the shorter side exactly 256, the longer one truncated
    let (nw, nh) = if w <= h {
        (RESIZE, ((h as f64 * scale) as u32).max(1))
    } else {
        (((w as f64 * scale) as u32).max(1), RESIZE)
    };
    let resized = image::imageops::resize(&img, nw, nh, image::imageops::FilterType::Triangle);
    if (nw as usize) < SIDE || (nh as usize) < SIDE {
        return Err(Error::malformed(
            file,
            format!("the image is {w}×{h}: too small to crop"),
        ));
    }
    // torchvision's CenterCrop: Python's round, halves to even
    let (left, top) = (
        ((nw as f64 - SIDE as f64) / 2.0).round_ties_even() as u32,
        ((nh as f64 - SIDE as f64) / 2.0).round_ties_even() as u32,
    );
    let plane = SIDE * SIDE;
    let mut out = vec![0f32; CHANNELS * plane];
    for y in 0..SIDE {
        for x in 0..SIDE {
            let px = resized.get_pixel(left + x as u32, top + y as u32).0;
            for c in 0..CHANNELS {
                out[c * plane + y * SIDE + x] = (px[c] as f32 / 255.0 - MEAN[c]) / STD[c];
            }
        }
    }
    Ok(out)
}

/// Batches [`FolderItem`]s, decoding their files on the host's cores. A file that fails to
/// decode (its header was read when listed; its body may still be corrupt) becomes a zero image
/// and the first such failure is kept for [`FolderBatcher::failure`], which the caller checks.
#[derive(Clone, Default)]
pub struct FolderBatcher {
    failure: Arc<Mutex<Option<Error>>>,
    /// Mirror images left-right at random, from this seed ([`FolderBatcher::augmented`]).
    flip: Option<u64>,
}

impl FolderBatcher {
    /// A batcher with no failure yet, for evaluation (no augmentation).
    pub fn new() -> Self {
        Self::default()
    }

    /// A batcher for training: each image is also mirrored left-right with probability ½,
    /// decided by `seed`, its class directory's name and its file name alone (the same image
    /// flips the same way in a resumed epoch, whatever batch or thread it lands in, and
    /// wherever the dataset is stored).
    pub fn augmented(seed: u64) -> Self {
        Self {
            flip: Some(seed),
            ..Self::default()
        }
    }

    /// Whether the training image `file` is mirrored under `seed`: a bit of an FNV-1a hash of
    /// the seed, the class directory's name, `/` and the file name (stable across builds,
    /// platforms and the directory the dataset is stored in).
    fn flips(seed: u64, file: &Path) -> bool {
        fn name(p: Option<&Path>) -> &[u8] {
            p.and_then(Path::file_name)
                .map_or(&[], |n| n.as_encoded_bytes())
        }
        let bytes = seed
            .to_le_bytes()
            .into_iter()
            .chain(name(file.parent()).iter().copied())
            .chain(*b"/")
            .chain(name(Some(file)).iter().copied());
        let hash = bytes.fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        hash >> 63 == 1
    }

    /// The first file that failed to decode since the last call, as an error naming it.
    pub fn failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

impl<B: Backend> Batcher<B, FolderItem, super::Batch<B>> for FolderBatcher {
    fn batch(&self, items: Vec<FolderItem>, device: &B::Device) -> super::Batch<B> {
        let n = items.len();
        let size = CHANNELS * SIDE * SIDE;
        let mut data = vec![0f32; n * size];
        let threads = std::thread::available_parallelism()
            .map_or(1, |t| t.get())
            .min(n.max(1));
        let per = n.div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            for (chunk, out) in items.chunks(per).zip(data.chunks_mut(per * size)) {
                scope.spawn(move || {
                    for (item, out) in chunk.iter().zip(out.chunks_mut(size)) {
                        match preprocess(&item.path) {
                            Ok(pixels) => {
                                out.copy_from_slice(&pixels);
                                if self.flip.is_some_and(|seed| Self::flips(seed, &item.path)) {
                                    out.chunks_mut(SIDE).for_each(<[f32]>::reverse);
                                }
                            }
                            Err(e) => {
                                let mut slot =
                                    self.failure.lock().unwrap_or_else(|e| e.into_inner());
                                slot.get_or_insert(e);
                            }
                        }
                    }
                });
            }
        });
        let targets: Vec<i64> = items.iter().map(|i| i.label as i64).collect();
        super::Batch {
            inputs: super::Inputs::Images(Tensor::from_data(
                TensorData::new(data, [n, CHANNELS, SIDE, SIDE]),
                device,
            )),
            targets: Tensor::from_data(TensorData::new(targets, [n]), device),
        }
    }
}
