// Progress: what a sweep tells the user while it runs. On a terminal it is one
// line, redrawn in place (jobs done/total, failures, running, ETA, the job
// running longest and its phase), fitted to the terminal's width, with each
// failure and notice printed above it; otherwise one plain line per finished
// job. Thread-safe: every device worker reports here.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>

namespace dfarm::harness {

// How progress lines name a job: the model file without its extension, the
// delegate with its options as shown ("xnnpack(fp16:true)"), the threads when
// not 1, and the device: "face_detection_short_range xnnpack x2 threads local".
std::string JobLabel(const std::string& model_file, const std::string& delegate,
                     const std::string& shown_options, uint32_t threads, const std::string& device);

// What Progress::JobDone shows after a job's status: " mean 1.2 ms" for an ok
// job with a mean, ": ERROR" for any other.
std::string JobDoneDetail(const std::string& status, const std::string& error,
                          std::optional<double> mean_us);

class Progress {
 public:
  // `out` is borrowed and may be null (then nothing is printed). `total`
  // counts every job of the run, `already_done` those finished before this
  // process started (a resumed run).
  Progress(std::ostream* out, bool tty, size_t total, size_t already_done);
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // The same with the terminal line `columns` wide (0: the width of the
  // terminal `out` writes to, asked at each redraw: TerminalColumns) and
  // `clock` for steady_clock::now. Tests fix both.
  Progress(std::ostream* out, bool tty, size_t total, size_t already_done, int columns,
           Clock clock);

  // A job finished. `label` names it ("face cpu local"), `detail` is what
  // follows the status (": why" or " mean 1.2 ms").
  void JobDone(const std::string& label, const std::string& status, const std::string& detail);
  // A job started / stopped running (for the "running" count on a terminal).
  void JobStarted(const std::string& label);
  void JobStopped(const std::string& label);
  // What the agent says of a running job (its JobProgress: phase "starting",
  // "running", "done", and time since it started). On a terminal the line
  // names the job running longest: "..., face cpu local running 12s".
  void JobPhase(const std::string& label, const std::string& phase, uint64_t elapsed_ms);
  // A line that is not a job result (retries, quarantine).
  void Note(const std::string& line);
  // Clears the terminal line; call once at the end.
  void Finish();

  // "1m05s", "42s", "2h03m"; exposed for tests.
  static std::string FormatDuration(std::chrono::seconds s);
  // The width of the terminal on `fd` (TIOCGWINSZ), else $COLUMNS, else 80.
  static int TerminalColumns(int fd);

 private:
  void DrawLocked();
  // What is left: the jobs not started at the mean duration of those that
  // finished, plus what the running jobs have left of it (their elapsed time
  // as the agent reports it), over the devices working at once. "--" until a
  // job finished.
  std::string EtaLocked(std::chrono::steady_clock::time_point now) const;
  int ColumnsLocked() const;

  std::mutex mu_;
  std::ostream* out_;
  bool tty_;
  size_t total_;
  size_t already_done_;
  size_t done_ = 0;  // this process's
  size_t failed_ = 0;
  size_t running_ = 0;
  size_t peak_running_ = 0;  // the devices that work at once, for the ETA
  int columns_ = 0;          // 0: ask the terminal
  Clock clock_;
  struct Phase {
    std::string phase;
    uint64_t elapsed_ms = 0;
    std::chrono::steady_clock::time_point reported_at;  // when the agent said elapsed_ms
  };
  std::map<std::string, Phase> phases_;  // running jobs the agent reported on, by label
  // Running jobs by label, since JobStarted; a stopped job's duration waits
  // in stopped_ for its JobDone (a retried attempt is replaced by the next).
  std::map<std::string, std::chrono::steady_clock::time_point> started_;
  std::map<std::string, std::chrono::steady_clock::duration> stopped_;
  std::chrono::steady_clock::duration finished_time_{};  // of the jobs timed to JobDone
  size_t finished_timed_ = 0;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dfarm::harness
