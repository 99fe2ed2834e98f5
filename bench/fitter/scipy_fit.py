#!/usr/bin/python3
"""The fitter's reference implementation in SciPy, for the benchmark (run_bench.sh).

Same two-stage fit of the paper's Eq. 14 as fitter/two_stage.cc (Appendix B.5): stage 1
(e, u, eta_n, rho_n, w, eta_l, rho_l) on the A = 1 rows, stage 2 (z, rho_k, rho_a) on the
A != 1 rows with stage 1 fixed; exponents by scipy.optimize.differential_evolution (same
population, generations and bounds as xmod-fit; SciPy's own L-BFGS-B polish), linear
coefficients by scipy.optimize.lsq_linear (method 'bvls', exact) with e free and
u, w, z >= 0. Input: the CSV written by fitter_synthetic_csv (n_act as the nominal size,
the capacity ratio N(K,A)/N_act recomputed here from the 28-layer plan with N0 = 4).
Prints one JSON object: r2, rmse, fit_s, bootstrap_s (measured over --bootstrap refits,
and scaled to --bootstrap_report refits when fewer were run), params.
"""
import argparse
import csv
import json
import math
import time

import numpy as np
from scipy.optimize import differential_evolution, lsq_linear

N_LAYERS, N0 = 28, 4


def capacity_ratio(k, a):
    """Physical / active-equivalent layers of [D]xN0 + ([S(K)]xAK + [D])xN1 (Eq. 3).

    Groups count 1 + A active-equivalent layers; when they do not divide the remaining
    layers, the first group is shortened (docs/design.md "Model").
    """
    rest = N_LAYERS - N0
    sparse = round(a * k)
    group_equiv = 1 + a
    full = math.floor(rest / group_equiv + 1e-9)
    left = rest - full * group_equiv
    layers = N0 + full * (sparse + 1)
    if left > 1e-9:  # a shortened first group: its dense anchor + left - 1 equivalents
        layers += 1 + round((left - 1) * k)
    return layers / N_LAYERS


def load(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            if r.get("held_out", "0") in ("1", "true"):
                continue
            k, a = int(r["K"]), float(r["A"])
            rows.append((float(r["n_act"]), capacity_ratio(k, a), float(r["L"]), k, a,
                         float(r["delta"])))
    return np.array(rows)


def stage1_design(d, x):
    eta_n, rho_n, eta_l, rho_l = x
    r_n = d[:, 0] ** -eta_n * (1 - d[:, 1] ** -rho_n)
    p_l = d[:, 2] ** -eta_l * (d[:, 3] ** rho_l - 1)
    return np.column_stack([np.ones(len(d)), -r_n, p_l])


def stage2_design(d, x):
    rho_k, rho_a = x
    omega = 2 * d[:, 4] / (d[:, 4] + 1)
    return (-(d[:, 3] ** rho_k - 1) * (omega ** rho_a - 1))[:, None]


def solve(design, y, lower):
    res = lsq_linear(design, y, bounds=(lower, np.full(len(lower), np.inf)), method="bvls")
    return res.x, float(np.sum((design @ res.x - y) ** 2))


def fit(data, seed, population, generations):
    s1 = data[data[:, 4] == 1.0]
    s2 = data[data[:, 4] != 1.0]
    y1 = s1[:, 5]
    sst1 = float(np.sum((y1 - y1.mean()) ** 2)) or 1.0
    lower1 = np.array([-np.inf, 0.0, 0.0])

    def f1(x):
        return solve(stage1_design(s1, x), y1, lower1)[1] / sst1

    r1 = differential_evolution(f1, [(0, 2), (0, 3), (0, 2), (0, 3)], popsize=population // 4,
                                maxiter=generations, tol=1e-10, atol=0, seed=seed, polish=True)
    c1, _ = solve(stage1_design(s1, r1.x), y1, lower1)
    params = dict(e=c1[0], u=c1[1], eta_n=r1.x[0], rho_n=r1.x[1], w=c1[2], eta_l=r1.x[2],
                  rho_l=r1.x[3], z=0.0, rho_k=0.0, rho_a=0.0)
    nfev = r1.nfev

    def predict(p, d):
        base = p["e"] + stage1_design(d, [p["eta_n"], p["rho_n"], p["eta_l"], p["rho_l"]])[:, 1:] @ [p["u"], p["w"]]
        return base + (stage2_design(d, [p["rho_k"], p["rho_a"]])[:, 0] * p["z"])

    if len(s2):
        y2 = s2[:, 5] - predict(params, s2)
        sst2 = float(np.sum((y2 - y2.mean()) ** 2)) or 1.0
        lower2 = np.array([0.0])

        def f2(x):
            return solve(stage2_design(s2, x), y2, lower2)[1] / sst2

        r2 = differential_evolution(f2, [(0, 3), (0, 3)], popsize=population // 2,
                                    maxiter=generations, tol=1e-10, atol=0, seed=seed + 7919,
                                    polish=True)
        c2, _ = solve(stage2_design(s2, r2.x), y2, lower2)
        params.update(z=c2[0], rho_k=r2.x[0], rho_a=r2.x[1])
        nfev += r2.nfev
    resid = data[:, 5] - predict(params, data)
    y = data[:, 5]
    r2 = 1 - float(np.sum(resid ** 2)) / float(np.sum((y - y.mean()) ** 2))
    return {k: float(v) for k, v in params.items()}, r2, float(np.sqrt(np.mean(resid ** 2))), nfev


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--population", type=int, default=32)
    ap.add_argument("--generations", type=int, default=400)
    ap.add_argument("--bootstrap", type=int, default=0, help="refits actually run")
    ap.add_argument("--bootstrap_report", type=int, default=200, help="refits the time is scaled to")
    args = ap.parse_args()
    data = load(args.csv)
    t0 = time.perf_counter()
    params, r2, rmse, nfev = fit(data, args.seed, args.population, args.generations)
    fit_s = time.perf_counter() - t0
    out = dict(r2=r2, rmse=rmse, fit_s=fit_s, evaluations=nfev, params=params)
    if args.bootstrap:
        rng = np.random.default_rng(args.seed)
        t0 = time.perf_counter()
        for i in range(args.bootstrap):
            fit(data[rng.integers(0, len(data), len(data))], args.seed + 1 + i,
                args.population, args.generations)
        measured = time.perf_counter() - t0
        out.update(bootstrap_refits=args.bootstrap, bootstrap_measured_s=measured,
                   bootstrap_s=measured * args.bootstrap_report / args.bootstrap)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
