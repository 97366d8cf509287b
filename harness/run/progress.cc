#include "harness/run/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "harness/run/terminal_text.h"

namespace dfarm::harness {
namespace {

constexpr int kBarWidth = 24;
constexpr int kMinBarWidth = 8;
constexpr size_t kMinLabelColumns = 8;
// A job's line or a note at most (they quote what agents say).
constexpr size_t kProgressLineBytes = 1024;

// Terminal columns of UTF-8 text: every byte but continuation bytes.
size_t Columns(const std::string& s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// The first `columns` columns of `s`.
std::string CutColumns(const std::string& s, size_t columns) {
  size_t seen = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((s[i] & 0xC0) != 0x80 && seen++ == columns) return s.substr(0, i);
  }
  return s;
}

// The pieces of the terminal line, most important first: the counts, the
// ETA, the running count, the job running longest, the bar.
struct LineParts {
  std::string counts;   // "12/40 jobs, 1 failed"
  std::string running;  // ", 2 running"
  std::string eta;      // ", ETA 1m05s"
  std::string label;    // the job running longest ("face cpu local"), empty when none
  std::string phase;    // " running 12s"
  double done_fraction = 0;
};

std::string Bar(int cells, double done_fraction) {
  if (cells <= 0) return "";
  std::string bar(static_cast<size_t>(cells * done_fraction), '#');
  bar.resize(static_cast<size_t>(cells), '.');
  return "[" + bar + "] ";
}

// The line at most `columns - 1` columns wide (a full last column wraps on
// some terminals): the bar shrinks, then goes; then the job's label is
// shortened, then the job, the running count and the ETA go in turn; the
// counts are cut last.
std::string FitLine(const LineParts& p, size_t columns) {
  const size_t room = columns > 1 ? columns - 1 : 1;
  auto job = [&p](size_t label_columns) {
    if (p.label.empty()) return std::string();
    std::string label = p.label;
    if (Columns(label) > label_columns) label = CutColumns(label, label_columns - 3) + "...";
    return ", " + label + p.phase;
  };
  const std::string tail = p.counts + p.running + p.eta;
  const std::string full_job = job(Columns(p.label));
  for (int cells = kBarWidth; cells >= kMinBarWidth; --cells) {
    std::string line = Bar(cells, p.done_fraction) + tail + full_job;
    if (Columns(line) <= room) return line;
  }
  if (Columns(tail + full_job) <= room) return tail + full_job;
  if (!p.label.empty()) {
    const size_t fixed = Columns(tail) + 2 + Columns(p.phase);
    if (fixed + kMinLabelColumns <= room) return tail + job(room - fixed);
  }
  for (std::string line : {tail, p.counts + p.eta, p.counts}) {
    if (Columns(line) <= room) return line;
  }
  return CutColumns(p.counts, room);
}

}  // namespace

Progress::Progress(std::ostream* out, bool tty, size_t total, size_t already_done)
    : Progress(out, tty, total, already_done, 0, std::chrono::steady_clock::now) {}

Progress::Progress(std::ostream* out, bool tty, size_t total, size_t already_done, int columns,
                   Clock clock)
    : out_(out),
      tty_(tty),
      total_(total),
      already_done_(already_done),
      columns_(columns),
      clock_(std::move(clock)),
      start_(clock_()) {}

int Progress::TerminalColumns(int fd) {
  struct winsize ws {};
  if (fd >= 0 && ::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* env = std::getenv("COLUMNS"); env != nullptr) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return 80;
}

int Progress::ColumnsLocked() const {
  if (columns_ > 0) return columns_;
  int fd = -1;
  if (out_ == &std::cerr || out_ == &std::clog) fd = STDERR_FILENO;
  if (out_ == &std::cout) fd = STDOUT_FILENO;
  return TerminalColumns(fd);
}

std::string JobLabel(const std::string& model_file, const std::string& delegate,
                     const std::string& shown_options, uint32_t threads,
                     const std::string& device) {
  const size_t dot = model_file.rfind('.');
  std::string s = dot == std::string::npos || dot == 0 ? model_file : model_file.substr(0, dot);
  s += " " + delegate;
  if (!shown_options.empty()) s += "(" + shown_options + ")";
  if (threads != 1) s += " x" + std::to_string(threads) + " threads";
  return s + " " + device;
}

std::string JobDoneDetail(const std::string& status, const std::string& error,
                          std::optional<double> mean_us) {
  if (status != "ok") return ": " + error;
  if (!mean_us) return "";
  char figure[64];
  std::snprintf(figure, sizeof figure, " mean %.1f ms", *mean_us / 1000.0);
  return figure;
}

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

void Progress::JobStarted(const std::string& label) {
  std::lock_guard lock(mu_);
  ++running_;
  peak_running_ = std::max(peak_running_, running_);
  started_[label] = clock_();
  if (tty_) DrawLocked();
}

void Progress::JobStopped(const std::string& label) {
  std::lock_guard lock(mu_);
  if (running_ > 0) --running_;
  phases_.erase(label);
  if (auto it = started_.find(label); it != started_.end()) {
    stopped_[label] = clock_() - it->second;
    started_.erase(it);
  }
}

void Progress::JobPhase(const std::string& label, const std::string& phase, uint64_t elapsed_ms) {
  std::lock_guard lock(mu_);
  phases_[label] = Phase{phase, elapsed_ms, clock_()};
  if (tty_) DrawLocked();
}

void Progress::JobDone(const std::string& label, const std::string& status,
                       const std::string& detail) {
  std::lock_guard lock(mu_);
  ++done_;
  if (auto it = stopped_.find(label); it != stopped_.end()) {
    finished_time_ += it->second;
    ++finished_timed_;
    stopped_.erase(it);
  }
  bool ok = status == "ok";
  if (!ok) ++failed_;
  if (!out_) return;
  size_t n = already_done_ + done_;
  // The detail holds what the agent said (an error): made safe for a terminal.
  const std::string line = TerminalSafe(label + ": " + status + detail, kProgressLineBytes);
  if (!tty_) {
    // A total of 0: the count is open-ended (a node's log).
    *out_ << "[" << n;
    if (total_ > 0) *out_ << "/" << total_;
    *out_ << "] " << line << std::endl;
    return;
  }
  if (!ok) {
    *out_ << "\r\x1b[2K[" << n << "/" << total_ << "] " << line << "\n";
  }
  DrawLocked();
}

void Progress::Note(const std::string& text) {
  std::lock_guard lock(mu_);
  if (!out_) return;
  const std::string line = TerminalSafe(text, kProgressLineBytes);  // often quotes the agent
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

std::string Progress::EtaLocked(std::chrono::steady_clock::time_point now) const {
  using std::chrono::duration_cast;
  using std::chrono::seconds;
  const size_t n = already_done_ + done_;
  if (n >= total_) return "0s";
  if (done_ == 0) return "--";
  if (finished_timed_ == 0) {  // jobs reported done without start and stop: the run's pace
    auto left = (now - start_) * static_cast<double>(total_ - n) / static_cast<double>(done_);
    return FormatDuration(duration_cast<seconds>(left));
  }
  const auto per_job = finished_time_ / finished_timed_;
  const size_t not_started = total_ - n > running_ ? total_ - n - running_ : 0;
  auto left = per_job * not_started;
  for (const auto& [label, since] : started_) {
    auto elapsed = now - since;
    if (auto it = phases_.find(label); it != phases_.end()) {  // the agent's clock
      elapsed = std::chrono::milliseconds(it->second.elapsed_ms) + (now - it->second.reported_at);
    }
    if (elapsed < per_job) left += per_job - elapsed;
  }
  left /= std::max<size_t>(peak_running_, 1);
  return FormatDuration(duration_cast<seconds>(left));
}

void Progress::DrawLocked() {
  if (!out_) return;
  const size_t n = already_done_ + done_;
  LineParts parts;
  parts.counts = std::to_string(n) + "/" + std::to_string(total_) + " jobs, " +
                 std::to_string(failed_) + " failed";
  parts.running = ", " + std::to_string(running_) + " running";
  parts.eta = ", ETA " + EtaLocked(clock_());
  parts.done_fraction = total_ ? std::min(1.0, static_cast<double>(n) / total_) : 1.0;
  const std::pair<const std::string, Phase>* longest = nullptr;
  for (const auto& entry : phases_) {
    if (longest == nullptr || entry.second.elapsed_ms > longest->second.elapsed_ms) {
      longest = &entry;
    }
  }
  if (longest != nullptr) {
    parts.label = TerminalSafe(longest->first);
    parts.phase = " " + TerminalSafe(longest->second.phase, 32) + " " +
                  FormatDuration(std::chrono::seconds(longest->second.elapsed_ms / 1000));
  }
  // Overwrite in place, then clear what a longer previous line left.
  *out_ << "\r" << FitLine(parts, static_cast<size_t>(ColumnsLocked())) << "\x1b[K" << std::flush;
  drawn_ = true;
}

}  // namespace dfarm::harness
