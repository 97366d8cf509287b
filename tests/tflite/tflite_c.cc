#include "tests/tflite/tflite_c.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef __has_feature
#define DFARM_HAS_FEATURE(x) __has_feature(x)
#else
#define DFARM_HAS_FEATURE(x) 0
#endif

namespace dfarm::tflite_ref {

// Opaque C API handles.
struct TfLiteModel;
struct TfLiteInterpreterOptions;
struct TfLiteInterpreter;
struct TfLiteTensor;
struct TfLiteDelegate;

namespace {

struct QuantizationParams {
  float scale;
  int32_t zero_point;
};

// TfLiteXNNPackDelegateOptions starts with num_threads (int32) and flags
// (uint32); later versions append fields, so the delegate is given a zeroed
// block larger than any of them with these two filled in.
struct XnnpackOptionsHead {
  int32_t num_threads;
  uint32_t flags;
};

using Reporter = void (*)(void*, const char*, va_list);

}  // namespace

struct Library::Api {
  const char* (*version)();
  TfLiteModel* (*model_create)(const void*, size_t);
  void (*model_delete)(TfLiteModel*);
  TfLiteInterpreterOptions* (*options_create)();
  void (*options_delete)(TfLiteInterpreterOptions*);
  void (*options_set_num_threads)(TfLiteInterpreterOptions*, int32_t);
  void (*options_add_delegate)(TfLiteInterpreterOptions*, TfLiteDelegate*);
  void (*options_set_error_reporter)(TfLiteInterpreterOptions*, Reporter, void*);
  TfLiteInterpreter* (*interpreter_create)(const TfLiteModel*, const TfLiteInterpreterOptions*);
  void (*interpreter_delete)(TfLiteInterpreter*);
  int (*allocate_tensors)(TfLiteInterpreter*);
  int (*invoke)(TfLiteInterpreter*);
  int32_t (*input_count)(const TfLiteInterpreter*);
  TfLiteTensor* (*input_tensor)(const TfLiteInterpreter*, int32_t);
  int32_t (*output_count)(const TfLiteInterpreter*);
  const TfLiteTensor* (*output_tensor)(const TfLiteInterpreter*, int32_t);
  int (*tensor_type)(const TfLiteTensor*);
  int32_t (*tensor_num_dims)(const TfLiteTensor*);
  int32_t (*tensor_dim)(const TfLiteTensor*, int32_t);
  size_t (*tensor_byte_size)(const TfLiteTensor*);
  QuantizationParams (*tensor_quantization)(const TfLiteTensor*);
  int (*tensor_copy_from)(TfLiteTensor*, const void*, size_t);
  int (*tensor_copy_to)(const TfLiteTensor*, void*, size_t);
  XnnpackOptionsHead (*xnnpack_options_default)();
  TfLiteDelegate* (*xnnpack_create)(const void*);
  void (*xnnpack_delete)(TfLiteDelegate*);
};

struct Interpreter::State {
  const Library::Api* api = nullptr;
  std::vector<uint8_t> model_bytes;  // TfLiteModelCreate does not copy
  TfLiteModel* model = nullptr;
  TfLiteInterpreterOptions* options = nullptr;
  TfLiteDelegate* xnnpack = nullptr;
  TfLiteInterpreter* interpreter = nullptr;
  std::string error;

