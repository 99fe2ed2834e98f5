// Synthetic B.4 sweeps from known parameters. See synthetic.h.
#include "fitter/synthetic.h"

#include <cmath>
#include <map>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace xmod::fitter {
namespace {

constexpr int kMaxContext = 32768;

absl::Status Add(const std::string& backbone, int seq_len, int k, double a, bool held_out,
                 std::vector<SweepRole> sweeps, const SyntheticOptions& options,
                 std::mt19937_64& rng, std::vector<Observation>* out) {
  absl::StatusOr<Observation> obs =
      MakeDeltaObservation(absl::StrCat("xmod-", backbone, "-L", seq_len, "-K", k, "-A", a),
                           backbone, seq_len, k, a, 0.0);
  if (!obs.ok()) return obs.status();
  std::normal_distribution<double> noise(0.0, options.sigma);
  obs->flops = options.flops;
  obs->delta = PredictDelta(options.truth, obs->point()) + noise(rng);
  obs->held_out = held_out;
  if (options.sweep_roles) {
    obs->sweeps = std::move(sweeps);
    if (obs->InSweep(SweepRole::kAxk)) obs->delta += options.axk_shift;
  }
  out->push_back(*std::move(obs));
  return absl::OkStatus();
}

double DenseLoss(double flops) { return 2.5 + 40.0 * std::pow(flops / 1e15, -0.12); }

}  // namespace

const std::vector<int>& PaperSweepKs() {
  static const std::vector<int>* ks = new std::vector<int>{2, 4, 6, 8, 10, 12, 16, 20, 24, 28, 32};
  return *ks;
}

namespace {

// The observations drawn so far, and the noise's generator for the next.
class SweepWriter {
 public:
  explicit SweepWriter(const SyntheticOptions& options) : options_(options), rng_(options.seed) {}

  absl::Status AddRun(const std::string& backbone, int seq_len, int k, double a, bool held_out,
                      const std::vector<SweepRole>& sweeps) {
    return Add(backbone, seq_len, k, a, held_out, sweeps, options_, rng_, &out_);
  }
  std::vector<Observation> Take() { return std::move(out_); }

 private:
  const SyntheticOptions& options_;
  std::mt19937_64 rng_;
  std::vector<Observation> out_;
};

// K×L sweep at 556M, A = 1 (B.4), with K = 3 at L = 2k only. Its L = 32k runs are the
// N_act sweep's 556M runs too.
absl::Status AddKxlSweep(SweepWriter* w) {
  for (int seq_len : {2048, 4096, 8192, 16384, 32768}) {
    const std::vector<SweepRole> roles =
        seq_len == kMaxContext ? std::vector<SweepRole>{SweepRole::kKxl, SweepRole::kNact}
                               : std::vector<SweepRole>{SweepRole::kKxl};
    if (seq_len == 2048) {
      if (absl::Status s = w->AddRun("556M", seq_len, 3, 1, false, roles); !s.ok()) return s;
    }
    for (int k : PaperSweepKs()) {
      if (absl::Status s = w->AddRun("556M", seq_len, k, 1, false, roles); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// N_act sweep at 32k, A = 1 (556M is shared with the K×L sweep).
absl::Status AddNactSweep(SweepWriter* w) {
  const std::vector<SweepRole> nact = {SweepRole::kNact};
  for (const char* backbone : {"165M", "298M", "936M"}) {
    for (int k : PaperSweepKs()) {
      if (absl::Status s = w->AddRun(backbone, kMaxContext, k, 1, false, nact); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// A×K sweep at 165M, 32k. Without roles its A = 1 runs are the N_act sweep's; with roles
// it has its own (three separate sweeps).
absl::Status AddAxkSweep(bool sweep_roles, SweepWriter* w) {
  const std::vector<SweepRole> axk = {SweepRole::kAxk};
  std::vector<double> anchors = {0.5, 2.0, 3.0, 4.0, 5.0};
  if (sweep_roles) anchors.insert(anchors.begin() + 1, 1.0);
  for (double a : anchors) {
    for (int k : {4, 8, 12, 16}) {
      if (absl::Status s = w->AddRun("165M", kMaxContext, k, a, false, axk); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status AddOutOfRangeRuns(SweepWriter* w) {
  for (int k : {16, 18, 20, 22, 24}) {
    if (absl::Status s = w->AddRun("556M", 65536, k, 1, true, {SweepRole::kKxl}); !s.ok()) {
      return s;
    }
  }
  for (int k : {14, 16, 18, 20}) {
    if (absl::Status s = w->AddRun("1.65B", kMaxContext, k, 1, true, {SweepRole::kNact}); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Observation>> PaperSweepObservations(const SyntheticOptions& options) {
  SweepWriter writer(options);
  if (absl::Status s = AddKxlSweep(&writer); !s.ok()) return s;
  if (absl::Status s = AddNactSweep(&writer); !s.ok()) return s;
  if (absl::Status s = AddAxkSweep(options.sweep_roles, &writer); !s.ok()) return s;
  if (options.out_of_range) {
    if (absl::Status s = AddOutOfRangeRuns(&writer); !s.ok()) return s;
  }
  return writer.Take();
}

std::vector<RunCurve> RunCurvesFor(const std::vector<Observation>& observations) {
  std::vector<CurvePoint> dense_points;
  for (int i = 1; i <= 8; ++i) {
    const double flops = 1e19 * i / 8.0;
    dense_points.push_back({flops, DenseLoss(flops)});
  }
  std::vector<RunCurve> runs;
  std::map<std::pair<int, std::string>, bool> have_dense;
  int64_t next_id = 1;
  for (const Observation& o : observations) {
    if (!have_dense[{o.seq_len, o.backbone}]) {
      have_dense[{o.seq_len, o.backbone}] = true;
      RunCurve dense;
      dense.run_id = next_id++;
      dense.name = absl::StrCat("dense-", o.backbone, "-L", o.seq_len);
      dense.arch = xmod::v1::DENSE;
      dense.backbone = o.backbone;
      dense.seq_len = o.seq_len;
      dense.points = dense_points;
      runs.push_back(dense);
    }
    RunCurve sparse;
    sparse.run_id = next_id++;
    sparse.name = o.name;
    sparse.arch = xmod::v1::XMOD;
    sparse.backbone = o.backbone;
    sparse.seq_len = o.seq_len;
    sparse.k = o.k;
    sparse.a = o.a;
    sparse.held_out = o.held_out;
    if (!o.sweeps.empty()) sparse.label = SweepRoleName(o.sweeps.front());
    for (const CurvePoint& p : dense_points) {
      // The gap closes towards the end; only the final point carries Δ exactly.
      sparse.points.push_back({p.flops, p.loss + o.delta * (0.5 + 0.5 * p.flops / 1e19)});
    }
    runs.push_back(sparse);
  }
  return runs;
}

}  // namespace xmod::fitter
