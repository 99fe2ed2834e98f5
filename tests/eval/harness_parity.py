"""xmod-eval against lm-evaluation-harness itself, on one checkpoint and the same documents.

    harness_parity.py --xmod_eval BIN --checkpoint FILE --tokenizer FILE --data_dir DIR --work DIR

For each of the six tasks, DIR/<harness task>.jsonl holds documents in the harness's dataset
schema. xmod-eval scores them in its task mode; the harness scores them through the "xmod"
model adapter (model/eval/harness/xmod_lm.py, which runs xmod-eval --pairs), with the
harness's own task configuration — each local config includes the installed harness's YAML
for the task and changes only where the documents come from (dataset_path: json, a local
data_files), so the prompts, choices, preprocessing, metrics and aggregation are the
harness's. The requests the harness sends must equal DIR/requests.jsonl — the pairs, task by
task in order, that model/eval/tasks_test.cc requires xmod-eval's task readers to build
(--write_requests rewrites that file from the harness). Both compute standard errors with the
harness's default bootstrap_iters (100000): acc_stderr and acc_norm_stderr (the sample
standard error), and LAMBADA's perplexity_stderr (the harness's seeded bootstrap, which
xmod-eval reproduces draw for draw). Prints a table (task, metric, harness, xmod,
|difference|) and exits 1 unless every metric and every standard error agrees to 1e-6 and
xmod-eval reports a standard error exactly where the harness does.
"""

import argparse
import json
import os
import subprocess
import sys

import lm_eval
import lm_eval.tasks

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "model", "eval",
                                "harness"))
import xmod_lm  # noqa: E402  (registers the "xmod" model)

TOLERANCE = 1e-6
BOOTSTRAP_ITERS = 100000  # the harness's default (simple_evaluate, lm_eval --bootstrap_iters)

# harness task -> (its YAML under lm_eval/tasks, the split it evaluates, xmod-eval's task,
# {harness metric: xmod-eval's JSON field}); each metric's standard error is
# "<metric>_stderr" in both.
TASKS = {
    "hellaswag": ("hellaswag/hellaswag.yaml", "validation", "hellaswag",
                  {"acc": "acc", "acc_norm": "acc_norm"}),
    "arc_easy": ("arc/arc_easy.yaml", "test", "arc_easy", {"acc": "acc", "acc_norm": "acc_norm"}),
    "arc_challenge": ("arc/arc_challenge.yaml", "test", "arc_challenge",
                      {"acc": "acc", "acc_norm": "acc_norm"}),
    "piqa": ("piqa/piqa.yaml", "validation", "piqa", {"acc": "acc", "acc_norm": "acc_norm"}),
    "boolq": ("super_glue/boolq/default.yaml", "validation", "boolq", {"acc": "acc"}),
    "lambada_openai": ("lambada/lambada_openai.yaml", "test", "lambada",
                       {"acc": "acc", "perplexity": "ppl"}),
}


