// The metric series' names in C++: the `series_name` of each xmod.v1.Series value
// (proto/xmod/v1/series.proto, their one definition). Thread-safe.
#ifndef XMOD_TRAINER_CONTRACT_SERIES_H_
#define XMOD_TRAINER_CONTRACT_SERIES_H_

#include <string>
#include <utility>
#include <vector>

#include "xmod/v1/series.pb.h"

namespace xmod {

// The series' name on the wire, e.g. train/loss for SERIES_TRAIN_LOSS; empty for
// SERIES_UNSPECIFIED and values this build does not know.
const std::string& SeriesName(xmod::v1::Series series);

// Every series but SERIES_UNSPECIFIED as (value name without "SERIES_", series name), in the
// order of their numbers: e.g. ("TRAIN_LOSS", train/loss).
const std::vector<std::pair<std::string, std::string>>& AllSeries();

}  // namespace xmod

#endif  // XMOD_TRAINER_CONTRACT_SERIES_H_
