//! `ember tune-bcr`: the block-size tuner run over a model's contraction layers.

use super::view_dims;
use crate::error::{EmberError, Result};
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;

/// `ember tune-bcr`: GRIM's Listing 1 per contraction layer of a model.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// The model whose layers are tuned.
    pub model: ember_models::classifier::ModelKind,
    /// The dataset its shapes are for.
    pub dataset: ember_models::data::DatasetKind,
    /// The pruning rate of the synthesized layers.
    pub rate: f64,
    /// Stop where the next block's speed-up falls below this ratio.
    pub threshold: f64,
    /// Rows of the activation matrix each timed product multiplies (`M`).
    pub rows: usize,
    /// Backend the products are timed on.
    pub backend: crate::backend::BackendKind,
    /// Candidate blocks, in the order Listing 1 tries them.
    pub sizes: Vec<burn_bcr::Block>,
    /// Timed calls per candidate (the best is kept).
    pub repeats: usize,
}

/// One tuned layer: its GEMM view and Listing 1's trials.
#[derive(Clone, Debug)]
pub struct TunedLayer {
    /// Layer path.
    pub path: String,
    /// `(out, K)` of its GEMM view.
    pub view: (usize, usize),
    /// The tuner's result (`Err`: why no block was chosen).
    pub tuned: std::result::Result<burn_bcr::tune::Tuned, String>,
}

/// The layers `tune` chose no block for, as one error naming each with its reason (after the
/// table, which shows the others): `Ok` when every layer was tuned.
pub fn untuned(layers: &[TunedLayer]) -> Result<()> {
    let failed: Vec<String> = layers
        .iter()
        .filter_map(|l| l.tuned.as_ref().err().map(|e| format!("{}: {e}", l.path)))
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    let all = if failed.len() == layers.len() {
        "no layer"
    } else {
        "not every layer"
    };
    Err(EmberError::Invalid(format!(
        "{all} could be tuned ({} of {} failed): {}",
        failed.len(),
        layers.len(),
        failed.join("; ")
    )))
}

