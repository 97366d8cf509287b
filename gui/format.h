// Display formatting shared by the dashboard's models.
#pragma once

#include <QString>
#include <string>

namespace dfarm::gui {

// A std::string (UTF-8) as a QString.
inline QString Q(const std::string& s) { return QString::fromStdString(s); }

// Microseconds as milliseconds with three significant decimals ("12.345").
QString formatMs(double us);
// Bytes as MiB with one decimal ("42.0").
QString formatMiB(qint64 bytes);
// A tooltip for text from the database (which agents fill): Qt shows a tooltip
// that looks like rich text as HTML, so such text is escaped and shown as
// written; plain text is returned as it is.
QString plainToolTip(const QString& text);

}  // namespace dfarm::gui
