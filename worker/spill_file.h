// SpillFile: one attempt's metric points on disk (MetricRelay's spill, metric_relay.h):
// append-only records (4-byte little-endian length, 8-byte little-endian seq, a serialized
// MetricPoint), read back in order. Deleted when destroyed unless persisted or released.
//
// Thread-safety: none (the relay's mutex guards it).
#ifndef XMOD_WORKER_SPILL_FILE_H_
#define XMOD_WORKER_SPILL_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

class SpillFile {
 public:
  // A new, empty file at `path` (truncated if it exists).
  static absl::StatusOr<std::unique_ptr<SpillFile>> Create(const std::string& path);
  // A file kept by an earlier life: its complete records are unread; a torn tail is cut.
  static absl::StatusOr<std::unique_ptr<SpillFile>> Open(const std::string& path);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  // Appends one record; with `durable`, fdatasync'ed before it returns (else see Persist).
  // On failure the file keeps only its earlier records.
  absl::Status Append(int64_t seq, const v1::MetricPoint& point, bool durable);
  // Makes every record durable and moves the file to `path`, where it stays when destroyed.
  absl::Status Persist(const std::string& path);
  // Leaves the file where it is when destroyed (e.g. one an earlier life kept, whose outcome
  // file still refers to it, or one another file has replaced by rename).
  void Release() { persisted_ = true; }
  // The next unread record; false when every record was read.
  absl::StatusOr<bool> ReadNext(int64_t* seq, v1::MetricPoint* point);

  int64_t unread() const { return written_ - read_; }
  int64_t last_seq() const { return last_seq_; }  // of the last record appended

 private:
  SpillFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  bool ReadAt(int64_t offset, char* out, size_t n);
  absl::Status Failed(const char* what);

  std::string path_;
  const int fd_;
  bool persisted_ = false;
  int64_t size_ = 0;    // bytes of complete records
  int64_t offset_ = 0;  // of the next unread record
  int64_t written_ = 0;
  int64_t read_ = 0;
  int64_t last_seq_ = 0;
};

}  // namespace xmod

#endif  // XMOD_WORKER_SPILL_FILE_H_
