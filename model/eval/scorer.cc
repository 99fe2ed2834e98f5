// Batched continuation scoring: see scorer.h.
#include "model/eval/scorer.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace xmod {

namespace {

struct Windows {
  std::vector<std::vector<int64_t>> tokens;
  std::vector<int64_t> scored;  // continuation tokens inside the window
};

// Each request's window: the last max_len + 1 tokens of context ++ continuation.
absl::StatusOr<Windows> BuildWindows(const std::vector<ScoreRequest>& requests, int64_t max_len) {
  Windows windows;
  windows.tokens.resize(requests.size());
  windows.scored.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const ScoreRequest& r = requests[i];
    if (r.context.empty() || r.continuation.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("request ", i, ": empty ", r.context.empty() ? "context" : "continuation"));
    }
    std::vector<int64_t>& w = windows.tokens[i];
    w = r.context;
    w.insert(w.end(), r.continuation.begin(), r.continuation.end());
    if (static_cast<int64_t>(w.size()) > max_len + 1) w.erase(w.begin(), w.end() - max_len - 1);
    windows.scored[i] = std::min<int64_t>(r.continuation.size(), max_len);
  }
  return windows;
}

// Indices of the windows, longest first (stable).
std::vector<size_t> LongestFirst(const std::vector<std::vector<int64_t>>& windows) {
  std::vector<size_t> order(windows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return windows[a].size() > windows[b].size(); });
  return order;
}

// Scores the windows `batch` (longest first) in one forward pass into out.
void ScoreBatch(Transformer& model, torch::Device device, const Windows& windows,
                const std::vector<size_t>& batch, std::vector<ContinuationScore>& out) {
  const int64_t b = static_cast<int64_t>(batch.size());
  const int64_t t = static_cast<int64_t>(windows.tokens[batch[0]].size()) - 1;  // longest
  torch::Tensor inputs = torch::zeros({b, t}, torch::kInt64);                   // (B, T)
  torch::Tensor targets = torch::zeros({b, t}, torch::kInt64);                  // (B, T)
  for (int64_t row = 0; row < b; ++row) {
    const std::vector<int64_t>& w = windows.tokens[batch[row]];
    const int64_t n = static_cast<int64_t>(w.size()) - 1;
    torch::Tensor tokens = torch::tensor(w, torch::kInt64);  // (n + 1)
    inputs[row].narrow(0, 0, n).copy_(tokens.narrow(0, 0, n));
    targets[row].narrow(0, 0, n).copy_(tokens.narrow(0, 1, n));
  }
  torch::Tensor logits =
      model->Logits(inputs.to(device), RoutingMode::kThreshold).to(torch::kFloat32);
  torch::Tensor logp = torch::log_softmax(logits, /*dim=*/-1);  // (B, T, V)
  torch::Tensor target_dev = targets.to(device).unsqueeze(-1);  // (B, T, 1)
  torch::Tensor token_logp = logp.gather(/*dim=*/-1, target_dev).squeeze(-1).to(torch::kCPU);
  torch::Tensor hits =
      logp.argmax(/*dim=*/-1).eq(target_dev.squeeze(-1)).to(torch::kCPU);  // (B, T) bool
  token_logp = token_logp.to(torch::kFloat64);                             // (B, T)
  for (int64_t row = 0; row < b; ++row) {
    const size_t i = batch[row];
    const int64_t n = static_cast<int64_t>(windows.tokens[i].size()) - 1;
    const int64_t k = windows.scored[i];
    ContinuationScore& s = out[i];
    s.loglik = token_logp[row].narrow(0, n - k, k).sum().item<double>();
    s.greedy = hits[row].narrow(0, n - k, k).all().item<bool>();
    s.tokens = k;
  }
}

}  // namespace

Scorer::Scorer(Transformer model, int64_t max_len, torch::Device device, int64_t batch_size)
    : model_(std::move(model)),
      max_len_(max_len),
      device_(device),
      batch_size_(std::max<int64_t>(1, batch_size)) {}

absl::StatusOr<std::vector<ContinuationScore>> Scorer::Score(
    const std::vector<ScoreRequest>& requests) {
  absl::StatusOr<Windows> windows = BuildWindows(requests, max_len_);
  if (!windows.ok()) return windows.status();
  const std::vector<size_t> order = LongestFirst(windows->tokens);

  std::vector<ContinuationScore> out(requests.size());
  const bool was_training = model_->is_training();
  try {
    torch::NoGradGuard no_grad;
    model_->eval();
    for (size_t begin = 0; begin < order.size(); begin += batch_size_) {
      const size_t end = std::min(order.size(), begin + static_cast<size_t>(batch_size_));
      const std::vector<size_t> batch(order.begin() + begin, order.begin() + end);
      ScoreBatch(model_, device_, *windows, batch, out);
    }
  } catch (const c10::Error& e) {
    model_->train(was_training);
    return absl::InternalError(absl::StrCat("LibTorch: ", e.what_without_backtrace()));
  }
  model_->train(was_training);
  return out;
}

}  // namespace xmod
