/* Broken plugins for the loader and runner tests, one per DFARM_BAD_PLUGIN:
 *   1 wrong api_version, 2 no entry symbol, 3 segfaults in kernel_invoke,
 *   4 hangs in kernel_invoke. Each claims float32 ADD. */
#include <signal.h>
#include <stddef.h>
#include <unistd.h>

#include "delegates/external/dfarm_delegate_plugin.h"

struct DfarmPluginDelegate {
  int unused;
};
struct DfarmPluginKernel {
  int unused;
};

static struct DfarmPluginDelegate g_delegate;
static struct DfarmPluginKernel g_kernel;

static DfarmPluginStatus Create(const char* const* keys, const char* const* values, int32_t n,
                                DfarmPluginReportFn report, void* data, DfarmPluginDelegate** out) {
  (void)keys, (void)values, (void)n, (void)report, (void)data;
  *out = &g_delegate;
  return DFARM_PLUGIN_OK;
}
static void Destroy(DfarmPluginDelegate* d) { (void)d; }
static DfarmPluginStatus Supports(DfarmPluginDelegate* d, const DfarmPluginNode* node) {
  (void)d;
  return node->builtin_code == 0 ? DFARM_PLUGIN_OK : DFARM_PLUGIN_UNSUPPORTED;
}
static DfarmPluginStatus Init(DfarmPluginDelegate* d, const DfarmPluginPartition* p,
                              DfarmPluginKernel** out) {
  (void)d, (void)p;
  *out = &g_kernel;
  return DFARM_PLUGIN_OK;
}
static DfarmPluginStatus Invoke(DfarmPluginKernel* k, const DfarmPluginPartition* p) {
  (void)k, (void)p;
#if DFARM_BAD_PLUGIN == 3
  raise(SIGSEGV);
#elif DFARM_BAD_PLUGIN == 4
  for (;;) pause();
#endif
  return DFARM_PLUGIN_OK;
}

static const DfarmDelegatePluginApi kApi = {
#if DFARM_BAD_PLUGIN == 1
    DFARM_DELEGATE_PLUGIN_API_VERSION + 1,
#else
    DFARM_DELEGATE_PLUGIN_API_VERSION,
#endif
    "bad",
    Create,
    Destroy,
    Supports,
    Init,
    NULL,
    Invoke,
    NULL};

#if DFARM_BAD_PLUGIN == 2
DFARM_PLUGIN_EXPORT const DfarmDelegatePluginApi* not_the_entry_point(void) { return &kApi; }
#else
DFARM_PLUGIN_EXPORT const DfarmDelegatePluginApi* dfarm_delegate_plugin_get_api(void) {
  return &kApi;
}
#endif
