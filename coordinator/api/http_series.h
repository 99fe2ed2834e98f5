// GET /series.js: the metric series' names (xmod.v1.Series, trainer_contract/series.h) as a
// dashboard script, so that the dashboard names series through their one definition:
//   const XmodSeries = Object.freeze({TRAIN_LOSS: <its series_name>, ...});
// Served to everyone, like the dashboard's other files: it holds no data.
#ifndef XMOD_COORDINATOR_API_HTTP_SERIES_H_
#define XMOD_COORDINATOR_API_HTTP_SERIES_H_

#include <string>

#include "coordinator/api/http_routes.h"

namespace xmod {

// The script's text.
std::string SeriesScript();

void GetSeriesScript(const HttpContext& context, const httplib::Request& request,
                     httplib::Response& response);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_HTTP_SERIES_H_
