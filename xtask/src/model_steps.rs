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
    pub(crate) fn inference(&self) -> bool {
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

/// The CSV of `steps` with PyTorch's times where known (every tensor f32 on both sides).
pub(crate) fn csv(steps: &[Step], torch: &BTreeMap<String, f64>) -> String {
    csv_of(
        steps,
        |s| s.device.clone(),
        |s| (torch.get(&s.torch_key()).copied(), "f32"),
    )
}

/// The CSV of `steps`: each row's device as `device` names it, and the PyTorch step it stands
/// beside (if measured) with that comparison's precision as `torch` finds them.
fn csv_of(
    steps: &[Step],
    device: impl Fn(&Step) -> String,
    torch: impl Fn(&Step) -> (Option<f64>, &'static str),
) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for s in steps {
        let (t, precision) = torch(s);
        let ms = |ns: f64| format!("{:.3}", ns / 1e6);
        let _ = writeln!(
            out,
            "{},{},{},{},{},{precision},{},{},{}",
            s.model,
            s.batch,
            device(s),
            s.threads,
            s.route,
            ms(s.ember_ns),
            t.map_or(String::new(), ms),
            t.map_or(String::new(), |t| format!("{:.2}", s.ember_ns / t)),
        );
    }
    out
}

/// Writes `fresh` (a CSV with [`CSV_HEADER`]) to `path`, keeping the rows `path` had of the
/// (device, model) pairs `fresh` has none of: the CPU rows and a GPU run's rows are measured
/// apart, and a run of some models (`EMBER_BENCH_MODELS`) keeps the others' rows.
fn write_csv(path: &Path, fresh: &str) -> Result<()> {
    let key = |line: &str| {
        let mut cells = line.split(',');
        let model = cells.next()?.to_string();
        Some((cells.nth(1)?.to_string(), model))
    };
    let ours: std::collections::BTreeSet<(String, String)> =
        fresh.lines().skip(1).filter_map(key).collect();
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines: Vec<&str> = fresh.lines().skip(1).collect();
    lines.extend(
        old.lines()
            .skip(1)
            .filter(|l| key(l).is_some_and(|k| !ours.contains(&k))),
    );
    lines.sort();
    let mut out = format!("{CSV_HEADER}\n");
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    crate::write_atomic(path, &out)
}

/// The heading of the GPU run's section in `docs/benchmarks.md`.
const GPU_SECTION: &str = "\n## Whole-model steps on a GPU";

/// The times of `torch_rows.py`'s output `v` under `key` (`rows`, `rows_tf32`), by row.
pub(crate) fn times(v: &serde_json::Value, key: &str) -> BTreeMap<String, f64> {
    v[key].as_object().map_or_else(BTreeMap::new, |rows| {
        rows.iter()
            .filter_map(|(k, t)| Some((k.clone(), t.as_f64()?)))
            .collect()
    })
}

/// A GPU run's model steps beside PyTorch's on the same GPU: the steps parsed from the
/// bench rows, PyTorch's f32 and TF32 steps by Ember row id (`torch.json`'s `rows` and
/// `rows_tf32`), and the GPU's name.
pub(crate) struct GpuRun {
    pub(crate) steps: Vec<Step>,
    pub(crate) f32: BTreeMap<String, f64>,
    pub(crate) tf32: BTreeMap<String, f64>,
    pub(crate) gpu: String,
    pub(crate) torch: String,
}

impl GpuRun {
    /// Reads `dir`: the runner's work folder, or a copy of its `criterion/` and `torch.json`.
    pub(crate) fn read(dir: &Path) -> Result<Self> {
        let mut rows = Vec::new();
        crate::bench::collect(&dir.join("criterion"), &mut rows)
            .with_context(|| format!("reading {}/criterion", dir.display()))?;
        let mut steps: Vec<Step> = rows
            .iter()
            .filter_map(|r| Step::parse(&r.id, r.mean_ns))
            .collect();
        anyhow::ensure!(
            !steps.is_empty(),
            "{}/criterion holds no model_step rows",
            dir.display()
        );
        steps.sort_by(|a, b| (&a.model, a.batch, &a.route).cmp(&(&b.model, b.batch, &b.route)));
        let path = dir.join("torch.json");
        let v: serde_json::Value = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", path.display()))?,
            Err(_) => serde_json::Value::Null,
        };
        let read = |key: &str| times(&v, key);
        Ok(Self {
            gpu: v["device"].as_str().unwrap_or("unnamed GPU").to_string(),
            torch: v["torch"].as_str().unwrap_or("not run").to_string(),
            f32: read("rows"),
            tf32: read("rows_tf32"),
            steps,
        })
    }

    /// The PyTorch step a row is compared with and its precision: AFM16 (an f32 emulation)
    /// beside PyTorch's f32 step, every other route beside PyTorch's TF32 step (Burn's CUDA
    /// matmul is TF32); an inference row beside PyTorch's inference step.
    pub(crate) fn torch_of(&self, s: &Step) -> Option<(f64, &'static str)> {
        let variant = if s.inference() {
            "5-dense-infer"
        } else {
            "1-native"
        };
        let key = format!(
            "model_step/{}_b{}/{}-{}t/{variant}",
            s.model, s.batch, s.device, s.threads
        );
        match s.route.as_str() {
            "afm16" => self.f32.get(&key).map(|&t| (t, "f32")),
            _ => self
                .tf32
                .get(&key)
                .map(|&t| (t, "tf32"))
                .or_else(|| self.f32.get(&key).map(|&t| (t, "f32"))),
        }
    }

    /// The CSV rows (device: the backend and the GPU's name).
    pub(crate) fn csv(&self) -> String {
        let gpu = self.gpu.replace(',', " ");
        csv_of(
            &self.steps,
            |s| format!("{}:{gpu}", s.device),
            |s| match self.torch_of(s) {
                Some((t, precision)) => (Some(t), precision),
                None => (None, "tf32"),
            },
        )
    }

    /// The section of `docs/benchmarks.md`.
    pub(crate) fn section(&self, commit: &str) -> String {
        let mut md = format!(
            "{GPU_SECTION}\n\nMeasured by the GPU bundle of {commit} (`run.sh --bench-filter \
             'model_step.*cuda'`, `docs/gpu-bundle.md`) on an {gpu}, beside PyTorch {torch} on \
             the same GPU, and merged here by `cargo xtask gpu-rows DIR`. A training step: \
             forward, cross-entropy, backward and Adam's update; `*-infer` rows: the logits of \
             a batch, no autodiff. Precision: Ember's CUDA matmul is TF32 (Burn's), so the \
             native, SparseAct and inference rows stand beside PyTorch with TF32 matmuls and \
             convolutions; AFM16 (simulated in f32 arithmetic) stands beside PyTorch's f32 \
             step (TF32 off). The same rows are in `docs/model-steps.csv` (device \
             `cuda:<GPU>`).\n\n\
             | model | batch | route | Ember | PyTorch | precision (PyTorch) | Ember ÷ PyTorch |\n\
             |---|---:|---|---:|---:|---|---:|\n",
            gpu = self.gpu,
            torch = self.torch,
        );
        for s in &self.steps {
            let t = self.torch_of(s);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                s.model,
                s.batch,
                s.route,
                crate::bench::fmt_time(s.ember_ns),
                t.map_or("–".into(), |(t, _)| crate::bench::fmt_time(t)),
                t.map_or("–", |(_, p)| p),
                t.map_or("–".into(), |(t, _)| format!("{:.2}×", s.ember_ns / t)),
            );
        }
        md
    }
}

