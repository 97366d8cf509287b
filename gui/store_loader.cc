#include "gui/store_loader.h"

#include <QFileInfo>

namespace dfarm::gui {

Result<std::unique_ptr<store::Reader>> OpenDashboardStore(const QString& dbPath) {
  if (!store::IsPostgresUrl(dbPath.toStdString()) && !QFileInfo::exists(dbPath)) {
    return MakeError(ErrorKind::kNotFound,
                     QObject::tr("database '%1' does not exist").arg(dbPath).toStdString());
  }
  auto opened = store::OpenStore(dbPath.toStdString());
  if (!opened) return opened.error();
  return std::unique_ptr<store::Reader>(std::move(*opened));
}

}  // namespace dfarm::gui
