#include "gui/views/pages.h"

#include <QStringList>
#include <array>

#include "gui/views/location.h"

namespace dfarm::gui {

namespace {

constexpr std::array<PageInfo, kPageCount> kPages = {{
#define DFARM_PAGE(id, name, title, shows, subject, make) \
  {Page::id, name, title, shows, subject, &make},
#include "gui/views/pages.inc"
#undef DFARM_PAGE
}};

}  // namespace

const PageInfo& pageInfo(Page page) { return kPages[static_cast<size_t>(page)]; }

const PageInfo* pageShowing(Subject subject) {
  for (const PageInfo& info : kPages) {
    if (info.subject == subject) return &info;
  }
  return nullptr;
}

QString pageName(Page page) { return QString::fromLatin1(pageInfo(page).name); }

bool parsePage(const QString& name, Page* page) {
  for (const PageInfo& info : kPages) {
    if (name == QLatin1String(info.name)) {
      *page = info.page;
      return true;
    }
  }
  return false;
}

QString pageChoices() {
  QStringList names;
  for (const PageInfo& info : kPages) names << QString::fromLatin1(info.name);
  return names.join('|');
}

QString pageDefaults() {
  QStringList opens;
  for (const PageInfo& info : kPages) {
    if (info.subject == Subject::Database) continue;
    opens << QStringLiteral("%1 %2%3").arg(QString::fromLatin1(info.name),
                                           opens.isEmpty() ? "opens " : "",
                                           QString::fromLatin1(newestDescription(info.subject)));
  }
  return opens.join(QStringLiteral(", "));
}

QString pagesShown() {
  QStringList shown;
  for (const PageInfo& info : kPages) shown << QString::fromLatin1(info.shows);
  if (shown.size() < 2) return shown.join(QString());
  const QString last = shown.takeLast();
  return shown.join(QStringLiteral(", ")) + QStringLiteral(" and ") + last;
}

}  // namespace dfarm::gui
