#!/usr/bin/env bash
# Installs lm-evaluation-harness (PyPI lm-eval, pinned) into .cache/lmeval-venv (Debian's
# /usr/bin/python3), for the harness-parity test (tests/eval/harness_parity_test.sh) and for
# scoring checkpoints through the harness (model/eval/harness/xmod_lm.py). Idempotent and
# quick when present; one installer at a time (flock).
#
# Lean on purpose: lm-eval goes in with --no-deps, then only what its evaluator, task configs
# and metrics import (model/eval/harness/requirements.txt, pinned). The harness's core needs
# no torch — only its Hugging Face model backends do — so none of torch's multi-GB CUDA wheels
# is downloaded; xmod's model is reached through xmod-eval instead.
set -euo pipefail
cd "$(dirname "$0")/.."
LM_EVAL_VERSION=0.4.13
VENV=.cache/lmeval-venv
REQUIREMENTS=model/eval/harness/requirements.txt
mkdir -p .cache
exec 9>.cache/lmeval-venv.lock
flock 9
stamp="lm-eval==$LM_EVAL_VERSION $(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)"
if [[ -f $VENV/.xmod-stamp && $(<"$VENV/.xmod-stamp") == "$stamp" ]] &&
   "$VENV/bin/python" -c 'import lm_eval' 2>/dev/null; then
  exit 0
fi
echo "install-lmeval: lm-eval==$LM_EVAL_VERSION into $VENV"
rm -rf "$VENV"
/usr/bin/python3 -m venv "$VENV"
PIP=("$VENV/bin/pip" install --quiet --disable-pip-version-check)
"${PIP[@]}" --no-deps "lm-eval==$LM_EVAL_VERSION"
"${PIP[@]}" --no-deps -r "$REQUIREMENTS"
"$VENV/bin/python" -c 'import lm_eval.evaluator, lm_eval.tasks, lm_eval.api.model'
echo "$stamp" >"$VENV/.xmod-stamp"
