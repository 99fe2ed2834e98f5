"""lm-evaluation-harness model "xmod": an xmod checkpoint behind the harness's LM interface.

The harness (lm_eval 0.4) turns every document of a task into loglikelihood requests, each a
(context, continuation) pair of strings, and computes its metrics from the answers. This
adapter answers them with xmod's own scorer: it writes a task's pairs as JSONL and runs
`xmod-eval --checkpoint C --pairs FILE` (model/eval/pairs.h), which tokenizes and scores them
on the checkpoint and prints one {"loglikelihood", "is_greedy", "tokens"} line per pair.
Requests go to xmod-eval one task at a time, in the harness's order (document by document,
choice by choice) — the order in which `xmod-eval --task` scores the same documents, so the
scorer forms the same batches and the two paths are comparable bit for bit.

    from lm_eval import simple_evaluate
    import xmod_lm  # registers "xmod"
    simple_evaluate(model="xmod", model_args="checkpoint=RUN/ckpt.pt,xmod_eval=BIN/xmod-eval",
                    tasks=[...])

model_args: checkpoint (required), xmod_eval (the binary; default "xmod-eval" on PATH),
tokenizer (xmod-eval --tokenizer), spec (--spec), device ("cpu"), threads (1), and the
harness's batch_size (xmod-eval --batch_size, default 16).

Only loglikelihood is served: the six zero-shot tasks xmod reports (hellaswag, arc_easy,
arc_challenge, piqa, boolq, lambada_openai) ask for nothing else; loglikelihood_rolling and
generate_until raise NotImplementedError naming what is missing.
"""

import json
import os
import subprocess
import tempfile

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model


@register_model("xmod")
class XmodLM(LM):
    def __init__(
        self,
        checkpoint,
        xmod_eval="xmod-eval",
        tokenizer="",
        spec="",
        device="cpu",
        threads=1,
        batch_size=16,
        **_harness_defaults,  # max_batch_size and the like, which xmod-eval has no use for
    ):
        super().__init__()
        if not os.path.isfile(checkpoint):
            raise ValueError(f"xmod: checkpoint {checkpoint!r} is not a file")
        self.checkpoint = checkpoint
        self.xmod_eval = xmod_eval
        self.tokenizer = tokenizer
        self.spec = spec
        self.xmod_device = device if device else "cpu"  # LM.device is a read-only property
        self.threads = int(threads)
        self.batch_size = 16 if batch_size in (None, "", "auto") else int(batch_size)

    def loglikelihood(self, requests, disable_tqdm=False):
        """(loglikelihood, is_greedy) per request, in order."""
        by_task = {}  # task name -> indices into requests, in the harness's order
        for i, request in enumerate(requests):
            by_task.setdefault(request.task_name, []).append(i)
        answers = [None] * len(requests)
        for indices in by_task.values():
            scores = self._score([requests[i].args[:2] for i in indices])
            for i, score in zip(indices, scores):
                answers[i] = (float(score["loglikelihood"]), bool(score["is_greedy"]))
        return answers

    def _score(self, pairs):
        with tempfile.TemporaryDirectory(prefix="xmod_lm_") as tmp:
            path = os.path.join(tmp, "pairs.jsonl")
            with open(path, "w", encoding="utf-8") as out:
                for context, continuation in pairs:
                    out.write(json.dumps({"context": context, "continuation": continuation}))
                    out.write("\n")
            command = [self.xmod_eval, "--checkpoint", self.checkpoint, "--pairs", path,
                       "--device", self.xmod_device, "--threads", str(self.threads),
                       "--batch_size", str(self.batch_size)]
            if self.tokenizer:
                command += ["--tokenizer", self.tokenizer]
            if self.spec:
                command += ["--spec", self.spec]
            done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"xmod: {' '.join(command)} exited {done.returncode}: "
                               f"{done.stderr.strip()}")
        scores = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        if len(scores) != len(pairs):
            raise RuntimeError(f"xmod: xmod-eval answered {len(scores)} of {len(pairs)} pairs")
        return scores

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        raise NotImplementedError(
            "xmod: loglikelihood_rolling (whole-document perplexity tasks) is not served; "
            "xmod-eval scores (context, continuation) pairs only")

    def generate_until(self, requests, disable_tqdm=False):
        raise NotImplementedError("xmod: generation is not served; xmod-eval only scores")
