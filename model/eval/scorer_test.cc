// The batched scorer against an independent eager scorer: a checkpoint written by the
// trainer's checkpoint code (with its RunSpec) is loaded twice — once through xmod-eval's
// LoadEvalModel and Scorer (batched, right-padded, longest first), once by hand (one choice
// at a time, no padding, full forward, log_softmax and the target log-probabilities summed
// in a loop) — and every choice's log-likelihood must agree to 1e-4.
#include "model/eval/scorer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "data/bpe_file.h"
#include "model/accounting/accounting.h"
#include "model/eval/evaluate.h"
#include "model/test_specs.h"
#include "model/train/adamw.h"
#include "model/train/checkpoint.h"
#include "model/train/eval_model.h"
#include "model/train/muon.h"
#include "model/train/test_corpus.h"

namespace xmod {
namespace {

constexpr int kSeqLen = 48;  // shorter than most fixture prompts: left truncation is exercised

std::string Fixture(const std::string& name) {
  const char* root = std::getenv("XMOD_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/model/eval/testdata/" + name;
}

// Log-likelihood and greedy match of `request`, scored alone by a full forward pass.
ContinuationScore EagerScore(Transformer& model, const ScoreRequest& request) {
  std::vector<int64_t> tokens = request.context;
  tokens.insert(tokens.end(), request.continuation.begin(), request.continuation.end());
  if (tokens.size() > kSeqLen + 1) tokens.erase(tokens.begin(), tokens.end() - (kSeqLen + 1));
  const int64_t n = static_cast<int64_t>(tokens.size()) - 1;
  const int64_t k = std::min<int64_t>(request.continuation.size(), kSeqLen);
  torch::Tensor input =
      torch::tensor(tokens, torch::kInt64).narrow(0, 0, n).unsqueeze(0);            // (1, n)
  torch::Tensor logits = model->Logits(input, RoutingMode::kThreshold)[0];          // (n, V)
  torch::Tensor logp = torch::log_softmax(logits.to(torch::kFloat64), /*dim=*/-1);  // (n, V)
  ContinuationScore out;
  out.greedy = true;
  out.tokens = k;
  for (int64_t j = n - k; j < n; ++j) {  // position j predicts token j + 1
    out.loglik += logp[j][tokens[j + 1]].item<double>();
    out.greedy = out.greedy && logp[j].argmax().item<int64_t>() == tokens[j + 1];
  }
  return out;
}

class ScorerTest : public ::testing::TestWithParam<xmod::v1::Architecture> {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("scorer_test");
    // Byte-level tokenizer (no merges) for the tiny-test vocabulary of 256, where the default
    // lookup finds it: beside the validation shards.
    ASSERT_TRUE(SaveBpeMerges(dir_ + "/tokenizer_256.txt", {}).ok());
    spec_.mutable_model()->CopyFrom(TinySpec(GetParam(), /*k=*/2, /*a=*/1));
    if (GetParam() == xmod::v1::XMOD) spec_.mutable_model()->set_n0(1);
    spec_.mutable_training()->set_seq_len(kSeqLen);
    spec_.mutable_training()->set_batch_tokens(kSeqLen);
    spec_.mutable_data()->set_val_glob(dir_ + "/val_*.bin");
    absl::StatusOr<Accounting> accounting = Account(spec_.model(), kSeqLen);
    ASSERT_TRUE(accounting.ok()) << accounting.status();
    torch::manual_seed(3);
    Transformer model(spec_.model(), *accounting, kSeqLen);
    {
      // Larger weights than the initialisation's, so that predictions and routing decisions
      // are far from uniform.
      torch::NoGradGuard no_grad;
      for (torch::Tensor& p : model->parameters()) p.mul_(3.0);
    }
    Muon muon(model->MuonParameters(), MuonOptions());
    AdamW adamw(model->AdamWParameters(), AdamWOptions());
    checkpoint_ = CheckpointPath(dir_, 1, 0);
    ASSERT_TRUE(SaveCheckpoint(checkpoint_, *model, muon, adamw, TrainState(), &spec_).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::string checkpoint_;
  xmod::v1::RunSpec spec_;
};

TEST_P(ScorerTest, BatchedScoresEqualAnIndependentEagerScorer) {
  absl::StatusOr<EvalModel> loaded = LoadEvalModel(checkpoint_, "", "cpu");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->seq_len, kSeqLen);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      OpenEvalTokenizer("", loaded->spec, loaded->vocab);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();

  // The independent model: built from the spec and loaded by hand.
  absl::StatusOr<Accounting> accounting = Account(spec_.model(), kSeqLen);
  ASSERT_TRUE(accounting.ok());
  Transformer eager(spec_.model(), *accounting, kSeqLen);
  ASSERT_TRUE(LoadModelWeights(checkpoint_, eager.get()).ok());
  eager->eval();
  torch::NoGradGuard no_grad;

  std::vector<ScoreRequest> requests;
  for (const char* task : {"hellaswag", "boolq", "lambada", "gcide"}) {
    absl::StatusOr<std::vector<TaskExample>> examples =
        ReadTask(task, Fixture(std::string(task) + ".jsonl"));
    ASSERT_TRUE(examples.ok()) << examples.status();
    for (const TaskExample& example : *examples) {
      for (const Choice& choice : example.choices) {
        std::vector<uint32_t> context = (*tokenizer)->Encode(choice.context);
        std::vector<uint32_t> continuation = (*tokenizer)->Encode(choice.continuation);
        requests.push_back(
            {{context.begin(), context.end()}, {continuation.begin(), continuation.end()}});
      }
    }
  }
  Scorer scorer(loaded->model, loaded->seq_len, torch::kCPU, /*batch_size=*/5);
  absl::StatusOr<std::vector<ContinuationScore>> scores = scorer.Score(requests);
  ASSERT_TRUE(scores.ok()) << scores.status();
  ASSERT_EQ(scores->size(), requests.size());
  int greedy = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    const ContinuationScore expected = EagerScore(eager, requests[i]);
    EXPECT_NEAR((*scores)[i].loglik, expected.loglik, 1e-4);
    EXPECT_EQ((*scores)[i].tokens, expected.tokens);
    EXPECT_EQ((*scores)[i].greedy, expected.greedy);
    greedy += expected.greedy ? 1 : 0;
  }
  EXPECT_LT(greedy, static_cast<int>(requests.size()));
}

TEST_P(ScorerTest, EvaluateTaskReportsAccuracies) {
  absl::StatusOr<EvalModel> loaded = LoadEvalModel(checkpoint_, "", "cpu");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      OpenEvalTokenizer("", loaded->spec, loaded->vocab);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  Scorer scorer(loaded->model, loaded->seq_len, torch::kCPU, /*batch_size=*/4);
  absl::StatusOr<std::vector<TaskExample>> arc = ReadTask("arc_easy", Fixture("arc.jsonl"));
  ASSERT_TRUE(arc.ok());
  absl::StatusOr<xmod::v1::EvalTaskResult> result =
      EvaluateTask("arc_easy", *arc, **tokenizer, scorer);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->n(), 5);
  EXPECT_GE(result->acc(), 0.0);
  EXPECT_LE(result->acc(), 1.0);
  EXPECT_TRUE(result->has_acc_norm());
  EXPECT_FALSE(result->has_ppl());
  std::vector<std::pair<std::string, double>> metrics = EvalMetrics(*result);
  ASSERT_EQ(metrics.size(), 5u);
  EXPECT_EQ(metrics[0].first, "eval/arc_easy/acc");
  EXPECT_EQ(metrics[1],
            (std::pair<std::string, double>{"eval/arc_easy/acc_stderr", result->acc_stderr()}));
  EXPECT_EQ(metrics[2].first, "eval/arc_easy/acc_norm");
  EXPECT_EQ(metrics[3].first, "eval/arc_easy/acc_norm_stderr");
  EXPECT_EQ(metrics[4], (std::pair<std::string, double>{"eval/arc_easy/n", 5}));

