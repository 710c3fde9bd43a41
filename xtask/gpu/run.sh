#!/bin/sh
# Ember's GPU bundle (made by `cargo xtask gpu-bundle`; docs/gpu-bundle.md): unpacks the binaries
# once, then runs every kernel test, the bench rows, one-epoch trainings and, where
# `python3 -c 'import torch'` works, the PyTorch column, and prints one table (also written to
# work/report.md, or to --report FILE). Options are xtask gpu-run's: `run.sh --help`.
#
# Needs an NVIDIA driver (libcuda) and CUDA's runtime libraries (libnvrtc): they are looked for in
# /usr/local/cuda/lib64 before LD_LIBRARY_PATH. EMBER_TEST_RUNTIME picks the runtime: cuda unless
# set (wgpu runs the same on Vulkan).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=${EMBER_BUNDLE_WORK:-$here/work}
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export EMBER_TEST_RUNTIME="${EMBER_TEST_RUNTIME:-cuda}"
if [ ! -x "$work/bin/xtask" ] || [ "$here/ember-gpu.tar.xz" -nt "$work/bin/xtask" ]; then
    rm -rf "$work/bin"
    mkdir -p "$work"
    echo "==> unpacking ember-gpu.tar.xz into $work" >&2
    if command -v xz >/dev/null 2>&1; then
        xz -dc "$here/ember-gpu.tar.xz" | tar -xf - -C "$work"
    else
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
            "$here/ember-gpu.tar.xz" "$work"
    fi
    touch "$work/bin/xtask"
fi
exec "$work/bin/xtask" gpu-run --bin "$work/bin" --work "$work" --torch "$work/torch_rows.py" "$@"
