#include "agent/runner/tflite_c.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

// TensorFlow Lite's delegate, as the C headers name it (global, C): a
// plugin's tflite_plugin_create_delegate returns a ::TfLiteDelegate*, and a
// call through a pointer of another type is undefined (UBSan's function check).
struct TfLiteDelegate;

namespace dfarm::runner::tflite {

// Opaque C API handles.
struct TfLiteModel;
struct TfLiteInterpreterOptions;
struct TfLiteInterpreter;
struct TfLiteTensor;
using ::TfLiteDelegate;

namespace {

struct QuantizationParams {
  float scale;
  int32_t zero_point;
};

// TfLiteXNNPackDelegateOptions of TFLite 2.9: num_threads (0 or 1: no
// pool), flags (TFLITE_XNNPACK_DELEGATE_FLAG_*) and a weights cache. Later
// versions append fields, so the delegate is given a zeroed block larger than
// any of them with these filled in.
struct XnnpackOptions {
  int32_t num_threads;
  uint32_t flags;
  void* weights_cache;
};
constexpr uint32_t kXnnpackFlagForceFp16 = 0x4;  // TFLITE_XNNPACK_DELEGATE_FLAG_FORCE_FP16

// TFLite's external delegate ABI (tensorflow/lite/delegates/external): what a
// plugin exports.
using PluginCreate = TfLiteDelegate* (*)(char** keys, char** values, size_t n,
                                         void (*report_error)(const char*));
using PluginDestroy = void (*)(TfLiteDelegate*);

using Reporter = void (*)(void*, const char*, va_list);

// What the XNNPACK probe (InterpreterConfig::probe_xnnpack) needs of TFLite's
// C ABI (c/common.h, whose structs grow only at their end): TfLiteDelegate's
// fields, with zeroed room for those later versions append; the place of
// TfLiteContext::ReplaceNodeSubsetsWithDelegateKernels, after a size_t and
// seven pointers; TfLiteIntArray (a size, then the values). The replaced
// function takes a TfLiteRegistration by value: a struct of over 16 bytes,
// which the x86-64 and AArch64 calling conventions both pass in memory, so
// the later arguments arrive in the same registers whatever its exact size.
struct DelegateAbi {
  void* data;
  int (*prepare)(void* context, DelegateAbi* delegate);
  void* copy_from_buffer_handle;
  void* copy_to_buffer_handle;
  void* free_buffer_handle;
  int64_t flags;
  void* appended[8];
};
constexpr size_t kReplaceNodeSubsetsSlot = 8;  // in pointer-sized fields of TfLiteContext
struct RegistrationAbi {
  void* fields[8];
};
struct IntArrayAbi {
  int size;
  int data[1];  // `size` values
};

}  // namespace

// The delegate handed to TFLite instead of XNNPACK's: `self`, whose data
// points back here.
struct XnnpackProbe {
  DelegateAbi self = {};
  DelegateAbi* xnnpack = nullptr;
  std::vector<int> nodes;
  bool called = false;
};

namespace {

thread_local XnnpackProbe* t_probe = nullptr;  // set during ProbePrepare()

int RecordNodes(void*, RegistrationAbi, const IntArrayAbi* nodes, void*) {
  if (t_probe == nullptr || nodes == nullptr) return 1;  // kTfLiteError
  t_probe->called = true;
  for (int i = 0; i < nodes->size; ++i) t_probe->nodes.push_back(nodes->data[i]);
  return 0;  // kTfLiteOk: nothing replaced
}

int ProbePrepare(void* context, DelegateAbi* self) {
  auto* probe = static_cast<XnnpackProbe*>(self->data);
  void** slot = static_cast<void**>(context) + kReplaceNodeSubsetsSlot;
  void* replace = *slot;
  *slot = reinterpret_cast<void*>(&RecordNodes);
  t_probe = probe;
  const int status = probe->xnnpack->prepare(context, probe->xnnpack);
  t_probe = nullptr;
  *slot = replace;
  return status;
}

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
  const char* (*tensor_name)(const TfLiteTensor*);
  void* (*tensor_data)(const TfLiteTensor*);
  int32_t (*tensor_num_dims)(const TfLiteTensor*);
  int32_t (*tensor_dim)(const TfLiteTensor*, int32_t);
  size_t (*tensor_byte_size)(const TfLiteTensor*);
  QuantizationParams (*tensor_quantization)(const TfLiteTensor*);
  int (*tensor_copy_from)(TfLiteTensor*, const void*, size_t);
  int (*tensor_copy_to)(const TfLiteTensor*, void*, size_t);
  XnnpackOptions (*xnnpack_options_default)();
  TfLiteDelegate* (*xnnpack_create)(const void*);
  void (*xnnpack_delete)(TfLiteDelegate*);
  void (*options_add_custom_op)(TfLiteInterpreterOptions*, const char*, const void*, int32_t,
                                int32_t);
};

// A plugin's shared library (dlopen handle) and its two entry points.
struct Plugin {
  void* handle = nullptr;
  PluginCreate create = nullptr;
  PluginDestroy destroy = nullptr;
  ~Plugin() {
    if (handle != nullptr) ::dlclose(handle);
  }
};

struct Interpreter::State {
  const Library::Api* api = nullptr;
  std::shared_ptr<const std::vector<uint8_t>> model_bytes;  // TfLiteModelCreate does not copy
  TfLiteModel* model = nullptr;
  TfLiteInterpreterOptions* options = nullptr;
  TfLiteDelegate* xnnpack = nullptr;
  std::unique_ptr<XnnpackProbe> probe;           // handed to TFLite instead of `xnnpack`
  std::vector<std::string> custom_op_names;      // TFLite keeps the pointers
  std::unique_ptr<RegistrationAbi> placeholder;  // every placeholder custom op's
  std::unique_ptr<Plugin> plugin;
  TfLiteDelegate* external = nullptr;  // made by `plugin`
  TfLiteInterpreter* interpreter = nullptr;
  std::string error;

