// The dashboard's details: a matrix cell sized for every line it draws, an
// expected `unsupported` drawn apart from a crash, the devices' node column,
// and the device state shown as figures with units, not raw JSON.
#include <gtest/gtest.h>

#include <QColor>
#include <QFontMetrics>
#include <QStyleOptionViewItem>
#include <QTableView>

#include "gui/views/devices_view.h"
#include "gui/views/job_models.h"
#include "gui/views/matrix_view.h"
#include "reports/palette.h"

namespace dfarm::gui {
namespace {

MatrixCell Cell(size_t ok, size_t trials, const std::string& bad, double medianUs) {
  MatrixCell c;
  c.present = true;
  c.cell.model = "face.tflite";
  c.cell.delegate = "xnnpack";
  c.trials = trials;
  c.ok = ok;
  c.bad = bad;
  if (ok > 0) c.median_us = medianUs;
  c.speedup = 1.23;
  return c;
}

MatrixData OneRow(std::vector<MatrixCell> cells) {
  MatrixData d;
  d.run.id = 1;
  for (size_t i = 0; i < cells.size(); ++i) d.devices.push_back("device" + std::to_string(i));
  d.rows.emplace_back("face.tflite", "xnnpack");
  d.cells.push_back(std::move(cells));
  return d;
}

// A cell with a warning line ("108.449 ms · 4/5 ok · ⚠ crashed") is as
// wide as that line in the small font it is drawn in: nothing clipped.
TEST(MatrixDetailsTest, CellWithAWarningIsWideEnoughForItsLines) {
  MatrixModel model;
  model.setMatrix(OneRow({Cell(4, 5, "crashed", 108449), Cell(5, 5, "", 1000)}));
  const QModelIndex warned = model.index(0, MatrixModel::FirstDeviceColumn);
  const QString detail = warned.data(MatrixModel::DetailRole).toString();
  ASSERT_TRUE(detail.contains("108.449 ms")) << detail.toStdString();
  ASSERT_TRUE(detail.contains("crashed")) << detail.toStdString();
  QTableView table;
  MatrixDelegate delegate;
  QStyleOptionViewItem option;
  option.initFrom(&table);
  const QSize hint = delegate.sizeHint(option, warned);
  QFont small = option.font;
  small.setPointSizeF(option.font.pointSizeF() * 0.85);
  EXPECT_GE(hint.width(), QFontMetrics(small).horizontalAdvance(detail) + 2)
      << "the detail line would be clipped";
  EXPECT_GE(hint.height(), QFontMetrics(option.font).height() * 2);
}

// No trial ok: a crash is red, an expected `unsupported` the palette's
// neutral grey (reports::JobStatusColours), in every colouring.
TEST(MatrixDetailsTest, UnsupportedIsNotTheRedOfACrash) {
  MatrixModel model;
  model.setMatrix(OneRow({Cell(0, 5, "crashed", 0), Cell(0, 5, "unsupported", 0)}));
  const QModelIndex crashed = model.index(0, MatrixModel::FirstDeviceColumn);
  const QModelIndex unsupported = model.index(0, MatrixModel::FirstDeviceColumn + 1);
  for (auto colour : {MatrixModel::Colour::kSpeedup, MatrixModel::Colour::kLatency,
                      MatrixModel::Colour::kVerdict}) {
    model.setColour(colour);
    const QColor red = crashed.data(Qt::BackgroundRole).value<QColor>();
    const QColor grey = unsupported.data(Qt::BackgroundRole).value<QColor>();
    EXPECT_NE(red, grey);
    EXPECT_EQ(red, QColor(QString::fromLatin1(reports::JobStatusColours("crashed").background)));
    EXPECT_EQ(grey,
              QColor(QString::fromLatin1(reports::JobStatusColours("unsupported").background)));
    EXPECT_NE(crashed.data(Qt::ForegroundRole).value<QColor>(),
              unsupported.data(Qt::ForegroundRole).value<QColor>());
  }
  EXPECT_EQ(unsupported.data().toString(), "unsupported");
}

TEST(DevicesDetailsTest, NodeColumnNamesTheNodeServingTheDevice) {
  DevicesModel model;
  store::DeviceRow farm;
  farm.name = "pixel7";
  farm.node = "rack1";
  store::DeviceRow local;
  local.name = "local";
  model.setDevices({farm, local});
  EXPECT_EQ(model.headerData(DevicesModel::NodeColumn, Qt::Horizontal).toString(), "Node");
  EXPECT_EQ(model.index(0, DevicesModel::NodeColumn).data().toString(), "rack1");
  EXPECT_EQ(model.index(1, DevicesModel::NodeColumn).data().toString(), "(local sweep)");
}

// The device state as the agent records it (harness DeviceStateToJson):
// one row per CPU and thermal zone, figures with their units, no JSON.
TEST(TelemetryDetailsTest, DeviceStateIsFiguresWithUnitsNotJson) {
  const std::string before =
      R"({"unix_ms":1700000000123,"cpus":[{"cpu":0,"cur_freq_khz":1800000,)"
      R"("max_freq_khz":2400000,"governor":"schedutil"},{"cpu":1,"online":false},{"cpu":2}],)"
      R"("thermal_zones":[{"zone":0,"type":"x86_pkg_temp","temp_c":45.5}],)"
      R"("load_avg_5m":0.5,"battery_temp_c":31.5,"battery_level_pct":80,)"
      R"("battery_current_ua":-350000,"battery_voltage_uv":3900000,"cpu_busy_pct":12})";
  const std::string after = R"({"unix_ms":1700000001123,"cpus":[{"cpu":0,"cur_freq_khz":1200000}],)"
                            R"("thermal_zones":[{"zone":0,"type":"x86_pkg_temp","temp_c":71}]})";
  TelemetryModel model;
  model.setTelemetry({}, before, after);
  std::map<QString, std::pair<QString, QString>> rows;
  for (int r = 0; r < model.rowCount(); ++r) {
    const QString before = model.index(r, TelemetryModel::BeforeColumn).data().toString();
    const QString after = model.index(r, TelemetryModel::AfterColumn).data().toString();
    EXPECT_FALSE(before.startsWith('[') || before.startsWith('{')) << before.toStdString();
    EXPECT_FALSE(after.startsWith('[') || after.startsWith('{')) << after.toStdString();
    rows[model.index(r, TelemetryModel::FigureColumn).data().toString()] = {before, after};
  }
  EXPECT_EQ(rows["cpu 0"].first, "1800 MHz, schedutil, max 2400 MHz");
  EXPECT_EQ(rows["cpu 0"].second, "1200 MHz");
  EXPECT_EQ(rows["cpu 1"].first, "offline");
  EXPECT_EQ(rows.count("cpu 2"), 0u) << "a CPU with nothing to show is no row";
  EXPECT_EQ(rows["thermal zone 0 (x86_pkg_temp)"].first, "45.5 °C");
  EXPECT_EQ(rows["thermal zone 0 (x86_pkg_temp)"].second, "71.0 °C");
  EXPECT_EQ(rows["battery temp"].first, "31.5 °C");
  EXPECT_EQ(rows["battery level"].first, "80 %");
  EXPECT_EQ(rows["battery current"].first, "-350.0 mA");
  EXPECT_EQ(rows["battery voltage"].first, "3.900 V");
  EXPECT_EQ(rows["cpu busy"].first, "12 %");
  EXPECT_EQ(rows["time (UTC)"].first, "2023-11-14 22:13:20.123");
}

}  // namespace
}  // namespace dfarm::gui
