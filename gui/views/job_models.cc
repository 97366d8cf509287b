#include "gui/views/job_models.h"

#include <QColor>
#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTimeZone>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

namespace dfarm::gui {
namespace {

QString real(double v, int precision = 4) {
  return std::isfinite(v) ? QString::number(v, 'g', precision) : QStringLiteral("-");
}
QString optReal(const std::optional<double>& v, int decimals = 1) {
  return v && std::isfinite(*v) ? QString::number(*v, 'f', decimals) : QString();
}
QString yesNo(const std::optional<bool>& v, const std::optional<double>& fraction) {
  if (!v) return {};
  QString s = *v ? QStringLiteral("yes") : QStringLiteral("no");
  if (fraction) s += QString(" (%1%)").arg(*fraction * 100, 0, 'f', 0);
  return s;
}

// A JSON value of a device state object as one line of text.
QString jsonText(const QJsonValue& v) {
  if (v.isDouble()) return QString::number(v.toDouble(), 'g', 6);
  if (v.isBool()) return v.toBool() ? "true" : "false";
  if (v.isString()) return v.toString();
  if (v.isNull() || v.isUndefined()) return {};
  return QString::fromUtf8(
      QJsonDocument::fromVariant(v.toVariant()).toJson(QJsonDocument::Compact));
}

QJsonObject parseObject(const std::optional<std::string>& json) {
  if (!json) return {};
  return QJsonDocument::fromJson(QByteArray::fromStdString(*json)).object();
}

// A device state key's name without its unit suffix ("battery temp") and
// its value with the unit ("31.5 °C"): _c, _pct, _khz (as MHz), _ua (as
// mA), _uv (as V), _ms, _bytes (as MiB); other keys as they are.
std::pair<QString, QString> figureWithUnit(const QString& key, const QJsonValue& v) {
  struct Unit {
    const char* suffix;
    const char* unit;
    double scale;
    int decimals;
  };
  static constexpr Unit kUnits[] = {
      {"_c", "°C", 1, 1},
      {"_pct", "%", 1, 0},
      {"_khz", "MHz", 1e-3, 0},
      {"_ua", "mA", 1e-3, 1},
      {"_uv", "V", 1e-6, 3},
      {"_ms", "ms", 1, 1},
      {"_bytes", "MiB", 1.0 / (1 << 20), 1},
  };
  QString name = key;
  const Unit* unit = nullptr;
  for (const Unit& u : kUnits) {
    if (!key.endsWith(QLatin1String(u.suffix))) continue;
    name = key.left(key.size() - static_cast<int>(std::strlen(u.suffix)));
    unit = &u;
    break;
  }
  const auto text = [unit](const QJsonValue& x) {
    if (unit == nullptr || !x.isDouble()) return jsonText(x);
    return QStringLiteral("%1 %2")
        .arg(x.toDouble() * unit->scale, 0, 'f', unit->decimals)
        .arg(QString::fromUtf8(unit->unit));
  };
  QString value;
  if (v.isArray()) {  // a list of figures: each with the unit
    QStringList parts;
    for (const QJsonValue& x : v.toArray()) parts << text(x);
    value = parts.join(QStringLiteral(", "));
  } else {
    value = text(v);
  }
  return {name.replace('_', ' '), value};
}

// One CPU's state on one line: "1800 MHz, schedutil (max 2400 MHz)".
QString cpuText(const QJsonObject& cpu) {
  if (cpu.contains("online") && !cpu.value("online").toBool()) return QObject::tr("offline");
  QStringList parts;
  const auto mhz = [&](const char* key) {
    return QStringLiteral("%1 MHz").arg(cpu.value(key).toDouble() / 1000, 0, 'f', 0);
  };
  if (cpu.contains("cur_freq_khz")) parts << mhz("cur_freq_khz");
  if (cpu.contains("governor")) parts << cpu.value("governor").toString();
  if (cpu.contains("max_freq_khz")) parts << QObject::tr("max %1").arg(mhz("max_freq_khz"));
  return parts.join(QStringLiteral(", "));
}

// The figures of a device state object (DeviceStateToJson) as (name, value
// with its unit) in its order: one row per CPU and per thermal zone, other
// nested values flattened as "key.sub".
std::vector<std::pair<QString, QString>> stateFigures(const QJsonObject& state) {
  std::vector<std::pair<QString, QString>> out;
  for (auto it = state.begin(); it != state.end(); ++it) {
    const QString key = it.key();
    if (key == "unix_ms") continue;  // the time row
    if (key == "cpus" && it.value().isArray()) {
      for (const QJsonValue& c : it.value().toArray()) {
        const QJsonObject cpu = c.toObject();
        out.emplace_back(QObject::tr("cpu %1").arg(cpu.value("cpu").toInt()), cpuText(cpu));
      }
    } else if (key == "thermal_zones" && it.value().isArray()) {
      for (const QJsonValue& z : it.value().toArray()) {
        const QJsonObject zone = z.toObject();
        out.emplace_back(QObject::tr("thermal zone %1 (%2)")
                             .arg(zone.value("zone").toInt())
                             .arg(zone.value("type").toString()),
                         figureWithUnit("temp_c", zone.value("temp_c")).second);
      }
    } else if (it.value().isObject()) {
      const QJsonObject inner = it.value().toObject();
      for (auto in = inner.begin(); in != inner.end(); ++in) {
        auto [name, value] = figureWithUnit(in.key(), in.value());
        out.emplace_back(key + "." + name, value);
      }
    } else {
      out.push_back(figureWithUnit(key, it.value()));
    }
  }
  return out;
}

}  // namespace

Result<JobData> loadJob(store::Reader& store, qint64 jobId) {
  JobData d;
  auto job = store.GetJob(jobId);
  if (!job) {
    return MakeError(ErrorKind::kNotFound,
                     "job " + std::to_string(jobId) + " is not in the database: " + job.message());
  }
  d.job = std::move(*job);
  auto samples = store.GetSamples(jobId);
  if (!samples) return samples.error();
  d.samples_us = std::move(*samples);
  if (store::IsFinalJobStatus(d.job.status)) {
    auto detail = store.GetJobDetail(jobId);
    if (detail) d.detail = std::move(*detail);  // a job interrupted mid-write may have none
  }
  auto accuracy = store.GetAccuracy(jobId);
  if (!accuracy) return accuracy.error();
  d.accuracy = std::move(*accuracy);
  auto placement = store.GetPlacement(jobId);
  if (!placement) return placement.error();
  d.placement = std::move(*placement);
  auto profile = store.GetProfile(jobId);
  if (!profile) return profile.error();
  d.profile = std::move(*profile);
  auto telemetry = store.GetTelemetry(jobId);
  if (!telemetry) return telemetry.error();
  d.telemetry = std::move(*telemetry);
  auto sustained = store.ListRunSustained(d.job.run_id);
  if (!sustained) return sustained.error();
  if (auto it = sustained->find(jobId); it != sustained->end()) d.sustained = it->second;
  auto task = store.ListRunTaskAccuracy(d.job.run_id);
  if (!task) return task.error();
  if (auto it = task->find(jobId); it != task->end()) d.task = it->second;
  return d;
}

std::vector<HistogramBin> latencyHistogram(const std::vector<double>& samples_us) {
  std::vector<HistogramBin> bins;
  if (samples_us.empty()) return bins;
  const auto [lo, hi] = std::minmax_element(samples_us.begin(), samples_us.end());
  if (*hi <= *lo) return {{*lo, *hi, static_cast<int>(samples_us.size())}};
  const int n = std::clamp(static_cast<int>(std::ceil(std::sqrt(samples_us.size()))), 5, 30);
  const double width = (*hi - *lo) / n;
  for (int i = 0; i < n; ++i) bins.push_back({*lo + i * width, *lo + (i + 1) * width, 0});
  for (double s : samples_us) {
    const int i = std::min(n - 1, static_cast<int>((s - *lo) / width));
    ++bins[static_cast<size_t>(i)].count;
  }
  return bins;
}

// ---- AccuracyModel

AccuracyModel::AccuracyModel(QObject* parent) : QAbstractTableModel(parent) {}

void AccuracyModel::setAccuracy(std::optional<store::Accuracy> accuracy) {
  beginResetModel();
  m_outputs = accuracy ? std::move(accuracy->outputs) : std::vector<store::OutputAccuracy>();
  endResetModel();
}

int AccuracyModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_outputs.size());
}
int AccuracyModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant AccuracyModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const store::OutputAccuracy& o = m_outputs[static_cast<size_t>(index.row())];
  if (role == Qt::ForegroundRole) {
    const bool bad = (index.column() == NanInfColumn && o.nan_count + o.inf_count > 0) ||
                     (index.column() == Top1Column && o.top1_agree && !*o.top1_agree) ||
                     (index.column() == Top5Column && o.top5_agree && !*o.top5_agree);
    return bad ? QVariant(QColor(Qt::darkRed)) : QVariant();
  }
  if (role == Qt::TextAlignmentRole) {
    return index.column() == NameColumn ? QVariant() : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case IndexColumn:
      return QVariant::fromValue<qint64>(o.index);
    case NameColumn:
      return QString::fromStdString(o.name);
    case MaxAbsColumn:
      return real(o.max_abs_error);
    case MeanAbsColumn:
      return real(o.mean_abs_error);
    case RmseColumn:
      return real(o.rmse);
    case SnrColumn:
      return optReal(o.snr_db);
    case PsnrColumn:
      return optReal(o.psnr_db);
    case LsbColumn:
      return o.max_abs_error_lsb ? QString::number(runner::ToDouble(*o.max_abs_error_lsb))
                                 : QString();
    case NanInfColumn:
      return QString("%1 / %2").arg(o.nan_count).arg(o.inf_count);
    case Top1Column:
      return yesNo(o.top1_agree, o.top1_agreement);
    case Top5Column:
      return yesNo(o.top5_agree, o.top5_agreement);
  }
  return {};
}

