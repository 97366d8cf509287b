#include "gui/format.h"

#include <QTextDocument>

namespace dfarm::gui {

QString formatMs(double us) { return QString::number(us / 1000.0, 'f', 3); }

QString formatMiB(qint64 bytes) {
  return QString::number(static_cast<double>(bytes) / (1024.0 * 1024.0), 'f', 1);
}

QString plainToolTip(const QString& text) {
  return Qt::mightBeRichText(text) ? Qt::convertFromPlainText(text, Qt::WhiteSpaceNormal) : text;
}

}  // namespace dfarm::gui
