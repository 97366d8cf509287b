// PluginLibrary: a loaded external delegate plugin (dlopen), checked against
// the ABI of delegates/external/dfarm_delegate_plugin.h.
#pragma once

#include <memory>
#include <string>

#include "delegates/external/dfarm_delegate_plugin.h"
#include "runtime/status.h"

namespace dfarm::delegates {

class PluginLibrary {
 public:
  // Loads the shared library at `path` and checks its API table. Errors
  // (kError), each its own message: the file is missing; it cannot be loaded
  // (dlerror()); it lacks the entry symbol; its api_version differs from
  // DFARM_DELEGATE_PLUGIN_API_VERSION; a required method is null.
  static runtime::Status Open(const std::string& path, std::unique_ptr<PluginLibrary>* out);

  // Unloads the library (dlclose): nothing obtained from api() may be used after.
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  // The plugin's table (static storage inside the library; valid while this lives).
  const DfarmDelegatePluginApi& api() const { return *api_; }
  const std::string& path() const { return path_; }

 private:
  PluginLibrary(std::string path, void* handle, const DfarmDelegatePluginApi* api)
      : path_(std::move(path)), handle_(handle), api_(api) {}

  std::string path_;
  void* handle_;  // owned: dlclose()d by the destructor
  const DfarmDelegatePluginApi* api_;
};

}  // namespace dfarm::delegates
