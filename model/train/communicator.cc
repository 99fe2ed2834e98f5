// Collectives of a data-parallel run over c10d (Gloo, or NCCL where built with it).
#include "model/train/communicator.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <cstdint>
#include <exception>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

constexpr int64_t kBucketBytes = int64_t{64} << 20;

// Runs a c10d call, turning its exceptions (c10::Error, gloo's std::runtime_error) into
// UNAVAILABLE naming the collective.
template <typename F>
absl::Status Guard(const char* what, F&& f) {
  try {
    f();
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::UnavailableError(
        absl::StrCat("data-parallel ", what, " failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("data-parallel ", what, " failed: ", e.what()));
  }
}

// The checksum of a tensor's bytes: the sum of its 32-bit words (of its bytes when the size
// is not a multiple of 4), accumulated exactly in int64 (< 2^31 x 2^32 words).
torch::Tensor Checksum(const torch::Tensor& t) {
  torch::Tensor flat = t.detach().contiguous().reshape({-1});
  const bool words = flat.numel() * flat.element_size() % 4 == 0;
  torch::Tensor units = flat.view(words ? torch::kInt32 : torch::kUInt8);
  return units.sum(torch::kInt64);
}

// A c10d work handle (its type differs between LibTorch versions).
template <typename WorkPtr>
class C10dWork : public CollectiveWork {
 public:
  explicit C10dWork(WorkPtr work) : work_(std::move(work)) {}
  absl::Status Wait() override {
    return Guard("gradient all-reduce", [&] { work_->wait(); });
  }

 private:
  WorkPtr work_;
};

// Whether this build and `device` can run options.backend.
absl::Status CheckBackend(const DistributedOptions& options, torch::Device device) {
  const bool nccl = options.backend == "nccl";
  if (nccl && !device.is_cuda()) {
    return absl::InvalidArgumentError("--backend nccl: needs a CUDA --device");
  }
#ifndef USE_C10D_NCCL
  if (nccl) {
    return absl::InvalidArgumentError(
        "--backend nccl: this xmod-train was built without NCCL (build against a CUDA "
        "LibTorch with -DXMOD_TRAIN_NCCL=ON); use --backend gloo");
  }
#endif
  return absl::OkStatus();
}

// The rendezvous store: a TCP store (rank 0 serves it) or a shared file. Throws on failure.
c10::intrusive_ptr<c10d::Store> OpenStore(const DistributedOptions& options,
                                          std::chrono::milliseconds timeout) {
  const TcpRendezvous tcp = ParseTcpRendezvous(options.rendezvous);
  if (tcp.ok) {
    c10d::TCPStoreOptions store_options;
    store_options.port = tcp.port;
    store_options.isServer = options.rank == 0;
    store_options.numWorkers = options.world_size;
    store_options.waitWorkers = true;
    store_options.timeout = timeout;
    return c10::make_intrusive<c10d::TCPStore>(tcp.host, store_options);
  }
  c10::intrusive_ptr<c10d::Store> store =
      c10::make_intrusive<c10d::FileStore>(options.rendezvous, options.world_size);
  store->setTimeout(timeout);
  return store;
}

// The process group of options.backend over `store`. Throws on failure.
c10::intrusive_ptr<c10d::Backend> OpenProcessGroup(const DistributedOptions& options,
                                                   const c10::intrusive_ptr<c10d::Store>& store,
                                                   std::chrono::milliseconds timeout) {
#ifdef USE_C10D_NCCL  // (without it, CheckBackend refuses nccl)
  if (options.backend == "nccl") {
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
    nccl_options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, options.rank, options.world_size,
                                                       nccl_options);
  }
#endif
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
  gloo_options->devices.push_back(
      options.host.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                           : c10d::ProcessGroupGloo::createDeviceForHostname(options.host));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(
      c10::make_intrusive<c10d::PrefixStore>("xmod", store), options.rank, options.world_size,
      gloo_options);
}
}  // namespace

// The common base of c10d's Gloo and NCCL process groups.
using C10dGroup = c10d::Backend;

struct Communicator::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<C10dGroup> group;
};

Communicator::Communicator(int rank, int world_size, torch::Device collective_device,
                           std::unique_ptr<Group> group)
    : rank_(rank),
      world_size_(world_size),
      collective_device_(collective_device),
      group_(std::move(group)) {}

Communicator::~Communicator() = default;

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Connect(
    const DistributedOptions& options, torch::Device device) {
  absl::Status status = ValidateDistributedOptions(options);
  if (!status.ok()) return status;
  status = CheckBackend(options, device);
  if (!status.ok()) return status;
  const bool nccl = options.backend == "nccl";
  // Gloo reduces CPU tensors: CUDA gradients are staged through host memory.
  const torch::Device collective_device = nccl ? device : torch::Device(torch::kCPU);
  if (options.world_size == 1) {
    return std::unique_ptr<Communicator>(
        new Communicator(0, 1, collective_device, std::unique_ptr<Group>()));
  }

  auto group = std::make_unique<Group>();
  const std::chrono::milliseconds timeout(int64_t{options.timeout_s} * 1000);
  status = Guard("rendezvous", [&] {
    group->store = OpenStore(options, timeout);
    group->group = OpenProcessGroup(options, group->store, timeout);
  });
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("--rendezvous ", options.rendezvous, ": rank ",
                                               options.rank, " of ", options.world_size, ": ",
                                               status.message()));
  }
  return std::unique_ptr<Communicator>(
      new Communicator(options.rank, options.world_size, collective_device, std::move(group)));
}

