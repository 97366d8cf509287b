// Exporting a dashboard chart (any widget, a QChartView in practice) as an
// image file, by the file's extension: .png (the widget grabbed at its size)
// or .svg (the widget rendered into a QSvgGenerator, vector shapes).
#pragma once

#include <QString>

#include "agent/base/result.h"

class QWidget;

namespace dfarm::gui {

// Writes `chartView` to `file` (.png or .svg, any case). kInvalidInput for a
// null widget or another extension; kFailed naming the file when it cannot be
// written.
Result<void> ExportChart(QWidget* chartView, const QString& file);

}  // namespace dfarm::gui
