// dfarm-dashboard [DB] [--screenshot FILE]: browse runs and jobs of a
// DelegateFarm database. Exit codes: kDashboardExitCodes.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QTimer>
#include <cstdio>

#include "gui/jobs_model.h"
#include "gui/main_window.h"
#include "gui/store_loader.h"

namespace {

// QCommandLineParser::process() itself exits 1 on a bad command line.
constexpr char kDashboardExitCodes[] =
    "Exit codes: 0 the window was closed (or the screenshot saved), 1 bad command line, "
    "2 the database does not exist, 3 the screenshot could not be written.";

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("dfarm-dashboard");
  QApplication::setApplicationVersion(DFARM_VERSION);

  QCommandLineParser parser;
  parser.setApplicationDescription(
      QStringLiteral("DelegateFarm dashboard: runs and jobs of a results database.\n\n") +
      kDashboardExitCodes);
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument("db", "SQLite database written by dfarm (default: ./dfarm.db).");
  QCommandLineOption screenshot(
      "screenshot", "Load the database, save a PNG of the window to FILE and exit.", "FILE");
  parser.addOption(screenshot);
  parser.process(app);

  const QStringList args = parser.positionalArguments();
  const QString db = args.isEmpty() ? QStringLiteral("dfarm.db") : args.first();
  if (!QFileInfo::exists(db)) {
    std::fprintf(stderr, "dfarm-dashboard: error: database '%s' does not exist\n", qPrintable(db));
    return 2;
  }

  dfarm::gui::MainWindow window;
  window.openDatabase(db);
  window.show();

  if (parser.isSet(screenshot)) {
    const QString file = parser.value(screenshot);
    // Save once the selected run's jobs are in (or after 10 s at most).
    auto save = [&window, file] {
      if (!window.grab().save(file)) {
        std::fprintf(stderr, "dfarm-dashboard: error: cannot write '%s'\n", qPrintable(file));
        QApplication::exit(3);
        return;
      }
      QApplication::exit(0);
    };
    QObject::connect(window.loader(), &dfarm::gui::StoreLoader::jobsLoaded, &window,
                     [save] { QTimer::singleShot(100, save); });
    QObject::connect(window.loader(), &dfarm::gui::StoreLoader::runsLoaded, &window,
                     [save](const dfarm::gui::RunsSnapshot& s) {
                       if (!s.error.isEmpty() || s.runs.empty()) QTimer::singleShot(100, save);
                     });
    QTimer::singleShot(10000, save);
  }
  return QApplication::exec();
}