absl::Status Communicator::AllReduce(torch::Tensor& tensor, Reduce op, const char* what) {
  c10d::AllreduceOptions reduce;
  reduce.reduceOp = op == Reduce::kSum   ? c10d::ReduceOp::SUM
                    : op == Reduce::kMin ? c10d::ReduceOp::MIN
                                         : c10d::ReduceOp::MAX;
  return Guard(what, [&] {
    std::vector<torch::Tensor> tensors = {tensor};
    group_->group->allreduce(tensors, reduce)->wait();
  });
}

absl::StatusOr<std::shared_ptr<CollectiveWork>> Communicator::StartAllReduceSum(
    torch::Tensor tensor) {
  std::shared_ptr<CollectiveWork> result;
  absl::Status status = Guard("gradient all-reduce", [&] {
    std::vector<torch::Tensor> tensors = {tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    auto work = group_->group->allreduce(tensors, options);
    result = std::make_shared<C10dWork<decltype(work)>>(std::move(work));
  });
  if (!status.ok()) return status;
  return result;
}

absl::Status Communicator::AllReduceBuckets(const std::vector<torch::Tensor>& tensors,
                                            double scale) {
  torch::NoGradGuard no_grad;
  size_t begin = 0;
  while (begin < tensors.size()) {
    // The bucket: consecutive tensors of one dtype, at most kBucketBytes (or one tensor).
    size_t end = begin;
    int64_t bytes = 0;
    while (end < tensors.size() && tensors[end].scalar_type() == tensors[begin].scalar_type() &&
           (end == begin ||
            bytes + tensors[end].numel() * tensors[end].element_size() <= kBucketBytes)) {
      bytes += tensors[end].numel() * tensors[end].element_size();
      ++end;
    }
    std::vector<torch::Tensor> pieces;
    for (size_t i = begin; i < end; ++i) pieces.push_back(tensors[i].reshape({-1}));
    torch::Tensor flat = torch::cat(pieces).to(collective_device_);  // (bucket elements)
    absl::Status status = AllReduce(flat, Reduce::kSum, "gradient all-reduce");
    if (!status.ok()) return status;
    if (scale != 1.0) flat.mul_(scale);
    int64_t offset = 0;
    for (size_t i = begin; i < end; ++i) {
      const int64_t n = tensors[i].numel();
      tensors[i].copy_(flat.narrow(0, offset, n).view(tensors[i].sizes()));
      offset += n;
    }
    begin = end;
  }
  return absl::OkStatus();
}

absl::Status Communicator::AverageGradients(const std::vector<torch::Tensor>& parameters) {
  if (world_size_ == 1) return absl::OkStatus();
  torch::NoGradGuard no_grad;
  std::vector<double> present(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) present[i] = parameters[i].grad().defined();
  absl::Status status = SumScalars(&present);
  if (!status.ok()) return status;
  std::vector<torch::Tensor> grads;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (present[i] == 0) continue;
    torch::Tensor p = parameters[i];
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  return AllReduceBuckets(grads, 1.0 / world_size_);
}

absl::Status Communicator::SumTensors(const std::vector<torch::Tensor>& tensors) {
  if (world_size_ == 1) return absl::OkStatus();
  return AllReduceBuckets(tensors, 1.0);
}

absl::Status Communicator::SumScalars(std::vector<double>* values) {
  if (world_size_ == 1 || values->empty()) return absl::OkStatus();
  torch::Tensor t = torch::tensor(*values, torch::kFloat64).to(collective_device_);
  absl::Status status = AllReduce(t, Reduce::kSum, "scalar all-reduce");
  if (!status.ok()) return status;
  t = t.to(torch::kCPU);
  std::copy(t.data_ptr<double>(), t.data_ptr<double>() + values->size(), values->begin());
  return absl::OkStatus();
}

absl::StatusOr<bool> Communicator::Any(bool value) {
  std::vector<double> v = {value ? 1.0 : 0.0};
  absl::Status status = SumScalars(&v);
  if (!status.ok()) return status;
  return v[0] > 0;
}

absl::Status Communicator::BroadcastFromRankZero(std::vector<double>* values) {
  if (world_size_ == 1 || values->empty()) return absl::OkStatus();
  torch::Tensor t = torch::tensor(*values, torch::kFloat64).to(collective_device_);
  absl::Status status = Guard("broadcast", [&] {
    std::vector<torch::Tensor> tensors = {t};
    c10d::BroadcastOptions options;
    options.rootRank = 0;
    group_->group->broadcast(tensors, options)->wait();
  });
  if (!status.ok()) return status;
  t = t.to(torch::kCPU);
  std::copy(t.data_ptr<double>(), t.data_ptr<double>() + values->size(), values->begin());
  return absl::OkStatus();
}

absl::Status Communicator::CheckIdentical(
    const std::vector<std::pair<std::string, torch::Tensor>>& named, const std::string& what) {
  if (world_size_ == 1 || named.empty()) return absl::OkStatus();
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> sums;
  for (const auto& item : named) sums.push_back(Checksum(item.second).to(torch::kCPU));
  torch::Tensor low = torch::stack(sums).to(collective_device_);  // (tensors) int64
  torch::Tensor high = low.clone();
  absl::Status status = AllReduce(low, Reduce::kMin, "checksum all-reduce");
  if (status.ok()) status = AllReduce(high, Reduce::kMax, "checksum all-reduce");
  if (!status.ok()) return status;
  torch::Tensor differs = low.ne(high).to(torch::kCPU);  // (tensors) bool
  for (size_t i = 0; i < named.size(); ++i) {
    if (differs[static_cast<int64_t>(i)].item<bool>()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " differ across the ", world_size_, " data-parallel ranks, first at ",
                       named[i].first, " (checksums ", low[static_cast<int64_t>(i)].item<int64_t>(),
                       " .. ", high[static_cast<int64_t>(i)].item<int64_t>(), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace xmod
