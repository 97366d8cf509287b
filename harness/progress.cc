#include "harness/progress.h"

#include <cstdio>

namespace dfarm::harness {

Progress::Progress(std::ostream* out, bool tty, size_t total, size_t already_done)
    : out_(out), tty_(tty), total_(total), already_done_(already_done) {}

std::string Progress::FormatDuration(std::chrono::seconds s) {
  long long t = s.count() < 0 ? 0 : s.count();
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t % 3600) / 60);
  } else if (t >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%llds", t);
  }
  return buf;
}

void Progress::JobStarted(const std::string& /*label*/) {
  std::lock_guard lock(mu_);
  ++running_;
  if (tty_) DrawLocked();
}

void Progress::JobStopped(const std::string& label) {
  std::lock_guard lock(mu_);
  if (running_ > 0) --running_;
  phases_.erase(label);
}

void Progress::JobPhase(const std::string& label, const std::string& phase, uint64_t elapsed_ms) {
  std::lock_guard lock(mu_);
  phases_[label] = Phase{phase, elapsed_ms};
  if (tty_) DrawLocked();
}

void Progress::JobDone(const std::string& label, const std::string& status,
                       const std::string& detail) {
  std::lock_guard lock(mu_);
  ++done_;
  bool ok = status == "ok";
  if (!ok) ++failed_;
  if (!out_) return;
  size_t n = already_done_ + done_;
  if (!tty_) {
    *out_ << "[" << n << "/" << total_ << "] " << label << ": " << status << detail << std::endl;
    return;
  }
  if (!ok) {
    *out_ << "\r\x1b[2K[" << n << "/" << total_ << "] " << label << ": " << status << detail
          << "\n";
  }
  DrawLocked();
}

void Progress::Note(const std::string& line) {
  std::lock_guard lock(mu_);
  if (!out_) return;
  if (tty_) {
    *out_ << "\r\x1b[2K" << line << "\n";
    DrawLocked();
  } else {
    *out_ << line << std::endl;
  }
}

void Progress::Finish() {
  std::lock_guard lock(mu_);
  if (out_ && tty_ && drawn_) *out_ << "\r\x1b[2K" << std::flush;
  drawn_ = false;
}

void Progress::DrawLocked() {
  if (!out_) return;
  size_t n = already_done_ + done_;
  std::string eta = "--";
  if (done_ > 0 && n < total_) {
    auto elapsed = std::chrono::steady_clock::now() - start_;
    auto left = elapsed * static_cast<double>(total_ - n) / static_cast<double>(done_);
    eta = FormatDuration(std::chrono::duration_cast<std::chrono::seconds>(left));
  } else if (n >= total_) {
    eta = "0s";
  }
  constexpr int kBarWidth = 24;
  int filled = total_ ? static_cast<int>(kBarWidth * n / total_) : kBarWidth;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  *out_ << "\r\x1b[2K[" << bar << "] " << n << "/" << total_ << " jobs, " << failed_ << " failed, "
        << running_ << " running, ETA " << eta;
  const std::pair<const std::string, Phase>* longest = nullptr;
  for (const auto& entry : phases_) {
    if (longest == nullptr || entry.second.elapsed_ms > longest->second.elapsed_ms) {
      longest = &entry;
    }
  }
  if (longest != nullptr) {
    *out_ << ", " << longest->first << " " << longest->second.phase << " "
          << FormatDuration(std::chrono::seconds(longest->second.elapsed_ms / 1000));
  }
  *out_ << std::flush;
  drawn_ = true;
}

}  // namespace dfarm::harness
