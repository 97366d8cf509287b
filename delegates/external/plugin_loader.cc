#include "delegates/external/plugin_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>

namespace dfarm::delegates {
namespace {

struct DlCloser {
  void operator()(void* handle) const {
    if (handle != nullptr) dlclose(handle);
  }
};

}  // namespace

runtime::Status PluginLibrary::Open(const std::string& path, std::unique_ptr<PluginLibrary>* out) {
  const std::string what = "external delegate plugin '" + path + "'";
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) {
    return runtime::Status::Error(what + " does not exist");
  }
  if (!S_ISREG(st.st_mode)) return runtime::Status::Error(what + " is not a regular file");
  dlerror();
  std::unique_ptr<void, DlCloser> handle(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (handle == nullptr) {
    const char* why = dlerror();
    return runtime::Status::Error("failed to load " + what + ": " +
                                  (why != nullptr ? why : "unknown dlopen error"));
  }
  dlerror();
  void* symbol = dlsym(handle.get(), DFARM_DELEGATE_PLUGIN_ENTRY);
  if (symbol == nullptr) {
    return runtime::Status::Error(what + " has no symbol '" DFARM_DELEGATE_PLUGIN_ENTRY
                                         "' (not a DelegateFarm delegate plugin)");
  }
  auto get_api = reinterpret_cast<DfarmDelegatePluginGetApiFn>(symbol);
  const DfarmDelegatePluginApi* api = get_api();
  if (api == nullptr) {
    return runtime::Status::Error(what + ": " DFARM_DELEGATE_PLUGIN_ENTRY "() returned null");
  }
  if (api->api_version != DFARM_DELEGATE_PLUGIN_API_VERSION) {
    return runtime::Status::Error(
        what + " was built for plugin API version " + std::to_string(api->api_version) +
        ", but this runtime takes version " + std::to_string(DFARM_DELEGATE_PLUGIN_API_VERSION));
  }
  const char* missing = api->name == nullptr            ? "name"
                        : api->create == nullptr        ? "create"
                        : api->destroy == nullptr       ? "destroy"
                        : api->supports_node == nullptr ? "supports_node"
                        : api->kernel_init == nullptr   ? "kernel_init"
                        : api->kernel_invoke == nullptr ? "kernel_invoke"
                                                        : nullptr;
  if (missing != nullptr) {
    return runtime::Status::Error(what + " lacks required method '" + missing + "'");
  }
  out->reset(new PluginLibrary(path, handle.release(), api));
  return runtime::Status::Ok();
}

PluginLibrary::~PluginLibrary() { DlCloser()(handle_); }

}  // namespace dfarm::delegates
