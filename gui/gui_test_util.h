// For the dashboard's tests: rows to put into a real store.
#pragma once

#include <string>

#include "reports/store/store.h"

namespace dfarm::gui::test_util {

// A queued job of `model` with `delegate` on "local", keyed by both.
inline store::JobRow Job(const std::string& model, const std::string& delegate) {
  store::JobRow job;
  job.job_key = model + "/" + delegate;
  job.model = model;
  job.model_path = "/models/" + model;
  job.model_sha256 = std::string(64, 'a');
  job.delegate = delegate;
  job.device = "local";
  return job;
}

}  // namespace dfarm::gui::test_util
