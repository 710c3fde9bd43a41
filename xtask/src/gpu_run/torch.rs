//! The runner's PyTorch column: the op of each bench group read from its name, the request to
//! `torch_rows.py`, and its times by Ember row.

use super::{Ended, Options, run_logged};
use crate::bench::Row;
use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One PyTorch row the runner asks for: the Ember row it stands beside, the op and its sizes.
#[derive(Debug, PartialEq)]
struct TorchOp {
    /// The Ember row (`group/row`) it is compared with.
    row: String,
    /// `matmul` (`[m, k] · [k, n]`), `matmul_at` (`[k, m]ᵀ · [k, n]`), a broadcast op
    /// (`prelu_fwd`, `prelu_bwd`, `affine_fwd`, `affine_bwd` on `[n, c, h, w]`), or
    /// `model_step` (dims `[batch]`, of `model`).
    op: &'static str,
    dims: Vec<usize>,
    /// The Ember model of a `model_step`.
    model: Option<String>,
}

/// PyTorch's inference step beside each model-step group's `*-dense-infer` row (the logits of
/// a batch on the evaluation form, no autodiff), for the groups among `ops` that have one.
fn infer_ops(ops: &[TorchOp], rows: &[Row]) -> Vec<TorchOp> {
    ops.iter()
        .filter(|o| o.op == "model_step")
        .filter_map(|o| {
            let group = o.row.rsplit_once('/')?.0;
            let row = rows.iter().find(|r| {
                r.id.rsplit_once('/')
                    .is_some_and(|(g, v)| g == group && v.ends_with("dense-infer"))
            })?;
            Some(TorchOp {
                row: row.id.clone(),
                op: "model_infer",
                dims: o.dims.clone(),
                model: o.model.clone(),
            })
        })
        .collect()
}

/// `"64x784x300"` → `[64, 784, 300]`.
fn dims_of(s: &str) -> Option<Vec<usize>> {
    s.split('x').map(|d| d.parse().ok()).collect()
}

/// `m197_k384_o1536`-style sizes at the end of `s`: (M, K, out).
fn mko(s: &str) -> Option<[usize; 3]> {
    let parts: Vec<&str> = s.rsplitn(4, '_').collect();
    let o = parts.first()?.strip_prefix('o')?.parse().ok()?;
    let k = parts.get(1)?.strip_prefix('k')?.parse().ok()?;
    let m = parts.get(2)?.strip_prefix('m')?.parse().ok()?;
    Some([m, k, o])
}

/// The PyTorch op of a bench group on `runtime`, read from the group's name (the benches
/// name their shapes: `gemm_<layer>_<m>x<k>x<n>/<runtime>`,
/// `bspmm_<runtime>_<samples>x<rows>x<d>_out<o>_b<b>`, `{hinm,bcrc}_<runtime>_…_m<M>_k<K>_o<O>`,
/// `broadcast_<runtime>_<op>_<n>x<c>x<h>x<w>`).
fn torch_op(group: &str, runtime: &str) -> Option<TorchOp> {
    if let Some(rest) = group.strip_prefix("model_step/") {
        // `model_step/<model>_b<batch>/<runtime>-<threads>t`: every route of the group beside
        // PyTorch's one step (its first row is `1-native`)
        let (model, rest) = rest.split_once("_b")?;
        let (batch, device) = rest.split_once('/')?;
        if device.split_once('-')?.0 != runtime {
            return None;
        }
        return Some(TorchOp {
            row: format!("{group}/1-native"),
            op: "model_step",
            dims: vec![batch.parse().ok()?],
            model: Some(model.to_string()),
        });
    }
    if let Some(rest) = group.strip_prefix("gemm_") {
        let (shape, rt) = rest.rsplit_once('/')?;
        if rt != runtime {
            return None;
        }
        let dims = dims_of(shape.rsplit('_').next()?)?;
        return (dims.len() == 3).then(|| TorchOp {
            row: format!("{group}/1-native"),
            op: "matmul",
            dims,
            model: None,
        });
    }
    let rest = group
        .strip_prefix(&format!("bspmm_{runtime}_"))
        .map(|r| ("bspmm", r));
    let rest = rest.or_else(|| {
        ["hinm", "bcrc", "broadcast"].into_iter().find_map(|k| {
            group
                .strip_prefix(&format!("{k}_{runtime}_"))
                .map(|r| (k, r))
        })
    });
    let (kind, rest) = rest?;
    match kind {
        "bspmm" => {
            let mut parts = rest.split('_');
            let [s, r, d]: [usize; 3] = dims_of(parts.next()?)?.try_into().ok()?;
            let out = parts.next()?.strip_prefix("out")?.parse().ok()?;
            Some(TorchOp {
                row: format!("{group}/0-dense"),
                op: "matmul_at",
                dims: vec![d, s * r, out],
                model: None,
            })
        }
        "hinm" | "bcrc" => Some(TorchOp {
            row: format!("{group}/0-dense"),
            op: "matmul",
            dims: mko(rest)?.to_vec(),
            model: None,
        }),
        _ => {
            let (op, shape) = rest.rsplit_once('_')?;
            let op = ["prelu_fwd", "prelu_bwd", "affine_fwd", "affine_bwd"]
                .into_iter()
                .find(|o| *o == op)?;
            let dims = dims_of(shape)?;
            (dims.len() == 4).then(|| TorchOp {
                row: format!("{group}/1-kernel"),
                op,
                dims,
                model: None,
            })
        }
    }
}