QVariant AccuracyModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kNames[] = {"#",         "Output", "Max abs err", "Mean abs err",
                                       "RMSE",      "SNR dB", "PSNR dB",     "Max LSB",
                                       "NaN / Inf", "Top-1",  "Top-5"};
  return section >= 0 && section < ColumnCount ? tr(kNames[section]) : QVariant();
}

// ---- PlacementModel

PlacementModel::PlacementModel(QObject* parent) : QAbstractTableModel(parent) {}

void PlacementModel::setPlacement(std::optional<store::JobPlacement> placement) {
  beginResetModel();
  m_nodes = placement ? std::move(placement->nodes) : std::vector<store::PlacementNode>();
  std::stable_partition(m_nodes.begin(), m_nodes.end(),
                        [](const store::PlacementNode& n) { return !n.folded; });
  endResetModel();
}

int PlacementModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_nodes.size());
}
int PlacementModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant PlacementModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const store::PlacementNode& n = m_nodes[static_cast<size_t>(index.row())];
  if (role == Qt::ForegroundRole) {
    if (n.folded) return QColor(Qt::gray);
    if (!n.reason.empty()) return QColor(Qt::darkRed);
    return {};
  }
  if (role == Qt::ToolTipRole && index.column() == ReasonColumn && !n.reason.empty()) {
    return QString::fromStdString(n.reason).toHtmlEscaped();
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case IndexColumn:
      return QVariant::fromValue<qint64>(n.index);
    case OpColumn:
      return QString::fromStdString(n.op);
    case DelegateColumn:
      return n.folded ? tr("folded at load") : QString::fromStdString(n.delegate);
    case PartitionColumn:
      return n.partition ? QVariant::fromValue<qint64>(*n.partition) : QVariant(QString());
    case ReasonColumn:
      return QString::fromStdString(n.reason);
  }
  return {};
}

