//! The whole-model step table: `model_step` bench rows (ember-train's `model_step` bench, run
//! once per thread count) beside PyTorch's step of the same model, batch and thread count
//! (`xtask/gpu/torch_rows.py`, where `python3 -c 'import torch'` works), written as
//! `docs/model-steps.csv` and as a section of `docs/benchmarks.md`.

use crate::bench::Row;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// The columns of `docs/model-steps.csv`.
pub(crate) const CSV_HEADER: &str =
    "model,batch,device,threads,route,precision,ember_ms,pytorch_ms,ratio";

/// The heading of the section this module writes in `docs/benchmarks.md`.
pub(crate) const SECTION: &str = "\n## Whole-model training steps";

/// One bench row's parts: `model_step/<model>_b<batch>/<device>-<threads>t/<variant>`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Step {
    pub(crate) model: String,
    pub(crate) batch: usize,
    pub(crate) device: String,
    pub(crate) threads: usize,
    /// The variant without its ordering prefix (`native`, `afm16`, ...).
    pub(crate) route: String,
    pub(crate) ember_ns: f64,
}

impl Step {
    /// The parts of a `model_step` row id, `None` for other rows.
    pub(crate) fn parse(id: &str, ns: f64) -> Option<Self> {
        let mut parts = id.strip_prefix("model_step/")?.split('/');
        let (model, batch) = parts.next()?.rsplit_once("_b")?;
        let (device, threads) = parts.next()?.rsplit_once('-')?;
        let route = parts.next()?;
        let route = route.split_once('-').map_or(route, |(_, r)| r);
        Some(Self {
            model: model.to_string(),
            batch: batch.parse().ok()?,
            device: device.to_string(),
            threads: threads.strip_suffix('t')?.parse().ok()?,
            route: route.to_string(),
            ember_ns: ns,
        })
    }

    /// Whether this is an inference step (a `*-infer` route: the logits of a batch, no
    /// autodiff), compared with PyTorch's inference step.
    fn inference(&self) -> bool {
        self.route.ends_with("-infer")
    }

    /// The PyTorch row this step is compared with: the same model, batch, threads and kind of
    /// step (one PyTorch step per group: PyTorch has no routes).
    fn torch_key(&self) -> String {
        let kind = if self.inference() { "/infer" } else { "" };
        format!("{}_b{}/{}t{kind}", self.model, self.batch, self.threads)
    }
}

/// PyTorch's step of every group of `steps` (ns by [`Step::torch_key`]) and its version, or
/// the reason there is none.
fn torch(
    steps: &[Step],
    work: &Path,
) -> std::result::Result<(BTreeMap<String, f64>, String), String> {
    let probe = Command::new("python3")
        .args(["-c", "import torch"])
        .output()
        .map_err(|e| format!("python3 cannot run: {e}"))?;
    if !probe.status.success() {
        return Err(
            "`python3 -c 'import torch'` fails here (`pip install torch` adds the column)".into(),
        );
    }
    let mut request = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for s in steps {
        if seen.insert(s.torch_key()) {
            let op = if s.inference() {
                "model_infer"
            } else {
                "model_step"
            };
            request.push(serde_json::json!({
                "row": s.torch_key(), "op": op, "dims": [s.batch],
                "model": s.model, "threads": s.threads,
            }));
        }
    }
    std::fs::create_dir_all(work).map_err(|e| e.to_string())?;
    let (req, resp) = (
        work.join("model-request.json"),
        work.join("model-torch.json"),
    );
    std::fs::write(&req, serde_json::Value::Array(request).to_string())
        .map_err(|e| e.to_string())?;
    let script = crate::root().join("xtask/gpu/torch_rows.py");
    println!("==> python3 {} (PyTorch's model steps)", script.display());
    let status = Command::new("python3")
        .arg(&script)
        .arg(&req)
        .arg(&resp)
        .env("CUDA_VISIBLE_DEVICES", "")
        .status()
        .map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("torch_rows.py failed ({status})"));
    }
    let v: serde_json::Value = std::fs::read_to_string(&resp)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))?;
    let rows = v["rows"]
        .as_object()
        .ok_or("torch_rows.py wrote no rows")?
        .iter()
        .filter_map(|(k, t)| Some((k.clone(), t.as_f64()?)))
        .collect();
    Ok((
        rows,
        format!("PyTorch {}", v["torch"].as_str().unwrap_or("?")),
    ))
}

