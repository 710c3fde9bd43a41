//! Batches of variable-length feature sequences (FSDD's MFCC frames, Japanese Vowels' LPC
//! cepstra) for the GRU classifier: right-padded with zeros to the longest sequence of the
//! batch, with each sequence's length (the classifier reads each at its last valid step).

use burn::prelude::*;

/// A batch of sequences and their labels.
#[derive(Clone, Debug)]
pub struct SequenceBatch<B: Backend> {
    /// `[batch, steps, features]`, right-padded with zeros.
    pub inputs: Tensor<B, 3>,
    /// Each sequence's number of valid steps.
    pub lengths: Vec<usize>,
    /// `[batch]` class indices.
    pub targets: Tensor<B, 1, Int>,
}

/// The batch of `items` (frames of `features` values each, and a label) on `device`.
///
/// # Panics
/// If `items` is empty, a sequence has no frame, or a frame does not have `features` values.
pub fn batch<B: Backend>(
    items: &[(&[Vec<f32>], usize)],
    features: usize,
    device: &B::Device,
) -> SequenceBatch<B> {
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
    SequenceBatch {
        inputs: Tensor::from_data(
            TensorData::new(values, [items.len(), steps, features]),
            device,
        ),
        lengths: items.iter().map(|(f, _)| f.len()).collect(),
        targets: Tensor::from_ints(labels.as_slice(), device),
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
        assert_eq!(batch.inputs.dims(), [2, 3, 2]);
        assert_eq!(batch.lengths, [3, 1]);
        let v = batch.inputs.into_data().to_vec::<f32>().unwrap();
        assert_eq!(
            v,
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 0.0, 0.0, 0.0, 0.0]
        );
        let t = batch.targets.into_data().to_vec::<i64>().unwrap();
        assert_eq!(t, [4, 1]);
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
