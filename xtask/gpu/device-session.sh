#!/usr/bin/env bash
# One call of a lent GPU machine (docs/gpu-bundle.md), run from the repository root with the
# carried folder gpu/ beside this script's copy (gpu/device-session.sh):
#
#   bash gpu/device-session.sh checks
#       gpu/bundle/ (cargo xtask gpu-bundle --out gpu/bundle) and gpu/cifar10-sub.tar.gz:
#       1. the model-step rows beside PyTorch (220 s at most), 2. the kernel tests (150 s),
#       3. one-epoch CIFAR-10 trainings of ResNet-18 on 5,120 images, native and AFM16 at
#       batch 128 (90 s each), 4. ResNet-50 at batch 20,000, which must end with an error naming
#       the batch size (60 s): 610 s at most, within one call.
#   bash gpu/device-session.sh profile [ROW...]
#       gpu/bundle/ (either kind; no dataset: the steps run on random inputs): `ember profile`
#       of the model-step table's GPU rows, each kernel's launches and device time per step
#       beside the step's wall time (80 s each, 7 of them: 560 s at most), into
#       res/profile-NAME.md. ROW names pick some of the rows (the names in the list below).
#   bash gpu/device-session.sh matmul [ROW [KERNEL...]]
#       gpu/bundle/ (either kind; no dataset): the wall time of ROW's training step (a name of
#       the profile list below; resnet18-cifar-b128-native without) on each of cubek's matmul
#       kernels (`ember profile --wall-only --matmul KERNEL`; the GPU's candidates without
#       KERNELs: burn and the twelve CMMA, mma and TMA kernels), 35 s each (455 s at most),
#       into res/matmul-ROW-KERNEL.md and the table res/matmul-ROW.md.
#   bash gpu/device-session.sh speed
#       gpu/bundle/ (either kind) and gpu/cifar10-sub.tar.gz: the whole-model speed check of
#       docs/architecture.md. 1. PyTorch's training step of the five image models, f32 and TF32
#       (torch_rows.py, 120 s at most); 2. the profile rows of ResNet-18-CIFAR b128 native and
#       AFM16, DeiT-Ti, ResMLP-S12 and LeNet-5 b64 (80 s each); 3. one-epoch CIFAR-10 trainings
#       of ResNet-18 at batch 128 on the GEMM route, on Burn's kernels (`--conv burn`) and under
#       AFM16, whose losses must agree (90 s each): 620 s at most by the timeouts; 192 s on
#       an H200.
#   bash gpu/device-session.sh reproduce NAME [ARGS...]
#       gpu/bundle/ (cargo xtask gpu-bundle --ember-only --out gpu/bundle) and
#       gpu/cifar10-jpg.tar.gz: `cargo xtask reproduce NAME --backend cuda ARGS` from the
#       bundle's binaries (ARGS: --time-limit SECONDS, --epochs N, ...). Its runs live in
#       target/reproduce/ for the next call while the machine stays warm.
#
# Everything it makes goes into $OUT/res.tar.gz, remade after each stage, so a call cut off by
# its limit still returns what was done.
set -u
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(pwd)
out=${OUT:-$root/device-out}
res=$out/res
mkdir -p "$res"
pack() { tar -czf "$out/res.tar.gz.part" -C "$out" res && mv "$out/res.tar.gz.part" "$out/res.tar.gz"; }
stage() { echo "==> $* ($(date +%T))" | tee -a "$res/stages.txt"; }
# One epoch of ResNet-18-CIFAR at batch 128 on gpu/cifar10-sub.tar.gz's 5,120 training images
# (tested on 1,000): NAME, then more `ember train` arguments; into res/train-NAME.
train_subset() {
    local name=$1
    shift
    local data=/tmp/ember-cifar-sub
    [ -d "$data/train" ] || { mkdir -p "$data" && tar -xzf "$here/cifar10-sub.tar.gz" -C "$data"; }
    timeout 90 "$bin/ember" train --model resnet18-cifar --backend cuda --dataset cifar10 \
        --data-dir "$data" "$@" --epochs 1 --batch-size 128 --plain \
        --train-limit 5120 --test-limit 1000 \
        --out "$res/train-$name" --overwrite >"$res/train-$name.log" 2>&1
    echo "train $name: exit $?" >>"$res/stages.txt"
    rm -rf "$res/train-$name/checkpoint" "$res/train-$name/model.mpk"
    pack
}

