// dfarm-dashboard [DB | --db DB] [LINK | --open LINK] [--view PAGE]
// [--screenshot FILE]: browse a DelegateFarm database in the pages of
// gui/views/pages.inc, on a page or at a dfarm:// link (locationLink). Exit
// codes: kDashboardExitCodes.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QTimer>
#include <cstdio>

#include "gui/main_window.h"
#include "gui/probe.h"
#include "reports/store/store.h"

namespace {

// QCommandLineParser::process() itself exits 1 on a bad command line.
constexpr char kDashboardExitCodes[] =
    "Exit codes: 0 the window was closed (or the screenshot saved), 1 bad command line, "
    "2 the database does not exist, 3 the screenshot could not be written, "
    "4 the view has nothing to show (no run, no job), the link is bad or names what the "
    "database does not hold, or the view was not ready within 60 s.";

constexpr int kReadyTimeoutMs = 60000;

void fail(const QString& message) {
  std::fprintf(stderr, "dfarm-dashboard: error: %s\n", qPrintable(message));
}

// Saves window to file once page is ready, then quits with the exit code.
void screenshotWhenReady(dfarm::gui::MainWindow* window, dfarm::gui::Page page,
                         const QString& file) {
  auto save = [window, file](int code) {
    if (!window->grab().save(file)) {
      fail(QStringLiteral("cannot write the screenshot '%1'").arg(file));
      QApplication::exit(3);
      return;
    }
    QApplication::exit(code);
  };
  QObject::connect(window, &dfarm::gui::MainWindow::pageReady, window,
                   [save, page](dfarm::gui::Page ready) {
                     // A short pause lets charts finish their layout.
                     if (ready == page) QTimer::singleShot(200, [save] { save(0); });
                   });
  QObject::connect(window, &dfarm::gui::MainWindow::openFailed, window, [](const QString& message) {
    fail(message);
    QApplication::exit(4);
  });
  QTimer::singleShot(kReadyTimeoutMs, window, [save, page] {
    fail(QStringLiteral("the %1 view was not ready within %2 s (saved as it is)")
             .arg(dfarm::gui::pageName(page))
             .arg(kReadyTimeoutMs / 1000));
    save(4);
  });
}

// Positional: [DB] [LINK]; a dfarm:// argument is the link wherever it is.
// Moves it from args to link; false (after saying why) when there are two.
bool takeLink(QStringList& args, QString& link) {
  for (qsizetype i = 0; i < args.size(); ++i) {
    if (!args[i].startsWith(QLatin1String("dfarm://"))) continue;
    if (!link.isEmpty()) {
      fail(QStringLiteral("give one link (LINK or --open LINK)"));
      return false;
    }
    link = args.takeAt(i);
    return true;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("dfarm-dashboard");
  QApplication::setApplicationVersion(DFARM_VERSION);

  QCommandLineParser parser;
  parser.setApplicationDescription(
      QStringLiteral("DelegateFarm dashboard: %1 of a results database.\n"
                     "Keys: Ctrl+1..%2 the views, Alt+Left back, Ctrl+R refresh, Ctrl+C copy "
                     "the table as TSV, Ctrl+E export the chart, Ctrl+L copy the view's link.\n"
                     "Live: the open view re-reads when results or statuses change (the "
                     "store's change counter, polled off the GUI thread); "
                     "DFARM_DASHBOARD_PROBE=FILE logs its timings (docs/dashboard.md).\n\n")
          .arg(dfarm::gui::pagesShown())
          .arg(dfarm::gui::kPageKeys) +
      kDashboardExitCodes);
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument("db",
                               "The database dfarm writes: a SQLite file (default: ./dfarm.db) or "
                               "a farm's PostgreSQL URL (postgresql://USER@HOST:PORT/DB).",
                               "[DB]");
  parser.addPositionalArgument(
      "link",
      "A dfarm://VIEW?run=ID&job=ID&cell=CELL link (Ctrl+L copies the open view's): opens that "
      "view on DB (the same as --open). A trend's link may add metric=NAME (mean, p50, p90, "
      "peak_rss, max_abs_error, top1, top5), from=YYYY-MM-DD&to=YYYY-MM-DD and zoom=RUN-RUN.",
      "[LINK]");
  QCommandLineOption dbOption("db", "The database (the same as the DB argument).", "DB");
  QCommandLineOption openOption("open", "Open the dfarm:// link LINK (instead of --view).", "LINK");
  QCommandLineOption view("view",
                          QStringLiteral("Open this view: %1. %2.")
                              .arg(dfarm::gui::pageChoices(), dfarm::gui::pageDefaults()),
                          "VIEW", dfarm::gui::pageName(dfarm::gui::kFirstPage));
  QCommandLineOption screenshot(
      "screenshot", "Open the view, save a PNG of the window to FILE when it is ready and exit.",
      "FILE");
  parser.addOption(dbOption);
  parser.addOption(openOption);
  parser.addOption(view);
  parser.addOption(screenshot);
  parser.process(app);

  QStringList args = parser.positionalArguments();
  QString link = parser.value(openOption);
  if (!takeLink(args, link)) return 1;
  if (args.size() > 1 || (parser.isSet(dbOption) && !args.isEmpty())) {
    fail(QStringLiteral("give one database (DB or --db FILE)"));
    return 1;
  }
  dfarm::gui::Page page = dfarm::gui::Page::Runs;
  if (!dfarm::gui::parsePage(parser.value(view), &page)) {
    fail(QStringLiteral("unknown view '%1': choose one of %2")
             .arg(parser.value(view), dfarm::gui::pageChoices()));
    return 1;
  }
  const QString db = parser.isSet(dbOption) ? parser.value(dbOption)
                     : args.isEmpty()       ? QStringLiteral("dfarm.db")
                                            : args.first();
  if (!dfarm::store::IsPostgresUrl(db.toStdString()) && !QFileInfo::exists(db)) {
    fail(QStringLiteral("database '%1' does not exist").arg(db));
    return 2;
  }
  if (!link.isEmpty()) {
    // The page the screenshot waits for; a bad link fails when opened.
    if (auto where = dfarm::gui::parseLocationLink(link)) page = where->page;
  }

  dfarm::gui::MainWindow window;
  if (parser.isSet(screenshot)) {
    screenshotWhenReady(&window, page, parser.value(screenshot));
  } else {
    QObject::connect(&window, &dfarm::gui::MainWindow::openFailed, &window, fail);
  }
  // DFARM_DASHBOARD_PROBE=FILE: the live mode's measurements (gui/probe.h).
  const QString probeFile = qEnvironmentVariable("DFARM_DASHBOARD_PROBE");
  if (!probeFile.isEmpty() && !(new dfarm::gui::EventLoopProbe(&window, probeFile))->ok()) {
    fail(QStringLiteral("cannot write the probe file '%1'").arg(probeFile));
    return 1;
  }
  window.openDatabase(db);
  // openDatabase shows the first page; another one opens on its newest.
  if (!link.isEmpty()) {
    window.openLink(link);
  } else if (page != dfarm::gui::kFirstPage) {
    window.goToPage(page);
  }
  window.show();
  return QApplication::exec();
}
