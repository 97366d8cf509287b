#include "reports/store/delegation.h"

#include "reports/store/store.h"

namespace dfarm::store {
namespace {

constexpr const char* kEllipsis = "...";

// `entry` without a leading "name: " (a delegate's name: no space in it).
std::string WithoutName(const std::string& entry) {
  const size_t colon = entry.find(": ");
  if (colon == std::string::npos || colon == 0) return entry;
  if (entry.find(' ') < colon) return entry;
  return entry.substr(colon + 2);
}

}  // namespace

std::string ShortReason(const std::string& reason, const std::string& delegate) {
  std::string entry;
  size_t start = 0;
  while (start <= reason.size()) {
    size_t end = reason.find("; ", start);
    if (end == std::string::npos) end = reason.size();
    const std::string e = reason.substr(start, end - start);
    if (entry.empty()) entry = e;
    if (e.rfind(delegate + ": ", 0) == 0) {
      entry = e;
      break;
    }
    start = end + 2;
  }
  std::string text = WithoutName(entry);
  if (text.size() <= kMaxReasonChars) return text;
  const size_t room = kMaxReasonChars - 3;
  size_t cut = text.rfind(' ', room);
  if (cut == std::string::npos || cut < room / 2) cut = room;
  text.resize(cut);
  while (!text.empty() && (text.back() == ' ' || text.back() == ',' || text.back() == ';')) {
    text.pop_back();
  }
  return text + kEllipsis;
}

std::string PartialDelegation::Count() const {
  return delegate + ": " + std::to_string(delegated) + " of " + std::to_string(nodes) + " nodes";
}

std::string PartialDelegation::Label() const {
  return reason.empty() ? Count() : Count() + " (" + reason + ")";
}

std::optional<PartialDelegation> PartialDelegationOf(const JobRow& job) {
  if (job.delegate == "cpu" || !job.placement) return std::nullopt;
  const PlacementSummary& p = *job.placement;
  const int64_t runs = p.nodes - p.folded_nodes;
  if (p.nodes == 0 || runs <= 0 || p.delegated_nodes >= runs) return std::nullopt;
  PartialDelegation d;
  d.delegate = job.delegate;
  d.delegated = p.delegated_nodes;
  d.nodes = runs;
  d.reason = ShortReason(p.main_reason, job.delegate);
  return d;
}

std::optional<PartialDelegation> PartialDelegationOf(const std::vector<const JobRow*>& jobs) {
  std::optional<PartialDelegation> fewest;
  for (const JobRow* job : jobs) {
    auto d = PartialDelegationOf(*job);
    if (d && (!fewest || d->delegated < fewest->delegated)) fewest = std::move(d);
  }
  return fewest;
}

}  // namespace dfarm::store