bundle=$here/bundle
work=$bundle/work
if [ ! -x "$bundle/run.sh" ]; then
    echo "no bundle in $bundle: cargo xtask gpu-bundle --out gpu/bundle" >&2
    exit 2
fi
# run.sh unpacks the binaries once (its --help runs nothing else)
"$bundle/run.sh" --help >/dev/null || { echo "cannot unpack $bundle" >&2; exit 2; }
bin=$work/bin
cp "$work/BUNDLE.txt" "$res/" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$res/gpu.csv" 2>&1

# `ember profile` rows: a name, then its arguments (CUDA; random inputs of the dataset's shape)
ROWS='resnet18-cifar-b128-native --model resnet18-cifar --dataset cifar10 --batch-size 128
resnet18-cifar-b128-afm16 --model resnet18-cifar --dataset cifar10 --batch-size 128 --multiplier afm16
resnet18-cifar-b128-burn --model resnet18-cifar --dataset cifar10 --batch-size 128 --conv burn
gru-b64-native --model gru --dataset fsdd --batch-size 64 --frames 48
resmlp-s12-b64-native --model resmlp-s12 --dataset cifar10 --batch-size 64
deit-ti-b64-native --model deit-ti --dataset cifar10 --batch-size 64
lenet5-b64-native --model lenet5 --dataset mnist --batch-size 64'

mode=${1:-checks}
shift || true
case $mode in
checks)
    stage "model-step rows beside PyTorch"
    timeout 220 "$bundle/run.sh" --skip tests --skip train --bench-filter 'model_step.*cuda' \
        --report "$res/model-report.md" >"$res/model.log" 2>&1
    mkdir -p "$res/model"
    cp -r "$work/criterion" "$work/torch.json" "$work/BUNDLE.txt" "$res/model/" 2>/dev/null
    pack
    stage "kernel tests"
    timeout 150 "$bundle/run.sh" --skip benches --skip train --skip torch \
        --report "$res/tests-report.md" >"$res/tests.log" 2>&1
    cp -r "$work/logs" "$res/test-logs" 2>/dev/null
    pack
    stage "one-epoch CIFAR-10 trainings"
    for mul in native afm16; do
        train_subset "$mul" --multiplier "$mul"
    done
    data=/tmp/ember-cifar-sub
    stage "ResNet-50 at batch 20,000 (must fail naming the batch)"
    timeout 60 "$bin/ember" train --model resnet50-cifar --backend cuda --dataset cifar10 \
        --data-dir "$data" --epochs 1 --batch-size 20000 --plain --out /tmp/ember-oom \
        >"$res/oom.log" 2>&1
    echo "oom: exit $?" >>"$res/stages.txt"
    ;;
profile)
    # name, then `ember profile` arguments (CUDA; random inputs of the dataset's shape)
    # optional arguments: the names of the rows to run (all seven without)
    only=" $* "
    while read -r name args; do
        [ -n "$name" ] || continue
        if [ "$only" != "  " ] && [[ $only != *" $name "* ]]; then continue; fi
        stage "profile $name"
        # shellcheck disable=SC2086
        timeout 80 "$bin/ember" profile --backend cuda $args --out "$res/profile-$name.md" \
            >"$res/profile-$name.log" 2>&1
        echo "profile $name: exit $?" >>"$res/stages.txt"
        pack
    done <<<"$ROWS"
    ;;
