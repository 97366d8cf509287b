// View: one page of the dashboard's main window (a row of gui/views/pages.inc).
// The window hands a view the Location to show (open); a view reads the store
// only off the GUI thread (LoadAsync), never blocks the UI, and tells the
// window where the user wants to go through its signals; the window owns
// navigation and history.
#pragma once

#include <QList>
#include <QMetaType>
#include <QString>
#include <QWidget>

#include "gui/views/location.h"
#include "reports/store/cell.h"

namespace dfarm::gui {

class View : public QWidget {
  Q_OBJECT

 public:
  explicit View(QWidget* parent = nullptr) : QWidget(parent) {}

  // The database the view reads (set before any show call).
  void setDatabase(const QString& dbPath) { m_dbPath = dbPath; }
  const QString& database() const { return m_dbPath; }

  // Shows where (where.names() its page's subject: the ids it needs are set)
  // and loads it; ready() follows.
  virtual void open(const Location& where) = 0;
  // Re-reads what the view shows, keeping its selection and scroll position
  // (the window calls it when the database changed on disk).
  virtual void refresh() = 0;
  // True once the view painted data (or an error/empty message) after its
  // last show call; ready() is emitted at that moment.
  bool isReady() const { return m_ready; }
  // Why the load the view painted last failed; empty when it succeeded.
  const QString& loadError() const { return m_loadError; }
  // The chart to export as PNG/SVG, or null when the view has none.
  virtual QWidget* exportableChart() const { return nullptr; }
  // Adds to where (the location the view opened) what the user changed in
  // the view since that a link carries too (the trend's metric, date range
  // and zoom); most views carry nothing more.
  virtual void describe(Location& where) const { (void)where; }

 signals:
  void ready();
  void openRun(qint64 runId);
  void openJob(qint64 jobId);
  void openCell(const dfarm::store::Cell& cell);  // a matrix cell across runs, as `dfarm history`
  // Several cells' trends on one chart (the first kMaxTrendSeries).
  void openCells(const QList<dfarm::store::Cell>& cells);
  // The cells added to the trend shown last (as further series).
  void addToTrend(const QList<dfarm::store::Cell>& cells);
  void compareRuns(qint64 baselineRunId, qint64 candidateRunId);

 protected:
  // Views call this after painting what a load brought: data (no error)
  // or the error that the load ended with.
  void markReady(const QString& error = {}) {
    m_loadError = error;
    m_ready = true;
    emit ready();
  }
  void markLoading() { m_ready = false; }

 private:
  QString m_dbPath;
  bool m_ready = false;
  QString m_loadError;
};

}  // namespace dfarm::gui

Q_DECLARE_METATYPE(dfarm::store::Cell)
