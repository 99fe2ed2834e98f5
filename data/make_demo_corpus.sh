#!/usr/bin/env bash
# Builds the demo corpus from dict-gcide, end to end and idempotently:
#   1. gcide.dict.dz -> OUT_DIR/gcide.txt (plain English text)
#   2. a small byte-level BPE (vocab XMOD_DEMO_VOCAB, default 2048) trained on the first
#      XMOD_DEMO_BPE_BYTES (default 8 MB) of it -> OUT_DIR/tokenizer_<vocab>.txt
#   3. all the text encoded -> OUT_DIR/gcide_train_000.bin ..., OUT_DIR/gcide_val_000.bin
#   4. the zero-shot task `gcide` from the validation entries -> OUT_DIR/gcide_task.jsonl
#      (for training.eval_tasks { task: "gcide" data: ".../gcide_task.jsonl" })
# A step is skipped when its output exists and is newer than its inputs. Prints the token
# counts of the shards at the end.
# Usage: data/make_demo_corpus.sh OUT_DIR BIN_DIR   (BIN_DIR holds xmod-data)
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 OUT_DIR BIN_DIR" >&2
  exit 2
fi
out_dir=$1
xmod_data=$2/xmod-data
dict=${XMOD_GCIDE_DICT:-/usr/share/dictd/gcide.dict.dz}
vocab=${XMOD_DEMO_VOCAB:-2048}
bpe_bytes=${XMOD_DEMO_BPE_BYTES:-8000000}
val_fraction=${XMOD_DEMO_VAL_FRACTION:-0.05}

[[ -x $xmod_data ]] || { echo "$0: $xmod_data not found; build the xmod-data target" >&2; exit 1; }
[[ -f $dict ]] || { echo "$0: $dict not found; apt-get install dict-gcide" >&2; exit 1; }
mkdir -p "$out_dir"

text=$out_dir/gcide.txt
tokenizer=$out_dir/tokenizer_$vocab.txt
prefix=$out_dir/gcide
stamp=$out_dir/gcide_shards.done

# up_to_date OUTPUT INPUT...: OUTPUT exists and is newer than every INPUT.
up_to_date() {
  local output=$1
  shift
  [[ -e $output ]] || return 1
  local input
  for input in "$@"; do
    [[ $output -nt $input ]] || return 1
  done
}

if up_to_date "$text" "$dict" "$xmod_data"; then
  echo "text: $text is up to date"
else
  "$xmod_data" gcide --dict "$dict" --out "$text"
fi

if up_to_date "$tokenizer" "$text"; then
  echo "tokenizer: $tokenizer is up to date"
else
  "$xmod_data" train-bpe --text "$text" --vocab "$vocab" --max_bytes "$bpe_bytes" --out "$tokenizer"
fi

if up_to_date "$stamp" "$tokenizer" "$text"; then
  echo "shards: ${prefix}_{train,val}_*.bin are up to date"
else
  rm -f "$stamp" "${prefix}"_train_*.bin "${prefix}"_val_*.bin
  "$xmod_data" encode --tokenizer "$tokenizer" --text "$text" --out_prefix "$prefix" \
    --val_fraction "$val_fraction"
  touch "$stamp"
fi

task=$out_dir/gcide_task.jsonl
if up_to_date "$task" "$text" "$xmod_data"; then
  echo "gcide task: $task is up to date"
else
  "$xmod_data" gcide-task --text "$text" --out "$task" --val_fraction "$val_fraction"
fi

# Token counts, read back from the shard headers.
for split in train val; do
  total=0
  for shard in "${prefix}_${split}"_*.bin; do
    count=$("$xmod_data" inspect "$shard" --show 0 | sed -n 's/.*version 1, \([0-9]*\) tokens/\1/p')
    total=$((total + count))
  done
  echo "$split: $total tokens in $(ls "${prefix}_${split}"_*.bin | wc -l) shard(s)" \
    "(${prefix}_${split}_*.bin, vocab $vocab)"
done