/// The PyTorch column: times by Ember row, and a line saying where they were taken (or why
/// there are none).
pub(super) fn torch_column(
    opts: &Options,
    rows: &[Row],
    runtime: &str,
) -> (BTreeMap<String, f64>, String) {
    let Some(script) = &opts.torch else {
        return (BTreeMap::new(), "PyTorch: no script given".into());
    };
    let probe = Command::new("python3")
        .args(["-c", "import torch"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        return (
            BTreeMap::new(),
            "PyTorch: not run (`python3 -c 'import torch'` fails here)".into(),
        );
    }
    let mut groups: Vec<String> = rows
        .iter()
        .filter_map(|r| r.id.rsplit_once('/').map(|(g, _)| g.to_string()))
        .collect();
    groups.dedup();
    let mut ops: Vec<TorchOp> = groups.iter().filter_map(|g| torch_op(g, runtime)).collect();
    ops.extend(infer_ops(&ops, rows));
    let request = serde_json::Value::Array(
        ops.iter()
            .map(
                |o| serde_json::json!({"row": o.row, "op": o.op, "dims": o.dims, "model": o.model}),
            )
            .collect(),
    );
    let (req, resp) = (
        opts.work.join("torch-request.json"),
        opts.work.join("torch.json"),
    );
    let result = (|| -> Result<(BTreeMap<String, f64>, String)> {
        std::fs::write(&req, serde_json::to_string_pretty(&request)?)?;
        let mut cmd = Command::new("python3");
        cmd.arg(script).arg(&req).arg(&resp);
        let ended = run_logged(
            cmd,
            &opts.work.join("logs/torch.log"),
            Duration::from_secs(opts.timeout),
        )?;
        if ended != Ended::Exited(Some(0)) {
            bail!("torch_rows.py {ended} (logs/torch.log)");
        }
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&resp)?)?;
        let read = |key: &str| crate::model_steps::times(&v, key);
        let mut times = read("rows");
        // model steps beside PyTorch with TF32 matmuls and convolutions, the precision of
        // Burn's CUDA matmul (the f32 steps stay in torch.json)
        let tf32 = read("rows_tf32");
        let matched = !tf32.is_empty();
        times.extend(tf32);
        let what = format!(
            "PyTorch {} on {}, TF32 matmul {}{}",
            v["torch"].as_str().unwrap_or("?"),
            v["device"].as_str().unwrap_or("?"),
            if v["tf32"].as_bool() == Some(true) {
                "on"
            } else {
                "off"
            },
            if matched {
                " (model steps: TF32 matmuls and convolutions, as Burn's CUDA matmul; the f32 \
                 steps are in torch.json)"
            } else {
                ""
            }
        );
        Ok((times, what))
    })();
    result.unwrap_or_else(|e| (BTreeMap::new(), format!("PyTorch: failed ({e:#})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_ops_are_read_from_the_bench_groups() {
        let op = |g| torch_op(g, "cuda");
        assert_eq!(
            op("gemm_lenet300_fc1_64x784x300/cuda"),
            Some(TorchOp {
                row: "gemm_lenet300_fc1_64x784x300/cuda/1-native".into(),
                op: "matmul",
                dims: vec![64, 784, 300],
                model: None,
            })
        );
        let m = op("model_step/resnet18-cifar_b128/cuda-16t").unwrap();
        assert_eq!(
            (m.op, m.dims, m.model.as_deref()),
            ("model_step", vec![128], Some("resnet18-cifar"))
        );
        assert_eq!(m.row, "model_step/resnet18-cifar_b128/cuda-16t/1-native");
        assert_eq!(op("model_step/lenet5_b64/ndarray-2t"), None);
        assert_eq!(op("gemm_512x512x512/cuda").unwrap().dims, [512, 512, 512]);
        assert_eq!(op("gemm_512x512x512/ndarray"), None);
        let b = op("bspmm_cuda_64x196x384_out384_b32").unwrap();
        assert_eq!((b.op, b.dims), ("matmul_at", vec![384, 64 * 196, 384]));
        assert_eq!(b.row, "bspmm_cuda_64x196x384_out384_b32/0-dense");
        let h = op("hinm_cuda_deit-s-fc1_m197_k384_o1536").unwrap();
        assert_eq!((h.op, h.dims), ("matmul", vec![197, 384, 1536]));
        let c = op("bcrc_cuda_gru-input_m32_k152_o1024").unwrap();
        assert_eq!(c.dims, [32, 152, 1024]);
        let p = op("broadcast_cuda_prelu_bwd_4x64x15x15").unwrap();
        assert_eq!((p.op, p.dims), ("prelu_bwd", vec![4, 64, 15, 15]));
        assert_eq!(p.row, "broadcast_cuda_prelu_bwd_4x64x15x15/1-kernel");
        assert_eq!(op("hinm_host_deit-s-fc1_m197_k384_o1536"), None);
        assert_eq!(op("broadcast_cuda_gelu_4x64x15x15"), None);
    }

    #[test]
    fn a_model_group_with_inference_rows_also_asks_for_pytorchs_inference_step() {
        let row = |id: &str| Row {
            id: id.into(),
            mean_ns: 1.0,
            low_ns: 1.0,
            high_ns: 1.0,
        };
        let rows = [
            row("model_step/deit-ti_b64/cuda-16t/1-native"),
            row("model_step/deit-ti_b64/cuda-16t/5-dense-infer"),
            row("model_step/gru_b64/cuda-16t/1-native"),
        ];
        let ops: Vec<TorchOp> = [
            "model_step/deit-ti_b64/cuda-16t",
            "model_step/gru_b64/cuda-16t",
        ]
        .iter()
        .filter_map(|g| torch_op(g, "cuda"))
        .collect();
        assert_eq!(
            infer_ops(&ops, &rows),
            [TorchOp {
                row: "model_step/deit-ti_b64/cuda-16t/5-dense-infer".into(),
                op: "model_infer",
                dims: vec![64],
                model: Some("deit-ti".into()),
            }]
        );
    }
}
