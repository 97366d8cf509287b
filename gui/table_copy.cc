#include "gui/table_copy.h"

#include <QAbstractItemModel>
#include <QApplication>
#include <QClipboard>
#include <QHeaderView>
#include <QStringList>
#include <QTableView>
#include <QVector>

namespace dfarm::gui {

namespace {

QString rowsToTsv(const QAbstractItemModel& model, const QVector<int>& columns,
                  const QVector<int>& rows) {
  QString out;
  QStringList fields;
  for (int c : columns)
    fields << tsvField(model.headerData(c, Qt::Horizontal, Qt::DisplayRole).toString());
  out += fields.join('\t') + '\n';
  for (int r : rows) {
    fields.clear();
    for (int c : columns) fields << tsvField(model.index(r, c).data(Qt::DisplayRole).toString());
    out += fields.join('\t') + '\n';
  }
  return out;
}

}  // namespace

QString tsvField(const QString& text) {
  QString field = text;
  field.replace(QLatin1String("\r\n"), QLatin1String(" "));
  for (QChar& ch : field) {
    if (ch == '\t' || ch == '\n' || ch == '\r') ch = ' ';
  }
  return field;
}

QString modelToTsv(const QAbstractItemModel& model) {
  QVector<int> columns, rows;
  for (int c = 0; c < model.columnCount(); ++c) columns << c;
  for (int r = 0; r < model.rowCount(); ++r) rows << r;
  return rowsToTsv(model, columns, rows);
}

QString tableToTsv(const QTableView& view) {
  const QAbstractItemModel* model = view.model();
  if (model == nullptr) return {};
  // Columns in visual order (the user may have moved them), hidden ones out.
  QVector<int> columns;
  const QHeaderView* header = view.horizontalHeader();
  for (int v = 0; v < header->count(); ++v) {
    const int c = header->logicalIndex(v);
    if (!view.isColumnHidden(c)) columns << c;
  }
  QVector<int> rows;
  const QHeaderView* vertical = view.verticalHeader();
  for (int v = 0; v < vertical->count(); ++v) {
    const int r = vertical->logicalIndex(v);
    if (!view.isRowHidden(r)) rows << r;
  }
  return rowsToTsv(*model, columns, rows);
}

QTableView* tableToCopy(QWidget* root) {
  if (root == nullptr) return nullptr;
  for (QWidget* w = QApplication::focusWidget(); w != nullptr; w = w->parentWidget()) {
    auto* table = qobject_cast<QTableView*>(w);
    if (table != nullptr && root->isAncestorOf(table)) return table;
  }
  const auto tables = root->findChildren<QTableView*>();
  for (QTableView* table : tables) {
    if (table->isVisibleTo(root)) return table;
  }
  return nullptr;
}

bool copyTableAsTsv(QWidget* root) {
  QTableView* table = tableToCopy(root);
  if (table == nullptr) return false;
  QApplication::clipboard()->setText(tableToTsv(*table));
  return true;
}

}  // namespace dfarm::gui