/// The CSV of `steps` with PyTorch's times where known.
pub(crate) fn csv(steps: &[Step], torch: &BTreeMap<String, f64>) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for s in steps {
        let t = torch.get(&s.torch_key());
        let ms = |ns: f64| format!("{:.3}", ns / 1e6);
        let _ = writeln!(
            out,
            "{},{},{},{},{},f32,{},{},{}",
            s.model,
            s.batch,
            s.device,
            s.threads,
            s.route,
            ms(s.ember_ns),
            t.map_or(String::new(), |&t| ms(t)),
            t.map_or(String::new(), |&t| format!("{:.2}", s.ember_ns / t)),
        );
    }
    out
}

/// The markdown section of `steps`.
fn section(steps: &[Step], torch: &BTreeMap<String, f64>, what: &str, when: &str) -> String {
    let mut md = format!(
        "{SECTION}\n\nWritten by `cargo xtask bench --filter model` at {when}, this machine \
         ({} cores). A training step: forward, cross-entropy, backward and Adam's update, \
         every tensor f32 on both sides, measured in one run; PyTorch's column: {what}, the \
         same model definitions (`xtask/gpu/torch_rows.py`), batch and thread count. Routes: \
         `native` is `--conv gemm` (the default), `native-burn-conv` Burn's own convolution \
         kernels (`--conv burn`). The `*-infer` rows are an inference step instead (the \
         logits of a batch on the evaluation form, no autodiff; PyTorch: `eval()` under \
         `no_grad`): `dense-infer` the model as trained, `hinm-75-infer` its contraction \
         layers but the first and last packed at HiNM 75 % (Gyro-permuted masks; V = 16 for \
         ResNet-18-w16, 64 elsewhere) and run by the HiNM product. The same rows are in \
         `docs/model-steps.csv`.\n\n\
         | model | batch | device | threads | route | Ember | PyTorch | Ember ÷ PyTorch |\n\
         |---|---:|---|---:|---|---:|---:|---:|\n",
        crate::cores()
    );
    for s in steps {
        let t = torch.get(&s.torch_key());
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            s.model,
            s.batch,
            s.device,
            s.threads,
            s.route,
            crate::bench::fmt_time(s.ember_ns),
            t.map_or("–".into(), |&t| crate::bench::fmt_time(t)),
            t.map_or("–".into(), |&t| format!("{:.2}×", s.ember_ns / t)),
        );
    }
    md
}

/// `report` with its model-step section replaced by `section` (added at the end where it had
/// none: after the GPU runs, which the bench table's writer keeps as they are).
pub(crate) fn replace_section(report: &str, section: &str) -> String {
    let (before, after) = match report.find(SECTION) {
        Some(at) => {
            let rest = &report[at + SECTION.len()..];
            let end = rest
                .find("\n## ")
                .map_or(report.len(), |e| at + SECTION.len() + e);
            (&report[..at], &report[end..])
        }
        None => (report, ""),
    };
    format!("{}\n{}{}", before.trim_end(), section, after)
}

/// Whether a `cargo xtask bench` run with `filter` measured the model steps.
pub(crate) fn selected(filter: Option<&str>) -> bool {
    filter.is_none_or(|f| "model_step".contains(f) || f.contains("model_step"))
}

