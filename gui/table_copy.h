// Copy a table as TSV: the header and the rows a table view shows, in the
// order it shows them (sorted, filtered), its hidden columns left out.
#pragma once

#include <QString>

class QAbstractItemModel;
class QTableView;
class QWidget;

namespace dfarm::gui {

// One cell's text for a TSV field: tabs and line breaks become spaces.
QString tsvField(const QString& text);

// The header line and every row of model (its DisplayRole text), one line
// each, fields separated by tabs, lines ended by '\n'.
QString modelToTsv(const QAbstractItemModel& model);

// Like modelToTsv over view's model, in view order, without hidden columns
// or hidden rows.
QString tableToTsv(const QTableView& view);

// The table a copy acts on under root: the focused one (or the one holding
// the focus), else the first visible one; null when root shows none.
QTableView* tableToCopy(QWidget* root);

// Puts tableToCopy(root) on the clipboard as TSV; false when there is none.
bool copyTableAsTsv(QWidget* root);

}  // namespace dfarm::gui
