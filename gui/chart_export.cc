#include "gui/chart_export.h"

#include <QDir>
#include <QFileInfo>
#include <QPainter>
#include <QPixmap>
#include <QSvgGenerator>
#include <QWidget>

namespace dfarm::gui {

Result<void> ExportChart(QWidget* chartView, const QString& file) {
  if (chartView == nullptr) {
    return MakeError(ErrorKind::kInvalidInput, "this view has no chart to export");
  }
  const QString suffix = QFileInfo(file).suffix().toLower();
  const QSize size = chartView->size().isEmpty() ? chartView->sizeHint() : chartView->size();
  if (suffix == "png") {
    if (chartView->size().isEmpty()) chartView->resize(size);
    if (!chartView->grab().save(file, "PNG")) {
      return MakeError(ErrorKind::kFailed, "cannot write the chart to '" + file.toStdString() +
                                               "': check that its folder exists and is writable");
    }
    return {};
  }
  if (suffix == "svg") {
    QFileInfo info(file);
    if (!info.absoluteDir().exists()) {
      return MakeError(ErrorKind::kFailed, "cannot write the chart to '" + file.toStdString() +
                                               "': its folder does not exist");
    }
    QSvgGenerator svg;
    svg.setFileName(file);
    svg.setSize(size);
    svg.setViewBox(QRect(QPoint(0, 0), size));
    svg.setTitle(chartView->windowTitle().isEmpty() ? QStringLiteral("DelegateFarm chart")
                                                    : chartView->windowTitle());
    svg.setDescription(QStringLiteral("Exported by dfarm-dashboard"));
    QPainter painter;
    if (!painter.begin(&svg)) {
      return MakeError(ErrorKind::kFailed, "cannot write the chart to '" + file.toStdString() +
                                               "': check that it is writable");
    }
    chartView->render(&painter);
    painter.end();
    if (QFileInfo(file).size() <= 0) {
      return MakeError(ErrorKind::kFailed,
                       "writing the chart to '" + file.toStdString() + "' left an empty file");
    }
    return {};
  }
  return MakeError(ErrorKind::kInvalidInput, "cannot export a chart as '" + file.toStdString() +
                                                 "': name a .png or .svg file");
}

}  // namespace dfarm::gui