class RecordingXmodLM(xmod_lm.XmodLM):
    """The adapter, keeping every request it answers as {"task", "context", "continuation"}."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.requests = []

    def loglikelihood(self, requests, disable_tqdm=False):
        for request in requests:
            context, continuation = request.args[:2]
            self.requests.append({"task": request.task_name.removeprefix("xmod_"),
                                  "context": context, "continuation": continuation})
        return super().loglikelihood(requests, disable_tqdm)


def check_requests(recorded, path, write):
    """0 when the harness's requests equal the recorded file (or it was just rewritten)."""
    lines = [json.dumps(r, ensure_ascii=False) for r in recorded]
    if write:
        with open(path, "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
        return 0
    with open(path, encoding="utf-8") as f:
        expected = [line for line in f.read().splitlines() if line.strip()]
    if lines == expected:
        print(f"requests: the harness sent the {len(lines)} pairs of {os.path.basename(path)}")
        return 0
    first = next((i for i, (a, b) in enumerate(zip(lines, expected)) if a != b),
                 min(len(lines), len(expected)))
    print(f"FAIL: the harness's request {first + 1} (of {len(lines)}) differs from "
          f"{path} (of {len(expected)}):\n  harness:  "
          f"{lines[first] if first < len(lines) else '-'}\n  recorded: "
          f"{expected[first] if first < len(expected) else '-'}")
    return 1


def write_local_configs(data_dir, config_dir):
    """One YAML per task: the harness's own, reading DIR/<task>.jsonl instead of the Hub."""
    harness_tasks = os.path.dirname(lm_eval.tasks.__file__)
    os.makedirs(config_dir, exist_ok=True)
    for task, (yaml_path, split, _, _) in TASKS.items():
        config = {
            "include": os.path.join(harness_tasks, yaml_path),
            "task": f"xmod_{task}",
            "dataset_path": "json",
            "dataset_name": None,
            "dataset_kwargs": {"data_files": {split: os.path.join(data_dir, f"{task}.jsonl")}},
            "training_split": None,
            "validation_split": split if split == "validation" else None,
            "test_split": split if split == "test" else None,
        }
        with open(os.path.join(config_dir, f"xmod_{task}.yaml"), "w") as out:
            json.dump(config, out)  # JSON is YAML


def xmod_scores(args, task, xmod_task):
    done = subprocess.run(
        [args.xmod_eval, "--checkpoint", args.checkpoint, "--tokenizer", args.tokenizer,
         "--task", xmod_task, "--data", os.path.join(args.data_dir, f"{task}.jsonl"),
         "--threads", "1", "--bootstrap_iters", str(BOOTSTRAP_ITERS)],
        capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAIL: xmod-eval --task {xmod_task}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def compare(task, metric, h, x):
    """(task, metric, harness, xmod, |diff|, flag) as printed; flag "" when they agree: both
    numbers within TOLERANCE, or the harness's "N/A" where xmod-eval printed no field."""
    if h == "N/A" or x is None:
        ok = h == "N/A" and x is None
        return (task, metric, str(h), "-" if x is None else f"{x:.15g}", "",
                "" if ok else "  MISMATCH")
    diff = abs(h - x)
    ok = diff <= TOLERANCE
    return (task, metric, f"{h:.15g}", f"{x:.15g}", f"{diff:.2g}", "" if ok else "  MISMATCH")


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--xmod_eval", "--checkpoint", "--tokenizer", "--data_dir", "--work"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--write_requests", action="store_true",
                        help="rewrite DIR/requests.jsonl from the harness's requests")
    args = parser.parse_args()
    config_dir = os.path.join(args.work, "tasks")
    write_local_configs(args.data_dir, config_dir)
    manager = lm_eval.tasks.TaskManager(include_path=config_dir)
    model = RecordingXmodLM(checkpoint=args.checkpoint, xmod_eval=args.xmod_eval,
                           tokenizer=args.tokenizer, threads=1)
    harness = lm_eval.simple_evaluate(model=model, tasks=[f"xmod_{t}" for t in TASKS],
                                      task_manager=manager, num_fewshot=0,
                                      bootstrap_iters=BOOTSTRAP_ITERS,
                                      log_samples=False)["results"]

    failures = check_requests(model.requests, os.path.join(args.data_dir, "requests.jsonl"),
                              args.write_requests)
    rows = []
    for task, (_, _, xmod_task, metrics) in TASKS.items():
        ours = xmod_scores(args, task, xmod_task)
        theirs = harness[f"xmod_{task}"]
        for metric, field in metrics.items():
            for h_key, x_key in ((metric, field), (f"{metric}_stderr", f"{field}_stderr")):
                row = compare(task, h_key, theirs[f"{h_key},none"], ours.get(x_key))
                failures += 0 if row[-1] == "" else 1
                rows.append(row)
    print(f"{'task':<16} {'metric':<18} {'harness':>22} {'xmod':>22} {'|diff|':>9}")
    for task, metric, h, x, diff, flag in rows:
        print(f"{task:<16} {metric:<18} {h:>22} {x:>22} {diff:>9}{flag}")
    passed = len(rows) + 1 - failures
    print(f"{passed} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
