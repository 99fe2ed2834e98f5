"""A stand-in for xmod-train for the client's cluster test, following the process contract
of docs/worker-trainer-contract.md (`--spec FILE --events_fd N ...` as the worker writes it,
trainer_contract/trainer_args.h: every flag and its value as two words; size-delimited
TrainerEvents on fd N, exit 0 when done), like worker/fake_train.cc, but with validation
losses shaped like the paper's law, so that the coordinator fits the sweep:

  dense:  L(C) = 2 + 40 C^-0.15
  sparse: L(C) + Delta,  Delta = 0.02 K^0.6 (seq_len / 64)^-0.2  (C at the marks of the run)

Started as `python fake_trainer.py ARGS...` by a wrapper the test script writes.
"""
import hashlib
import sys

from xmod.v1 import spec_pb2, trainer_pb2

MARKS = 4


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def main(argv):
    args = dict(zip(argv[1::2], argv[2::2]))
    spec = spec_pb2.RunSpec()
    with open(args["--spec"], "rb") as f:
        spec.ParseFromString(f.read())
    out = open(int(args["--events_fd"]), "wb", buffering=0)

    def emit(**event):
        data = trainer_pb2.TrainerEvent(**event).SerializeToString()
        out.write(varint(len(data)) + data)

    budget = spec.training.flop_budget
    k = spec.model.k if spec.model.arch != spec_pb2.DENSE else 1
    delta = 0.0 if k <= 1 else 0.02 * k ** 0.6 * (spec.training.seq_len / 64) ** -0.2
    emit(started=trainer_pb2.TrainerStarted(steps_planned=MARKS))
    loss = 0.0
    for step in range(1, MARKS + 1):
        flops = budget * step / MARKS
        loss = 2 + 40 * flops ** -0.15 + delta
        tokens = step * spec.training.batch_tokens
        for name in ("train/loss", "val/loss"):
            emit(metric={"step": step, "tokens": tokens, "flops": flops, "name": name,
                         "value": loss})
    path = f"{spec.checkpoint_dir}/step-{MARKS}.pt"
    with open(path, "wb") as f:  # one byte, with its digest, as the coordinator requires
        f.write(b"x")
    emit(checkpoint=trainer_pb2.TrainerCheckpoint(
        step=MARKS, tokens=MARKS * spec.training.batch_tokens, flops=budget,
        path=path, sha256=hashlib.sha256(b"x").hexdigest(), bytes=1))
    emit(finished=trainer_pb2.TrainerFinished(final_val_loss=loss, steps=MARKS, flops=budget))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