QVariant PlacementModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kNames[] = {"Node", "Op", "Ran on", "Partition", "Fallback reason"};
  return section >= 0 && section < ColumnCount ? tr(kNames[section]) : QVariant();
}

// ---- ProfileModel

ProfileModel::ProfileModel(QObject* parent) : QAbstractTableModel(parent) {}

void ProfileModel::setProfile(std::optional<store::JobProfile> profile) {
  beginResetModel();
  m_ops = profile ? std::move(profile->by_op) : std::vector<store::ProfileOp>();
  endResetModel();
}

int ProfileModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_ops.size());
}
int ProfileModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant ProfileModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const store::ProfileOp& o = m_ops[static_cast<size_t>(index.row())];
  if (role == Qt::TextAlignmentRole && index.column() != OpColumn) {
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case OpColumn:
      return QString::fromStdString(o.op);
    case CountColumn:
      return QVariant::fromValue<qint64>(o.count);
    case TotalColumn:
      return QString::number(o.total_us / 1000.0, 'f', 3);
    case ShareColumn:
      return QString::number(o.pct, 'f', 1);
  }
  return {};
}

QVariant ProfileModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kNames[] = {"Op", "Count", "Total ms", "%"};
  return section >= 0 && section < ColumnCount ? tr(kNames[section]) : QVariant();
}

// ---- TelemetryModel

TelemetryModel::TelemetryModel(QObject* parent) : QAbstractTableModel(parent) {}