  ~State() {
    if (interpreter != nullptr) api->interpreter_delete(interpreter);
    if (xnnpack != nullptr) api->xnnpack_delete(xnnpack);
    if (options != nullptr) api->options_delete(options);
    if (model != nullptr) api->model_delete(model);
  }
};

namespace {

void CollectError(void* user, const char* format, va_list args) {
  char line[1024];
  std::vsnprintf(line, sizeof line, format, args);
  auto* error = static_cast<std::string*>(user);
  if (!error->empty()) *error += "; ";
  *error += line;
}

TensorData Describe(const Library::Api& api, const TfLiteTensor* t) {
  TensorData d;
  d.type = static_cast<CType>(api.tensor_type(t));
  for (int32_t i = 0; i < api.tensor_num_dims(t); ++i) d.shape.push_back(api.tensor_dim(t, i));
  const QuantizationParams q = api.tensor_quantization(t);
  d.scale = q.scale;
  d.zero_point = q.zero_point;
  return d;
}

}  // namespace

Interpreter::Interpreter(std::unique_ptr<State> state) : state_(std::move(state)) {}
Interpreter::~Interpreter() = default;

size_t Interpreter::num_inputs() const {
  return static_cast<size_t>(state_->api->input_count(state_->interpreter));
}
size_t Interpreter::num_outputs() const {
  return static_cast<size_t>(state_->api->output_count(state_->interpreter));
}

TensorData Interpreter::Input(size_t i) const {
  return Describe(*state_->api,
                  state_->api->input_tensor(state_->interpreter, static_cast<int32_t>(i)));
}

bool Interpreter::SetInput(size_t i, const std::vector<uint8_t>& bytes) {
  TfLiteTensor* t = state_->api->input_tensor(state_->interpreter, static_cast<int32_t>(i));
  if (state_->api->tensor_byte_size(t) != bytes.size()) {
    state_->error = "input " + std::to_string(i) + " takes " +
                    std::to_string(state_->api->tensor_byte_size(t)) + " bytes, given " +
                    std::to_string(bytes.size());
    return false;
  }
  return state_->api->tensor_copy_from(t, bytes.data(), bytes.size()) == 0;
}

bool Interpreter::Invoke() {
  state_->error.clear();
  return state_->api->invoke(state_->interpreter) == 0;
}

bool Interpreter::TimeInvokes(int runs, double* mean_us) {
  if (runs < 1) {
    state_->error = "TimeInvokes needs at least 1 run, given " + std::to_string(runs);
    return false;
  }
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < runs; ++r) {
    if (!Invoke()) return false;
  }
  const std::chrono::duration<double, std::micro> total = std::chrono::steady_clock::now() - start;
  *mean_us = total.count() / runs;
  return true;
}

TensorData Interpreter::Output(size_t i) const {
  const TfLiteTensor* t = state_->api->output_tensor(state_->interpreter, static_cast<int32_t>(i));
  TensorData d = Describe(*state_->api, t);
  d.bytes.resize(state_->api->tensor_byte_size(t));
  state_->api->tensor_copy_to(t, d.bytes.data(), d.bytes.size());
  return d;
}

const std::string& Interpreter::last_error() const { return state_->error; }