/// `cargo xtask gpu-rows DIR`: a GPU run's model steps into `docs/model-steps.csv` (the rows
/// of that GPU replaced, the others kept) and their section of `docs/benchmarks.md`.
pub(crate) fn import_gpu(dir: &Path, commit: &str) -> Result<()> {
    let run = GpuRun::read(dir)?;
    let root = crate::root();
    write_csv(&root.join("docs/model-steps.csv"), &run.csv())?;
    let report_path = root.join("docs/benchmarks.md");
    let report = std::fs::read_to_string(&report_path)
        .with_context(|| format!("reading {}", report_path.display()))?;
    crate::write_atomic(
        &report_path,
        &replace_named(&report, GPU_SECTION, &run.section(commit)),
    )?;
    println!(
        "wrote {} {} rows into docs/model-steps.csv and docs/benchmarks.md",
        run.steps.len(),
        run.gpu
    );
    Ok(())
}

/// The markdown section of `steps`.
fn section(steps: &[Step], torch: &BTreeMap<String, f64>, what: &str, when: &str) -> String {
    let mut md = format!(
        "{SECTION}\n\nWritten by `cargo xtask bench --filter model` at {when}, this machine \
         ({} cores, {}). A training step: forward, cross-entropy, backward and Adam's update, \
         every tensor f32 on both sides, measured in one run; PyTorch's column: {what}, the \
         same model definitions (`xtask/gpu/torch_rows.py`), batch and thread count. Routes: \
         `native` is `--conv gemm` (the default), `native-burn-conv` Burn's own convolution \
         kernels (`--conv burn`), `native-burn-norm` Burn's composite batch norm in place of \
         Ember's fused one. The `*-infer` rows are an inference step instead (the \
         logits of a batch on the evaluation form, no autodiff; PyTorch: `eval()` under \
         `no_grad`): `dense-infer` the model as trained, `hinm-75-infer` its contraction \
         layers but the first and last packed at HiNM 75 % (Gyro-permuted masks; V = 16 for \
         ResNet-18-w16, 64 elsewhere) and run by the HiNM product. The same rows are in \
         `docs/model-steps.csv`.\n\n\
         | model | batch | device | threads | route | Ember | PyTorch | Ember ÷ PyTorch |\n\
         |---|---:|---|---:|---|---:|---:|---:|\n",
        crate::cores(),
        crate::cpu()
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

/// The model-step section of `report` (empty where it has none).
fn current_section(report: &str) -> &str {
    report.find(SECTION).map_or("", |at| {
        let rest = &report[at + SECTION.len()..];
        &report[at..rest
            .find("\n## ")
            .map_or(report.len(), |e| at + SECTION.len() + e)]
    })
}

/// The model-step section after a run of some models (`measured`, as `fresh` gives them):
/// `old`'s header and its rows of the other models, `fresh`'s rows, and a line under the
/// header naming the models re-run alone at `when` (as `cargo xtask bench --filter` does).
/// Without an old section, `fresh` as it is.
fn merge_section(
    old: &str,
    fresh: &str,
    measured: &std::collections::BTreeSet<String>,
    when: &str,
) -> String {
    if old.is_empty() {
        return fresh.to_string();
    }
    let model = |line: &str| {
        let cell = line.strip_prefix("| ")?.split(" |").next()?;
        (cell != "model" && !line.starts_with("|---")).then(|| cell.to_string())
    };
    let names = measured
        .iter()
        .map(|m| format!("`{m}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let note = format!("Rows of {names}: re-run alone at {when}.");
    let (mut head, mut rows) = (Vec::new(), Vec::new());
    for line in old.lines() {
        match model(line) {
            Some(m) if measured.contains(&m) => {}
            Some(_) => rows.push(line),
            None if line.starts_with("Rows of ") && line.contains(&format!("{names}:")) => {}
            None => head.push(line),
        }
    }
    rows.extend(fresh.lines().filter(|l| model(l).is_some()));
    // by model, batch, device, threads and route, as a full run writes them
    let cells = |l: &str| -> Vec<String> { l.split(" | ").map(str::to_string).collect() };
    rows.sort_by_key(|l| {
        let c = cells(l);
        let number = |i: usize| c.get(i).and_then(|v| v.trim().parse::<usize>().ok());
        (
            c.first().cloned(),
            number(1),
            c.get(2).cloned(),
            number(3),
            c.get(4).cloned(),
        )
    });
    crate::bench::with_note(&head, "| model", &note, rows.into_iter())
}

/// `report` with its model-step section replaced by `section` (added at the end where it had
/// none: after the GPU runs, which the bench table's writer keeps as they are).
pub(crate) fn replace_section(report: &str, section: &str) -> String {
    replace_named(report, SECTION, section)
}

/// `report` with the section under `heading` (`"\n## …"`, up to the next `## `) replaced by
/// `section`, which is added at the end where there was none.
fn replace_named(report: &str, heading: &str, section: &str) -> String {
    let (before, after) = match report.find(heading) {
        Some(at) => {
            let rest = &report[at + heading.len()..];
            let end = rest
                .find("\n## ")
                .map_or(report.len(), |e| at + heading.len() + e);
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
    write_csv(&root.join("docs/model-steps.csv"), &csv(&steps, &times))?;
    let report_path = root.join("docs/benchmarks.md");
    let report = std::fs::read_to_string(&report_path)
        .with_context(|| format!("reading {}", report_path.display()))?;
    let fresh = section(&steps, &times, &what, &when);
    let fresh = match std::env::var("EMBER_BENCH_MODELS") {
        Ok(models) if !models.trim().is_empty() => {
            let measured = steps.iter().map(|s| s.model.clone()).collect();
            merge_section(current_section(&report), &fresh, &measured, &when)
        }
        _ => fresh,
    };
    crate::write_atomic(&report_path, &replace_section(&report, &fresh))?;
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
    fn a_gpu_runs_rows_stand_beside_pytorch_at_their_precision_and_keep_the_cpu_rows() {
        let group = "model_step/resnet18-cifar_b128/cuda-16t";
        let step = |v: &str, ns| Step::parse(&format!("{group}/{v}"), ns).unwrap();
        let key = |v: &str| format!("{group}/{v}");
        let run = GpuRun {
            steps: vec![
                step("1-native", 20e6),
                step("3-afm16", 60e6),
                step("5-dense-infer", 5e6),
            ],
            f32: BTreeMap::from([(key("1-native"), 17e6), (key("5-dense-infer"), 4e6)]),
            tf32: BTreeMap::from([(key("1-native"), 10e6), (key("5-dense-infer"), 2.5e6)]),
            gpu: "NVIDIA H200".into(),
            torch: "2.11".into(),
        };
        // native beside TF32, AFM16 beside f32, inference beside inference
        assert_eq!(run.torch_of(&run.steps[0]), Some((10e6, "tf32")));
        assert_eq!(run.torch_of(&run.steps[1]), Some((17e6, "f32")));
        assert_eq!(run.torch_of(&run.steps[2]), Some((2.5e6, "tf32")));
        let csv = run.csv();
        assert!(
            csv.contains("resnet18-cifar,128,cuda:NVIDIA H200,16,afm16,f32,60.000,17.000,3.53\n"),
            "{csv}"
        );
        assert!(
            run.section("abc1234")
                .contains("| resnet18-cifar | 128 | native |")
        );
        // merged into the file: the CPU rows stay, the GPU's earlier rows are replaced
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model-steps.csv");
        std::fs::write(
            &path,
            format!(
                "{CSV_HEADER}\nlenet5,64,ndarray,1,native,f32,8.000,4.000,2.00\n\
                 resnet18-cifar,128,cuda:NVIDIA H200,16,native,tf32,99.000,10.000,9.90\n"
            ),
        )
        .unwrap();
        write_csv(&path, &csv).unwrap();
        let merged = std::fs::read_to_string(&path).unwrap();
        assert!(merged.starts_with(CSV_HEADER), "{merged}");
        assert!(merged.contains("lenet5,64,ndarray,1,native"), "{merged}");
        assert!(!merged.contains("99.000"), "{merged}");
        assert_eq!(merged.lines().count(), 1 + 1 + 3, "{merged}");
    }

    #[test]
    fn a_run_of_some_models_replaces_their_rows_alone() {
        let row = |model: &str, threads: usize, ms: &str| {
            format!("| {model} | 64 | ndarray | {threads} | native | {ms} | 1 ms | 2.00× |")
        };
        let head = format!(
            "{SECTION}\n\nWritten by a full run.\n\n\
             | model | batch | device | threads | route | Ember | PyTorch | Ember ÷ PyTorch |\n\
             |---|---:|---|---:|---|---:|---:|---:|\n"
        );
        let old = format!(
            "{head}{}\n{}\n{}\n",
            row("deit-ti", 1, "old"),
            row("gru", 1, "old"),
            row("lenet5", 2, "old")
        );
        let report = format!("# B\n\n| a |\n{old}\n## Whole-model steps on a GPU\n\ng\n");
        assert_eq!(current_section(&report), old);
        let fresh = format!("{head}{}\n{}\n", row("gru", 1, "new"), row("gru", 2, "new"));
        let gru = std::collections::BTreeSet::from(["gru".to_string()]);
        let merged = merge_section(current_section(&report), &fresh, &gru, "commit abc");
        let rows: Vec<&str> = merged
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| model"))
            .collect();
        assert_eq!(
            rows,
            [
                row("deit-ti", 1, "old"),
                row("gru", 1, "new"),
                row("gru", 2, "new"),
                row("lenet5", 2, "old")
            ]
        );
        assert!(merged.starts_with(&format!("{SECTION}\n\nWritten by a full run.\n\nRows of `gru`: re-run alone at commit abc.\n\n| model")), "{merged}");
        // again: one note for the same models, the table written once
        let again = merge_section(&merged, &fresh, &gru, "commit def");
        assert_eq!(again.matches("Rows of `gru`").count(), 1, "{again}");
        assert!(again.contains("commit def") && !again.contains("commit abc"));
        assert_eq!(again.matches("| model").count(), 1);
        // into the report: the GPU section after it stays
        let written = replace_section(&report, &merged);
        assert!(
            written.ends_with("## Whole-model steps on a GPU\n\ng\n"),
            "{written}"
        );
        // no old section: the fresh one
        assert_eq!(merge_section("", &fresh, &gru, "c"), fresh);
        // the CSV: the other models' rows of the same device stay
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model-steps.csv");
        std::fs::write(
            &path,
            format!(
                "{CSV_HEADER}\ngru,64,ndarray,1,native,f32,9.000,1.000,9.00\n\
                 lenet5,64,ndarray,1,native,f32,8.000,4.000,2.00\n"
            ),
        )
        .unwrap();
        write_csv(
            &path,
            &format!("{CSV_HEADER}\ngru,64,ndarray,1,native,f32,3.000,1.000,3.00\n"),
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!(
                "{CSV_HEADER}\ngru,64,ndarray,1,native,f32,3.000,1.000,3.00\n\
                 lenet5,64,ndarray,1,native,f32,8.000,4.000,2.00\n"
            )
        );
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
