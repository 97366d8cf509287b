// Display formatting shared by the dashboard's models.
#pragma once

#include <QString>

namespace dfarm::gui {

// Microseconds as milliseconds with three significant decimals ("12.345").
QString formatMs(double us);
// Bytes as MiB with one decimal ("42.0").
QString formatMiB(qint64 bytes);

}  // namespace dfarm::gui
