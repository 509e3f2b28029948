#!/usr/bin/env bash
# The GPU device check: the conformance suite, the facade's linear kernels against the
# adapter's memory bandwidth, and `tempra bench --backend gpu` on 1b models, on a machine
# with a real GPU and no network.
#
#   bash scripts/gpu-device-check.sh build   # here: release binaries into target/device-check
#   bash scripts/gpu-device-check.sh run     # there, with target/device-check carried over
#
# SHAPE (default 1b) and REPS (default 3) set the bench models' shape and repetitions
# (SHAPE=tiny REPS=1 tries the script on lavapipe).
#
# `run` writes its JSON under $OUT (or target/device-check/out) and ends with a summary:
# the adapter, the conformance result, each decode-shaped linear row's GB/s and percent
# of the device's bandwidth (target >= 70 %), and pp/tg tok/s per model.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/device-check

build() {
  cargo build --release --locked -p tempra-llm --features gpu --bin tempra
  cargo build --release --locked -p tempra-conformance --features gpu --bin tempra-conformance
  cargo build --release --locked -p xtask
  mkdir -p "$dir/bin"
  for b in tempra tempra-conformance xtask; do
    cp "target/release/$b" "$dir/bin/$b"
    strip "$dir/bin/$b" 2>/dev/null || true
  done
  du -sh "$dir/bin"
}

run() {
  local bin=$dir/bin out=${OUT:-$dir/out}
  mkdir -p "$out"
  [ -x "$bin/tempra" ] || { echo "no $bin/tempra: run '$0 build' first and carry $dir" >&2; exit 1; }
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

  echo "::: conformance"
  local conformance=passed
  "$bin/tempra-conformance" --backend gpu | tee "$out/conformance.txt" || conformance=failed

  echo "::: linear kernels (decode and prefill shapes)"
  "$bin/xtask" bench-facade --backend gpu --quick --filter linear --out "$out/bench-facade-gpu.json" \
    | tee "$out/bench-facade-gpu.txt"

  echo "::: tempra bench --backend gpu"
  local models=$out/models
  mkdir -p "$models"
  local shape=${SHAPE:-1b} reps=${REPS:-3}
  for dtype in q4_0 q8_0 f16; do
    "$bin/xtask" make-model --arch llama --shape "$shape" --dtype "$dtype" -o "$models/$dtype.gguf"
    "$bin/tempra" bench -m "$models/$dtype.gguf" --backend gpu -p 512 -n 64 -r "$reps" --json \
      > "$out/bench-$shape-$dtype.json"
    rm -f "$models/$dtype.gguf"
  done

  echo "::: summary"
  if ! command -v python3 >/dev/null; then
    echo "conformance: $conformance (no python3 for the summary; the JSON is in $out)"
    cat "$out"/bench-*.json
    [ "$conformance" = passed ]
    return
  fi
  python3 - "$out" "$conformance" <<'PY'
import json, sys, glob, os
out, conformance = sys.argv[1], sys.argv[2]
facade = json.load(open(os.path.join(out, "bench-facade-gpu.json")))
a = facade["adapter"]
print(f"adapter: {a['name']} ({a['backend']}, {a['device_type']}, driver {a['driver']}); "
      f"bandwidth {a['mem_bw_gbs']} GB/s")
print(f"conformance: {conformance}")
print("| decode-shaped linear | dtype | GB/s | % of bandwidth |")
for r in facade["results"]:
    if r["op"].startswith("linear") and r["shape"].startswith("m1 ") and r.get("gbs") is not None:
        pct = r.get("pct_of_peak")
        flag = "" if pct is None or pct >= 70 else "  (below the 70 % target)"
        pct_s = "-" if pct is None else f"{pct:.0f} %"
        print(f"| {r['shape']} | {r['dtype']} | {r['gbs']:.1f} | {pct_s}{flag} |")
print("| model | pp512 tok/s | tg64 tok/s | decode weight reads GB/s |")
for path in sorted(glob.glob(os.path.join(out, "bench-*.json"))):
    if "facade" in path:
        continue
    b = json.load(open(path))
    tg_gbs = b.get("tg_weight_read_gbs")
    print(f"| {os.path.basename(path)[6:-5]} | {b['pp_tok_s']:.1f} | {b['tg_tok_s']:.1f} | "
          f"{'-' if tg_gbs is None else f'{tg_gbs:.1f}'} |")
PY
  [ "$conformance" = passed ]
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
