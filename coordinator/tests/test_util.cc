// See test_util.h.
#include "coordinator/tests/test_util.h"

#include <grpcpp/create_channel.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/auth.h"
#include "common/credentials.h"
#include "coordinator/store/store_reads.h"
#include "gtest/gtest.h"

namespace xmod {

std::string NewTestDir(const std::string& name) {
  static std::atomic<int> counter{0};
  const std::string dir =
      absl::StrCat(testing::TempDir(), "/xmod-coord-", name, "-", getpid(), "-", counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::unique_ptr<Store> OpenStore(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, StoreOptions{});
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

CoordinatorOptions LoopbackOptions(const std::string& dir) {
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.http_listen = "127.0.0.1:0";
  options.metrics_listen = "";
  options.db_path = dir + "/x.db";
  options.checkpoint_root = dir + "/ckpt";
  return options;
}

xmod::v1::SweepSpec TinySweep(const std::string& dir) {
  std::ofstream(dir + "/train_000.bin") << "x";
  std::ofstream(dir + "/val_000.bin") << "x";
  xmod::v1::SweepSpec spec;
  spec.set_name("tiny");
  spec.mutable_data()->set_train_glob(dir + "/train_*.bin");
  spec.mutable_data()->set_val_glob(dir + "/val_*.bin");
  spec.mutable_training()->set_seq_len(64);
  spec.mutable_training()->set_batch_tokens(128);
  spec.mutable_training()->set_flop_budget(1e12);
  xmod::v1::GridSpec* grid = spec.add_grids();
  grid->set_label("kx");
  grid->add_archs(xmod::v1::DENSE);
  grid->add_archs(xmod::v1::XMOD);
  grid->add_backbones("tiny-test");
  grid->add_ks(1);
  grid->add_ks(2);
  grid->add_ks(4);
  grid->add_as(1);
  return spec;
}

xmod::v1::SweepSpec AdaptiveTinySweep(const std::string& dir) {
  xmod::v1::SweepSpec spec = TinySweep(dir);
  spec.mutable_training()->set_batch_tokens(512);
  xmod::v1::GridSpec* grid = spec.mutable_grids(0);
  grid->clear_archs();
  grid->add_archs(xmod::v1::XMOD);
  grid->clear_seq_lens();
  for (int l : {64, 128, 256}) grid->add_seq_lens(l);
  grid->clear_ks();
  for (int k : {1, 2, 4, 8}) grid->add_ks(k);
  grid->clear_as();
  for (double a : {0.5, 1.0, 2.0}) grid->add_as(a);
  xmod::v1::AdaptiveSpec* adaptive = spec.mutable_adaptive();
  adaptive->set_enabled(true);
  xmod::v1::DesignTarget* target = adaptive->add_targets();
  target->set_flops(spec.training().flop_budget());
  target->set_seq_len(256);
  target->set_backbone("tiny-test");
  adaptive->set_compute_budget(40 * spec.training().flop_budget());
  adaptive->set_bootstrap_samples(8);
  return spec;
}

xmod::v1::Run StoredRun(Store& store, int64_t run_id) {
  xmod::v1::Run run;
  EXPECT_TRUE(store
                  .Read([&](Db& db) {
                    absl::StatusOr<xmod::v1::Run> r = LoadRun(db, run_id);
                    if (r.ok()) run = *r;
                    return r.status();
                  })
                  .ok());
  return run;
}

std::vector<xmod::v1::Attempt> StoredAttempts(Store& store, int64_t run_id) {
  std::vector<xmod::v1::Attempt> out;
  EXPECT_TRUE(store
                  .Read([&](Db& db) {
                    auto a = LoadAttempts(db, run_id);
                    if (a.ok()) out = *a;
                    return a.status();
                  })
                  .ok());
  return out;
}

xmod::v1::RegisterRequest CpuWorker(const std::string& name, int slots) {
  xmod::v1::RegisterRequest request;
  request.set_worker_name(name);
  for (int i = 0; i < slots; ++i) {
    xmod::v1::Slot* slot = request.add_slots();
    slot->set_index(i);
    slot->set_kind(xmod::v1::CPU);
    slot->set_cores(1);
  }
  return request;
}

std::optional<xmod::v1::Assignment> AcquireNow(Scheduler& scheduler, int64_t worker,
                                               const std::vector<int32_t>& free_slots) {
  xmod::v1::AcquireRunRequest request;
  request.set_worker_id(worker);
  for (int32_t slot : free_slots) request.add_free_slots(slot);
  request.set_wait_ms(0);
  absl::StatusOr<std::optional<xmod::v1::Assignment>> a = scheduler.Acquire(request);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : std::nullopt;
}

std::unique_ptr<grpc::ClientContext> BearerContext(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  AttachBearerToken(token, context.get());
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  // A loaded machine may fail a new channel's first connect attempt: the call waits for the
  // channel (within the deadline) rather than failing at once with UNAVAILABLE.
  context->set_wait_for_ready(true);
  return context;
}

absl::StatusOr<LoopbackCoordinator> StartLoopbackCoordinator(CoordinatorOptions options,
                                                             const std::string& credentials) {
  if (!credentials.empty()) {
    absl::StatusOr<CredentialSet> set = CredentialSet::Parse(credentials, "test");
    if (!set.ok()) return set.status();
    options.credentials = std::make_shared<const CredentialSet>(*std::move(set));
  }
  absl::StatusOr<std::unique_ptr<Coordinator>> started = Coordinator::Start(options);
  if (!started.ok()) return started.status();
  LoopbackCoordinator c;
  c.coordinator = *std::move(started);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", c.coordinator->ports().grpc),
                                     grpc::InsecureChannelCredentials());
  c.user = xmod::v1::Coordinator::NewStub(channel);
  c.worker = xmod::v1::WorkerGateway::NewStub(channel);
  return c;
}

namespace {

// Each row `sql` selects, its cells separated by \x1f (NULL as "NULL"), sorted.
absl::StatusOr<std::vector<std::string>> SortedRows(Db& db, const std::string& sql) {
  absl::StatusOr<Stmt> rows = db.Prepare(sql);
  if (!rows.ok()) return rows.status();
  std::vector<std::string> lines;
  while (true) {
    absl::StatusOr<bool> row = rows->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    std::vector<std::string> cells;
    for (int c = 0; c < rows->ColumnCount(); ++c) {
      cells.push_back(rows->IsNull(c) ? "NULL" : rows->Text(c));
    }
    lines.push_back(absl::StrJoin(cells, "\x1f"));
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace

std::map<std::string, std::string> TableRows(Store& store, bool with_events) {
  // Earlier writes are committed once a write queued after them is.
  EXPECT_TRUE(store.WriteAndWait([](Db&) { return absl::OkStatus(); }).ok());
  std::map<std::string, std::string> out;
  absl::Status read = store.Read([&](Db& db) {
    absl::StatusOr<std::vector<std::string>> tables =
        SortedRows(db, "SELECT name FROM sqlite_master WHERE type = 'table'");
    if (!tables.ok()) return tables.status();
    for (const std::string& table : *tables) {
      if (!with_events && table == "events") continue;
      absl::StatusOr<std::vector<std::string>> rows =
          SortedRows(db, absl::StrCat("SELECT * FROM \"", table, "\""));
      if (!rows.ok()) return rows.status();
      for (const std::string& line : *rows) absl::StrAppend(&out[table], line, "\n");
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(read.ok()) << read;
  return out;
}

}  // namespace xmod