/// The per-layer table of a tuning, Markdown.
pub fn tune_table(opts: &TuneOptions, layers: &[TunedLayer]) -> String {
    let mut s = format!(
        "{} at {}× on {} (M = {} rows, threshold {}, best of {} calls per candidate)\n\n\
         | layer | out × K | block | latency per candidate, µs (the last failed the threshold \
         unless all passed) |\n|---|---|---|---|\n",
        opts.model, opts.rate, opts.backend, opts.rows, opts.threshold, opts.repeats
    );
    for l in layers {
        let (block, trials) = match &l.tuned {
            Ok(t) => (
                t.block.to_string(),
                t.trials
                    .iter()
                    .map(|tr| format!("{}: {:.1}", tr.block, tr.seconds * 1e6))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            Err(e) => ("—".to_string(), e.clone()),
        };
        s += &format!(
            "| {} | {} × {} | {block} | {trials} |\n",
            l.path, l.view.0, l.view.1
        );
    }
    s
}

/// Runs Listing 1 on every contraction layer of the model, timing the BCRC product of each
/// synthesized layer on the chosen backend (through the `Bcr` decorator's `linear`: the kernel
/// on a CubeCL backend, the host product on ndarray).
pub fn tune(opts: TuneOptions) -> Result<Vec<TunedLayer>> {
    if !(opts.rate.is_finite() && opts.rate > 1.0) {
        return Err(EmberError::Invalid(format!(
            "--rate {}: a pruning rate is a number above 1 (10 for 10×)",
            opts.rate
        )));
    }
    // once for every layer, before any is timed
    burn_bcr::tune::check_threshold(opts.threshold)
        .map_err(|e| EmberError::Invalid(format!("--threshold: {e}")))?;
    if opts.rows == 0 || opts.repeats == 0 || opts.sizes.is_empty() {
        return Err(EmberError::Invalid(
            "--rows, --repeats and the block list must be at least 1".into(),
        ));
    }
    let spec = opts.dataset.spec();
    opts.model
        .accepts(spec)
        .map_err(|why| EmberError::Invalid(format!("--dataset {}: {why}", opts.dataset)))?;
    let shapes = crate::policy::module_params(opts.model, spec)?;
    let mut layers = Vec::new();
    for m in shapes {
        for (name, dims) in &m.params {
            if name == "weight" && dims.len() >= 2 {
                let path = m.path.clone();
                layers.push((path, view_dims(dims)));
            }
        }
    }
    check_rows(opts.rows, &layers, crate::memory::available_memory())?;
    opts.backend.dispatch(
        burn_approx_mul::Multiplier::native(),
        Default::default(),
        TuneJob {
            opts: opts.clone(),
            layers,
        },
    )
}

/// Refuses a `--rows` whose activations (`rows × k`, built on the host and uploaded) and
/// output (`rows × out`) a layer of `layers` (path, `(out, k)`) could not hold: a tensor past
/// [`crate::memory::MAX_ELEMENTS`], or more bytes than `available`. The error names the layer
/// and the largest `--rows` that passes.
pub(crate) fn check_rows(
    rows: usize,
    layers: &[(String, (usize, usize))],
    available: Option<u64>,
) -> Result<()> {
    use crate::memory::{MAX_ELEMENTS, check_fits};
    for (path, (out, k)) in layers {
        let widest = (*out).max(*k).max(1);
        if rows as u128 * widest as u128 > MAX_ELEMENTS as u128 {
            return Err(EmberError::Invalid(format!(
                "--rows {rows}: layer {path} ({out} × {k}) would have tensors of more than \
                 {MAX_ELEMENTS} elements; at most --rows {}",
                MAX_ELEMENTS / widest
            )));
        }
        // the host values, their device copy and the output, in f32
        let bytes = rows as u128 * (2 * *k as u128 + *out as u128) * 4;
        check_fits(
            bytes,
            &format!("--rows {rows}: layer {path}'s activations and output"),
            available,
        )?;
    }
    Ok(())
}

pub(super) struct TuneJob {
    opts: TuneOptions,
    layers: Vec<(String, (usize, usize))>,
}

impl crate::backend::BackendJob for TuneJob {
    type Output = Vec<TunedLayer>;
    fn run<B: crate::backend::TrainBackend>(self, device: B::Device) -> Result<Vec<TunedLayer>> {
        use burn::tensor::{Tensor, TensorPrimitive};
        use cubecl_kernels::decorator::{KernelBackend, LayerSettings};
        type I<B> = <B as AutodiffBackend>::InnerBackend;
        let device: burn::tensor::Device<I<B>> = device;
        let o = &self.opts;
        let bar = indicatif::ProgressBar::new(self.layers.len() as u64).with_style(
            indicatif::ProgressStyle::with_template("tuning {bar:30} {pos}/{len} layers {msg}")
                .expect("a valid template"),
        );
        let mut out = Vec::new();
        for (path, (rows_out, k)) in self.layers {
            bar.set_message(path.clone());
            let x = Tensor::<I<B>, 2>::from_data(
                TensorData::new(
                    (0..o.rows * k)
                        .map(|i| ((i * 37 % 97) as f32 - 48.0) / 48.0)
                        .collect::<Vec<f32>>(),
                    [o.rows, k],
                ),
                &device,
            );
            let tuned = burn_bcr::tune::find_opt_blk(
                rows_out,
                k,
                o.rate,
                &o.sizes,
                o.threshold,
                |view, mask| {
                    let bcrc = burn_bcr::pack::pack(view, mask).expect("a projected layer packs");
                    let dense = Tensor::<I<B>, 2>::from_data(
                        TensorData::new(view.to_linear(), [k, rows_out]),
                        &device,
                    );
                    let settings = LayerSettings::new(&path).with(
                        cubecl_kernels::decorator::packed::PackedLayer(std::sync::Arc::new(bcrc)),
                    );
                    let packed = Tensor::<I<B>, 2>::from_primitive(TensorPrimitive::Float(
                        <I<B> as KernelBackend>::float_for_layer(
                            dense.into_primitive().tensor(),
                            &settings,
                        ),
                    ));
                    let run = || {
                        let y = burn::tensor::module::linear(x.clone(), packed.clone(), None);
                        let _ = <I<B> as burn::tensor::backend::Backend>::sync(&device);
                        y
                    };
                    drop(run()); // warm-up: uploads, kernel compilation
                    (0..o.repeats)
                        .map(|_| {
                            let t = std::time::Instant::now();
                            std::hint::black_box(run());
                            t.elapsed().as_secs_f64()
                        })
                        .fold(f64::INFINITY, f64::min)
                },
            )
            .map_err(|e| e.to_string());
            out.push(TunedLayer {
                path,
                view: (rows_out, k),
                tuned,
            });
            bar.inc(1);
        }
        bar.finish_and_clear();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::check_rows;

    #[test]
    fn rows_past_a_tensor_or_the_machine_are_refused_naming_the_layer_and_the_limit() {
        let layers = [
            ("fc1".to_string(), (120, 400)),
            ("fc2".to_string(), (84, 120)),
        ];
        check_rows(32, &layers, Some(1 << 30)).unwrap();
        let e = check_rows(100_000_000, &layers, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--rows 100000000: layer fc1 (120 × 400)")
                && e.contains(&format!("at most --rows {}", (1usize << 31) / 400)),
            "{e}"
        );
        // 1,000,000 rows: fc1 needs (2 · 400 + 120) · 4 bytes a row, 3.4 GiB
        let e = check_rows(1_000_000, &layers, Some(1 << 30))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--rows 1000000: layer fc1's activations and output would need 3.4 GiB")
                && e.contains("more than the 1.0 GiB"),
            "{e}"
        );
        check_rows(1_000_000, &layers, None).unwrap();
    }
}
