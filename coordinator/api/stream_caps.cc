// See stream_caps.h.
#include "coordinator/api/stream_caps.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace xmod {

StreamCaps::Place::~Place() { caps_->Close(key_); }

absl::StatusOr<std::unique_ptr<StreamCaps::Place>> StreamCaps::Open(const Principal& caller) {
  const std::string who =
      caller.anonymous ? std::string("the anonymous caller")
                       : absl::StrCat(ScopeName(caller.scope), " credential \"", caller.name, "\"");
  absl::MutexLock lock(&mu_);
  auto it = open_.find(who);
  const int mine = it == open_.end() ? 0 : it->second;
  if (mine >= limits_.per_credential) {
    return absl::ResourceExhaustedError(
        absl::StrCat(method_, ": ", who, " already has ", mine, " ", what_, " (at most ",
                     limits_.per_credential, " per credential); try again when one has ended"));
  }
  if (total_ >= limits_.total) {
    return absl::ResourceExhaustedError(absl::StrCat(method_, ": ", total_, " ", what_,
                                                     " in all (at most ", limits_.total,
                                                     "); try again later"));
  }
  ++open_[who];
  ++total_;
  return std::unique_ptr<Place>(new Place(this, who));
}

void StreamCaps::Close(const std::string& key) {
  absl::MutexLock lock(&mu_);
  --total_;
  auto it = open_.find(key);
  if (--it->second == 0) open_.erase(it);
}

}  // namespace xmod
