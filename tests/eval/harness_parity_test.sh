#!/usr/bin/env bash
# Zero-shot parity with lm-evaluation-harness: trains a tiny X-MoD checkpoint (xmod-train,
# tiny-test backbone, K = 2, A = 1, a few steps on byte-level dict-gcide shards), then scores
# the six tasks' documents (model/eval/testdata/harness, in the harness's dataset schemas)
# twice — with xmod-eval, and with the harness itself (lm-eval from PyPI, installed by
# scripts/install-lmeval.sh into .cache/lmeval-venv) through the "xmod" model adapter — and
# requires every acc / acc_norm / perplexity and its standard error (the harness's default
# 100000-resample bootstrap for the perplexity) to agree to 1e-6
# (tests/eval/harness_parity.py, which prints the table). Offline: HF_DATASETS_OFFLINE / HF_HUB_OFFLINE, a private HF_HOME.
# Needs XMOD_BIN_DIR and XMOD_SOURCE_DIR (ctest sets both); KEEP_TMP=1 keeps the work folder.
set -euo pipefail
SRC=${XMOD_SOURCE_DIR:?}
BIN=${XMOD_BIN_DIR:?}
for bin in xmod-data xmod-train xmod-eval; do
  [[ -x $BIN/$bin ]] || { echo "FAIL: $BIN/$bin not built" >&2; exit 1; }
done
"$SRC/scripts/install-lmeval.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/harness_parity.XXXXXX")
cleanup() { [[ ${KEEP_TMP:-0} == 1 ]] && echo "kept $work" || rm -rf "$work"; }
trap cleanup EXIT

# Byte-level shards (vocabulary 256 = tiny-test's) from the first 300 kB of dict-gcide.
"$BIN/xmod-data" gcide --out "$work/gcide.txt" >/dev/null
head -c 300000 "$work/gcide.txt" >"$work/text.txt"
"$BIN/xmod-data" train-bpe --text "$work/text.txt" --vocab 256 --out "$work/bytes.txt" >/dev/null
"$BIN/xmod-data" encode --tokenizer "$work/bytes.txt" --text "$work/text.txt" \
  --out_prefix "$work/gcide" --val_fraction 0.1 >/dev/null

cat >"$work/spec.textpb" <<SPEC
model { arch: XMOD backbone { name: "tiny-test" } k: 2 a: 1 n0: 1 }
training { flop_budget: 2e9 seq_len: 64 batch_tokens: 256 seed: 1 }
data { train_glob: "$work/gcide_train_*.bin" val_glob: "$work/gcide_val_*.bin" }
checkpoint_dir: "$work/ckpt"
SPEC
"$BIN/xmod-train" --spec "$work/spec.textpb" --threads 1 >"$work/train.log" 2>&1 ||
  { cat "$work/train.log" >&2; echo "FAIL: xmod-train" >&2; exit 1; }
checkpoint=$(find "$work/ckpt" -type f -name '*.pt' | sort | tail -n 1)
[[ -n $checkpoint ]] || { echo "FAIL: xmod-train wrote no checkpoint" >&2; exit 1; }

# The adapter's channel refuses what it cannot trust, naming the line, before any scoring.
printf '{"context": "a"}\n' >"$work/bad-pairs.jsonl"
if "$BIN/xmod-eval" --checkpoint "$checkpoint" --pairs "$work/bad-pairs.jsonl" \
     2>"$work/bad-pairs.err"; then
  echo "FAIL: xmod-eval --pairs accepted a pair without a continuation" >&2; exit 1
fi
grep -q 'bad-pairs.jsonl:1: no "continuation" field' "$work/bad-pairs.err" ||
  { cat "$work/bad-pairs.err" >&2; echo "FAIL: xmod-eval --pairs: no line named" >&2; exit 1; }

export HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 HF_HOME=$work/hf TOKENIZERS_PARALLELISM=false
cd "$work"
"$SRC/.cache/lmeval-venv/bin/python" "$SRC/tests/eval/harness_parity.py" \
  --xmod_eval "$BIN/xmod-eval" --checkpoint "$checkpoint" --tokenizer "$work/bytes.txt" \
  --data_dir "$SRC/model/eval/testdata/harness" --work "$work" 2>"$work/harness.log" ||
  { tail -n 30 "$work/harness.log" >&2; exit 1; }
