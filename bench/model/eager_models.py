#!/usr/bin/env python3
"""PyTorch twins of xmod's Dense and X-MoD models, for the speed comparisons of run_bench.sh
(CPU) and scripts/gpu-check.sh (CUDA, eager and torch.compile). Same math as model/ (RMSNorm
pre-norm, GQA attention with RoPE in the rotate-half layout and optional QK-Norm, SwiGLU FFN,
untied head; X-MoD sparse layer of paper §2.2-2.3: router on the normalized input, top-k of
s - tau*b per sequence sorted back into order, causal attention among the selected tokens at
their original positions, FFN, update x += varsigma * r * (a + f), per-interval token-choice
bias, B.7 BCE router loss), written as a researcher writes them in PyTorch: --attention
manual is Llama-style eager code (repeat_kv, one masked T x T product per layer), --attention
sdpa is F.scaled_dot_product_attention with enable_gqa; --precision bf16 runs the forward
under torch.autocast; --optimizer adamw adds a (fused, on CUDA) torch.optim.AdamW step, timed
apart as bench_model times xmod's update; --compile wraps the model in torch.compile.

The layer plan, FLOPs per token and backbone come from bench_model --arch plan (run_bench.sh
and gpu-check.sh pass them). Prints one line, model=... step_s=... tokens_per_s=..., or with
--json one JSON object.
"""
import argparse
import json
import math
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

INIT_STD = 0.02


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, max_pos, theta):
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angle = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv_freq)
    return angle.cos().float(), angle.sin().float()


