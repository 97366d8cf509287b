#include "gui/probe.h"

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

void EventLoopProbe::tick() {
  m_maxLateMs = std::max(m_maxLateMs, m_sinceTick.restart() - kTickMs);
  if (m_sinceReport.elapsed() < 1000) return;
  m_sinceReport.restart();
  write(QStringLiteral("gap %1 polls %2").arg(m_maxLateMs).arg(m_window->watcher()->polls()));
  m_maxLateMs = 0;
}

void EventLoopProbe::write(const QString& event) {
  m_file.write(
      QStringLiteral("%1 %2\n").arg(QDateTime::currentMSecsSinceEpoch()).arg(event).toUtf8());
  m_file.flush();
}

}  // namespace dfarm::gui
