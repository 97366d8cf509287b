#include "gui/probe.h"

#include <time.h>

#include <QDateTime>

#include "gui/live.h"
#include "gui/main_window.h"

namespace dfarm::gui {

EventLoopProbe::EventLoopProbe(MainWindow* window, const QString& file)
    : QObject(window), m_window(window), m_file(file) {
  if (!m_file.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Text)) return;
  connect(window->watcher(), &DatabaseWatcher::changed, this, [this] { write("seen"); });
  connect(window, &MainWindow::liveUpdated, this, [this] { write("updated"); });
  m_timer.setTimerType(Qt::PreciseTimer);
  m_timer.setInterval(kTickMs);
  connect(&m_timer, &QTimer::timeout, this, &EventLoopProbe::tick);
  m_sinceTick.start();
  m_sinceReport.start();
  m_timer.start();
}

namespace {

qint64 threadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<qint64>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

void EventLoopProbe::tick() {
  m_maxLateMs = std::max(m_maxLateMs, m_sinceTick.restart() - kTickMs);
  const qint64 cpu = threadCpuNs();
  if (m_lastCpuNs > 0) m_maxCpuNs = std::max(m_maxCpuNs, cpu - m_lastCpuNs);
  m_lastCpuNs = cpu;
  if (m_sinceReport.elapsed() < 1000) return;
  m_sinceReport.restart();
  write(QStringLiteral("gap %1 cpu %2 polls %3")
            .arg(m_maxLateMs)
            .arg(m_maxCpuNs / 1000000)
            .arg(m_window->watcher()->polls()));
  m_maxLateMs = 0;
  m_maxCpuNs = 0;
}

void EventLoopProbe::write(const QString& event) {
  m_file.write(
      QStringLiteral("%1 %2\n").arg(QDateTime::currentMSecsSinceEpoch()).arg(event).toUtf8());
  m_file.flush();
}

}  // namespace dfarm::gui