def apply_rope(x, cos, sin):
    """x: (B, H, T, E); cos, sin: (B or 1, 1, T, E/2)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def repeat_kv(x, n_rep):
    """(B, G, T, E) -> (B, G*n_rep, T, E), as in Llama's eager attention."""
    b, g, t, e = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, g, n_rep, t, e).reshape(b, g * n_rep, t, e)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.h, self.g, self.e, self.sdpa = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.sdpa
        d = cfg.d
        self.wq = nn.Linear(d, self.h * self.e, bias=False)
        self.wk = nn.Linear(d, self.g * self.e, bias=False)
        self.wv = nn.Linear(d, self.g * self.e, bias=False)
        self.wo = nn.Linear(self.h * self.e, d, bias=False)
        self.q_norm = RMSNorm(self.e) if cfg.qk_norm else None
        self.k_norm = RMSNorm(self.e) if cfg.qk_norm else None

    def forward(self, h, cos, sin):
        """h: (B, T, D), tokens in increasing position order; cos/sin (B|1, 1, T, E/2)."""
        b, t, _ = h.shape
        q = self.wq(h).view(b, t, self.h, self.e)
        k = self.wk(h).view(b, t, self.g, self.e)
        v = self.wv(h).view(b, t, self.g, self.e).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q.transpose(1, 2), cos, sin), apply_rope(k.transpose(1, 2), cos, sin)
        if self.sdpa:
            out = F.scaled_dot_product_attention(q.to(v.dtype), k.to(v.dtype), v, is_causal=True,
                                                 enable_gqa=self.g != self.h)
        else:
            k, v = repeat_kv(k, self.h // self.g), repeat_kv(v, self.h // self.g)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.e)
            mask = torch.ones(t, t, dtype=torch.bool, device=h.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
            out = torch.softmax(scores, dim=-1) @ v
        return self.wo(out.transpose(1, 2).reshape(b, t, self.h * self.e))


class SwiGLU(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.w1 = nn.Linear(d, f, bias=False)
        self.w3 = nn.Linear(d, f, bias=False)
        self.w2 = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class DenseBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(cfg.d), RMSNorm(cfg.d)
        self.attention = Attention(cfg)
        self.ffn = SwiGLU(cfg.d, cfg.ffn)

    def forward(self, x, cos, sin):
        x = x + self.attention(self.norm1(x), cos, sin)
        return x + self.ffn(self.norm2(x))


class SparseBlock(nn.Module):
    """X-MoD sparse layer, paper §2.2-2.3."""

    def __init__(self, cfg):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(cfg.d), RMSNorm(cfg.d)
        self.router = nn.Parameter(torch.randn(cfg.d) * INIT_STD)
        self.attention = Attention(cfg)
        self.ffn = SwiGLU(cfg.d, cfg.ffn)
        self.gate_scale = nn.Parameter(torch.tensor(1.0))
        self.k, self.tau = cfg.L // cfg.K, cfg.tau

    def forward(self, x, bias, cos_table, sin_table):
        b, t, d = x.shape
        h = self.norm1(x)
        with torch.autocast(x.device.type, enabled=False):  # scores in float32, as xmod's
            s = h.float() @ self.router
            z = s - self.tau * bias  # (B, T)
        r = torch.sigmoid(z)
        with torch.no_grad():
            top = z.topk(self.k, dim=1).indices
            idx = top.sort(dim=1).values  # (B, k), sequence order
            mask = torch.zeros(b, t, dtype=torch.bool, device=x.device).scatter_(1, top, True)
        aux = F.binary_cross_entropy_with_logits(h.detach().float() @ self.router - self.tau * bias,
                                                 mask.float())
        rows = idx.unsqueeze(-1).expand(b, self.k, d)
        xs, hs = x.gather(1, rows), h.gather(1, rows)
        cos, sin = cos_table[idx].unsqueeze(1), sin_table[idx].unsqueeze(1)  # (B, 1, k, E/2)
        a = self.attention(hs, cos, sin)
        f = self.ffn(self.norm2(xs + a))
        delta = self.gate_scale * r.gather(1, idx).unsqueeze(-1) * (a + f)
        return x.scatter_add(1, rows, delta.to(x.dtype)), bias + mask.float(), aux


class Model(nn.Module):
    def __init__(self, cfg, plan, intervals):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.d)
        self.layers = nn.ModuleList(
            [DenseBlock(cfg) if kind == "D" else SparseBlock(cfg) for kind in plan])
        self.intervals = intervals
        self.norm_f = RMSNorm(cfg.d)
        self.lm_head = nn.Linear(cfg.d, cfg.vocab, bias=False)
        cos, sin = rope_tables(cfg.head_dim, cfg.L, cfg.rope_theta)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        out_std = INIT_STD / math.sqrt(2 * cfg.n_layers)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, out_std if name.endswith(("wo.weight", "w2.weight"))
                                else INIT_STD)

    def forward(self, tokens, targets):
        b, t = tokens.shape
        x = self.embed(tokens)
        cos, sin = self.cos[:t][None, None], self.sin[:t][None, None]
        bias, interval, aux, routed = None, -1, 0.0, 0
        for layer, iv in zip(self.layers, self.intervals):
            if isinstance(layer, SparseBlock):
                if iv != interval:
                    bias, interval = torch.zeros(b, t, device=tokens.device), iv
                x, bias, layer_aux = layer(x, bias, self.cos, self.sin)
                aux, routed = aux + layer_aux, routed + 1
            else:
                x = layer(x, cos, sin)
        logits = self.lm_head(self.norm_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
        return loss, (0.01 * aux / routed if routed else torch.zeros((), device=tokens.device))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", default="dense")
    p.add_argument("--plan", required=True, help="layer kinds, e.g. DDDDSSSSDSSSSD")
    p.add_argument("--intervals", required=True, help="interval per layer, comma separated")
    p.add_argument("--train_flops_per_token", type=float, required=True)
    p.add_argument("--seq_len", type=int, default=1024)
    p.add_argument("--tokens_per_step", type=int, default=4096)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--head_dim", type=int, default=32)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv_heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=768)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--n_layers", type=int, default=8)
    p.add_argument("--rope_theta", type=float, default=10000.0)
    p.add_argument("--qk_norm", type=int, default=0)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--tau", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--device", default="cpu", help="cpu | cuda")
    p.add_argument("--precision", default="fp32", help="fp32 | bf16 (torch.autocast)")
    p.add_argument("--attention", default="manual", help="manual | sdpa")
    p.add_argument("--optimizer", default="none", help="none | adamw (fused on CUDA)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p.parse_args()


def build_model(args, device):
    """The model of the arguments in training mode on device, and its AdamW optimizer (None
    without --optimizer adamw)."""

    class Cfg:
        d, head_dim, heads, kv_heads = args.d, args.head_dim, args.heads, args.kv_heads
        ffn, vocab, n_layers, L, K, tau = (args.ffn, args.vocab, args.n_layers, args.seq_len,
                                           args.k, args.tau)
        rope_theta, qk_norm, sdpa = args.rope_theta, bool(args.qk_norm), args.attention == "sdpa"

    intervals = [int(i) for i in args.intervals.strip(",").split(",")]
    model = Model(Cfg, args.plan, intervals).to(device).train()
    optimizer = None
    if args.optimizer == "adamw":
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95),
                                      weight_decay=0.1, fused=device.type == "cuda")
    return model, optimizer


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_steps(args, model, optimizer, step_fn, inputs, targets):
    """Runs --warmup + --steps training steps; returns the seconds of each step after the
    warmup (forward and backward) and of its optimizer step, the first step's seconds and the
    last loss."""
    device = inputs.device
    bf16 = args.precision == "bf16"
    steps, optimizer_s, first_s = [], [], 0.0
    for step in range(args.warmup + args.steps):
        model.zero_grad(set_to_none=True)
        sync(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss, aux = step_fn(inputs, targets)
        (loss + aux).backward()
        sync(device)
        seconds = time.perf_counter() - start
        if step == 0:
            first_s = seconds  # with --compile: the compilation
        if optimizer is not None:
            start = time.perf_counter()
            optimizer.step()
            sync(device)
            if step >= args.warmup:
                optimizer_s.append(time.perf_counter() - start)
        if step >= args.warmup:
            steps.append(seconds)
    return steps, optimizer_s, first_s, loss


def summarize(args, batch, steps, optimizer_s, first_s, loss):
    """The JSON object that --json prints."""
    step_s = statistics.mean(steps)
    tps = batch * args.seq_len / step_s
    return {
        "model": ("compiled_" if args.compile else "eager_") + args.name,
        "device": args.device, "precision": args.precision, "attention": args.attention,
        "layers": len(args.plan), "L": args.seq_len, "threads": args.threads,
        "step_s": step_s, "median_step_s": statistics.median(steps), "tokens_per_s": tps,
        "achieved_flops_per_s": tps * args.train_flops_per_token, "first_step_s": first_s,
        "optimizer_s": statistics.mean(optimizer_s) if optimizer_s else 0.0,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "peak_device_mib": (torch.cuda.max_memory_allocated() / 2**20
                            if torch.device(args.device).type == "cuda" else 0.0),
        "loss": loss.item(), "torch": torch.__version__}


def print_result(args, result):
    if args.json:
        print(json.dumps(result))
        return
    step_s, tps = result["step_s"], result["tokens_per_s"]
    print(f"model={result['model']} L={args.seq_len} threads={args.threads} "
          f"layers={len(args.plan)} step_s={step_s:.4f} tokens_per_s={tps:.1f} "
          f"achieved_gflops={tps * args.train_flops_per_token / 1e9:.2f} "
          f"peak_rss_mib={result['peak_rss_mib']:.1f} loss={result['loss']:.4f}")


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    model, optimizer = build_model(args, device)
    step_fn = torch.compile(model) if args.compile else model
    batch = max(1, args.tokens_per_step // args.seq_len)
    tokens = torch.randint(0, args.vocab, (batch, args.seq_len + 1), device=device)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    steps, optimizer_s, first_s, loss = time_steps(args, model, optimizer, step_fn, inputs,
                                                   targets)
    print_result(args, summarize(args, batch, steps, optimizer_s, first_s, loss))


if __name__ == "__main__":
    main()
