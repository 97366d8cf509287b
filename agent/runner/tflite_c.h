// A TensorFlow Lite interpreter reached through TFLite's C API in a shared
// library loaded at run time (dlopen): the runtime of dfarm-tflite-runner
// (tflite_runner.h) and the reference of the TFLite cross-check
// (tests/tflite/). scripts/setup.sh installs TFLite 2.9's prebuilt
// libtensorflowlite_c.so (npm tfjs-tflite-node) in .cache/tflite/<arch>/. The
// few C API entry points used are declared in tflite_c.cc from TFLite's
// documented, stable C API; nothing of TFLite is compiled into DelegateFarm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dfarm::runner::tflite {

// TfLiteType values of the C API (the schema's TensorType differs).
enum class CType : int {
  kNoType = 0,
  kFloat32 = 1,
  kInt32 = 2,
  kUInt8 = 3,
  kInt64 = 4,
  kString = 5,
  kBool = 6,
  kInt16 = 7,
  kComplex64 = 8,
  kInt8 = 9,
  kFloat16 = 10,
};

struct TensorData {
  CType type = CType::kNoType;
  std::string name;
  std::vector<int32_t> shape;
  float scale = 0.0f;  // quantization (scale 0: none)
  int32_t zero_point = 0;
  std::vector<uint8_t> bytes;
};

// A tensor in place: TFLite's own buffer, valid while its interpreter lives
// and until the next AllocateTensors (which dfarm does not call again).
struct TensorView {
  TensorData meta;  // bytes empty
  void* data = nullptr;
  size_t byte_size = 0;
};

// How to build an interpreter.
struct InterpreterConfig {
  enum class Delegate { kNone, kXnnpack, kExternal };
  // TfLiteInterpreterOptionsSetNumThreads: the threads of TFLite's own kernels.
  int num_threads = 1;
  Delegate delegate = Delegate::kNone;
  // kXnnpack: the pool's threads (TfLiteXNNPackDelegateOptions.num_threads;
  // 1 runs without a pool) and TFLITE_XNNPACK_DELEGATE_FLAG_FORCE_FP16.
  int xnnpack_threads = 1;
  bool xnnpack_fp16 = false;
  // kExternal: a TFLite external delegate plugin (the shared library
  // exporting tflite_plugin_create_delegate / tflite_plugin_destroy_delegate)
  // and the keys and values given to it.
  std::string plugin_path;
  std::vector<std::pair<std::string, std::string>> plugin_options;
  // Copy what TFLite writes on stderr while the interpreter is built (its
  // "Replacing N node(s) with delegate ..." lines) into CreateInfo::log; the
  // text is still written to stderr afterwards.
  bool capture_log = false;
  // kXnnpack: learn which nodes the XNNPACK delegate takes without applying
  // it (CreateInfo::xnnpack_nodes); the interpreter then runs TFLite's
  // builtin kernels. TFLite 2.9's release build logs no "Replacing N
  // node(s)" line, so this is how its partitions are known: the delegate's
  // Prepare runs with TfLiteContext's ReplaceNodeSubsetsWithDelegateKernels
  // (a field of TFLite's C ABI, c/common.h) swapped for a recorder.
  bool probe_xnnpack = false;
  // Custom ops registered with TfLiteInterpreterOptionsAddCustomOp without
  // a kernel (no init, prepare or invoke), so that a model using them (e.g.
  // MediaPipe's Convolution2DTransposeBias, which TFLite's XNNPACK delegate
  // takes) can be probed; invoking such a node fails.
  std::vector<std::string> placeholder_custom_ops;
};

// Why Create failed.
enum class CreateFault {
  kNone,
  kModel,  // TFLite refused the model (TfLiteModelCreate, or the interpreter without a delegate)
  kUnsupported,  // an op TFLite lacks ("unresolved custom op", "Didn't find op")
  kDelegate,     // the delegate could not be made or applied (the model builds without it)
};

struct CreateInfo {
  CreateFault fault = CreateFault::kNone;
  std::string error;  // one line; TFLite's own messages
  std::string log;    // capture_log: what TFLite printed on stderr
  // probe_xnnpack: the node indices (subgraph 0's operators) the XNNPACK
  // delegate asked to replace, ascending; xnnpack_probed is false when it
  // never asked (it took nothing, or TFLite never prepared it).
  std::vector<int> xnnpack_nodes;
  bool xnnpack_probed = false;
};

class Library;

// One model in one interpreter: default kernels (what TfLiteInterpreterCreate
// applies), TFLite's XNNPACK delegate or an external delegate plugin. Owns
// the model bytes, the delegate and the plugin's handle.
class Interpreter {
 public:
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  size_t num_inputs() const;
  size_t num_outputs() const;
  TensorData Input(size_t i) const;  // type, name, shape, quantization; bytes empty
  TensorView InputView(size_t i);
  TensorView OutputView(size_t i) const;
  // Copies `bytes` (exactly the tensor's size) into input i; false on a size mismatch.
  bool SetInput(size_t i, const std::vector<uint8_t>& bytes);
  bool Invoke();  // false: TFLite's error text is in last_error()
  // Runs Invoke() `runs` times (steady clock); the mean per run in `mean_us`.
  // False (last_error() says why) when an Invoke() fails or runs < 1.
  bool TimeInvokes(int runs, double* mean_us);
  TensorData Output(size_t i) const;
  const std::string& last_error() const;

  struct State;  // tflite_c.cc's

 private:
  friend class Library;
  explicit Interpreter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class Library {
 public:
  // Loads the library at `path` (a bare file name goes through the dynamic
  // loader's search: LD_LIBRARY_PATH, a loader's --library-path); null with
  // `error` (the loader's message, which names the path, or the missing
  // symbol) when it cannot.
  static std::unique_ptr<Library> Load(const std::string& path, std::string* error);
  ~Library();

  std::string Version() const;  // TfLiteVersion(): "2.9.0"
  // An interpreter for the .tflite `model` bytes (copied), allocated. Null
  // with `info->fault` and `info->error` when it cannot be built.
  std::unique_ptr<Interpreter> Create(const std::vector<uint8_t>& model,
                                      const InterpreterConfig& config, CreateInfo* info) const;
  // The same on shared bytes, which the interpreter keeps (TfLiteModelCreate
  // reads them for its whole life) instead of a copy: the bytes are held
  // once however many interpreters use them, as TensorFlow Lite needs.
  std::unique_ptr<Interpreter> Create(std::shared_ptr<const std::vector<uint8_t>> model,
                                      const InterpreterConfig& config, CreateInfo* info) const;
  // The cross-check's form: threads for TFLite's kernels, xnnpack_threads > 0
  // adds TFLite's XNNPACK delegate with that many threads.
  std::unique_ptr<Interpreter> Create(const std::vector<uint8_t>& model, int threads,
                                      int xnnpack_threads, std::string* error) const;

  struct Api;

 private:
  Library() = default;
  std::unique_ptr<Interpreter> Build(std::shared_ptr<const std::vector<uint8_t>> model,
                                     const InterpreterConfig& config, CreateInfo* info) const;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
};

// The library's default place: $DFARM_TFLITE_LIB, else `fallback` (the
// build's .cache/tflite/<arch>/libtensorflowlite_c.so).
std::string DefaultLibraryPath(const std::string& fallback);

}  // namespace dfarm::runner::tflite