  absl::StatusOr<std::vector<TaskExample>> lambada = ReadTask("lambada", Fixture("lambada.jsonl"));
  ASSERT_TRUE(lambada.ok());
  result = EvaluateTask("lambada", *lambada, **tokenizer, scorer);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->has_ppl());
  EXPECT_GT(result->ppl(), 1.0);
  EXPECT_FALSE(result->has_acc_norm());
}

TEST_P(ScorerTest, CheckpointWithoutSpecNeedsOne) {
  absl::StatusOr<Accounting> accounting = Account(spec_.model(), kSeqLen);
  ASSERT_TRUE(accounting.ok());
  Transformer model(spec_.model(), *accounting, kSeqLen);
  Muon muon(model->MuonParameters(), MuonOptions());
  AdamW adamw(model->AdamWParameters(), AdamWOptions());
  const std::string bare = CheckpointPath(dir_, 2, 0);
  ASSERT_TRUE(SaveCheckpoint(bare, *model, muon, adamw, TrainState()).ok());
  absl::Status status = LoadEvalModel(bare, "", "cpu").status();
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
}

// acc_norm as the harness computes it: log-likelihood / len(answer) in characters, without
// the delimiter. " ångström" (8 characters, 10 bytes) at -8.4 loses to " abcdefghi" (9
// characters) at -9.0 per character (-1.05 < -1.0) though it would win per UTF-8 byte of the
// continuation (-0.76 > -0.9).
TEST(AggregateTask, AccNormDividesByCharactersOfTheAnswer) {
  TaskExample example;
  example.choices = {{"Question: q\nAnswer:", " ångström", 8},
                     {"Question: q\nAnswer:", " abcdefghi", 9}};
  example.label = 1;
  const std::vector<ContinuationScore> scores = {{-8.4, false, 4}, {-9.0, false, 4}};
  xmod::v1::EvalTaskResult result = AggregateTask("arc_easy", {example}, scores);
  EXPECT_EQ(result.acc(), 0.0);  // -8.4 > -9.0
  ASSERT_TRUE(result.has_acc_norm());
  EXPECT_EQ(result.acc_norm(), 1.0);
  // Ties go to the first choice, as numpy.argmax sends them.
  result = AggregateTask("arc_easy", {example}, {{-9.0, false, 4}, {-9.0, false, 4}});
  EXPECT_EQ(result.acc(), 0.0);
}

