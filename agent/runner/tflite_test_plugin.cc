// Test only: a TensorFlow Lite external delegate plugin for
// dfarm_tflite_runner_test (tflite_plugin_create_delegate ABI). It hands out
// TFLite's own XNNPACK delegate, made through the library its option
// tflite_lib names (the runner's copy, already loaded), so that the runner's
// external path runs a real delegate. Option fail:MESSAGE reports MESSAGE
// through report_error and makes none.
#include <dlfcn.h>

#include <cstddef>
#include <cstring>

struct TfLiteDelegate;

namespace {

using XnnpackCreate = TfLiteDelegate* (*)(const void* options);
using XnnpackDelete = void (*)(TfLiteDelegate*);
XnnpackDelete g_delete = nullptr;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) TfLiteDelegate* tflite_plugin_create_delegate(
    char** keys, char** values, size_t n, void (*report_error)(const char*)) {
  const char* lib = nullptr;
  for (size_t i = 0; i < n; ++i) {
    if (std::strcmp(keys[i], "tflite_lib") == 0) lib = values[i];
    if (std::strcmp(keys[i], "fail") == 0) {
      report_error(values[i]);
      return nullptr;
    }
  }
  if (lib == nullptr) {
    report_error("test plugin: option tflite_lib is missing");
    return nullptr;
  }
  void* handle = ::dlopen(lib, RTLD_NOW | RTLD_LOCAL);  // kept: the delegate lives in it
  if (handle == nullptr) {
    report_error(::dlerror());
    return nullptr;
  }
  auto create = reinterpret_cast<XnnpackCreate>(::dlsym(handle, "TfLiteXNNPackDelegateCreate"));
  g_delete = reinterpret_cast<XnnpackDelete>(::dlsym(handle, "TfLiteXNNPackDelegateDelete"));
  if (create == nullptr || g_delete == nullptr) {
    report_error("test plugin: no TfLiteXNNPackDelegateCreate in tflite_lib");
    return nullptr;
  }
  // TfLiteXNNPackDelegateOptions zeroed: no thread pool, no flags.
  alignas(8) unsigned char options[256] = {};
  return create(options);
}

__attribute__((visibility("default"))) void tflite_plugin_destroy_delegate(TfLiteDelegate* d) {
  if (g_delete != nullptr) g_delete(d);
}

}  // extern "C"