std::unique_ptr<Library> Library::Load(const std::string& path, std::string* error) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    *error = "cannot load TensorFlow Lite's C library '" + path + "': " + ::dlerror() +
             " (scripts/setup.sh installs it; or set DFARM_TFLITE_LIB)";
    return nullptr;
  }
  std::unique_ptr<Library> lib(new Library());
  lib->handle_ = handle;
  lib->api_ = std::make_unique<Api>();
  Api& a = *lib->api_;
  bool ok = true;
  auto bind = [&](auto& fn, const char* name) {
    void* sym = ::dlsym(handle, name);
    if (sym == nullptr && ok) {
      *error = "'" + path + "' has no " + name + " (not a TensorFlow Lite C library?)";
      ok = false;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
  };
  bind(a.version, "TfLiteVersion");
  bind(a.model_create, "TfLiteModelCreate");
  bind(a.model_delete, "TfLiteModelDelete");
  bind(a.options_create, "TfLiteInterpreterOptionsCreate");
  bind(a.options_delete, "TfLiteInterpreterOptionsDelete");
  bind(a.options_set_num_threads, "TfLiteInterpreterOptionsSetNumThreads");
  bind(a.options_add_delegate, "TfLiteInterpreterOptionsAddDelegate");
  bind(a.options_set_error_reporter, "TfLiteInterpreterOptionsSetErrorReporter");
  bind(a.interpreter_create, "TfLiteInterpreterCreate");
  bind(a.interpreter_delete, "TfLiteInterpreterDelete");
  bind(a.allocate_tensors, "TfLiteInterpreterAllocateTensors");
  bind(a.invoke, "TfLiteInterpreterInvoke");
  bind(a.input_count, "TfLiteInterpreterGetInputTensorCount");
  bind(a.input_tensor, "TfLiteInterpreterGetInputTensor");
  bind(a.output_count, "TfLiteInterpreterGetOutputTensorCount");
  bind(a.output_tensor, "TfLiteInterpreterGetOutputTensor");
  bind(a.tensor_type, "TfLiteTensorType");
  bind(a.tensor_num_dims, "TfLiteTensorNumDims");
  bind(a.tensor_dim, "TfLiteTensorDim");
  bind(a.tensor_byte_size, "TfLiteTensorByteSize");
  bind(a.tensor_quantization, "TfLiteTensorQuantizationParams");
  bind(a.tensor_copy_from, "TfLiteTensorCopyFromBuffer");
  bind(a.tensor_copy_to, "TfLiteTensorCopyToBuffer");
  bind(a.xnnpack_options_default, "TfLiteXNNPackDelegateOptionsDefault");
  bind(a.xnnpack_create, "TfLiteXNNPackDelegateCreate");
  bind(a.xnnpack_delete, "TfLiteXNNPackDelegateDelete");
  if (!ok) return nullptr;
  return lib;
}

Library::~Library() {
  api_.reset();
  // Under ASan the library stays mapped: once unmapped, LeakSanitizer would
  // take TensorFlow Lite's one-time allocations, held by its statics, for leaks.
#if !defined(__SANITIZE_ADDRESS__) && !DFARM_HAS_FEATURE(address_sanitizer)
  if (handle_ != nullptr) ::dlclose(handle_);
#endif
}

std::string Library::Version() const { return api_->version(); }

std::unique_ptr<Interpreter> Library::Create(const std::vector<uint8_t>& model, int threads,
                                             int xnnpack_threads, std::string* error) const {
  auto state = std::make_unique<Interpreter::State>();
  state->api = api_.get();
  state->model_bytes = model;
  state->model = api_->model_create(state->model_bytes.data(), state->model_bytes.size());
  if (state->model == nullptr) {
    *error = "TensorFlow Lite refused the model (TfLiteModelCreate)";
    return nullptr;
  }
  state->options = api_->options_create();
  api_->options_set_num_threads(state->options, threads);
  api_->options_set_error_reporter(state->options, &CollectError, &state->error);
  if (xnnpack_threads > 0) {
    alignas(8) unsigned char block[256] = {};
    XnnpackOptionsHead head = api_->xnnpack_options_default();
    head.num_threads = xnnpack_threads;
    std::memcpy(block, &head, sizeof head);
    state->xnnpack = api_->xnnpack_create(block);
    if (state->xnnpack == nullptr) {
      *error = "TensorFlow Lite's XNNPACK delegate could not be created";
      return nullptr;
    }
    api_->options_add_delegate(state->options, state->xnnpack);
  }
  state->interpreter = api_->interpreter_create(state->model, state->options);
  if (state->interpreter == nullptr) {
    *error = "TensorFlow Lite could not build an interpreter: " + state->error;
    return nullptr;
  }
  if (api_->allocate_tensors(state->interpreter) != 0) {
    *error = "TensorFlow Lite could not allocate tensors: " + state->error;
    return nullptr;
  }
  return std::unique_ptr<Interpreter>(new Interpreter(std::move(state)));
}

std::string DefaultLibraryPath(const std::string& fallback) {
  const char* env = std::getenv("DFARM_TFLITE_LIB");
  return env != nullptr && *env != '\0' ? env : fallback;
}

}  // namespace dfarm::tflite_ref