// LAMBADA's perplexity is the harness's: exp(-mean over documents of the target word's summed
// log-likelihood), not exp(-log-likelihood per token): words of 1 and 3 tokens at -2 and -6
// give exp(4), where a per-token perplexity would be exp(8 / 4) = exp(2).
TEST(AggregateTask, LambadaPerplexityIsPerDocument) {
  std::vector<TaskExample> examples(2);
  examples[0].choices = {{"The cat sat on the", " mat", 3}};
  examples[1].choices = {{"She opened the", " door", 4}};
  const std::vector<ContinuationScore> scores = {{-2.0, true, 1}, {-6.0, false, 3}};
  xmod::v1::EvalTaskResult result = AggregateTask("lambada", examples, scores);
  ASSERT_TRUE(result.has_ppl());
  EXPECT_DOUBLE_EQ(result.ppl(), std::exp(4.0));
  EXPECT_EQ(result.acc(), 0.5);  // greedy-exact words
  EXPECT_FALSE(result.has_acc_norm());
}

// Standard errors as the harness reports them (stderr.h; expected values from lm_eval's
// mean_stderr and bootstrap_stderr on the same numbers): acc and acc_norm from the per-example
// 1/0 values, LAMBADA's perplexity by the seeded bootstrap; none for a single example or with
// bootstrap_iters = 0. The run metrics carry them as eval/<task>/<metric>_stderr.
TEST(AggregateTask, StandardErrorsAreTheHarnesss) {
  std::vector<TaskExample> examples(4);
  std::vector<ContinuationScore> scores;
  for (int e = 0; e < 4; ++e) {
    examples[e].choices = {{"Q", " a", 1}, {"Q", " bb", 2}};
    examples[e].label = e == 1 ? 1 : 0;  // choice 0 scores higher: acc 1, 0, 1, 1
    scores.insert(scores.end(), {{-1.0, false, 1}, {-4.0, false, 1}});
  }
  xmod::v1::EvalTaskResult result = AggregateTask("arc_easy", examples, scores);
  EXPECT_EQ(result.acc(), 0.75);
  ASSERT_TRUE(result.has_acc_stderr());
  EXPECT_DOUBLE_EQ(result.acc_stderr(), 0.25);
  ASSERT_TRUE(result.has_acc_norm_stderr());  // per character: -1 vs -2, the same picks
  EXPECT_DOUBLE_EQ(result.acc_norm_stderr(), 0.25);
  EXPECT_FALSE(result.has_ppl_stderr());
  const auto metrics = EvalMetrics(result);
  const std::vector<std::string> names = [&] {
    std::vector<std::string> out;
    for (const auto& [name, value] : metrics) out.push_back(name);
    return out;
  }();
  EXPECT_EQ(names, (std::vector<std::string>{"eval/arc_easy/acc", "eval/arc_easy/acc_stderr",
                                             "eval/arc_easy/acc_norm",
                                             "eval/arc_easy/acc_norm_stderr", "eval/arc_easy/n"}));
  EXPECT_EQ(EvalResultLine(result), "arc_easy: n 4, acc 0.75 ± 0.25, acc_norm 0.75 ± 0.25");

  std::vector<TaskExample> lambada(2);
  lambada[0].choices = {{"The cat sat on the", " mat", 3}};
  lambada[1].choices = {{"She opened the", " door", 4}};
  const std::vector<ContinuationScore> words = {{-2.0, true, 1}, {-6.0, false, 3}};
  result = AggregateTask("lambada", lambada, words, /*bootstrap_iters=*/1000);
  ASSERT_TRUE(result.has_ppl_stderr());
  EXPECT_NEAR(result.ppl_stderr(), 155.0128097108637, 1e-9);
  EXPECT_DOUBLE_EQ(result.acc_stderr(), 0.5);
  result = AggregateTask("lambada", lambada, words);  // the harness's default 100000
  EXPECT_NEAR(result.ppl_stderr(), 159.17604515362035, 1e-9);

  result = AggregateTask("lambada", lambada, words, /*bootstrap_iters=*/0);
  EXPECT_FALSE(result.has_acc_stderr() || result.has_ppl_stderr());
  result = AggregateTask("arc_easy", {examples[0]}, {scores[0], scores[1]});
  EXPECT_FALSE(result.has_acc_stderr() || result.has_acc_norm_stderr());
  EXPECT_EQ(EvalResultLine(result), "arc_easy: n 1, acc 1, acc_norm 1");
}

INSTANTIATE_TEST_SUITE_P(Archs, ScorerTest, ::testing::Values(xmod::v1::DENSE, xmod::v1::XMOD));

}  // namespace
}  // namespace xmod
