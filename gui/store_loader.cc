#include "gui/store_loader.h"

#include <QFileInfo>

namespace dfarm::gui {

Result<std::unique_ptr<store::Store>> OpenDashboardStore(const QString& dbPath) {
  if (!store::IsPostgresUrl(dbPath.toStdString()) && !QFileInfo::exists(dbPath)) {
    return MakeError(ErrorKind::kNotFound,
                     QObject::tr("database '%1' does not exist").arg(dbPath).toStdString());
  }
  return store::OpenStore(dbPath.toStdString());
}

}  // namespace dfarm::gui