  // The interpreter goes before its delegates, the plugin's code last.
  ~State() {
    if (interpreter != nullptr) api->interpreter_delete(interpreter);
    if (xnnpack != nullptr) api->xnnpack_delete(xnnpack);
    if (external != nullptr) plugin->destroy(external);
    if (options != nullptr) api->options_delete(options);
    if (model != nullptr) api->model_delete(model);
  }
};

namespace {

void AppendError(std::string* error, std::string line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (line.empty()) return;
  if (!error->empty()) *error += "; ";
  *error += line;
}

void CollectError(void* user, const char* format, va_list args) {
  char line[1024];
  std::vsnprintf(line, sizeof line, format, args);
  AppendError(static_cast<std::string*>(user), line);
}

// A plugin's report_error has no user pointer: the plugin being created
// reports into this one (creation is single-threaded).
std::string* g_plugin_errors = nullptr;
void CollectPluginError(const char* message) {
  if (g_plugin_errors != nullptr && message != nullptr) AppendError(g_plugin_errors, message);
}

TensorData Describe(const Library::Api& api, const TfLiteTensor* t) {
  TensorData d;
  d.type = static_cast<CType>(api.tensor_type(t));
  const char* name = api.tensor_name(t);
  d.name = name != nullptr ? name : "";
  for (int32_t i = 0; i < api.tensor_num_dims(t); ++i) d.shape.push_back(api.tensor_dim(t, i));
  const QuantizationParams q = api.tensor_quantization(t);
  d.scale = q.scale;
  d.zero_point = q.zero_point;
  return d;
}

TensorView View(const Library::Api& api, const TfLiteTensor* t) {
  return {Describe(api, t), api.tensor_data(t), api.tensor_byte_size(t)};
}

// Sends what is written to fd 2 into a temporary file while it lives; Finish()
// puts fd 2 back, writes the text to it too when `echo` and returns it.
class StderrCapture {
 public:
  explicit StderrCapture(bool on) {
    if (!on) return;
    std::fflush(stderr);
    file_ = std::tmpfile();
    saved_ = file_ != nullptr ? ::dup(2) : -1;
    if (saved_ < 0 || ::dup2(::fileno(file_), 2) < 0) Restore();
  }
  ~StderrCapture() { Finish(); }
  std::string Finish(bool echo = true) {
    if (saved_ < 0) {
      Restore();
      return std::string();
    }
    std::fflush(stderr);
    Restore();
    std::string text;
    std::rewind(file_);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) text.append(buf, n);
    std::fclose(file_);
    file_ = nullptr;
    if (echo) std::fwrite(text.data(), 1, text.size(), stderr);
    return text;
  }