/// After the main bench run (every core): runs the model-step bench once with one thread,
/// then writes the table from every `model_step` row criterion holds.
pub(crate) fn run() -> Result<()> {
    let criterion = crate::target_dir().join("criterion");
    let when = crate::bench::commit();
    let rows = &mut Vec::<Row>::new();
    crate::cargo_env(
        // `--workspace`: the features of the main run, so nothing is built again
        &[
            "bench",
            "--workspace",
            "--bench",
            "model_step",
            "--",
            "model_step",
        ],
        &[("EMBER_BENCH_THREADS", "1")],
    )?;
    crate::bench::collect(&criterion, rows)?;
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    let mut steps: Vec<Step> = rows
        .iter()
        .filter_map(|r| Step::parse(&r.id, r.mean_ns))
        .collect();
    steps.sort_by(|a, b| {
        (&a.model, a.batch, a.threads, &a.route).cmp(&(&b.model, b.batch, b.threads, &b.route))
    });
    let work = crate::target_dir().join("model-steps");
    let (times, what) = torch(&steps, &work).unwrap_or_else(|why| (BTreeMap::new(), why));
    let root = crate::root();
    crate::write_atomic(&root.join("docs/model-steps.csv"), &csv(&steps, &times))?;
    let report_path = root.join("docs/benchmarks.md");
    let report = std::fs::read_to_string(&report_path)
        .with_context(|| format!("reading {}", report_path.display()))?;
    crate::write_atomic(
        &report_path,
        &replace_section(&report, &section(&steps, &times, &what, &when)),
    )?;
    println!("wrote docs/model-steps.csv ({} rows)", steps.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_ids_parse_into_their_parts() {
        let s = Step::parse("model_step/resnet18-cifar-w16_b64/ndarray-2t/3-afm16", 5e6).unwrap();
        assert_eq!(
            (
                s.model.as_str(),
                s.batch,
                s.device.as_str(),
                s.threads,
                s.route.as_str()
            ),
            ("resnet18-cifar-w16", 64, "ndarray", 2, "afm16")
        );
        assert_eq!(s.torch_key(), "resnet18-cifar-w16_b64/2t");
        assert!(Step::parse("gemm_fc1/ndarray/1-native", 1.0).is_none());
        // an inference step is compared with PyTorch's inference step
        let i = Step::parse("model_step/deit-ti_b64/ndarray-1t/6-hinm-75-infer", 5e6).unwrap();
        assert_eq!((i.route.as_str(), i.inference()), ("hinm-75-infer", true));
        assert_eq!(i.torch_key(), "deit-ti_b64/1t/infer");
        assert!(!s.inference());
    }

    #[test]
    fn the_csv_has_its_columns_and_the_ratio() {
        let s = Step::parse("model_step/lenet5_b64/ndarray-1t/1-native", 8e6).unwrap();
        let torch = BTreeMap::from([("lenet5_b64/1t".to_string(), 4e6)]);
        let csv = csv(std::slice::from_ref(&s), &torch);
        assert_eq!(
            csv,
            format!("{CSV_HEADER}\nlenet5,64,ndarray,1,native,f32,8.000,4.000,2.00\n")
        );
        // no PyTorch: empty cells, not zeros
        assert!(super::csv(&[s], &BTreeMap::new()).ends_with("native,f32,8.000,,\n"));
    }

    #[test]
    fn the_section_is_added_at_the_end_and_then_replaced_in_place() {
        let report = "# B\n\n| a |\n\n## GPU runs\n\nx\n";
        let with = replace_section(report, &format!("{SECTION}\n\nv1\n"));
        assert!(
            with.find("v1").unwrap() > with.find("## GPU runs").unwrap(),
            "{with}"
        );
        let later = format!("{with}\n## Later\n\ny\n");
        let again = replace_section(&later, &format!("{SECTION}\n\nv2\n"));
        assert!(again.contains("v2") && !again.contains("v1"), "{again}");
        assert_eq!(again.matches("## Whole-model").count(), 1);
        assert!(again.ends_with("## Later\n\ny\n"), "{again}");
        assert!(
            again.starts_with("# B\n\n| a |\n\n## GPU runs\n\nx"),
            "{again}"
        );
    }
}