matmul)
    row=${1:-resnet18-cifar-b128-native}
    shift || true
    args=$(awk -v r="$row" '$1 == r { $1 = ""; print }' <<<"$ROWS")
    [ -n "$args" ] || { echo "unknown row $row" >&2; exit 2; }
    kernels=${*:-burn simple-cyclic-cmma simple-cyclic-mma simple-multirow-cmma double-cyclic-cmma \
double-cyclic-mma double-specialized-cmma ordered-double-cmma ordered-double-mma \
specialized-cyclic-cmma simple-tma-cmma simple-tma-mma specialized-tma-cmma}
    table=$res/matmul-$row.md
    printf '| kernel | ms / step | fallbacks / step | exit |\n|---|---:|---:|---:|\n' >"$table"
    for k in $kernels; do
        stage "matmul $row $k"
        md=$res/matmul-$row-$k.md
        # shellcheck disable=SC2086
        timeout 35 "$bin/ember" profile --backend cuda $args --matmul "$k" --wall-only \
            --out "$md" >"$res/matmul-$row-$k.log" 2>&1
        status=$?
        ms=$(sed -n 's/.*profiler off: \*\*\([0-9.]*\) ms.*/\1/p' "$md" 2>/dev/null)
        fb=$(sed -n 's/.* a step, \([0-9.]*\) of them on Burn.*/\1/p' "$md" 2>/dev/null)
        echo "| $k | ${ms:-—} | ${fb:-—} | $status |" >>"$table"
        echo "matmul $row $k: exit $status" >>"$res/stages.txt"
        pack
    done
    cat "$table"
    ;;
speed)
    stage "PyTorch's model steps"
    python3 - "$res/torch-request.json" <<'PY'
import json, sys
rows = [("resnet18-cifar", 128), ("resnet18-cifar-w16", 64), ("deit-ti", 64),
        ("resmlp-s12", 64), ("lenet5", 64)]
json.dump([{"row": f"{m}/b{b}", "op": "model_step", "dims": [b], "model": m}
           for m, b in rows], open(sys.argv[1], "w"))
PY
    timeout 120 python3 "$root/xtask/gpu/torch_rows.py" "$res/torch-request.json" \
        "$res/torch.json" >"$res/torch.log" 2>&1
    echo "torch: exit $?" >>"$res/stages.txt"
    pack
    bash "$0" profile resnet18-cifar-b128-native resnet18-cifar-b128-afm16 deit-ti-b64-native \
        resmlp-s12-b64-native lenet5-b64-native
    stage "one-epoch CIFAR-10 trainings (5,120 images)"
    train_subset gemm --conv gemm --seed 1
    train_subset burn --conv burn --seed 1
    train_subset afm16 --multiplier afm16 --seed 1
    ;;
reproduce)
    name=${1:?reproduce needs an experiment name}
    shift
    stage "reproduce $name $*"
    # xtask finds the workspace from CARGO_MANIFEST_DIR; the commit comes from the bundle
    CARGO_MANIFEST_DIR=$root/xtask \
        EMBER_COMMIT=$(sed -n 's/^commit //p' "$work/BUNDLE.txt") \
        "$bin/xtask" reproduce "$name" --backend cuda --ember "$bin/ember" --datasets "$here" "$@" \
        2>&1 | tee "$res/reproduce-$name.log"
    status=${PIPESTATUS[0]}
    echo "reproduce $name: exit $status" >>"$res/stages.txt"
    mkdir -p "$res/results"
    cp docs/results/"$name"-cuda* "$res/results/" 2>/dev/null
    # every run's manifest and metrics (small), never its checkpoints
    (cd target/reproduce 2>/dev/null && find . -name ember-run.json -o -name metrics.csv \
        -o -name curves.png -o -name '*.args' | tar -czf "$res/runs.tar.gz" -T -)
    ;;
*)
    echo "unknown mode $mode: checks, profile, matmul, speed or reproduce NAME [ARGS...]" >&2
    exit 2
    ;;
esac
pack
echo "done: $out/res.tar.gz"