 private:
  void Restore() {
    if (saved_ >= 0) {
      ::dup2(saved_, 2);
      ::close(saved_);
      saved_ = -1;
      return;
    }
    if (file_ != nullptr) std::fclose(file_);
    file_ = nullptr;
  }
  std::FILE* file_ = nullptr;
  int saved_ = -1;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// TFLite's refusal of an op it lacks, told apart from a broken model by its text.
bool SaysUnsupported(const std::string& error) {
  return error.find("unresolved custom op") != std::string::npos ||
         error.find("Didn't find op for builtin opcode") != std::string::npos;
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

TensorView Interpreter::InputView(size_t i) {
  return View(*state_->api,
              state_->api->input_tensor(state_->interpreter, static_cast<int32_t>(i)));
}

TensorView Interpreter::OutputView(size_t i) const {
  return View(*state_->api,
              state_->api->output_tensor(state_->interpreter, static_cast<int32_t>(i)));
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
    *error = ::dlerror();  // it names the path

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
  bind(a.tensor_name, "TfLiteTensorName");
  bind(a.tensor_data, "TfLiteTensorData");
  bind(a.tensor_num_dims, "TfLiteTensorNumDims");
  bind(a.tensor_dim, "TfLiteTensorDim");
  bind(a.tensor_byte_size, "TfLiteTensorByteSize");
  bind(a.tensor_quantization, "TfLiteTensorQuantizationParams");
  bind(a.tensor_copy_from, "TfLiteTensorCopyFromBuffer");
  bind(a.tensor_copy_to, "TfLiteTensorCopyToBuffer");
  bind(a.xnnpack_options_default, "TfLiteXNNPackDelegateOptionsDefault");
  bind(a.xnnpack_create, "TfLiteXNNPackDelegateCreate");
  bind(a.xnnpack_delete, "TfLiteXNNPackDelegateDelete");
  bind(a.options_add_custom_op, "TfLiteInterpreterOptionsAddCustomOp");
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

namespace {

// Loads the plugin and makes its delegate with `config`'s options.
bool AddExternalDelegate(const InterpreterConfig& config, Interpreter::State* state,
                         CreateInfo* info) {
  auto plugin = std::make_unique<Plugin>();
  // dlopen() of a FIFO would wait for a writer: refuse anything but a file.
  struct stat st;
  if (::stat(config.plugin_path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    info->error = "cannot load delegate plugin '" + config.plugin_path + "': not a regular file";
    return false;
  }
  plugin->handle = ::dlopen(config.plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (plugin->handle == nullptr) {
    info->error = "cannot load delegate plugin '" + config.plugin_path + "': " + ::dlerror();
    return false;
  }
  plugin->create =
      reinterpret_cast<PluginCreate>(::dlsym(plugin->handle, "tflite_plugin_create_delegate"));
  plugin->destroy =
      reinterpret_cast<PluginDestroy>(::dlsym(plugin->handle, "tflite_plugin_destroy_delegate"));
  if (plugin->create == nullptr || plugin->destroy == nullptr) {
    info->error = "delegate plugin '" + config.plugin_path +
                  "' exports no tflite_plugin_create_delegate/tflite_plugin_destroy_delegate "
                  "(not a TensorFlow Lite external delegate)";
    return false;
  }
  std::vector<char*> keys, values;
  for (const auto& [k, v] : config.plugin_options) {
    keys.push_back(const_cast<char*>(k.c_str()));
    values.push_back(const_cast<char*>(v.c_str()));
  }
  std::string errors;
  g_plugin_errors = &errors;
  state->external = plugin->create(keys.data(), values.data(), keys.size(), &CollectPluginError);
  g_plugin_errors = nullptr;
  state->plugin = std::move(plugin);
  if (state->external == nullptr) {
    info->error = "delegate plugin '" + config.plugin_path + "' made no delegate" +
                  (errors.empty() ? std::string() : ": " + errors);
    return false;
  }
  state->api->options_add_delegate(state->options, state->external);
  return true;
}

bool AddXnnpackDelegate(const InterpreterConfig& config, Interpreter::State* state,
                        CreateInfo* info) {
  alignas(8) unsigned char block[256] = {};
  XnnpackOptions options = state->api->xnnpack_options_default();
  options.num_threads = config.xnnpack_threads > 1 ? config.xnnpack_threads : 0;
  if (config.xnnpack_fp16) options.flags |= kXnnpackFlagForceFp16;
  std::memcpy(block, &options, sizeof options);
  state->xnnpack = state->api->xnnpack_create(block);
  if (state->xnnpack == nullptr) {
    info->error = "TensorFlow Lite's XNNPACK delegate could not be created";
    return false;
  }
  if (!config.probe_xnnpack) {
    state->api->options_add_delegate(state->options, state->xnnpack);
    return true;
  }
  state->probe = std::make_unique<XnnpackProbe>();
  XnnpackProbe& probe = *state->probe;
  probe.xnnpack = reinterpret_cast<DelegateAbi*>(state->xnnpack);
  probe.self.data = &probe;
  probe.self.flags = probe.xnnpack->flags;
  probe.self.prepare = &ProbePrepare;
  state->api->options_add_delegate(state->options, reinterpret_cast<TfLiteDelegate*>(&probe.self));
  return true;
}

// InterpreterConfig::placeholder_custom_ops: one zeroed registration (no
// functions) under each name.
void AddPlaceholderCustomOps(const InterpreterConfig& config, Interpreter::State* state) {
  if (config.placeholder_custom_ops.empty()) return;
  state->placeholder = std::make_unique<RegistrationAbi>();
  state->custom_op_names = config.placeholder_custom_ops;
  for (const std::string& name : state->custom_op_names) {
    state->api->options_add_custom_op(state->options, name.c_str(), state->placeholder.get(), 1,
                                      1000);
  }
}

}  // namespace

std::unique_ptr<Interpreter> Library::Build(std::shared_ptr<const std::vector<uint8_t>> model,
                                            const InterpreterConfig& config,
                                            CreateInfo* info) const {
  auto state = std::make_unique<Interpreter::State>();
  state->api = api_.get();
  state->model_bytes = std::move(model);
  StderrCapture model_capture(config.capture_log);
  state->model = api_->model_create(state->model_bytes->data(), state->model_bytes->size());
  const std::string model_log = model_capture.Finish(state->model != nullptr);
  if (state->model == nullptr) {
    info->fault = CreateFault::kModel;
    info->error = "TensorFlow Lite refused the model (TfLiteModelCreate)";
    std::string why;
    for (std::string line : Lines(model_log)) {
      if (line.rfind("ERROR: ", 0) == 0) line.erase(0, 7);
      AppendError(&why, line);
    }
    if (!why.empty()) info->error += ": " + why;
    return nullptr;
  }
  state->options = api_->options_create();
  api_->options_set_num_threads(state->options, config.num_threads);
  api_->options_set_error_reporter(state->options, &CollectError, &state->error);
  AddPlaceholderCustomOps(config, state.get());
  bool delegate_ok = true;
  if (config.delegate == InterpreterConfig::Delegate::kXnnpack) {
    delegate_ok = AddXnnpackDelegate(config, state.get(), info);
  } else if (config.delegate == InterpreterConfig::Delegate::kExternal) {
    delegate_ok = AddExternalDelegate(config, state.get(), info);
  }
  if (!delegate_ok) {
    info->fault = CreateFault::kDelegate;
    return nullptr;
  }
  StderrCapture capture(config.capture_log);
  state->interpreter = api_->interpreter_create(state->model, state->options);
  info->log = capture.Finish();
  if (state->probe != nullptr) {
    info->xnnpack_nodes = state->probe->nodes;
    std::sort(info->xnnpack_nodes.begin(), info->xnnpack_nodes.end());
    info->xnnpack_probed = state->probe->called;
  }
  if (state->interpreter == nullptr) {
    info->fault = SaysUnsupported(state->error) ? CreateFault::kUnsupported : CreateFault::kModel;
    info->error = "TensorFlow Lite could not build an interpreter: " + state->error;
    return nullptr;
  }
  if (api_->allocate_tensors(state->interpreter) != 0) {
    info->fault = SaysUnsupported(state->error) ? CreateFault::kUnsupported : CreateFault::kModel;
    info->error = "TensorFlow Lite could not allocate tensors: " + state->error;
    return nullptr;
  }
  return std::unique_ptr<Interpreter>(new Interpreter(std::move(state)));
}

std::unique_ptr<Interpreter> Library::Create(const std::vector<uint8_t>& model,
                                             const InterpreterConfig& config,
                                             CreateInfo* info) const {
  return Create(std::make_shared<const std::vector<uint8_t>>(model), config, info);
}

std::unique_ptr<Interpreter> Library::Create(std::shared_ptr<const std::vector<uint8_t>> model,
                                             const InterpreterConfig& config,
                                             CreateInfo* info) const {
  std::unique_ptr<Interpreter> interpreter = Build(model, config, info);
  if (interpreter != nullptr || info->fault == CreateFault::kDelegate ||
      config.delegate == InterpreterConfig::Delegate::kNone) {
    return interpreter;
  }
  // Failed with a delegate: when the model builds without it, the delegate is at fault.
  InterpreterConfig plain = config;
  plain.delegate = InterpreterConfig::Delegate::kNone;
  plain.capture_log = false;
  CreateInfo without;
  if (Build(model, plain, &without) != nullptr) {
    info->fault = CreateFault::kDelegate;
    info->error = "TensorFlow Lite could not apply the delegate: " + info->error;
  }
  return nullptr;
}

std::unique_ptr<Interpreter> Library::Create(const std::vector<uint8_t>& model, int threads,
                                             int xnnpack_threads, std::string* error) const {
  InterpreterConfig config;
  config.num_threads = threads;
  if (xnnpack_threads > 0) {
    config.delegate = InterpreterConfig::Delegate::kXnnpack;
    config.xnnpack_threads = xnnpack_threads;
  }
  CreateInfo info;
  std::unique_ptr<Interpreter> interpreter = Create(model, config, &info);
  if (interpreter == nullptr) *error = info.error;
  return interpreter;
}

std::string DefaultLibraryPath(const std::string& fallback) {
  const char* env = std::getenv("DFARM_TFLITE_LIB");
  return env != nullptr && *env != '\0' ? env : fallback;
}

}  // namespace dfarm::runner::tflite
