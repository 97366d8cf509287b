// ExternalDelegate: a runtime::Delegate over a plugin loaded from a shared
// library (delegates/external/dfarm_delegate_plugin.h). Registered as
// "external" in delegates/registry.h.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "delegates/external/plugin_loader.h"
#include "runtime/delegate.h"

namespace dfarm::delegates {

class ExternalDelegate : public runtime::Delegate {
 public:
  // Loads the plugin at `path` and calls its create() with `plugin_options`.
  // Errors name the plugin; a create() answering UNSUPPORTED is kUnsupported.
  static runtime::Status Create(
      const std::string& path,
      const std::vector<std::pair<std::string, std::string>>& plugin_options,
      const runtime::DelegatePartitionOptions& partition_options,
      std::unique_ptr<ExternalDelegate>* out);

  // Calls the plugin's destroy() and unloads it. Every kernel from
  // CreateKernel() must be gone by then.
  ~ExternalDelegate() override;

  runtime::Status CheckNode(const runtime::Node& node) const override;
  std::unique_ptr<runtime::DelegateKernel> CreateKernel() override;

  // The plugin's status as a runtime Status carrying its last reported message.
  runtime::Status ToStatus(DfarmPluginStatus status, const char* method) const;
  const DfarmDelegatePluginApi& api() const { return library_->api(); }
  DfarmPluginDelegate* handle() const { return handle_; }

 private:
  ExternalDelegate(std::unique_ptr<PluginLibrary> library,
                   const runtime::DelegatePartitionOptions& options);
  static void Report(void* self, const char* message);

  std::unique_ptr<PluginLibrary> library_;
  DfarmPluginDelegate* handle_ = nullptr;  // owned: destroy()ed by the destructor
  mutable std::string message_;            // the plugin's last report
};

// The registry's factory for "external": takes `path` (required) and the
// partition options; passes every other key to the plugin.
runtime::Status CreateExternalDelegate(
    const std::vector<std::pair<std::string, std::string>>& options,
    std::unique_ptr<runtime::Delegate>* delegate_out);

}  // namespace dfarm::delegates