void TelemetryModel::setTelemetry(const std::vector<store::TelemetryRow>& rows,
                                  const std::optional<std::string>& stateBefore,
                                  const std::optional<std::string>& stateAfter) {
  beginResetModel();
  m_rows.clear();
  const store::TelemetryRow* before = nullptr;
  const store::TelemetryRow* after = nullptr;
  double lo = 0, hi = 0;
  int during = 0;
  for (const store::TelemetryRow& r : rows) {
    if (r.phase == "before") before = &r;
    if (r.phase == "after") after = &r;
    if (r.phase.rfind("during:", 0) != 0 || !r.hottest_temp_c) continue;
    lo = during == 0 ? *r.hottest_temp_c : std::min(lo, *r.hottest_temp_c);
    hi = during == 0 ? *r.hottest_temp_c : std::max(hi, *r.hottest_temp_c);
    ++during;
  }
  const auto fig = [&](const QString& name, auto get) {
    const QString b = before ? get(*before) : QString();
    const QString a = after ? get(*after) : QString();
    if (!b.isEmpty() || !a.isEmpty()) m_rows.push_back({name, b, a});
  };
  fig(tr("hottest zone (C)"),
      [](const store::TelemetryRow& r) { return optReal(r.hottest_temp_c); });
  if (during > 0) {
    m_rows.push_back({tr("while running: hottest zone (C)"),
                      tr("%1 to %2").arg(lo, 0, 'f', 1).arg(hi, 0, 'f', 1),
                      tr("%n sample(s)", nullptr, during)});
  }
  fig(tr("load avg 1m"), [](const store::TelemetryRow& r) { return optReal(r.load_avg_1m, 2); });
  fig(tr("battery (C)"), [](const store::TelemetryRow& r) { return optReal(r.battery_temp_c); });
  fig(tr("battery level (%)"), [](const store::TelemetryRow& r) {
    return r.battery_level_pct ? QString::number(*r.battery_level_pct) : QString();
  });
  addStateRows(parseObject(stateBefore), parseObject(stateAfter));
  endResetModel();
}

void TelemetryModel::addStateRows(const QJsonObject& before, const QJsonObject& after) {
  const auto time = [](const QJsonValue& v) {
    return v.isDouble()
               ? QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(v.toDouble()), QTimeZone::utc())
                     .toString("yyyy-MM-dd hh:mm:ss.zzz")
               : QString();
  };
  if (before.contains("unix_ms") || after.contains("unix_ms")) {
    m_rows.push_back(
        {tr("time (UTC)"), time(before.value("unix_ms")), time(after.value("unix_ms"))});
  }
  // Rows in the before state's order, then what only the after state has.
  const bool telemetryRows = !m_rows.empty();
  std::map<QString, size_t> rowOf;
  const auto add = [&](const std::vector<std::pair<QString, QString>>& figures, bool isAfter) {
    for (const auto& [name, value] : figures) {
      if (name == "load avg 1m" && telemetryRows) continue;  // a telemetry figure above
      auto [it, fresh] = rowOf.emplace(name, m_rows.size());
      if (fresh) m_rows.push_back({name, {}, {}});
      (isAfter ? m_rows[it->second].after : m_rows[it->second].before) = value;
    }
  };
  add(stateFigures(before), false);
  add(stateFigures(after), true);
  // A figure neither state holds (a CPU without frequencies in a container).
  m_rows.erase(std::remove_if(m_rows.begin(), m_rows.end(),
                              [](const Row& r) { return r.before.isEmpty() && r.after.isEmpty(); }),
               m_rows.end());
}

int TelemetryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}
int TelemetryModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant TelemetryModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const Row& r = m_rows[static_cast<size_t>(index.row())];
  if (role == Qt::ForegroundRole && index.column() == AfterColumn && r.after != r.before &&
      !r.before.isEmpty()) {
    return QColor(Qt::darkBlue);
  }
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
  const QString text = index.column() == FigureColumn   ? r.figure
                       : index.column() == BeforeColumn ? r.before
                                                        : r.after;
  if (role == Qt::ToolTipRole)
    return text.size() > 40 ? QVariant(text.toHtmlEscaped()) : QVariant();
  return text.size() > 80 ? QVariant(text.left(77) + "...") : QVariant(text);
}

QVariant TelemetryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kNames[] = {"Device figure", "Before", "After"};
  return section >= 0 && section < ColumnCount ? tr(kNames[section]) : QVariant();
}

}  // namespace dfarm::gui
