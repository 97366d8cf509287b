// For the views' tests only: wait until a view has its data, and count the
// warnings Qt logs (QAbstractItemModelTester reports through them).
#pragma once

#include <QSignalSpy>
#include <QtGlobal>
#include <cstdio>

#include "gui/views/view.h"

namespace dfarm::gui::viewtest {

inline int g_warnings = 0;

inline void CountWarnings(QtMsgType type, const QMessageLogContext&, const QString& msg) {
  if (type == QtWarningMsg || type == QtCriticalMsg || type == QtFatalMsg) {
    ++g_warnings;
    std::fprintf(stderr, "qt: %s\n", qPrintable(msg));
  }
}

// Counts Qt's warnings in g_warnings (from 0) for its lifetime.
struct WarningCounter {
  WarningCounter() : previous(qInstallMessageHandler(CountWarnings)) { g_warnings = 0; }
  ~WarningCounter() { qInstallMessageHandler(previous); }
  WarningCounter(const WarningCounter&) = delete;
  WarningCounter& operator=(const WarningCounter&) = delete;
  QtMessageHandler previous;
};

// True once `view` has its data (at most 20 s).
inline bool WaitReady(View& view) {
  if (view.isReady()) return true;
  QSignalSpy spy(&view, &View::ready);
  return spy.wait(20000);
}

}  // namespace dfarm::gui::viewtest
